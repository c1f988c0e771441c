//! Label syntax as apimachinery validates it (`validation.IsQualifiedName`,
//! `IsValidLabelValue`, `IsDNS1123Subdomain`): the one place label keys and
//! values are checked, for selectors and for validation.

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters: the
/// name part of a qualified name, and a non-empty label value.
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A DNS-1123 subdomain: lowercase alphanumeric labels of at most 63
/// characters, `-` inside them, separated by dots, at most 253 in all.
#[must_use]
pub fn is_dns1123_subdomain(s: &str) -> bool {
    let lower_alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b.first().is_some_and(lower_alnum)
                && b.last().is_some_and(lower_alnum)
                && b.iter().all(|c| lower_alnum(c) || *c == b'-')
        })
}

/// A valid label key (`IsQualifiedName`): an optional DNS-1123 subdomain
/// prefix and a slash, then a name part.
#[must_use]
pub fn is_qualified_name(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_dns1123_subdomain(prefix) && is_name_part(name),
        None => is_name_part(key),
    }
}

/// A valid label value (`IsValidLabelValue`): empty, or a name part.
#[must_use]
pub fn is_valid_label_value(value: &str) -> bool {
    value.is_empty() || is_name_part(value)
}

/// Why `key` is not a label key, in apimachinery's words; `None` when it is.
#[must_use]
pub fn label_key_error(key: &str) -> Option<String> {
    if is_qualified_name(key) {
        return None;
    }
    let prefix_bad = key
        .split_once('/')
        .is_some_and(|(prefix, _)| !is_dns1123_subdomain(prefix));
    Some(if prefix_bad {
        format!(
            "key: Invalid value: {key:?}: prefix part must be a lowercase RFC 1123 subdomain (lowercase alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character)"
        )
    } else {
        format!(
            "key: Invalid value: {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (at most 63 characters)"
        )
    })
}

/// Why `value` is not a label value, in apimachinery's words; `None` when it
/// is.
#[must_use]
pub fn label_value_error(value: &str) -> Option<String> {
    (!is_valid_label_value(value)).then(|| {
        format!(
            "values: Invalid value: {value:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (at most 63 characters)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys_follow_apimachinery_validation() {
        for good in [
            "app",
            "example.com/gpu",
            "a-b_c.d",
            "A1",
            "kubernetes.io/hostname",
        ] {
            assert!(is_qualified_name(good), "{good}");
            assert_eq!(label_key_error(good), None);
        }
        for bad in [
            "",
            "invalid key",
            "-a",
            "a-",
            "Example.com/x",
            "/x",
            "x/",
            "a/b/c",
        ] {
            assert!(!is_qualified_name(bad), "{bad}");
            assert!(label_key_error(bad).is_some(), "{bad}");
        }
        assert!(is_qualified_name(&"a".repeat(63)));
        assert!(!is_qualified_name(&"a".repeat(64)));
        let long_prefix = format!("{}.com/x", "a".repeat(64));
        assert!(!is_qualified_name(&long_prefix), "a prefix label over 63");
    }

    #[test]
    fn label_values_follow_apimachinery_validation() {
        assert!(is_valid_label_value(""));
        assert!(is_valid_label_value("v1.2_3-a"));
        assert!(!is_valid_label_value("invalid value: ___@#$%^"));
        assert!(!is_valid_label_value(&"a".repeat(64)));
        assert!(!is_valid_label_value("-1"), "must start alphanumeric");
        assert!(label_value_error("bad value").is_some());
        assert_eq!(label_value_error("ok"), None);
    }
}
