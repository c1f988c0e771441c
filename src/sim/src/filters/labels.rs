//! Label selectors compiled once into a canonical, hashable form, and the
//! namespaces pods live in.
//!
//! The filters need more than evaluating an API object: a selector that can key a cache (so
//! every replica of a workload shares one set of topology counts), the
//! distinction between a nil selector (matches nothing) and an empty one
//! (matches everything), and upstream's parse-time validation
//! (`metav1.LabelSelectorAsSelector`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Labels of one object.
pub(crate) type Labels = BTreeMap<String, String>;

/// A label selector that cannot be compiled, as upstream's
/// `LabelSelectorAsSelector` refuses it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label selector requirement on key {key:?}: {message}")]
pub struct SelectorParseError {
    /// The requirement's key.
    pub key: String,
    /// What was wrong.
    pub message: String,
}

/// `name part` of a qualified name or a label value:
/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn is_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes
            .iter()
            .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
}

/// A valid label value (`validation.IsValidLabelValue`): empty, or a name part.
pub(crate) fn is_valid_label_value(value: &str) -> bool {
    value.is_empty() || is_name_part(value)
}

/// A valid label key (`validation.IsQualifiedName`): an optional DNS-1123
/// subdomain prefix and a slash, then a name part.
pub(crate) fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                let b = label.as_bytes();
                !b.is_empty()
                    && b.len() <= 63
                    && b.first()
                        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && b.last()
                        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            })
    });
    prefix_ok && is_name_part(name)
}

/// One requirement's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One requirement, with its values sorted so equal selectors hash equally.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Requirement {
    pub(crate) key: String,
    pub(crate) op: Op,
    pub(crate) values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: Option<&Labels>) -> bool {
        let value = labels.and_then(|l| l.get(&self.key));
        match self.op {
            Op::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Op::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
        }
    }
}

/// A compiled label selector. `Nothing` is what a nil API selector compiles
/// to; `Requirements(vec![])` is the empty selector, which matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Selector {
    Nothing,
    Requirements(Vec<Requirement>),
}

impl Selector {
    /// Compiles an API selector. `None` compiles to [`Selector::Nothing`].
    pub(crate) fn compile(selector: Option<&LabelSelector>) -> Result<Self, SelectorParseError> {
        let Some(selector) = selector else {
            return Ok(Selector::Nothing);
        };
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            if !is_qualified_name(key) || !is_valid_label_value(value) {
                return Err(SelectorParseError {
                    key: key.clone(),
                    message: format!("invalid label key or value {value:?}"),
                });
            }
            requirements.push(Requirement {
                key: key.clone(),
                op: Op::In,
                values: vec![value.clone()],
            });
        }
        for expression in selector.match_expressions.iter().flatten() {
            let error = |message: &str| SelectorParseError {
                key: expression.key.clone(),
                message: message.to_string(),
            };
            let mut values = expression.values.clone().unwrap_or_default();
            let op = match expression.operator.as_str() {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => {
                    return Err(error(&format!(
                        "{other:?} is not a valid label selector operator"
                    )));
                }
            };
            match op {
                Op::In | Op::NotIn if values.is_empty() => {
                    return Err(error(
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
                Op::Exists | Op::DoesNotExist if !values.is_empty() => {
                    return Err(error(
                        "values set must be empty for exists and does not exist",
                    ));
                }
                _ => {}
            }
            if !is_qualified_name(&expression.key) {
                return Err(error("invalid label key"));
            }
            if let Some(bad) = values.iter().find(|v| !is_valid_label_value(v)) {
                return Err(error(&format!("invalid label value {bad:?}")));
            }
            values.sort();
            values.dedup();
            requirements.push(Requirement {
                key: expression.key.clone(),
                op,
                values,
            });
        }
        requirements.sort();
        requirements.dedup();
        Ok(Selector::Requirements(requirements))
    }

    /// Does the label set match? A missing label set is an empty one.
    pub(crate) fn matches(&self, labels: Option<&Labels>) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::Requirements(requirements) => requirements.iter().all(|r| r.matches(labels)),
        }
    }

    /// Upstream's `Selector.Empty()`: true only for the match-everything selector.
    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, Selector::Requirements(r) if r.is_empty())
    }

    /// ANDs `key In (value)` requirements onto the selector; a `Nothing`
    /// selector stays `Nothing`, as upstream's merge leaves it.
    pub(crate) fn with_requirements(
        self,
        extra: impl IntoIterator<Item = (String, Op, String)>,
    ) -> Self {
        match self {
            Selector::Nothing => Selector::Nothing,
            Selector::Requirements(mut requirements) => {
                for (key, op, value) in extra {
                    requirements.push(Requirement {
                        key,
                        op,
                        values: vec![value],
                    });
                }
                requirements.sort();
                requirements.dedup();
                Selector::Requirements(requirements)
            }
        }
    }
}

/// Every namespace the simulation knows, with its labels.
///
/// Namespaces that pods live in but that the snapshot does not list are
/// known with no labels: the API server would hold them, so a namespace
/// selector `{}` must still see them.
#[derive(Debug, Clone, Default)]
pub(crate) struct NamespaceRegistry {
    labels: BTreeMap<String, Labels>,
}

impl NamespaceRegistry {
    pub(crate) fn new(namespaces: &[Namespace]) -> Self {
        let mut registry = Self::default();
        for namespace in namespaces {
            if let Some(name) = namespace.metadata.name.as_deref() {
                registry.labels.insert(
                    name.to_string(),
                    namespace.metadata.labels.clone().unwrap_or_default(),
                );
            }
        }
        registry
    }

    /// Records a namespace seen on a pod, keeping labels already known.
    pub(crate) fn note(&mut self, name: &str) {
        if !self.labels.contains_key(name) {
            self.labels.insert(name.to_string(), Labels::new());
        }
    }

    /// The labels of a namespace, `None` when it is unknown.
    pub(crate) fn labels(&self, name: &str) -> Option<&Labels> {
        self.labels.get(name)
    }

    /// Names of the namespaces whose labels the selector matches, plus `extra`
    /// (the incoming pod's own namespace, which exists even if unlisted).
    pub(crate) fn matching(&self, selector: &Selector, extra: &str) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self
            .labels
            .iter()
            .filter(|(_, labels)| selector.matches(Some(labels)))
            .map(|(name, _)| name.clone())
            .collect();
        if !self.labels.contains_key(extra) && selector.matches(None) {
            names.insert(extra.to_string());
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn nil_matches_nothing_and_empty_matches_everything() {
        let nothing = Selector::compile(None).unwrap();
        assert!(!nothing.matches(Some(&labels(&[("a", "b")]))));
        assert!(!nothing.is_empty());
        let everything = Selector::compile(Some(&LabelSelector::default())).unwrap();
        assert!(everything.matches(None));
        assert!(everything.is_empty());
    }

    #[test]
    fn upstream_parse_errors_are_refused() {
        let bad = |op: &str, values: Option<Vec<String>>| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: op.into(),
                values,
            }]),
            ..Default::default()
        };
        assert!(Selector::compile(Some(&bad("In", Some(vec![])))).is_err());
        assert!(Selector::compile(Some(&bad("Exists", Some(vec!["x".into()])))).is_err());
        assert!(Selector::compile(Some(&bad("Like", None))).is_err());
        assert!(Selector::compile(Some(&bad("DoesNotExist", None))).is_ok());
    }

    #[test]
    fn label_syntax_follows_apimachinery_validation() {
        for good in ["app", "example.com/gpu", "a-b_c.d", "A1"] {
            assert!(is_qualified_name(good), "{good}");
        }
        for bad in ["", "invalid key", "-a", "a-", "Example.com/x", "/x", "x/"] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
        assert!(is_valid_label_value(""));
        assert!(!is_valid_label_value("invalid value: ___@#$%^"));
        assert!(!is_valid_label_value(&"a".repeat(64)));
    }

    #[test]
    fn equal_selectors_compile_equal_whatever_the_order() {
        let a = LabelSelector {
            match_labels: Some(
                [
                    ("x".to_string(), "1".to_string()),
                    ("y".to_string(), "2".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        };
        let b = LabelSelector {
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "y".into(),
                    operator: "In".into(),
                    values: Some(vec!["2".into()]),
                },
                LabelSelectorRequirement {
                    key: "x".into(),
                    operator: "In".into(),
                    values: Some(vec!["1".into()]),
                },
            ]),
            ..Default::default()
        };
        assert_eq!(
            Selector::compile(Some(&a)).unwrap(),
            Selector::compile(Some(&b)).unwrap()
        );
    }
}
