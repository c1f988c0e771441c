//! PodTopologySpread, `whenUnsatisfiable: DoNotSchedule` constraints.
//!
//! For each constraint, upstream's PreFilter counts the pods in the pod's
//! namespace that match the constraint's selector, per domain of its topology
//! key, over the nodes that have every topology key of the pod's constraints
//! and pass the constraint's inclusion policies (`nodeAffinityPolicy`,
//! default Honor; `nodeTaintsPolicy`, default Ignore). The global minimum is
//! taken over those domains, or is 0 while there are fewer than `minDomains`
//! of them. A node passes when
//! `count(node's domain) + (pod matches its own selector) - minimum <= maxSkew`.
//! Terminating pods are not counted, and an empty selector (`{}`) counts no
//! pod at all, both as upstream's `countPodsMatchSelector`.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::index::{Clause, Index, MaskSpec, NodeRecord, PodMatcher, PodRecord};
use super::node_affinity::RequiredNodeAffinity;
use super::topology::{Domain, DomainCounts, TopologyColumn};
use crate::selectors::{Op, Selector, SelectorParseError};

/// Upstream plugin name.
pub const NAME: &str = "PodTopologySpread";
/// Upstream's `ErrReasonConstraintsNotMatch`.
pub const REASON: &str = "node(s) didn't match pod topology spread constraints";
/// Upstream's `ErrReasonNodeLabelNotMatch`.
pub const MISSING_LABEL_REASON: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// One DoNotSchedule constraint, parsed.
#[derive(Debug, Clone)]
struct Constraint {
    max_skew: i64,
    topology_key: String,
    selector: Selector,
    min_domains: i64,
    honor_affinity: bool,
    honor_taints: bool,
}

/// A constraint with the counts of the moment the pod was prepared.
#[derive(Debug, Clone)]
pub(crate) struct PreparedConstraint {
    column: Arc<TopologyColumn>,
    counts: Arc<DomainCounts>,
    min_match: i64,
    max_skew: i64,
    self_match: i64,
}

/// Why a node failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpreadRefusal {
    MissingLabel,
    Skew,
}

/// A `DoNotSchedule` constraint whose label selector cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("topologySpreadConstraints[{topology_key}]: {source}")]
pub(crate) struct SpreadConstraintError {
    /// The constraint's `topologyKey` (how upstream names it).
    pub topology_key: String,
    /// Why its selector does not parse.
    pub source: SelectorParseError,
}

fn constraints(pod: &Pod) -> Result<Vec<Constraint>, SpreadConstraintError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(Vec::new());
    };
    let labels = pod.metadata.labels.as_ref();
    let mut out = Vec::new();
    for c in spec.topology_spread_constraints.iter().flatten() {
        if c.when_unsatisfiable != "DoNotSchedule" {
            continue;
        }
        let selector = Selector::compile(c.label_selector.as_ref()).map_err(|source| {
            SpreadConstraintError {
                topology_key: c.topology_key.clone(),
                source,
            }
        })?;
        // matchLabelKeys: AND `key = <this pod's value>` for keys the pod has.
        let extra: Vec<(String, Op, String)> = c
            .match_label_keys
            .iter()
            .flatten()
            .filter_map(|k| {
                labels
                    .and_then(|l| l.get(k))
                    .map(|v| (k.clone(), Op::In, v.clone()))
            })
            .collect();
        let selector = if extra.is_empty() {
            selector
        } else {
            selector.with_requirements(extra)
        };
        out.push(Constraint {
            max_skew: i64::from(c.max_skew),
            topology_key: c.topology_key.clone(),
            selector,
            min_domains: i64::from(c.min_domains.unwrap_or(1)),
            honor_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        });
    }
    Ok(out)
}

/// The PreFilter: parses the constraints and takes the domain counts.
///
/// # Errors
/// A constraint's label selector cannot be parsed.
pub(crate) fn prepare(
    pod: &Pod,
    index: &mut Index,
    nodes: &[NodeRecord],
    pods: &[PodRecord],
) -> Result<Vec<PreparedConstraint>, SpreadConstraintError> {
    let constraints = constraints(pod)?;
    if constraints.is_empty() {
        return Ok(Vec::new());
    }
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let keys: Vec<String> = constraints
        .iter()
        .map(|c| c.topology_key.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let affinity = RequiredNodeAffinity::of(pod);
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    let own_labels = pod.metadata.labels.as_ref();
    let mut out = Vec::with_capacity(constraints.len());
    for c in constraints {
        let mask = index.mask(
            MaskSpec {
                keys: keys.clone(),
                affinity: if c.honor_affinity {
                    affinity.clone()
                } else {
                    None
                },
                tolerations: c.honor_taints.then(|| tolerations.clone()),
            },
            nodes,
        );
        let clauses = if c.selector.is_empty() {
            Vec::new()
        } else {
            vec![Clause {
                namespaces: BTreeSet::from([namespace.clone()]),
                selector: c.selector.clone(),
            }]
        };
        let matcher = PodMatcher {
            clauses,
            skip_terminating: true,
        };
        let (column, counts) = index.view(&matcher, &c.topology_key, Some(mask), nodes, pods);
        let (present, min) = counts.present_and_min();
        let min_match = if i64::try_from(present).unwrap_or(i64::MAX) < c.min_domains {
            0
        } else {
            min.unwrap_or(i64::from(i32::MAX))
        };
        out.push(PreparedConstraint {
            column,
            counts,
            min_match,
            max_skew: c.max_skew,
            self_match: i64::from(c.selector.matches(own_labels)),
        });
    }
    Ok(out)
}

/// The Filter.
pub(crate) fn check(
    constraints: &[PreparedConstraint],
    node_index: usize,
    node: &Node,
) -> Result<(), SpreadRefusal> {
    for c in constraints {
        let domain = c.column.domain(node_index, node);
        if domain == Domain::Missing {
            return Err(SpreadRefusal::MissingLabel);
        }
        let skew = c.counts.pods_in(domain) + c.self_match - c.min_match;
        if skew > c.max_skew {
            return Err(SpreadRefusal::Skew);
        }
    }
    Ok(())
}
