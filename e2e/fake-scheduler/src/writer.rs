//! The writes that carry out a decision, in the order the real components make them: claim
//! allocations (the scheduler's PreBind), the Binding, then what the kubelet reports once the
//! containers run (phase `Running`, Ready conditions, container statuses, IPs); and for the
//! pods that wait, `PodScheduled=False` with the reason and a `FailedScheduling` Event when
//! the message changes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::decide::{Placement, Refusal};

/// `reportingController` of the Events (kube-scheduler's).
pub const SCHEDULER_NAME: &str = "default-scheduler";

/// Writes a cycle's outcome.
#[derive(Clone)]
pub struct Writer {
    client: Client,
    instance: String,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

/// A write that failed (the next cycle tries again).
#[derive(Debug, thiserror::Error)]
#[error("unable to {action} for pod {pod}")]
pub struct WriteError {
    /// What was being done.
    pub action: String,
    /// `namespace/name`.
    pub pod: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// What a kubelet reports for a pod whose containers all started: the fake provider's
/// kubelet writes the same, so both backends of the local stack agree.
pub use dra_provider_fake::kubelet::running_status;

/// The pod's conditions with `PodScheduled` set to False for `refusal` (other conditions
/// kept), or `None` when it already says exactly that.
pub fn unschedulable_conditions(pod: &Pod, refusal: &Refusal) -> Option<Value> {
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let current = conditions.iter().find(|c| c.type_ == "PodScheduled");
    if current.is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some(refusal.reason)
            && c.message.as_deref() == Some(refusal.message.as_str())
    }) {
        return None;
    }
    let mut list: Vec<Value> = conditions
        .iter()
        .filter(|c| c.type_ != "PodScheduled")
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    let since = current
        .filter(|c| c.status == "False")
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(Timestamp::now()));
    list.push(json!({
        "type": "PodScheduled",
        "status": "False",
        "reason": refusal.reason,
        "message": refusal.message,
        "lastProbeTime": null,
        "lastTransitionTime": since,
    }));
    Some(json!({"status": {"conditions": list}}))
}

fn pod_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

impl Writer {
    /// Writes through `client`, reporting Events as `instance`.
    #[must_use]
    pub fn new(client: Client, instance: &str) -> Self {
        Self {
            client,
            instance: instance.to_owned(),
        }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    async fn event(&self, pod: &Pod, type_: &str, reason: &str, action: &str, note: &str) {
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let now = Timestamp::now();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    pod.metadata.name.clone().unwrap_or_default(),
                    now.as_nanosecond()
                )),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(action.into()),
            reason: Some(reason.into()),
            note: Some(note.into()),
            type_: Some(type_.into()),
            regarding: Some(pod_ref(pod)),
            reporting_controller: Some(SCHEDULER_NAME.into()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(err) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(%err, reason, "unable to write an Event");
        }
    }

    /// Allocates the pod's claims, binds it and marks it Running.
    ///
    /// # Errors
    /// [`WriteError`] naming the step that failed.
    pub async fn place(
        &self,
        pod: &Pod,
        placement: &Placement,
        nodes: &BTreeMap<String, &Node>,
    ) -> Result<(), WriteError> {
        let key = placement.pod.to_string();
        let fail = |action: &str| {
            let action = action.to_owned();
            let pod = key.clone();
            move |source| WriteError {
                action,
                pod,
                source,
            }
        };
        for update in &placement.claims {
            let claims: Api<ResourceClaim> =
                Api::namespaced(self.client.clone(), &update.claim.namespace);
            let status = json!({"status": update.status});
            claims
                .patch_status(
                    &update.claim.name,
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await
                .map_err(fail(&format!("allocate claim {}", update.claim)))?;
        }
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(placement.pod.name.clone()),
                namespace: Some(placement.pod.namespace.clone()),
                uid: Some(placement.uid.clone()),
                ..ObjectMeta::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(placement.node.clone()),
                ..ObjectReference::default()
            },
        };
        let pods = self.pods(&placement.pod.namespace);
        pods.create_subresource::<Binding, Value>(
            "binding",
            &placement.pod.name,
            &PostParams::default(),
            &binding,
        )
        .await
        .map_err(fail("bind it"))?;
        tracing::info!(pod = %key, node = %placement.node, claims = placement.claims.len(), "bound");
        self.event(
            pod,
            "Normal",
            "Scheduled",
            "Binding",
            &format!("Successfully assigned {key} to {}", placement.node),
        )
        .await;
        let bound = pods
            .get(&placement.pod.name)
            .await
            .map_err(fail("read it back"))?;
        let status = running_status(&bound, nodes.get(&placement.node).copied());
        pods.patch_status(
            &placement.pod.name,
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .map_err(fail("mark it Running"))?;
        Ok(())
    }

    /// Records why the pod waits, when that changed.
    ///
    /// # Errors
    /// [`WriteError`] when the status cannot be written.
    pub async fn refuse(&self, pod: &Pod, refusal: &Refusal) -> Result<(), WriteError> {
        let Some(patch) = unschedulable_conditions(pod, refusal) else {
            return Ok(());
        };
        self.pods(&refusal.pod.namespace)
            .patch_status(
                &refusal.pod.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|source| WriteError {
                action: "mark it unschedulable".into(),
                pod: refusal.pod.to_string(),
                source,
            })?;
        tracing::info!(pod = %refusal.pod, reason = refusal.reason, why = %refusal.message, "not scheduled");
        self.event(
            pod,
            "Warning",
            "FailedScheduling",
            "Scheduling",
            &refusal.message,
        )
        .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_sim::objects::ObjectRef;

    fn pod(conditions: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ml", "uid": "u-1"},
            "spec": {"containers": [{"name": "main", "image": "trainer:1"}]},
            "status": {"phase": "Pending", "conditions": conditions}
        }))
        .expect("pod")
    }

    #[test]
    fn a_running_pod_has_ready_containers_and_an_ip() {
        let status = running_status(&pod(json!([])), None);
        let s = &status["status"];
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["containerStatuses"][0]["name"], "main");
        assert_eq!(s["containerStatuses"][0]["ready"], true);
        assert!(s["containerStatuses"][0]["state"]["running"]["startedAt"].is_string());
        let ready = s["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(ready);
        // A stable address in 10.0.0.0/8, the same for the same pod.
        let ip = s["podIP"].as_str().expect("podIP");
        assert!(ip.starts_with("10."), "{ip}");
        assert_eq!(running_status(&pod(json!([])), None)["status"]["podIP"], ip);
        let typed: Pod = serde_json::from_value(json!({"metadata": {}, "status": s}))
            .expect("a valid PodStatus");
        assert_eq!(
            typed.status.and_then(|s| s.phase).as_deref(),
            Some("Running")
        );
    }

    #[test]
    fn the_unschedulable_condition_is_written_only_when_it_changes() {
        let refusal = Refusal {
            pod: ObjectRef::new("ml", "p"),
            reason: "Unschedulable",
            message: "0/1 nodes are available: 1 Insufficient cpu.".into(),
        };
        let patch = unschedulable_conditions(&pod(json!([])), &refusal).expect("new condition");
        let condition = &patch["status"]["conditions"][0];
        assert_eq!(condition["status"], "False");
        assert_eq!(condition["reason"], "Unschedulable");
        let already = pod(patch["status"]["conditions"].clone());
        assert!(unschedulable_conditions(&already, &refusal).is_none());
        let changed = Refusal {
            message: "0/2 nodes are available: 2 Insufficient cpu.".into(),
            ..refusal
        };
        let again = unschedulable_conditions(&already, &changed).expect("message changed");
        assert_eq!(
            again["status"]["conditions"][0]["lastTransitionTime"],
            patch["status"]["conditions"][0]["lastTransitionTime"],
            "still False since the first refusal"
        );
    }
}
