//! Node selectors with the API server's semantics, shared by the snapshot
//! (allocated claims' node selectors) and the NodeAffinity filter.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// A selector that cannot be evaluated (unknown operator, bad number). The
/// scheduler treats these as errors, so callers surface the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector requirement on {key:?}: {message}")]
pub struct SelectorError {
    /// The requirement's key.
    pub key: String,
    /// What was wrong.
    pub message: String,
}

fn node_labels(node: &Node) -> Option<&BTreeMap<String, String>> {
    node.metadata.labels.as_ref()
}

/// Does `node` match the selector? Terms are ORed; inside a term, expressions
/// and fields are ANDed. A selector with no terms matches nothing, as upstream.
///
/// # Errors
/// An unknown operator or a `Gt`/`Lt` value that is not an integer.
pub fn node_selector_matches(selector: &NodeSelector, node: &Node) -> Result<bool, SelectorError> {
    for term in &selector.node_selector_terms {
        if node_selector_term_matches(term, node)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Does `node` match one term? An empty term matches nothing (upstream skips
/// empty terms when matching).
///
/// # Errors
/// As [`node_selector_matches`].
pub fn node_selector_term_matches(
    term: &NodeSelectorTerm,
    node: &Node,
) -> Result<bool, SelectorError> {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return Ok(false);
    }
    let labels = node_labels(node);
    for requirement in expressions {
        let value = labels
            .and_then(|l| l.get(&requirement.key))
            .map(String::as_str);
        if !requirement_matches(requirement, value)? {
            return Ok(false);
        }
    }
    let name = node.metadata.name.as_deref().unwrap_or_default();
    for requirement in fields {
        // Only metadata.name is a supported node field, as in upstream.
        if requirement.key != "metadata.name" {
            return Err(SelectorError {
                key: requirement.key.clone(),
                message: "only metadata.name is supported in matchFields".into(),
            });
        }
        if !requirement_matches(requirement, Some(name))? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn requirement_matches(
    requirement: &NodeSelectorRequirement,
    value: Option<&str>,
) -> Result<bool, SelectorError> {
    let values = requirement.values.as_deref().unwrap_or_default();
    let error = |message: &str| SelectorError {
        key: requirement.key.clone(),
        message: message.to_string(),
    };
    Ok(match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        op @ ("Gt" | "Lt") => {
            let [bound] = values else {
                return Err(error(&format!("{op} needs exactly one value")));
            };
            let bound: i64 = bound
                .parse()
                .map_err(|_| error(&format!("{op} value {bound:?} is not an integer")))?;
            match value.map(str::parse::<i64>) {
                Some(Ok(v)) => {
                    if op == "Gt" {
                        v > bound
                    } else {
                        v < bound
                    }
                }
                // A label that is absent or not an integer does not match.
                _ => false,
            }
        }
        other => return Err(error(&format!("unknown operator {other:?}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The selector that pins an allocation to one node, as the allocator writes
    /// it for node-local devices.
    fn pinned_to_node(node_name: &str) -> NodeSelector {
        NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_fields: Some(vec![NodeSelectorRequirement {
                    key: "metadata.name".into(),
                    operator: "In".into(),
                    values: Some(vec![node_name.to_string()]),
                }]),
                ..Default::default()
            }],
        }
    }

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| (*v).to_string()).collect()),
        }
    }

    fn term(expressions: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(expressions),
            ..Default::default()
        }
    }

    #[test]
    fn operators_follow_upstream() {
        let n = node("n1", &[("zone", "a"), ("gpus", "8")]);
        let cases = [
            (req("zone", "In", &["a", "b"]), true),
            (req("zone", "In", &["b"]), false),
            (req("zone", "NotIn", &["b"]), true),
            (req("missing", "NotIn", &["b"]), true),
            (req("zone", "Exists", &[]), true),
            (req("missing", "DoesNotExist", &[]), true),
            (req("gpus", "Gt", &["4"]), true),
            (req("gpus", "Lt", &["4"]), false),
            (req("zone", "Gt", &["4"]), false),
        ];
        for (r, expected) in cases {
            let selector = NodeSelector {
                node_selector_terms: vec![term(vec![r.clone()])],
            };
            assert_eq!(
                node_selector_matches(&selector, &n).unwrap(),
                expected,
                "{r:?}"
            );
        }
    }

    #[test]
    fn terms_are_ored_and_empty_terms_match_nothing() {
        let n = node("n1", &[("zone", "a")]);
        let selector = NodeSelector {
            node_selector_terms: vec![
                term(vec![req("zone", "In", &["b"])]),
                term(vec![req("zone", "In", &["a"])]),
            ],
        };
        assert!(node_selector_matches(&selector, &n).unwrap());
        let empty = NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm::default()],
        };
        assert!(!node_selector_matches(&empty, &n).unwrap());
        assert!(!node_selector_matches(&NodeSelector::default(), &n).unwrap());
    }

    #[test]
    fn match_fields_pin_by_name_and_bad_operators_are_errors() {
        let n = node("n1", &[]);
        assert!(node_selector_matches(&pinned_to_node("n1"), &n).unwrap());
        assert!(!node_selector_matches(&pinned_to_node("n2"), &n).unwrap());
        let bad = NodeSelector {
            node_selector_terms: vec![term(vec![req("zone", "Like", &["a"])])],
        };
        assert!(node_selector_matches(&bad, &n).is_err());
    }
}

/// A `metav1.LabelSelector` compiled once, for callers outside the filters that match it
/// against many label sets (PodDisruptionBudgets against pods). A missing selector matches
/// nothing and an empty one everything, as upstream's `LabelSelectorAsSelector`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelectorMatcher(crate::filters::labels::Selector);

impl LabelSelectorMatcher {
    /// Compiles `selector`.
    ///
    /// # Errors
    /// An invalid operator, key or value, naming the key.
    pub fn compile(
        selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    ) -> Result<Self, crate::filters::SelectorParseError> {
        crate::filters::labels::Selector::compile(selector).map(Self)
    }

    /// Whether `labels` (missing: none) satisfy the selector.
    #[must_use]
    pub fn matches(&self, labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
        self.0.matches(labels)
    }
}
