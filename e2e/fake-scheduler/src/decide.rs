//! One scheduling cycle, pure: which pending pod goes to which node with which devices, and
//! why the others wait. The fit is dra-sim's (the scheduler's filters and the DRA allocator,
//! pods in the scheduler's queue order, nodes in name order), gangs are dra-plan's (a gang
//! binds only when at least its `minCount` members fit together, as coscheduling's Permit
//! waits for them); nothing here is a copy of either.

use dra_plan::gang::detect_gangs;
use dra_sim::objects::ObjectRef;
use dra_sim::report::{Outcome, PodReport};
use dra_sim::simulate::place_pod;
use dra_sim::snapshot::Snapshot;
use dra_sim::{ClusterObjects, FeatureGates};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaimStatus;

use crate::message::fit_error;

/// A claim's status after the pod was placed (allocation and `reservedFor`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimUpdate {
    /// The claim.
    pub claim: ObjectRef,
    /// Its new status.
    pub status: ResourceClaimStatus,
}

/// A pod to bind.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// The pod.
    pub pod: ObjectRef,
    /// Its uid (a binding names it).
    pub uid: String,
    /// The node.
    pub node: String,
    /// Every claim of the pod, allocated and reserved for it.
    pub claims: Vec<ClaimUpdate>,
}

/// A pod that waits, and why (the `PodScheduled=False` condition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The pod.
    pub pod: ObjectRef,
    /// `Unschedulable`, or `SchedulerError` for a pod the scheduler fails on (a CEL error).
    pub reason: &'static str,
    /// The message, in kube-scheduler's words.
    pub message: String,
}

/// What one cycle decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// Pods to bind, in placement order.
    pub placements: Vec<Placement>,
    /// Pods that wait.
    pub refusals: Vec<Refusal>,
}

/// Whether every claim the pod makes from a template has been created (its name is in the
/// pod's status): until then the scheduler waits, as upstream's DynamicResources plugin does.
#[must_use]
pub fn claims_created(pod: &Pod) -> bool {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.resource_claim_template_name.is_some())
        .all(|c| statuses.is_some_and(|s| s.iter().any(|s| s.name == c.name)))
}

/// The claim keys of a pod: named claims, and the claims recorded for its templates.
fn pod_claims(pod: &Pod) -> Vec<ObjectRef> {
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default();
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| {
            c.resource_claim_name.clone().or_else(|| {
                statuses
                    .iter()
                    .find(|s| s.name == c.name)
                    .and_then(|s| s.resource_claim_name.clone())
            })
        })
        .map(|name| ObjectRef::new(namespace.clone(), name))
        .collect()
}

fn placement(snapshot: &Snapshot, pod_index: usize, node: String) -> Placement {
    let pod = &snapshot.pods()[pod_index];
    let claims = pod_claims(pod)
        .into_iter()
        .filter_map(|key| {
            let status = snapshot.claim(&key)?.status.clone()?;
            Some(ClaimUpdate { claim: key, status })
        })
        .collect();
    Placement {
        pod: ObjectRef::namespaced(&pod.metadata),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        node,
        claims,
    }
}

fn refusal(pod: ObjectRef, report: &PodReport, nodes: &[String]) -> Refusal {
    match report.outcome {
        Outcome::Error => Refusal {
            pod,
            reason: "SchedulerError",
            message: report.reasons.join("; "),
        },
        _ => Refusal {
            pod,
            reason: "Unschedulable",
            message: fit_error(nodes, &report.reasons),
        },
    }
}

/// Places the pending pods of `objects` (those whose template claims exist) as kube-scheduler
/// would: one at a time in queue order, gangs all together or not at all.
#[must_use]
pub fn decide(objects: &ClusterObjects, gates: &FeatureGates) -> Decision {
    let mut snapshot = Snapshot::new(objects.clone(), *gates);
    let nodes: Vec<String> = snapshot
        .nodes()
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let pending: Vec<usize> = snapshot
        .pending_pods()
        .into_iter()
        .filter(|&i| {
            let pod = &snapshot.pods()[i];
            pod.metadata.deletion_timestamp.is_none() && claims_created(pod)
        })
        .collect();
    let gangs = detect_gangs(
        snapshot.pods(),
        &pending,
        &objects.extra,
        &objects.pod_workload_refs,
        gates,
    );
    let mut decision = Decision::default();
    // Pods placed so far this cycle: replayed on a fresh snapshot when a gang that placed
    // some members has to give them back.
    let mut placed: Vec<usize> = Vec::new();
    for gang in gangs {
        let members: Vec<ObjectRef> = gang
            .pending
            .iter()
            .map(|&i| ObjectRef::namespaced(&snapshot.pods()[i].metadata))
            .collect();
        if let Some(why) = &gang.blocked {
            decision
                .refusals
                .extend(members.into_iter().map(|pod| Refusal {
                    pod,
                    reason: "Unschedulable",
                    message: why.clone(),
                }));
            continue;
        }
        let mut fitted = Vec::new();
        let mut first_refused: Option<(ObjectRef, PodReport)> = None;
        for (&index, member) in gang.pending.iter().zip(&members) {
            let report = place_pod(&mut snapshot, index);
            match (&report.outcome, &report.node) {
                (Outcome::Fits, Some(node)) => fitted.push((index, node.clone())),
                _ => {
                    if first_refused.is_none() {
                        first_refused = Some((member.clone(), report));
                    }
                }
            }
        }
        if fitted.len() >= gang.needed().max(1) {
            for (index, node) in fitted {
                decision.placements.push(placement(&snapshot, index, node));
                placed.push(index);
            }
            if let Some((pod, report)) = first_refused {
                decision.refusals.push(refusal(pod, &report, &nodes));
            }
            continue;
        }
        if !fitted.is_empty() {
            snapshot = Snapshot::new(objects.clone(), *gates);
            for &index in &placed {
                let _ = place_pod(&mut snapshot, index);
            }
        }
        let Some((refused_pod, report)) = first_refused else {
            continue;
        };
        let own = refusal(refused_pod.clone(), &report, &nodes);
        if gang.min_count <= 1 {
            decision.refusals.push(own);
            continue;
        }
        let summary = format!(
            "pod group {}: {} of the {} members needed fit; {refused_pod}: {}",
            gang.name,
            fitted.len(),
            gang.needed(),
            own.message
        );
        decision
            .refusals
            .extend(members.into_iter().map(|pod| Refusal {
                pod,
                reason: own.reason,
                message: summary.clone(),
            }));
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    fn node(name: &str, cpu: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .expect("node")
    }

    fn pod(name: &str, cpu: &str, group: Option<&str>) -> Pod {
        let mut labels = json!({});
        if let Some(g) = group {
            labels["scheduling.x-k8s.io/pod-group"] = json!(g);
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"), "labels": labels,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"schedulerName": "default-scheduler",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending"}
        }))
        .expect("pod")
    }

    fn pod_group(name: &str, min: i64) -> dra_sim::objects::ExtraObject {
        dra_sim::objects::ExtraObject {
            origin: dra_sim::objects::Origin::default(),
            api_version: "scheduling.x-k8s.io/v1alpha1".into(),
            kind: "PodGroup".into(),
            value: json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                          "metadata": {"name": name, "namespace": "ml"}, "spec": {"minMember": min}}),
        }
    }

    fn gates() -> FeatureGates {
        FeatureGates::for_version(dra_sim::KubeVersion::NEWEST)
    }

    #[test]
    fn pods_go_to_the_first_node_that_fits_and_the_rest_are_told_why() {
        let objects = ClusterObjects {
            nodes: vec![node("a", "2"), node("b", "4")],
            pods: vec![
                pod("small", "1", None),
                pod("big", "3", None),
                pod("huge", "8", None),
            ],
            ..ClusterObjects::default()
        };
        let decision = decide(&objects, &gates());
        let placed: Vec<(String, String)> = decision
            .placements
            .iter()
            .map(|p| (p.pod.name.clone(), p.node.clone()))
            .collect();
        // Equal priority and age: the queue orders by name.
        assert_eq!(
            placed,
            vec![("big".into(), "b".into()), ("small".into(), "a".into())]
        );
        assert_eq!(decision.placements[0].uid, "uid-big");
        assert_eq!(decision.refusals.len(), 1);
        assert_eq!(decision.refusals[0].pod.name, "huge");
        assert_eq!(decision.refusals[0].reason, "Unschedulable");
        assert_eq!(
            decision.refusals[0].message,
            "0/2 nodes are available: 2 Insufficient cpu."
        );
    }

    #[test]
    fn a_gang_binds_only_when_min_member_fit_together() {
        let mut objects = ClusterObjects {
            nodes: vec![node("a", "4"), node("b", "4")],
            pods: vec![
                pod("w-0", "3", Some("train")),
                pod("w-1", "3", Some("train")),
                pod("w-2", "3", Some("train")),
                pod("solo", "1", None),
            ],
            ..ClusterObjects::default()
        };
        objects.extra.push(pod_group("train", 3));
        let decision = decide(&objects, &gates());
        assert_eq!(decision.placements.len(), 1, "{decision:?}");
        assert_eq!(decision.placements[0].pod.name, "solo");
        assert_eq!(
            decision.placements[0].node, "a",
            "the gang's two fits were given back"
        );
        let refused: Vec<&str> = decision
            .refusals
            .iter()
            .map(|r| r.pod.name.as_str())
            .collect();
        assert_eq!(refused, vec!["w-0", "w-1", "w-2"]);
        assert!(
            decision.refusals[0].message.starts_with("pod group ml/train: 2 of the 3 members needed fit; ml/w-2: 0/2 nodes are available:"),
            "{}",
            decision.refusals[0].message
        );

        objects.extra[0] = pod_group("train", 2);
        let decision = decide(&objects, &gates());
        let placed: Vec<&str> = decision
            .placements
            .iter()
            .map(|p| p.pod.name.as_str())
            .collect();
        assert_eq!(
            placed,
            vec!["solo", "w-0", "w-1"],
            "minMember 2: two bind, the third waits"
        );
        assert_eq!(decision.refusals.len(), 1);
        assert_eq!(decision.refusals[0].pod.name, "w-2");
    }

    #[test]
    fn pods_whose_template_claims_are_not_created_yet_wait() {
        let mut waiting = pod("gpu", "1", None);
        waiting.spec.as_mut().expect("spec").resource_claims = Some(vec![
            serde_json::from_value(json!({"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))
                .expect("claim"),
        ]);
        assert!(!claims_created(&waiting));
        let objects = ClusterObjects {
            nodes: vec![node("a", "4")],
            pods: vec![waiting],
            ..ClusterObjects::default()
        };
        assert_eq!(decide(&objects, &gates()), Decision::default());
    }
}
