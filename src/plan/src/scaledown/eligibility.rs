//! Which pods keep their node, which need a new place, and which go with the node — the
//! drainability rules of cluster-autoscaler (`simulator/drainability/rules`, its defaults:
//! skip nodes with system pods, with local storage, with pods of no controller) plus Karpenter's
//! and our own do-not-disrupt annotations — and which nodes are never candidates.
//!
//! Rules run in cluster-autoscaler's order: pods that need no new place first (mirror pods,
//! pods terminating past their grace period, DaemonSet pods, finished pods), then what keeps a
//! node whatever it says (do-not-disrupt), then `safe-to-evict: "true"`, which lets a pod move
//! past the remaining rules (no controller, kube-system without a budget, `safe-to-evict:
//! "false"`, local storage) and, as in cluster-autoscaler, past the budget check of the
//! simulation (the Eviction API still enforces budgets when the pod is evicted). Budgets and
//! gangs are judged by the caller, across nodes.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::keys::{
    CA_TO_BE_DELETED_TAINT, DAEMONSET_POD, DO_NOT_DISRUPT, KARPENTER_DO_NOT_DISRUPT, MIRROR_POD,
    SAFE_TO_EVICT, SAFE_TO_EVICT_LOCAL_VOLUMES, SCALE_DOWN_DISABLED, TO_BE_DELETED_TAINT, is_true,
};
use super::reasons::{BlockingPod, PodBlock, Unremovable};

/// What a pod on a candidate node means for its removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodRole {
    /// Goes with the node and needs no new place.
    Stays,
    /// Must fit on another node.
    Moves,
    /// Keeps the node, for this reason.
    Blocks(BlockingPod),
}

/// A pod terminating longer than its grace period plus this is treated as gone
/// (cluster-autoscaler's `PodLongTerminatingExtraThreshold`).
const LONG_TERMINATING_EXTRA: SignedDuration = SignedDuration::from_secs(30);

/// `namespace/name` of a pod.
#[must_use]
pub fn pod_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether the pod is a DaemonSet's (its controller is one, or cluster-autoscaler's
/// annotation says so).
#[must_use]
pub fn is_daemon_set_pod(pod: &Pod) -> bool {
    let owned = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DaemonSet");
    owned || is_true(pod.metadata.annotations.as_ref(), DAEMONSET_POD)
}

fn is_mirror_pod(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD))
}

fn is_finished(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// Terminating for longer than its grace period plus 30 s at `now`.
fn is_long_terminating(pod: &Pod, now: Option<Timestamp>) -> bool {
    let (Some(deleted), Some(now)) = (pod.metadata.deletion_timestamp.as_ref(), now) else {
        return false;
    };
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    deleted
        .0
        .checked_add(SignedDuration::from_secs(grace))
        .and_then(|t| t.checked_add(LONG_TERMINATING_EXTRA))
        .is_ok_and(|gone| gone < now)
}

/// `cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`.
#[must_use]
pub fn is_safe_to_evict(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SAFE_TO_EVICT))
        .is_some_and(|v| v == "true")
}

fn has_controller(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true))
}

/// The first local volume (hostPath, or emptyDir not in memory) the pod does not list in
/// `safe-to-evict-local-volumes`.
fn blocking_local_volume(pod: &Pod) -> Option<String> {
    let allowed: Vec<&str> = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SAFE_TO_EVICT_LOCAL_VOLUMES))
        .map(|v| v.split(',').collect())
        .unwrap_or_default();
    pod.spec
        .as_ref()?
        .volumes
        .iter()
        .flatten()
        .find(|v| {
            let local = v.host_path.is_some()
                || v.empty_dir
                    .as_ref()
                    .is_some_and(|e| e.medium.as_deref() != Some("Memory"));
            local && !allowed.contains(&v.name.as_str())
        })
        .map(|v| v.name.clone())
}

/// The role of a bound pod when its node is removed, by the per-pod rules. `has_budget` tells
/// whether a PodDisruptionBudget selects it (a kube-system pod needs one to move).
#[must_use]
pub fn pod_role(pod: &Pod, now: Option<Timestamp>, has_budget: bool) -> PodRole {
    if is_mirror_pod(pod)
        || is_long_terminating(pod, now)
        || is_daemon_set_pod(pod)
        || is_finished(pod)
    {
        return PodRole::Stays;
    }
    let blocks = |block| {
        PodRole::Blocks(BlockingPod {
            pod: pod_name(pod),
            block,
        })
    };
    let annotations = pod.metadata.annotations.as_ref();
    for key in [KARPENTER_DO_NOT_DISRUPT, DO_NOT_DISRUPT] {
        if is_true(annotations, key) {
            return blocks(PodBlock::DoNotDisrupt { key: key.into() });
        }
    }
    if is_safe_to_evict(pod) {
        return PodRole::Moves;
    }
    if !has_controller(pod) {
        return blocks(PodBlock::NoController);
    }
    if pod.metadata.namespace.as_deref() == Some("kube-system") && !has_budget {
        return blocks(PodBlock::KubeSystemWithoutBudget);
    }
    if annotations
        .and_then(|a| a.get(SAFE_TO_EVICT))
        .is_some_and(|v| v == "false")
    {
        return blocks(PodBlock::NotSafeToEvict);
    }
    if let Some(volume) = blocking_local_volume(pod) {
        return blocks(PodBlock::LocalStorage { volume });
    }
    PodRole::Moves
}

/// Whether a taint marks the node as being removed (by us or by cluster-autoscaler).
#[must_use]
pub fn is_being_removed(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_some()
        || node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| {
                t.iter()
                    .any(|t| t.key == TO_BE_DELETED_TAINT || t.key == CA_TO_BE_DELETED_TAINT)
            })
}

/// Why the node itself may never be removed, if an annotation says so.
#[must_use]
pub fn node_hold(node: &Node) -> Option<Unremovable> {
    let annotations = node.metadata.annotations.as_ref();
    [
        SCALE_DOWN_DISABLED,
        KARPENTER_DO_NOT_DISRUPT,
        DO_NOT_DISRUPT,
    ]
    .into_iter()
    .find(|key| is_true(annotations, key))
    .map(|key| Unremovable::Annotated { key: key.into() })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn pod(extra: serde_json::Value) -> Pod {
        let mut value = serde_json::json!({
            "metadata": {"name": "p", "namespace": "ml",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}]},
            "spec": {"containers": []},
            "status": {"phase": "Running"}
        });
        merge(&mut value, &extra);
        serde_json::from_value(value).unwrap()
    }

    fn merge(base: &mut serde_json::Value, extra: &serde_json::Value) {
        match (base, extra) {
            (serde_json::Value::Object(b), serde_json::Value::Object(e)) => {
                for (k, v) in e {
                    merge(b.entry(k.clone()).or_insert(serde_json::Value::Null), v);
                }
            }
            (b, e) => *b = e.clone(),
        }
    }

    fn blocks(role: PodRole) -> String {
        match role {
            PodRole::Blocks(reason) => reason.to_string(),
            other => panic!("expected a block, got {other:?}"),
        }
    }

    #[test]
    fn a_replicated_pod_moves_and_daemon_mirror_and_finished_pods_stay() {
        assert_eq!(
            pod_role(&pod(serde_json::json!({})), None, false),
            PodRole::Moves
        );
        let ds = pod(serde_json::json!({"metadata": {"ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": true}]}}));
        assert_eq!(pod_role(&ds, None, false), PodRole::Stays);
        let mirror = pod(serde_json::json!({"metadata": {"annotations": {MIRROR_POD: "x"}}}));
        assert_eq!(pod_role(&mirror, None, false), PodRole::Stays);
        let done = pod(serde_json::json!({"status": {"phase": "Succeeded"}}));
        assert_eq!(pod_role(&done, None, false), PodRole::Stays);
    }

    #[test]
    fn pods_without_controller_kube_system_local_storage_and_not_safe_block() {
        let bare = pod(serde_json::json!({"metadata": {"ownerReferences": []}}));
        // cluster-autoscaler's replicated rule: a pod no controller owns is NotReplicated.
        assert_eq!(
            pod_role(&bare, None, false),
            PodRole::Blocks(BlockingPod {
                pod: "ml/p".into(),
                block: PodBlock::NoController
            })
        );
        assert_eq!(
            blocks(pod_role(&bare, None, false)),
            "pod ml/p has no controller"
        );
        let system = pod(serde_json::json!({"metadata": {"namespace": "kube-system"}}));
        assert!(blocks(pod_role(&system, None, false)).contains("without a PodDisruptionBudget"));
        assert_eq!(pod_role(&system, None, true), PodRole::Moves);
        let unsafe_pod =
            pod(serde_json::json!({"metadata": {"annotations": {SAFE_TO_EVICT: "false"}}}));
        assert!(blocks(pod_role(&unsafe_pod, None, false)).ends_with("safe-to-evict=false"));
        let local = pod(serde_json::json!({"spec": {"volumes": [
            {"name": "mem", "emptyDir": {"medium": "Memory"}},
            {"name": "scratch", "emptyDir": {}}]}}));
        assert_eq!(
            blocks(pod_role(&local, None, false)),
            "pod ml/p has local storage (volume scratch)"
        );
        let listed = pod(serde_json::json!({
            "metadata": {"annotations": {SAFE_TO_EVICT_LOCAL_VOLUMES: "scratch"}},
            "spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}}));
        assert_eq!(pod_role(&listed, None, false), PodRole::Moves);
    }

    #[test]
    fn safe_to_evict_overrides_the_soft_rules_but_not_do_not_disrupt() {
        let bare_safe = pod(serde_json::json!({"metadata": {"ownerReferences": [],
            "annotations": {SAFE_TO_EVICT: "true"}}}));
        assert_eq!(pod_role(&bare_safe, None, false), PodRole::Moves);
        for key in [KARPENTER_DO_NOT_DISRUPT, DO_NOT_DISRUPT] {
            let held = pod(
                serde_json::json!({"metadata": {"annotations": {key: "true", SAFE_TO_EVICT: "true"}}}),
            );
            assert_eq!(
                blocks(pod_role(&held, None, false)),
                format!("pod ml/p is annotated {key}")
            );
        }
    }

    #[test]
    fn a_pod_terminating_past_its_grace_period_stays() {
        let terminating = pod(serde_json::json!({
            "metadata": {"deletionTimestamp": "2026-12-01T00:00:00Z"},
            "spec": {"terminationGracePeriodSeconds": 30}}));
        let soon: Timestamp = "2026-12-01T00:00:50Z".parse().unwrap();
        let later: Timestamp = "2026-12-01T00:01:01Z".parse().unwrap();
        assert_eq!(pod_role(&terminating, Some(soon), false), PodRole::Moves);
        assert_eq!(pod_role(&terminating, Some(later), false), PodRole::Stays);
    }

    #[test]
    fn node_annotations_and_removal_taints() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "annotations": {SCALE_DOWN_DISABLED: "true"}}}))
        .unwrap();
        let hold = node_hold(&node).unwrap();
        assert_eq!(
            hold.to_string(),
            "node annotated cluster-autoscaler.kubernetes.io/scale-down-disabled"
        );
        assert_eq!(
            hold.code(),
            crate::scaledown::reasons::UnremovableReason::ScaleDownDisabledAnnotation
        );
        let tainted: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"},
            "spec": {"taints": [{"key": TO_BE_DELETED_TAINT, "value": "1", "effect": "NoSchedule"}]}})).unwrap();
        assert!(is_being_removed(&tainted) && node_hold(&tainted).is_none());
    }
}
