//! Facts about one pod that the simulator, the planner and the controller
//! all read: whether it waits for a node, has finished, is bound or gated,
//! its priority, its required pod (anti-)affinity, and the gang it says it
//! belongs to. One reading of each, so the three never disagree.

use k8s_openapi::api::core::v1::{Affinity, NodeSelector, Pod, PodAffinityTerm};
use serde_json::Value;

/// A pod waits for a node when it has none and has not finished.
#[must_use]
pub fn is_pending(pod: &Pod) -> bool {
    let unbound = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.node_name.as_deref().is_none_or(str::is_empty));
    unbound && !is_terminal(pod)
}

/// Phase `Succeeded` or `Failed`: the pod will not run again.
#[must_use]
pub fn is_terminal(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed")
}

/// `spec.nodeName` is set.
#[must_use]
pub fn is_bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// The pod has `spec.schedulingGates`: the scheduler does not try it.
#[must_use]
pub fn is_scheduling_gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

/// `spec.priority`, 0 when unset (the admission plugin resolves classes).
#[must_use]
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

fn affinity(pod: &Pod) -> Option<&Affinity> {
    pod.spec.as_ref()?.affinity.as_ref()
}

/// The pod's required node affinity (`requiredDuringScheduling…`).
#[must_use]
pub fn required_node_affinity(pod: &Pod) -> Option<&NodeSelector> {
    affinity(pod)?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()
}

/// The pod's required pod affinity terms.
#[must_use]
pub fn required_pod_affinity(pod: &Pod) -> &[PodAffinityTerm] {
    affinity(pod)
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
}

/// The pod's required pod anti-affinity terms.
#[must_use]
pub fn required_pod_anti_affinity(pod: &Pod) -> &[PodAffinityTerm] {
    affinity(pod)
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
}

/// Whether the pod has a required pod anti-affinity term: then where it may
/// go depends on the labels of the pods already on a node.
#[must_use]
pub fn has_required_anti_affinity(pod: &Pod) -> bool {
    !required_pod_anti_affinity(pod).is_empty()
}

/// Label of scheduler-plugins coscheduling.
pub const COSCHEDULING_LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// The label scheduler-plugins used before its API group moved (early 2023).
pub const COSCHEDULING_LEGACY_LABEL: &str = "pod-group.scheduling.sigs.k8s.io";
/// Volcano's group annotation.
pub const VOLCANO_ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// Volcano's alternative group annotation.
pub const VOLCANO_ANNOTATION_ALT: &str = "scheduling.volcano.sh/group-name";
/// Kueue's pod-group label.
pub const KUEUE_GROUP_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
/// Kueue's pod-group size annotation.
pub const KUEUE_TOTAL_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-total-count";

/// Which field of the pod links it to a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinkField {
    /// 1.36+ `spec.schedulingGroup.podGroupName` → a `scheduling.k8s.io`
    /// PodGroup.
    SchedulingGroup,
    /// 1.35 `spec.workloadRef` → a pod group of a `scheduling.k8s.io/v1alpha1`
    /// Workload.
    WorkloadRef,
    /// The scheduler-plugins coscheduling label (or its legacy spelling).
    CoschedulingLabel,
    /// Volcano's group annotation (either spelling).
    VolcanoAnnotation,
    /// Kueue's pod-group label.
    KueueLabel,
}

/// The group a pod says it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangLink {
    /// The field that says so.
    pub field: LinkField,
    /// The group's name in the pod's namespace; for a 1.35 `workloadRef`,
    /// the Workload's.
    pub group: String,
    /// `workloadRef.podGroup`: the pod group within the Workload.
    pub pod_group: Option<String>,
    /// `workloadRef.podGroupReplicaKey`, when set: it separates instances of
    /// one pod group.
    pub replica_key: Option<String>,
    /// The group size the pod declares (Kueue's total-count annotation),
    /// when it declares a valid one.
    pub declared_size: Option<usize>,
}

/// The group `pod` links to, newest upstream API first: `schedulingGroup`,
/// `workloadRef` (both only when `upstream` — the cluster's scheduler runs
/// upstream gang scheduling), then coscheduling, Volcano and Kueue.
/// `workload_ref` is the pod's 1.35 `spec.workloadRef`, which the typed Pod
/// of later versions cannot carry (see
/// [`crate::objects::ClusterObjects::pod_workload_refs`]).
#[must_use]
pub fn gang_link(pod: &Pod, workload_ref: Option<&Value>, upstream: bool) -> Option<GangLink> {
    let link = |field, group: &str| GangLink {
        field,
        group: group.to_string(),
        pod_group: None,
        replica_key: None,
        declared_size: None,
    };
    if upstream {
        let scheduling_group = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.as_deref())
            .filter(|n| !n.is_empty());
        if let Some(group) = scheduling_group {
            return Some(link(LinkField::SchedulingGroup, group));
        }
        if let Some(reference) = workload_ref {
            let get = |k: &str| reference.get(k).and_then(Value::as_str).unwrap_or_default();
            let mut found = link(LinkField::WorkloadRef, get("name"));
            found.pod_group = Some(get("podGroup").to_string());
            let replica = get("podGroupReplicaKey");
            found.replica_key = (!replica.is_empty()).then(|| replica.to_string());
            return Some(found);
        }
    }
    let labels = pod.metadata.labels.as_ref();
    let annotations = pod.metadata.annotations.as_ref();
    if let Some(group) = labels.and_then(|l| {
        l.get(COSCHEDULING_LABEL)
            .or_else(|| l.get(COSCHEDULING_LEGACY_LABEL))
    }) {
        return Some(link(LinkField::CoschedulingLabel, group));
    }
    if let Some(group) = annotations.and_then(|a| {
        a.get(VOLCANO_ANNOTATION)
            .or_else(|| a.get(VOLCANO_ANNOTATION_ALT))
    }) {
        return Some(link(LinkField::VolcanoAnnotation, group));
    }
    if let Some(group) = labels.and_then(|l| l.get(KUEUE_GROUP_LABEL)) {
        let mut found = link(LinkField::KueueLabel, group);
        found.declared_size = annotations
            .and_then(|a| a.get(KUEUE_TOTAL_ANNOTATION))
            .and_then(|t| t.parse::<usize>().ok());
        return Some(found);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSchedulingGate, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(node: Option<&str>, phase: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(Into::into),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: phase.map(Into::into),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn pending_bound_and_terminal() {
        assert!(is_pending(&pod(None, Some("Pending"))));
        assert!(
            is_pending(&pod(Some(""), None)),
            "an empty nodeName is none"
        );
        assert!(!is_pending(&pod(Some("n1"), Some("Running"))));
        assert!(!is_pending(&pod(None, Some("Succeeded"))));
        assert!(!is_pending(&pod(None, Some("Failed"))));
        assert!(is_terminal(&pod(Some("n1"), Some("Failed"))));
        assert!(is_bound(&pod(Some("n1"), None)));
        assert!(!is_bound(&pod(Some(""), None)));
    }

    #[test]
    fn gates_and_priority() {
        let mut p = pod(None, None);
        assert!(!is_scheduling_gated(&p));
        assert_eq!(priority(&p), 0);
        if let Some(spec) = p.spec.as_mut() {
            spec.scheduling_gates = Some(vec![PodSchedulingGate {
                name: "example.com/wait".into(),
            }]);
            spec.priority = Some(7);
        }
        assert!(is_scheduling_gated(&p));
        assert_eq!(priority(&p), 7);
    }

    fn labelled(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Pod {
        let mut p = pod(None, None);
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                    .collect(),
            )
        };
        p.metadata.labels = map(labels);
        p.metadata.annotations = map(annotations);
        p
    }

    #[test]
    fn gang_links_of_every_api() {
        let link = |p: &Pod| gang_link(p, None, true).map(|l| (l.field, l.group));
        assert_eq!(
            link(&labelled(&[(COSCHEDULING_LABEL, "g")], &[])),
            Some((LinkField::CoschedulingLabel, "g".into()))
        );
        assert_eq!(
            link(&labelled(&[(COSCHEDULING_LEGACY_LABEL, "old")], &[])),
            Some((LinkField::CoschedulingLabel, "old".into()))
        );
        assert_eq!(
            link(&labelled(&[], &[(VOLCANO_ANNOTATION_ALT, "v")])),
            Some((LinkField::VolcanoAnnotation, "v".into()))
        );
        let kueue = labelled(
            &[(KUEUE_GROUP_LABEL, "k")],
            &[(KUEUE_TOTAL_ANNOTATION, "4")],
        );
        let found = gang_link(&kueue, None, true).expect("kueue");
        assert_eq!(
            (found.field, found.declared_size),
            (LinkField::KueueLabel, Some(4))
        );
        assert_eq!(link(&pod(None, None)), None);
    }

    #[test]
    fn upstream_links_come_first_and_only_when_upstream_gangs_are_on() {
        let mut p = labelled(&[(COSCHEDULING_LABEL, "g")], &[]);
        let reference = serde_json::json!({
            "name": "trainer", "podGroup": "workers", "podGroupReplicaKey": "r0"
        });
        let found = gang_link(&p, Some(&reference), true).expect("workloadRef");
        assert_eq!(found.field, LinkField::WorkloadRef);
        assert_eq!(found.group, "trainer");
        assert_eq!(found.pod_group.as_deref(), Some("workers"));
        assert_eq!(found.replica_key.as_deref(), Some("r0"));
        assert_eq!(
            gang_link(&p, Some(&reference), false).map(|l| l.field),
            Some(LinkField::CoschedulingLabel),
            "without upstream gang scheduling the other links still count"
        );
        if let Some(spec) = p.spec.as_mut() {
            spec.scheduling_group = Some(k8s_openapi::api::core::v1::PodSchedulingGroup {
                pod_group_name: Some("pg".into()),
            });
        }
        assert_eq!(
            gang_link(&p, Some(&reference), true).map(|l| (l.field, l.group)),
            Some((LinkField::SchedulingGroup, "pg".into()))
        );
    }
}
