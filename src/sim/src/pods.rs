//! Small facts about pods that several parts of the simulator need.

use k8s_openapi::api::core::v1::Pod;

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
