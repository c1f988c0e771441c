//! `simulate`: place every pending pod onto existing nodes, one after another,
//! the way kube-scheduler would, and say why each node refused each pod.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::AllocationResult;

use crate::dra::{AllocError, AllocateOutcome};
use crate::gates::FeatureGates;
use crate::objects::ClusterObjects;
use crate::report::{ClaimAllocation, DeviceResult, Outcome, PodReport, Report};
use crate::selectors::node_selector_matches;
use crate::snapshot::{PodClaims, Snapshot, key_string, object_key};

/// Taint key the node controller puts on cordoned nodes; tolerating it lets a
/// pod onto an unschedulable node.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// What one node said about one pod.
enum NodeVerdict {
    Fits(Vec<AllocationResult>),
    Refused(String),
    /// The scheduler would stop trying this pod anywhere.
    Fatal(String),
}

/// Places the pending pods of `objects` with `gates` and reports each one.
#[must_use]
pub fn simulate(objects: ClusterObjects, gates: FeatureGates) -> Report {
    let mut snapshot = Snapshot::new(objects, gates);
    let mut report = Report::default();
    for pod_index in snapshot.pending_pods() {
        report.pods.push(place_pod(&mut snapshot, pod_index));
    }
    report
}

/// Tries every node in name order and commits the first fit.
pub fn place_pod(snapshot: &mut Snapshot, pod_index: usize) -> PodReport {
    let pod_name = key_string(&object_key(&snapshot.pods()[pod_index].metadata));
    let refused = |outcome, reasons| PodReport {
        pod: pod_name.clone(),
        outcome,
        node: None,
        node_group: None,
        allocations: None,
        reasons,
    };
    let claims = match snapshot.resolve_claims(pod_index) {
        Ok(claims) => claims,
        Err(reason) => return refused(Outcome::Unschedulable, vec![reason]),
    };
    let mut reasons = Vec::new();
    for node_index in 0..snapshot.nodes().len() {
        let node_name = snapshot.nodes()[node_index]
            .metadata
            .name
            .clone()
            .unwrap_or_default();
        match check_node(snapshot, pod_index, node_index, &claims) {
            NodeVerdict::Fits(allocations) => {
                let reported = report_allocations(&claims, &allocations);
                snapshot.bind(pod_index, node_index, &claims, allocations);
                return PodReport {
                    pod: pod_name,
                    outcome: Outcome::Fits,
                    node: Some(node_name),
                    node_group: None,
                    allocations: Some(reported),
                    reasons: Vec::new(),
                };
            }
            NodeVerdict::Refused(reason) => reasons.push(format!("{node_name}: {reason}")),
            NodeVerdict::Fatal(message) => return refused(Outcome::Error, vec![message]),
        }
    }
    if reasons.is_empty() {
        reasons.push("no nodes in the snapshot".into());
    }
    refused(Outcome::Unschedulable, reasons)
}

fn check_node(
    snapshot: &mut Snapshot,
    pod_index: usize,
    node_index: usize,
    claims: &PodClaims,
) -> NodeVerdict {
    let node = &snapshot.nodes()[node_index];
    let pod = &snapshot.pods()[pod_index];
    if let Some(reason) = node_unschedulable(pod, node) {
        return NodeVerdict::Refused(reason);
    }
    for key in &claims.allocated {
        let selector = snapshot
            .claim(key)
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.node_selector.as_ref());
        if let Some(selector) = selector {
            match node_selector_matches(selector, node) {
                Ok(true) => {}
                Ok(false) => {
                    return NodeVerdict::Refused(format!(
                        "resourceclaim {} is allocated on another node: resourceclaim not available on the node",
                        key_string(key)
                    ));
                }
                Err(e) => {
                    return NodeVerdict::Fatal(format!(
                        "resourceclaim {}: allocation nodeSelector: {e}",
                        key_string(key)
                    ));
                }
            }
        }
    }
    if claims.to_allocate.is_empty() {
        return NodeVerdict::Fits(Vec::new());
    }
    match snapshot.allocate(node_index, &claims.to_allocate) {
        Ok(AllocateOutcome::Allocated(allocations)) => NodeVerdict::Fits(allocations),
        Ok(AllocateOutcome::Unschedulable { reasons }) => {
            NodeVerdict::Refused(if reasons.is_empty() {
                "cannot allocate all claims".to_string()
            } else {
                reasons.join("; ")
            })
        }
        Err(AllocError::FailedOnNode(message)) => NodeVerdict::Refused(message),
        Err(AllocError::Fatal(message)) => NodeVerdict::Fatal(message),
    }
}

/// The NodeUnschedulable filter: cordoned nodes take only pods that tolerate
/// the unschedulable taint.
fn node_unschedulable(pod: &Pod, node: &Node) -> Option<String> {
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    if !cordoned {
        return None;
    }
    let tolerated = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .into_iter()
        .flatten()
        .any(|t| {
            let exists = t.operator.as_deref() == Some("Exists");
            let key_ok = match t.key.as_deref() {
                None | Some("") => exists,
                Some(k) => k == UNSCHEDULABLE_TAINT,
            };
            let effect_ok = t
                .effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == "NoSchedule");
            // The taint has an empty value, so Equal matches only an empty value.
            let value_ok = exists || t.value.as_deref().is_none_or(str::is_empty);
            key_ok && effect_ok && value_ok
        });
    (!tolerated).then(|| "node(s) were unschedulable".to_string())
}

fn report_allocations(
    claims: &PodClaims,
    allocations: &[AllocationResult],
) -> Vec<ClaimAllocation> {
    claims
        .to_allocate
        .iter()
        .zip(allocations)
        .map(|(key, allocation)| ClaimAllocation {
            claim: key_string(key),
            node_selector: allocation
                .node_selector
                .as_ref()
                .and_then(|s| serde_json::to_value(s).ok())
                .unwrap_or_else(|| serde_json::json!({})),
            results: allocation
                .devices
                .as_ref()
                .and_then(|d| d.results.as_ref())
                .into_iter()
                .flatten()
                .map(DeviceResult::from)
                .collect(),
        })
        .collect()
}
