//! `simulate`: place every pending pod onto existing nodes, one after another,
//! the way kube-scheduler would, and say why each node refused each pod.

use k8s_openapi::api::resource::v1::AllocationResult;

use crate::gates::FeatureGates;
use crate::objects::ClusterObjects;
use crate::reason::{Code, Reason};
use crate::report::{ClaimAllocation, DeviceResult, Outcome, PodReport, Report};
use crate::snapshot::{ObjectKey, PodClaims, Snapshot, Verdict, extended_claim_key, object_key};

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
    let pod_name = object_key(&snapshot.pods()[pod_index].metadata).to_string();
    let refused = |outcome, reasons: Vec<Reason>| {
        let mut report = PodReport {
            pod: pod_name.clone(),
            outcome,
            node: None,
            node_group: None,
            allocations: None,
            reasons: Vec::new(),
            reason_codes: Vec::new(),
        };
        report.set_reasons(&reasons);
        report
    };
    let claims = match snapshot.resolve_claims(pod_index) {
        Ok(claims) => claims,
        Err(reason) => return refused(Outcome::Unschedulable, vec![reason]),
    };
    let mut reasons = Vec::new();
    let checkpoint = snapshot.checkpoint();
    let signature = snapshot.cursor_signature(pod_index, &claims);
    let start = snapshot.scan_start(signature);
    for node_index in start..snapshot.nodes().len() {
        match snapshot.check(pod_index, node_index, &claims) {
            Verdict::Fits(allocations) => {
                let pod_key = object_key(&snapshot.pods()[pod_index].metadata);
                let reported = report_allocations(&pod_key, &claims, &allocations);
                snapshot.bind(pod_index, node_index, &claims, allocations);
                snapshot.refused_before(signature, node_index);
                snapshot.commit(checkpoint);
                return PodReport {
                    pod: pod_name,
                    outcome: Outcome::Fits,
                    node: Some(node_name(snapshot, node_index)),
                    node_group: None,
                    allocations: Some(reported),
                    reasons: Vec::new(),
                    reason_codes: Vec::new(),
                };
            }
            Verdict::Refused(reason) => reasons.push(on_node(reason, snapshot, node_index)),
            // The scheduler's error names no node: the report says it alone.
            Verdict::Fatal(reason) => {
                return refused(
                    Outcome::Error,
                    vec![Reason {
                        node: None,
                        ..reason
                    }],
                );
            }
            Verdict::Unresolvable(reason) => return refused(Outcome::Unschedulable, vec![reason]),
        }
    }
    snapshot.refused_before(signature, snapshot.nodes().len());
    snapshot.commit(checkpoint);
    // The nodes skipped because an identical pod was refused there still
    // get their own reasons: the report says per node why, and this is only
    // paid for pods that fit nowhere.
    let mut skipped = Vec::with_capacity(start);
    for node_index in 0..start {
        match snapshot.check(pod_index, node_index, &claims) {
            Verdict::Refused(reason) | Verdict::Unresolvable(reason) | Verdict::Fatal(reason) => {
                skipped.push(on_node(reason, snapshot, node_index));
            }
            // Cannot happen while fit only worsens; say so rather than hide it.
            Verdict::Fits(_) => skipped.push(
                Reason::new(
                    Code::Internal,
                    "refused an identical pod earlier in this simulation",
                )
                .on(Some(&node_name(snapshot, node_index))),
            ),
        }
    }
    skipped.append(&mut reasons);
    let mut reasons = skipped;
    if reasons.is_empty() {
        reasons.push(Reason::new(Code::NoNodes, "no nodes in the snapshot"));
    }
    refused(Outcome::Unschedulable, reasons)
}

/// Node `node_index`'s name, empty when it has none.
fn node_name(snapshot: &Snapshot, node_index: usize) -> String {
    snapshot.nodes()[node_index]
        .metadata
        .name
        .clone()
        .unwrap_or_default()
}

/// `reason` as node `node_index`'s, so it prints `node: …` (a PreFilter
/// refusal seen on a skipped node is that node's line too).
fn on_node(reason: Reason, snapshot: &Snapshot, node_index: usize) -> Reason {
    let name = node_name(snapshot, node_index);
    reason.on(Some(&name))
}

/// The report entries for a pod's new allocations.
#[must_use]
pub fn report_allocations(
    pod: &ObjectKey,
    claims: &PodClaims,
    allocations: &[AllocationResult],
) -> Vec<ClaimAllocation> {
    let extended = extended_claim_key(pod);
    claims
        .to_allocate
        .iter()
        .chain(std::iter::once(&extended))
        .zip(allocations)
        .map(|(key, allocation)| ClaimAllocation {
            claim: key.to_string(),
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
