//! Small facts about pods that several parts of the simulator need.

use k8s_openapi::api::core::v1::{Node, Pod};

/// Taint key the node controller puts on cordoned nodes; tolerating it lets a
/// pod onto an unschedulable node.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A pod waits for a node when it has none and has not finished.
#[must_use]
pub fn is_pending(pod: &Pod) -> bool {
    let unbound = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.node_name.as_deref().is_none_or(str::is_empty));
    let finished = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    unbound && !finished
}

/// `spec.priority`, 0 when unset (the admission plugin resolves classes).
#[must_use]
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// The NodeUnschedulable filter: cordoned nodes take only pods that tolerate
/// the unschedulable taint.
pub fn node_unschedulable(pod: &Pod, node: &Node) -> Option<String> {
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
