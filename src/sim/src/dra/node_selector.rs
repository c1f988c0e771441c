//! `v1.NodeSelector` as kube-scheduler evaluates it for ResourceSlices
//! (`component-helpers/scheduling/corev1/nodeaffinity`): terms are ORed,
//! requirements inside a term are ANDed, empty terms match nothing, and any
//! parse error in any term makes the whole selector unusable.
//!
//! Slices are immutable, so selectors are parsed once when a slice enters the
//! catalog and only matched afterwards.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// A selector ready for matching.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedNodeSelector {
    terms: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq)]
struct Term {
    labels: Vec<LabelRequirement>,
    /// `None` when the term has no `matchFields`.
    fields: Option<Vec<FieldRequirement>>,
}

#[derive(Debug, Clone, PartialEq)]
enum LabelRequirement {
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
    Gt(String, i64),
    Lt(String, i64),
}

#[derive(Debug, Clone, PartialEq)]
struct FieldRequirement {
    key: String,
    value: String,
    equal: bool,
}

impl ParsedNodeSelector {
    /// Parses a selector.
    ///
    /// # Errors
    /// Every problem found, joined: unknown operators, wrong value counts,
    /// invalid label keys or values, non-integer `Gt`/`Lt` values.
    pub fn parse(selector: &NodeSelector) -> Result<Self, String> {
        let mut terms = Vec::new();
        let mut errors = Vec::new();
        for (i, term) in selector.node_selector_terms.iter().enumerate() {
            if is_empty_term(term) {
                continue;
            }
            match parse_term(term, i) {
                Ok(t) => terms.push(t),
                Err(mut e) => errors.append(&mut e),
            }
        }
        if errors.is_empty() {
            Ok(ParsedNodeSelector { terms })
        } else {
            Err(errors.join(", "))
        }
    }

    /// Whether the node satisfies at least one term.
    #[must_use]
    pub fn matches(&self, node: &Node) -> bool {
        let name = node.metadata.name.as_deref().unwrap_or("");
        let labels = node.metadata.labels.as_ref();
        self.terms.iter().any(|term| term.matches(name, labels))
    }
}

fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.as_ref().is_none_or(Vec::is_empty)
        && term.match_fields.as_ref().is_none_or(Vec::is_empty)
}

impl Term {
    fn matches(
        &self,
        node_name: &str,
        labels: Option<&std::collections::BTreeMap<String, String>>,
    ) -> bool {
        let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
        for requirement in &self.labels {
            let ok = match requirement {
                LabelRequirement::In(key, values) => label(key).is_some_and(|v| values.contains(v)),
                LabelRequirement::NotIn(key, values) => {
                    label(key).is_none_or(|v| !values.contains(v))
                }
                LabelRequirement::Exists(key) => label(key).is_some(),
                LabelRequirement::DoesNotExist(key) => label(key).is_none(),
                LabelRequirement::Gt(key, bound) => label(key)
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v > *bound),
                LabelRequirement::Lt(key, bound) => label(key)
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v < *bound),
            };
            if !ok {
                return false;
            }
        }
        // Upstream only checks fields when the node has any (a name).
        if let Some(fields) = &self.fields
            && !node_name.is_empty()
        {
            for field in fields {
                let actual = if field.key == "metadata.name" {
                    node_name
                } else {
                    ""
                };
                if (actual == field.value) != field.equal {
                    return false;
                }
            }
        }
        true
    }
}

fn parse_term(term: &NodeSelectorTerm, index: usize) -> Result<Term, Vec<String>> {
    let mut errors = Vec::new();
    let mut labels = Vec::new();
    for (j, req) in term.match_expressions.iter().flatten().enumerate() {
        let path = format!("nodeSelectorTerms[{index}].matchExpressions[{j}]");
        match parse_label_requirement(req) {
            Ok(r) => labels.push(r),
            Err(e) => errors.push(format!("{path}: {e}")),
        }
    }
    let fields = match term.match_fields.as_ref().filter(|f| !f.is_empty()) {
        None => None,
        Some(reqs) => {
            let mut out = Vec::new();
            for (j, req) in reqs.iter().enumerate() {
                let path = format!("nodeSelectorTerms[{index}].matchFields[{j}]");
                let values = req.values.as_deref().unwrap_or_default();
                let equal = match req.operator.as_str() {
                    "In" => true,
                    "NotIn" => false,
                    other => {
                        errors.push(format!(
                            "{path}.operator: Unsupported value: {other:?}: supported values: \"In\", \"NotIn\""
                        ));
                        continue;
                    }
                };
                if values.len() != 1 {
                    errors.push(format!(
                        "{path}.values: Invalid value: {values:?}: must have one element"
                    ));
                    continue;
                }
                out.push(FieldRequirement {
                    key: req.key.clone(),
                    value: values[0].clone(),
                    equal,
                });
            }
            Some(out)
        }
    };
    if errors.is_empty() {
        Ok(Term { labels, fields })
    } else {
        Err(errors)
    }
}

fn parse_label_requirement(req: &NodeSelectorRequirement) -> Result<LabelRequirement, String> {
    let values = req.values.as_deref().unwrap_or_default();
    let key = req.key.clone();
    validate_label_key(&key)?;
    let requirement = match req.operator.as_str() {
        "In" | "NotIn" => {
            if values.is_empty() {
                return Err("for 'in', 'notin' operators, values set can't be empty".into());
            }
            let set: BTreeSet<String> = values.iter().cloned().collect();
            if req.operator == "In" {
                LabelRequirement::In(key, set)
            } else {
                LabelRequirement::NotIn(key, set)
            }
        }
        "Exists" | "DoesNotExist" => {
            if !values.is_empty() {
                return Err("values set must be empty for exists and does not exist".into());
            }
            if req.operator == "Exists" {
                LabelRequirement::Exists(key)
            } else {
                LabelRequirement::DoesNotExist(key)
            }
        }
        "Gt" | "Lt" => {
            if values.len() != 1 {
                return Err("for 'Gt', 'Lt' operators, exactly one value is required".into());
            }
            let bound: i64 = values[0].parse().map_err(|_| {
                "for 'Gt', 'Lt' operators, the value must be an integer".to_string()
            })?;
            if req.operator == "Gt" {
                LabelRequirement::Gt(key, bound)
            } else {
                LabelRequirement::Lt(key, bound)
            }
        }
        other => {
            return Err(format!(
                "operator: Unsupported value: {other:?}: supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\""
            ));
        }
    };
    for value in values {
        validate_label_value(value)?;
    }
    Ok(requirement)
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 characters.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A DNS-1123 subdomain: lowercase labels separated by dots, at most 253.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && !s.is_empty()
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
                && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

fn validate_label_key(key: &str) -> Result<(), String> {
    let ok = match key.split_once('/') {
        Some((prefix, name)) => is_dns1123_subdomain(prefix) && is_qualified_name_part(name),
        None => is_qualified_name_part(key),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "key: Invalid value: {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

fn validate_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_qualified_name_part(value) {
        Ok(())
    } else {
        Err(format!(
            "values: Invalid value: {value:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

/// Upstream's `NodeMatches`: a non-empty node name wins, then `allNodes`,
/// then the selector; nothing set matches nothing.
///
/// # Errors
/// The selector's parse error.
pub fn node_matches(
    node: &Node,
    node_name: Option<&str>,
    all_nodes: bool,
    selector: Option<&Result<ParsedNodeSelector, String>>,
) -> Result<bool, String> {
    match node_name {
        Some(name) if !name.is_empty() => {
            return Ok(node.metadata.name.as_deref() == Some(name));
        }
        _ => {}
    }
    if all_nodes {
        return Ok(true);
    }
    match selector {
        Some(Ok(parsed)) => Ok(parsed.matches(node)),
        Some(Err(e)) => Err(format!("failed to parse node selector: {e}")),
        None => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).into(), (*v).into()))
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
            values: Some(values.iter().map(|v| (*v).into()).collect()),
        }
    }

    fn selector(
        terms: Vec<(Vec<NodeSelectorRequirement>, Vec<NodeSelectorRequirement>)>,
    ) -> NodeSelector {
        NodeSelector {
            node_selector_terms: terms
                .into_iter()
                .map(|(e, f)| NodeSelectorTerm {
                    match_expressions: Some(e),
                    match_fields: Some(f),
                })
                .collect(),
        }
    }

    #[test]
    fn terms_are_ored_and_requirements_anded() {
        let n = node("n1", &[("region", "r1"), ("zone", "z1")]);
        let s = selector(vec![
            (vec![req("region", "In", &["r2"])], vec![]),
            (
                vec![req("region", "In", &["r1"]), req("zone", "NotIn", &["z2"])],
                vec![],
            ),
        ]);
        assert!(ParsedNodeSelector::parse(&s).unwrap().matches(&n));
        let s = selector(vec![(
            vec![req("region", "In", &["r1"]), req("zone", "In", &["z2"])],
            vec![],
        )]);
        assert!(!ParsedNodeSelector::parse(&s).unwrap().matches(&n));
    }

    #[test]
    fn every_label_operator() {
        let n = node("n1", &[("gpus", "8"), ("a", "x")]);
        let one = |r: NodeSelectorRequirement| {
            ParsedNodeSelector::parse(&selector(vec![(vec![r], vec![])]))
                .unwrap()
                .matches(&n)
        };
        assert!(one(req("a", "Exists", &[])));
        assert!(!one(req("b", "Exists", &[])));
        assert!(one(req("b", "DoesNotExist", &[])));
        assert!(
            one(req("b", "NotIn", &["x"])),
            "missing label satisfies NotIn"
        );
        assert!(!one(req("b", "In", &["x"])));
        assert!(one(req("gpus", "Gt", &["4"])));
        assert!(!one(req("gpus", "Gt", &["8"])));
        assert!(one(req("gpus", "Lt", &["9"])));
        assert!(
            !one(req("a", "Gt", &["1"])),
            "non-integer label never satisfies Gt"
        );
    }

    #[test]
    fn match_fields_on_the_node_name() {
        let n = node("n1", &[]);
        let s = selector(vec![(vec![], vec![req("metadata.name", "In", &["n1"])])]);
        assert!(ParsedNodeSelector::parse(&s).unwrap().matches(&n));
        let s = selector(vec![(vec![], vec![req("metadata.name", "NotIn", &["n1"])])]);
        assert!(!ParsedNodeSelector::parse(&s).unwrap().matches(&n));
        let s = selector(vec![(
            vec![],
            vec![req("metadata.name", "In", &["n1", "n2"])],
        )]);
        assert!(
            ParsedNodeSelector::parse(&s).is_err(),
            "field In takes exactly one value"
        );
    }

    #[test]
    fn empty_terms_match_nothing() {
        let s = selector(vec![(vec![], vec![])]);
        assert!(
            !ParsedNodeSelector::parse(&s)
                .unwrap()
                .matches(&node("n1", &[]))
        );
    }

    #[test]
    fn parse_errors() {
        for bad in [
            req("a", "In", &[]),
            req("a", "Exists", &["x"]),
            req("a", "Gt", &["x"]),
            req("a", "Gt", &["1", "2"]),
            req("a", "Foo", &["x"]),
            req("-bad", "In", &["x"]),
            req("a", "In", &["bad value"]),
        ] {
            assert!(
                ParsedNodeSelector::parse(&selector(vec![(vec![bad.clone()], vec![])])).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn node_matches_precedence() {
        let n = node("n1", &[]);
        assert!(node_matches(&n, Some("n1"), false, None).unwrap());
        assert!(
            !node_matches(&n, Some("n2"), true, None).unwrap(),
            "name wins over allNodes"
        );
        assert!(
            node_matches(&n, Some(""), true, None).unwrap(),
            "empty name is unset"
        );
        assert!(!node_matches(&n, None, false, None).unwrap());
        assert!(node_matches(&n, None, false, Some(&Err("x".into()))).is_err());
    }
}
