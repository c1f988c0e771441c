//! Checks of a plan for tests and benchmarks (feature `testing`, off in
//! every shipped binary).
//!
//! One oracle for "the scheduler would accept this plan", so that the
//! planner's property tests and the benchmarks' workload tests judge plans
//! by the same rule.

use std::collections::HashMap;

use dra_sim::reason::Reason;
use dra_sim::report::Outcome;
use dra_sim::snapshot::{Snapshot, Verdict, key_string, object_key};
use dra_sim::{ClusterObjects, FeatureGates};

use crate::PlanReport;
use crate::groups::{read_groups, template_node};

/// Why a plan does not replay.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplayError {
    /// A pod placed on a new node without naming the node or its group.
    #[error("{pod}: fits-new-node without node or group")]
    NoNewNode {
        /// The pod, as the plan names it.
        pod: String,
    },
    /// A placement on a group that is not in the objects.
    #[error("{pod}: unknown group {group}")]
    UnknownGroup {
        /// The pod.
        pod: String,
        /// The group.
        group: String,
    },
    /// A placed pod that is not in the objects.
    #[error("{pod} is not in the snapshot")]
    UnknownPod {
        /// The pod.
        pod: String,
    },
    /// A placement on a node that is neither existing nor planned.
    #[error("{pod}: node {node} missing")]
    UnknownNode {
        /// The pod.
        pod: String,
        /// The node.
        node: String,
    },
    /// The pod's claims do not resolve.
    #[error("{pod}: {reason}")]
    Claims {
        /// The pod.
        pod: String,
        /// Why (boxed: a reason is larger than an error should be).
        reason: Box<Reason>,
    },
    /// The scheduler would not accept the pod where the plan put it.
    #[error("{pod} on {node}: {verdict}")]
    Refused {
        /// The pod.
        pod: String,
        /// The node.
        node: String,
        /// The verdict, as `Debug` prints it.
        verdict: String,
    },
}

/// Replays a plan in a fresh snapshot of `objects`: the planned nodes are
/// added from their groups' templates, then every pod the plan placed is
/// checked and bound on its planned node, in the plan's order, with every
/// filter and the DRA allocator under `gates`. Pods are matched by the name
/// the plan reports (`namespace/name`, the namespace defaulted as the
/// planner does). Returns the number of new nodes.
///
/// # Errors
/// The first pod the plan placed that does not fit where the plan put it,
/// or a placement that names an unknown pod, node or group.
pub fn replay(
    objects: &ClusterObjects,
    gates: FeatureGates,
    report: &PlanReport,
) -> Result<usize, ReplayError> {
    let (groups, _) = read_groups(&objects.extra, &objects.nodes);
    let mut snapshot = Snapshot::new(objects.clone(), gates);
    let mut new_nodes = 0;
    for pod in &report.pods {
        if pod.outcome != Outcome::FitsNewNode {
            continue;
        }
        let (Some(node), Some(group)) = (&pod.node, &pod.node_group) else {
            return Err(ReplayError::NoNewNode {
                pod: pod.pod.clone(),
            });
        };
        if snapshot.node_index(node).is_none() {
            let group = groups.iter().find(|g| &g.name == group).ok_or_else(|| {
                ReplayError::UnknownGroup {
                    pod: pod.pod.clone(),
                    group: group.clone(),
                }
            })?;
            let (node, slices) = template_node(group, node);
            snapshot.add_node(node, slices);
            new_nodes += 1;
        }
    }
    let index_of: HashMap<String, usize> = snapshot
        .pods()
        .iter()
        .enumerate()
        .map(|(i, p)| (key_string(&object_key(&p.metadata)), i))
        .collect();
    for pod in &report.pods {
        if !matches!(pod.outcome, Outcome::Fits | Outcome::FitsNewNode) {
            continue;
        }
        let pod_index = *index_of
            .get(&pod.pod)
            .ok_or_else(|| ReplayError::UnknownPod {
                pod: pod.pod.clone(),
            })?;
        let node = pod.node.as_deref().unwrap_or_default();
        let node_index = snapshot
            .node_index(node)
            .ok_or_else(|| ReplayError::UnknownNode {
                pod: pod.pod.clone(),
                node: node.to_string(),
            })?;
        let claims = snapshot
            .resolve_claims(pod_index)
            .map_err(|reason| ReplayError::Claims {
                pod: pod.pod.clone(),
                reason: Box::new(reason),
            })?;
        match snapshot.check(pod_index, node_index, &claims) {
            Verdict::Fits(allocations) => {
                snapshot.bind(pod_index, node_index, &claims, allocations);
            }
            other => {
                return Err(ReplayError::Refused {
                    pod: pod.pod.clone(),
                    node: node.to_string(),
                    verdict: format!("{other:?}"),
                });
            }
        }
    }
    Ok(new_nodes)
}
