//! NodeAffinity: the pod's `nodeSelector` and required node affinity
//! (`nodeaffinity.GetRequiredNodeAffinity`).
//!
//! Terms are ORed; a term whose requirements cannot be parsed never matches,
//! as upstream's lazy-error node selector skips it (see
//! [`crate::selectors::node`]). The PreFilter also narrows the candidate
//! nodes when every term pins `metadata.name In (...)`; nodes outside that
//! set are refused before any Filter runs, with the framework's "didn't
//! satisfy plugin(s)" reason.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Node, Pod};

use crate::pods::required_node_affinity;
use crate::selectors::ParsedNodeSelector;

/// Upstream plugin name.
pub const NAME: &str = "NodeAffinity";
/// Upstream's `ErrReasonPod`.
pub const REASON: &str = "node(s) didn't match Pod's node affinity/selector";
/// The framework's status for nodes a PreFilterResult left out.
pub const PREFILTER_REASON: &str = "node(s) didn't satisfy plugin(s) [NodeAffinity]";
/// Upstream's `errReasonConflict`: every term pins disjoint node names.
pub const CONFLICT_REASON: &str = "pod affinity terms conflict";

/// `nodeSelector` plus the required node affinity terms of one pod, parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RequiredNodeAffinity {
    node_selector: BTreeMap<String, String>,
    /// `None` when the pod has no required node affinity.
    terms: Option<ParsedNodeSelector>,
}

impl RequiredNodeAffinity {
    /// The pod's requirement, `None` when it has neither part.
    pub(crate) fn of(pod: &Pod) -> Option<Self> {
        let spec = pod.spec.as_ref()?;
        let node_selector = spec.node_selector.clone().unwrap_or_default();
        let terms = required_node_affinity(pod).map(ParsedNodeSelector::parse_lazy);
        if node_selector.is_empty() && terms.is_none() {
            return None;
        }
        Some(Self {
            node_selector,
            terms,
        })
    }

    /// `RequiredNodeAffinity.Match`, with parse errors counted as no match.
    pub(crate) fn matches(&self, node: &Node) -> bool {
        self.matches_name_and_labels(
            node.metadata.name.as_deref().unwrap_or(""),
            node.metadata.labels.as_ref(),
        )
    }

    /// [`Self::matches`] of a node named `name` with `labels` (all it reads of a node).
    pub(crate) fn matches_name_and_labels(
        &self,
        name: &str,
        labels: Option<&BTreeMap<String, String>>,
    ) -> bool {
        let selector_ok = self
            .node_selector
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
        selector_ok
            && self
                .terms
                .as_ref()
                .is_none_or(|terms| terms.matches_name_and_labels(name, labels))
    }

    /// A string equal for equal requirements, to key caches of node sets.
    pub(crate) fn cache_key(&self) -> String {
        format!("{:?}|{:?}", self.node_selector, self.terms)
    }
}

/// The NodeAffinity PreFilter's node-name restriction: `Ok(None)` means all
/// nodes; `Err` is the conflict upstream reports as unschedulable everywhere.
pub(crate) fn prefilter_node_names(pod: &Pod) -> Result<Option<HashSet<String>>, &'static str> {
    let terms = required_node_affinity(pod).map(|s| s.node_selector_terms.as_slice());
    let Some(terms) = terms else {
        return Ok(None);
    };
    let mut names: Option<HashSet<String>> = None;
    for term in terms {
        let mut term_names: Option<HashSet<String>> = None;
        for requirement in term.match_fields.iter().flatten() {
            if requirement.key == "metadata.name" && requirement.operator == "In" {
                let values: HashSet<String> =
                    requirement.values.iter().flatten().cloned().collect();
                term_names = Some(match term_names {
                    None => values,
                    Some(previous) => previous.intersection(&values).cloned().collect(),
                });
            }
        }
        // A term without a name pin admits every node: the terms are ORed.
        let Some(term_names) = term_names else {
            return Ok(None);
        };
        names.get_or_insert_with(HashSet::new).extend(term_names);
    }
    match names {
        Some(names) if names.is_empty() => Err(CONFLICT_REASON),
        other => Ok(other),
    }
}
