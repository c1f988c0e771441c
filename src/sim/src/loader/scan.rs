//! Reads the plain `apiVersion` and `kind` at the top of an item's text, without parsing
//! the item.
//!
//! Only ever run on an item that `serde_json` has already read as one valid JSON value
//! ([`super::stream::read_object`]), so it needs to tell apart, not to validate: it skips
//! strings (with their escapes) and counts brackets. The item is then typed straight from
//! its text (no `serde_json::Value` in between) when it is of a typed kind.

/// The values of the simple string members `keys` at the top level of the object `text`
/// (an item), read up to the last of them (`kubectl` writes `apiVersion` and `kind`
/// first, so this reads a few bytes): `None` for an absent key; `None` overall when one
/// of them is there but not a string without escapes (the caller then takes the general
/// path). A later duplicate of a key is not looked for: the typed object checks
/// `apiVersion` and `kind` itself, so a differing duplicate fails typing and the item
/// takes the general path, where the last of duplicate keys counts.
pub(super) fn top_level_strs<'t, const N: usize>(
    text: &'t str,
    keys: [&str; N],
) -> Option<[Option<&'t str>; N]> {
    let bytes = text.as_bytes();
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut found = [None; N];
    loop {
        i = skip_ws(bytes, i);
        match bytes.get(i)? {
            b'}' => return Some(found),
            b',' => {
                i += 1;
                continue;
            }
            b'"' => {}
            _ => return None,
        }
        let key_end = skip_string(bytes, i)?;
        let this = text.get(i + 1..key_end - 1)?;
        if this.contains('\\') {
            return None;
        }
        i = skip_ws(bytes, key_end);
        if bytes.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(bytes, i + 1);
        let end = skip_value(bytes, i)?;
        if let Some(k) = keys.iter().position(|key| *key == this) {
            if found[k].is_some() {
                return None;
            }
            let value = text.get(i..end)?;
            let inner = value.strip_prefix('"')?.strip_suffix('"')?;
            if inner.contains('\\') {
                return None;
            }
            found[k] = Some(inner);
            if found.iter().all(Option::is_some) {
                return Some(found);
            }
        }
        i = end;
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(i) {
        i += 1;
    }
    i
}

/// The index after the string whose opening quote is at `i`.
fn skip_string(bytes: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match bytes.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// The index after the value starting at `i`.
fn skip_value(bytes: &[u8], mut i: usize) -> Option<usize> {
    match bytes.get(i)? {
        b'"' => skip_string(bytes, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match bytes.get(i)? {
                    b'"' => {
                        i = skip_string(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            // A number, true, false or null: up to the next delimiter.
            while let Some(b) = bytes.get(i) {
                if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                i += 1;
            }
            Some(i)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_strings_are_read_only_when_plain() {
        let item = r#"{"metadata":{"kind":"x"},"apiVersion":"v1","kind":"Node","x":[{"kind":1}]}"#;
        assert_eq!(
            top_level_strs(item, ["apiVersion", "kind", "spec"]),
            Some([Some("v1"), Some("Node"), None])
        );
        assert_eq!(top_level_strs(r#"{"kind":"N\u006fde"}"#, ["kind"]), None);
        assert_eq!(
            top_level_strs(r#"{"kind":"Node","kind":1}"#, ["kind"]),
            Some([Some("Node")])
        );
        assert_eq!(
            top_level_strs(r#"{"kind":"Node","kind":"Pod","x":1}"#, ["kind", "x"]),
            None
        );
        assert_eq!(top_level_strs(r#"{"kind":1}"#, ["kind"]), None);
        assert_eq!(top_level_strs("[1]", ["kind"]), None);
    }
}
