//! `v1.NodeSelector` as kube-scheduler evaluates it
//! (`component-helpers/scheduling/corev1/nodeaffinity`), parsed once:
//! terms are ORed, requirements inside a term are ANDed, empty terms match
//! nothing, `matchFields` is checked only against a node that has a name.
//!
//! Upstream has two readings of one selector, both here:
//! - strict (`NewNodeSelector`, used for ResourceSlices and allocated claims):
//!   any parse error in any term makes the whole selector unusable
//!   ([`ParsedNodeSelector::parse`]);
//! - lazy (`NewLazyErrorNodeSelector`, used by NodeAffinity): a term that does
//!   not parse never matches, the others still do
//!   ([`ParsedNodeSelector::parse_lazy`]).
//!
//! `matchFields` accepts any key, as upstream's field selector does; a node
//! has only the `metadata.name` field, so any other key reads as `""`
//! (`metadata.uid In (x)` never matches, `NotIn (x)` always does).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

use super::requirement::Requirement;

/// The one field a node has for `matchFields`.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// A node selector ready for matching.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ParsedNodeSelector {
    /// Non-empty terms, each parsed or with its errors.
    terms: Vec<Result<Term, Vec<FieldError>>>,
}

/// One problem in one requirement of a node selector, at its field path
/// (`nodeSelectorTerms[i].matchExpressions[j]` or `…matchFields[j]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{path}.{problem}")]
pub struct FieldError {
    /// The requirement's field path.
    pub path: String,
    /// What is wrong with it.
    pub problem: RequirementProblem,
}

/// What is wrong with one node selector requirement.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
pub enum RequirementProblem {
    /// A `matchExpressions` requirement `labels.NewRequirement` refuses, in
    /// apimachinery's words (field and value included).
    #[error("{0}")]
    Label(String),
    /// A `matchFields` operator other than `In`/`NotIn`.
    #[error("operator: Unsupported value: {operator:?}: supported values: \"In\", \"NotIn\"")]
    FieldOperator {
        /// The operator given.
        operator: String,
    },
    /// A `matchFields` requirement without exactly one value.
    #[error("values: Invalid value: {values:?}: must have one element")]
    FieldValues {
        /// The values given.
        values: Vec<String>,
    },
}

/// A node selector that does not parse: every problem of every term,
/// printed joined with ", " as upstream's aggregate error is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{}", join(.problems))]
pub struct NodeSelectorError {
    /// The problems, in term and requirement order.
    pub problems: Vec<FieldError>,
}

fn join(problems: &[FieldError]) -> String {
    let words: Vec<String> = problems.iter().map(ToString::to_string).collect();
    words.join(", ")
}

/// Why upstream's `NodeMatches` failed: the selector does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("failed to parse node selector: {0}")]
pub struct NodeMatchError(pub NodeSelectorError);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Term {
    /// `None` when the term has no `matchExpressions`.
    labels: Option<Vec<Requirement>>,
    /// `None` when the term has no `matchFields`.
    fields: Option<Vec<FieldRequirement>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FieldRequirement {
    key: String,
    value: String,
    equal: bool,
}

impl ParsedNodeSelector {
    /// Upstream's `NewNodeSelector`: every term must parse.
    ///
    /// # Errors
    /// Every problem found in any term, joined, each with its field path.
    pub fn parse(selector: &NodeSelector) -> Result<Self, NodeSelectorError> {
        let parsed = Self::parse_lazy(selector);
        match parsed.errors() {
            None => Ok(parsed),
            Some(errors) => Err(errors),
        }
    }

    /// The parse errors of every term, joined; `None` when all parsed.
    fn errors(&self) -> Option<NodeSelectorError> {
        let problems: Vec<FieldError> = self
            .terms
            .iter()
            .filter_map(|t| t.as_ref().err())
            .flatten()
            .cloned()
            .collect();
        (!problems.is_empty()).then_some(NodeSelectorError { problems })
    }

    /// Upstream's `NewLazyErrorNodeSelector`: terms that do not parse are
    /// kept with their errors and never match.
    #[must_use]
    pub fn parse_lazy(selector: &NodeSelector) -> Self {
        let terms = selector
            .node_selector_terms
            .iter()
            .enumerate()
            .filter(|(_, term)| !is_empty_term(term))
            .map(|(i, term)| parse_term(term, &format!("nodeSelectorTerms[{i}]")))
            .collect();
        ParsedNodeSelector { terms }
    }

    /// Whether the node satisfies at least one term that parsed
    /// (`NodeSelector.Match`; errors are ignored).
    #[must_use]
    pub fn matches(&self, node: &Node) -> bool {
        self.matches_name_and_labels(
            node.metadata.name.as_deref().unwrap_or(""),
            node.metadata.labels.as_ref(),
        )
    }

    /// [`Self::matches`] of a node named `name` with `labels`: all a term reads of a
    /// node (its labels, and its name for `matchFields`).
    #[must_use]
    pub fn matches_name_and_labels(
        &self,
        name: &str,
        labels: Option<&BTreeMap<String, String>>,
    ) -> bool {
        self.terms
            .iter()
            .flatten()
            .any(|term| term.matches(name, labels))
    }

    /// `LazyErrorNodeSelector.Match`: a matching term wins; otherwise the
    /// parse errors of the terms that did not parse, if any.
    ///
    /// # Errors
    /// The parse errors, when no term matched.
    pub fn matches_or_errors(&self, node: &Node) -> Result<bool, NodeSelectorError> {
        if self.matches(node) {
            return Ok(true);
        }
        match self.errors() {
            None => Ok(false),
            Some(errors) => Err(errors),
        }
    }
}

fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.as_ref().is_none_or(Vec::is_empty)
        && term.match_fields.as_ref().is_none_or(Vec::is_empty)
}

impl Term {
    fn matches(&self, node_name: &str, labels: Option<&BTreeMap<String, String>>) -> bool {
        if let Some(requirements) = &self.labels
            && !requirements.iter().all(|r| r.matches(labels))
        {
            return false;
        }
        // Upstream checks fields only when the node has any (a name).
        if let Some(fields) = &self.fields
            && !node_name.is_empty()
        {
            for field in fields {
                let actual = if field.key == NODE_NAME_FIELD {
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

fn parse_term(term: &NodeSelectorTerm, path: &str) -> Result<Term, Vec<FieldError>> {
    let mut errors = Vec::new();
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let labels = (!expressions.is_empty()).then(|| {
        let mut out = Vec::with_capacity(expressions.len());
        for (j, req) in expressions.iter().enumerate() {
            let values = req.values.as_deref().unwrap_or_default();
            match Requirement::parse(&req.key, &req.operator, values, true) {
                Ok(r) => out.push(r),
                Err(e) => errors.extend(e.into_iter().map(|e| FieldError {
                    path: format!("{path}.matchExpressions[{j}]"),
                    problem: RequirementProblem::Label(e),
                })),
            }
        }
        out
    });
    let fields = term.match_fields.as_deref().unwrap_or_default();
    let fields = (!fields.is_empty()).then(|| {
        let mut out = Vec::with_capacity(fields.len());
        for (j, req) in fields.iter().enumerate() {
            match parse_field(req) {
                Ok(f) => out.push(f),
                Err(problem) => errors.push(FieldError {
                    path: format!("{path}.matchFields[{j}]"),
                    problem,
                }),
            }
        }
        out
    });
    if errors.is_empty() {
        Ok(Term { labels, fields })
    } else {
        Err(errors)
    }
}

/// Upstream's `nodeSelectorRequirementsAsFieldSelector` for one requirement:
/// `In` or `NotIn` with exactly one value, any key.
fn parse_field(req: &NodeSelectorRequirement) -> Result<FieldRequirement, RequirementProblem> {
    let values = req.values.as_deref().unwrap_or_default();
    let equal = match req.operator.as_str() {
        "In" => true,
        "NotIn" => false,
        other => {
            return Err(RequirementProblem::FieldOperator {
                operator: other.to_string(),
            });
        }
    };
    let [value] = values else {
        return Err(RequirementProblem::FieldValues {
            values: values.to_vec(),
        });
    };
    Ok(FieldRequirement {
        key: req.key.clone(),
        value: value.clone(),
        equal,
    })
}

/// Upstream's `NodeMatches` for a ResourceSlice or device: a non-empty node
/// name wins, then `allNodes`, then the (strictly parsed) selector; nothing
/// set matches nothing.
///
/// # Errors
/// The selector's parse error.
pub fn node_matches(
    node: &Node,
    node_name: Option<&str>,
    all_nodes: bool,
    selector: Option<&Result<ParsedNodeSelector, NodeSelectorError>>,
) -> Result<bool, NodeMatchError> {
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
        Some(Err(e)) => Err(NodeMatchError(e.clone())),
        None => Ok(false),
    }
}

#[cfg(test)]
mod tests;
