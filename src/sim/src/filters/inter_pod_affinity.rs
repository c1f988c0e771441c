//! InterPodAffinity: required pod affinity and anti-affinity, both the
//! incoming pod's and that of pods already placed (`filtering.go`).
//!
//! Three checks, in upstream's order:
//! 1. every affinity term's topology key is on the node and, in the node's
//!    domain of each, some pod matches all the terms; unless no pod anywhere
//!    does and the pod matches its own terms (the first pod of a group);
//! 2. in the node's domain of each anti-affinity term, no pod matches it;
//! 3. no placed pod's anti-affinity term that matches the incoming pod has a
//!    pod in the node's domain.
//!
//! Terms default to the pod's own namespace; the incoming pod's
//! `namespaceSelector` is resolved against the namespaces once, a placed
//! pod's is evaluated against the incoming pod's namespace labels.
//! `matchLabelKeys`/`mismatchLabelKeys` are merged into the selector as the
//! API server does at admission (idempotent if it already did).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodAffinityTerm};

use super::index::{AntiTerm, Clause, Index, NodeRecord, PodMatcher, PodRecord};
use super::labels::NamespaceRegistry;
use super::topology::{Domain, DomainCounts, TopologyColumn};
use crate::pods::{required_pod_affinity, required_pod_anti_affinity};
use crate::selectors::{Labels, Op, Selector, SelectorParseError};

/// Upstream plugin name.
pub const NAME: &str = "InterPodAffinity";
/// Upstream's `ErrReasonAffinityRulesNotMatch`.
pub const AFFINITY_REASON: &str = "node(s) didn't match pod affinity rules";
/// Upstream's `ErrReasonAntiAffinityRulesNotMatch`.
pub const ANTI_AFFINITY_REASON: &str = "node(s) didn't match pod anti-affinity rules";
/// Upstream's `ErrReasonExistingAntiAffinityRulesNotMatch`.
pub const EXISTING_ANTI_AFFINITY_REASON: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// Why a node failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AffinityRefusal {
    Affinity,
    AntiAffinity,
    ExistingAntiAffinity,
}

/// A term parsed for one pod.
#[derive(Debug, Clone)]
struct Term {
    namespaces: BTreeSet<String>,
    namespace_selector: Selector,
    selector: Selector,
    topology_key: String,
}

fn parse_term(
    namespace: &str,
    labels: Option<&Labels>,
    term: &PodAffinityTerm,
) -> Result<Term, SelectorParseError> {
    let mut selector = Selector::compile(term.label_selector.as_ref())?;
    let keyed = |keys: &Option<Vec<String>>, op: Op| -> Vec<(String, Op, String)> {
        keys.iter()
            .flatten()
            .filter_map(|k| {
                labels
                    .and_then(|l| l.get(k))
                    .map(|v| (k.clone(), op, v.clone()))
            })
            .collect()
    };
    let extra: Vec<_> = keyed(&term.match_label_keys, Op::In)
        .into_iter()
        .chain(keyed(&term.mismatch_label_keys, Op::NotIn))
        .collect();
    if !extra.is_empty() {
        selector = selector.with_requirements(extra);
    }
    let listed: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
    let namespaces = if listed.is_empty() && term.namespace_selector.is_none() {
        BTreeSet::from([namespace.to_string()])
    } else {
        listed
    };
    Ok(Term {
        namespaces,
        namespace_selector: Selector::compile(term.namespace_selector.as_ref())?,
        selector,
        topology_key: term.topology_key.clone(),
    })
}

fn parse_terms(pod: &Pod, terms: &[PodAffinityTerm]) -> Result<Vec<Term>, SelectorParseError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    terms
        .iter()
        .map(|t| parse_term(namespace, pod.metadata.labels.as_ref(), t))
        .collect()
}

/// A pod affinity term that does not parse, as upstream's `NewPodInfo`
/// reports it ("parsing pod: ...").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parsing pod: {terms}: {source}")]
pub(crate) struct AffinityTermError {
    /// Which list of terms: `requiredAffinityTerms`,
    /// `requiredAntiAffinityTerms`, `preferredAffinityTerms` or
    /// `preferredAntiAffinityTerms`.
    pub terms: &'static str,
    /// The selector's error.
    pub source: SelectorParseError,
}

/// Parses the preferred terms only to surface errors, as `NewPodInfo` does.
fn check_preferred(pod: &Pod) -> Result<(), AffinityTermError> {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let preferred = affinity
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default();
    let anti = affinity
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default();
    for (what, terms) in [
        ("preferredAffinityTerms", preferred),
        ("preferredAntiAffinityTerms", anti),
    ] {
        for weighted in terms {
            Selector::compile(weighted.pod_affinity_term.label_selector.as_ref())
                .and_then(|_| {
                    Selector::compile(weighted.pod_affinity_term.namespace_selector.as_ref())
                })
                .map_err(|source| AffinityTermError {
                    terms: what,
                    source,
                })?;
        }
    }
    Ok(())
}

/// The required anti-affinity terms a placed pod imposes on later pods.
/// A pod whose terms do not parse imposes none, as the scheduler cache keeps
/// no terms for it.
pub(crate) fn placed_anti_terms(pod: &Pod) -> Vec<AntiTerm> {
    parse_terms(pod, required_pod_anti_affinity(pod))
        .map(|terms| {
            terms
                .into_iter()
                .map(|t| AntiTerm {
                    namespaces: t.namespaces,
                    namespace_selector: t.namespace_selector,
                    selector: t.selector,
                    topology_key: t.topology_key,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A term's topology column and counts at prepare time.
type TermCounts = (Arc<TopologyColumn>, Arc<DomainCounts>);

/// Everything the Filter needs, computed once per pod.
#[derive(Debug, Clone, Default)]
pub(crate) struct PreparedAffinity {
    /// Per affinity term: pods matching all the terms, per domain.
    affinity: Vec<TermCounts>,
    /// Some pod somewhere matches all the affinity terms.
    affinity_anywhere: bool,
    /// The pod matches all its own affinity terms.
    self_affinity: bool,
    /// Per anti-affinity term: pods matching it, per domain.
    anti_affinity: Vec<TermCounts>,
    /// Placed pods' anti-affinity terms that match this pod.
    existing: Vec<TermCounts>,
}

impl PreparedAffinity {
    /// Nothing to check: upstream's PreFilter returns Skip.
    pub(crate) fn is_empty(&self) -> bool {
        self.affinity.is_empty() && self.anti_affinity.is_empty() && self.existing.is_empty()
    }
}

/// Resolves the incoming pod's namespace selector into its namespace set
/// (`mergeAffinityTermNamespacesIfNotEmpty`): a non-empty selector adds the
/// namespaces it matches; the empty selector keeps matching every namespace.
fn clause(term: &Term, registry: &NamespaceRegistry, own_namespace: &str) -> Clause {
    let mut namespaces = term.namespaces.clone();
    match &term.namespace_selector {
        Selector::Nothing => {}
        selector => namespaces.extend(registry.matching(selector, own_namespace)),
    }
    Clause {
        namespaces,
        selector: term.selector.clone(),
    }
}

/// Whether every pod of `others` is one `pod`'s required affinity counts: it
/// matches all of `pod`'s required affinity terms (upstream counts a pod for
/// a term only when it matches every term, `podMatchesAllAffinityTerms`).
/// `false` when `pod` has no required affinity term or one does not parse.
pub(crate) fn affinity_counts_all<'a>(
    pod: &Pod,
    others: impl IntoIterator<Item = &'a Pod>,
    registry: &NamespaceRegistry,
) -> bool {
    let Ok(terms) = parse_terms(pod, required_pod_affinity(pod)) else {
        return false;
    };
    if terms.is_empty() {
        return false;
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let clauses: Vec<Clause> = terms
        .iter()
        .map(|t| clause(t, registry, namespace))
        .collect();
    // As `PodMatcher::matches`, on borrowed labels: a gang asks this for
    // every pair of its members.
    others.into_iter().all(|other| {
        let other_namespace = other.metadata.namespace.as_deref().unwrap_or("default");
        clauses
            .iter()
            .all(|c| c.matches(other_namespace, other.metadata.labels.as_ref()))
    })
}

/// The PreFilter.
///
/// # Errors
/// A term of the pod does not parse (upstream: "parsing pod: ...").
pub(crate) fn prepare(
    pod: &Pod,
    registry: &NamespaceRegistry,
    index: &mut Index,
    nodes: &[NodeRecord],
    pods: &[PodRecord],
) -> Result<PreparedAffinity, AffinityTermError> {
    let affinity_terms =
        parse_terms(pod, required_pod_affinity(pod)).map_err(|source| AffinityTermError {
            terms: "requiredAffinityTerms",
            source,
        })?;
    let anti_terms =
        parse_terms(pod, required_pod_anti_affinity(pod)).map_err(|source| AffinityTermError {
            terms: "requiredAntiAffinityTerms",
            source,
        })?;
    check_preferred(pod)?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let labels = pod.metadata.labels.as_ref();
    let mut prepared = PreparedAffinity {
        existing: index.matching_anti_groups(namespace, labels, registry.labels(namespace), nodes),
        ..PreparedAffinity::default()
    };
    if !affinity_terms.is_empty() {
        let own = PodRecord {
            namespace: namespace.into(),
            labels: labels.cloned().map(std::sync::Arc::new),
            terminating: false,
            node_index: usize::MAX,
            placed: None,
        };
        let all = PodMatcher {
            clauses: affinity_terms
                .iter()
                .map(|t| clause(t, registry, namespace))
                .collect(),
            skip_terminating: false,
        };
        prepared.self_affinity = all.matches(&own);
        for term in &affinity_terms {
            let view = index.view(&all, &term.topology_key, None, nodes, pods);
            prepared.affinity_anywhere |= view.1.any_pods();
            prepared.affinity.push(view);
        }
    }
    for term in &anti_terms {
        let matcher = PodMatcher {
            clauses: vec![clause(term, registry, namespace)],
            skip_terminating: false,
        };
        prepared
            .anti_affinity
            .push(index.view(&matcher, &term.topology_key, None, nodes, pods));
    }
    Ok(prepared)
}

/// The Filter.
pub(crate) fn check(
    prepared: &PreparedAffinity,
    node_index: usize,
    node: &Node,
) -> Result<(), AffinityRefusal> {
    let mut pods_exist = true;
    for (column, counts) in &prepared.affinity {
        let domain = column.domain(node_index, node);
        if domain == Domain::Missing {
            return Err(AffinityRefusal::Affinity);
        }
        if counts.pods_in(domain) <= 0 {
            pods_exist = false;
        }
    }
    if !pods_exist && (prepared.affinity_anywhere || !prepared.self_affinity) {
        return Err(AffinityRefusal::Affinity);
    }
    for (column, counts) in &prepared.anti_affinity {
        if counts.pods_in(column.domain(node_index, node)) > 0 {
            return Err(AffinityRefusal::AntiAffinity);
        }
    }
    for (column, counts) in &prepared.existing {
        if counts.pods_in(column.domain(node_index, node)) > 0 {
            return Err(AffinityRefusal::ExistingAntiAffinity);
        }
    }
    Ok(())
}
