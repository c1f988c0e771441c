//! What a kubelet reports for a pod once its containers started.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// A pod the kubelet has not reported started yet (and that is not finished).
pub(super) fn needs_start(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running" | "Succeeded" | "Failed")
    )
}

/// A stable fake pod IP from the pod's uid (there is no pod network).
fn pod_ip(uid: &str) -> String {
    let hash = uid.bytes().fold(2_166_136_261_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    });
    let [_, b, c, d] = hash.to_be_bytes();
    format!("10.{}.{}.{}", b.max(1), c, d.max(2))
}

/// The status merge patch a kubelet reports for a pod whose containers all started: phase
/// Running, the Ready conditions, one running status per container, the pod's and the host's
/// IPs (the `PodScheduled` condition the scheduler wrote is kept).
#[must_use]
pub fn running_status(pod: &Pod, node: Option<&Node>) -> Value {
    let now = Time(Timestamp::now());
    let host_ip = node
        .and_then(|n| n.status.as_ref())
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone())
        .unwrap_or_default();
    let ip = pod_ip(pod.metadata.uid.as_deref().unwrap_or_default());
    let condition =
        |type_: &str| json!({"type": type_, "status": "True", "lastTransitionTime": now});
    let containers: Vec<Value> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "image": c.image.clone().unwrap_or_default(),
                "imageID": "",
                "containerID": format!("fake://{}", c.name),
                "ready": true,
                "started": true,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            })
        })
        .collect();
    let scheduled = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        })
        .and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or_else(|| condition("PodScheduled"));
    let mut status = json!({
        "phase": "Running",
        "conditions": [
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            condition("Ready"),
            condition("ContainersReady"),
            scheduled,
        ],
        "containerStatuses": containers,
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
    });
    if !host_ip.is_empty() {
        status["hostIP"] = json!(host_ip);
        status["hostIPs"] = json!([{"ip": host_ip}]);
    }
    json!({"status": status})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_or_running_pod_is_not_started_again() {
        let pod = |phase: Option<&str>| Pod {
            status: phase.map(|p| k8s_openapi::api::core::v1::PodStatus {
                phase: Some(p.to_owned()),
                ..Default::default()
            }),
            ..Pod::default()
        };
        assert!(needs_start(&pod(None)));
        assert!(needs_start(&pod(Some("Pending"))));
        for phase in ["Running", "Succeeded", "Failed"] {
            assert!(!needs_start(&pod(Some(phase))), "{phase}");
        }
    }
}
