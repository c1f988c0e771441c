//! Removing one node: evict its pods through the Eviction API (PodDisruptionBudgets decide;
//! a refused eviction is retried), wait for them to be gone, then delete the machine through
//! the provider. Everything must finish within `--max-graceful-termination`; if anything fails
//! the node's taint is taken off and the node stays.
//!
//! Pods that go with the node are not evicted: DaemonSet and mirror pods, and finished ones
//! (as cluster-autoscaler drains).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dra_plan::scaledown::eligibility::is_daemon_set_pod;
use dra_plan::scaledown::keys::MIRROR_POD;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::SignedDuration;
use kube::api::{Api, ListParams};

use crate::executor::{GroupRef, NodeToDelete, ScaleExecutor};

/// What a removal needs from the controller.
pub(crate) struct Removal {
    pub client: kube::Client,
    /// Evictions: a client that does not retry 429s itself.
    pub evictions: kube::Client,
    pub executor: Arc<dyn ScaleExecutor>,
    /// The node.
    pub node: String,
    /// Its group, as the provider knows it.
    pub group: GroupRef,
    /// The whole removal's time limit.
    pub timeout: SignedDuration,
    /// Pause between attempts to evict a pod an eviction refused.
    pub retry: Duration,
}

/// Why a removal failed, for the event and the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct RemovalFailed(pub String);

fn must_leave(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let finished = matches!(phase, Some("Succeeded" | "Failed"));
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD));
    !finished && !mirror && !is_daemon_set_pod(pod)
}

fn pod_key(pod: &Pod) -> (String, String) {
    (
        pod.metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// The pods still on `node` that must leave before it goes.
async fn remaining(client: &kube::Client, node: &str) -> Result<Vec<Pod>, kube::Error> {
    let pods: Api<Pod> = Api::all(client.clone());
    let list = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?;
    Ok(list.items.into_iter().filter(must_leave).collect())
}

/// `POST pods/<name>/eviction` with `deleteOptions.gracePeriodSeconds` (kube's `Api::evict`
/// writes the options under a key the API server does not read).
async fn evict(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    grace_period_seconds: u32,
) -> Result<(), kube::Error> {
    let body = serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"gracePeriodSeconds": grace_period_seconds},
    });
    let request = http::Request::post(format!(
        "/api/v1/namespaces/{namespace}/pods/{name}/eviction"
    ))
    .header(http::header::CONTENT_TYPE, "application/json")
    .body(serde_json::to_vec(&body).map_err(kube::Error::SerdeError)?)
    .map_err(kube::Error::HttpError)?;
    client.request::<serde_json::Value>(request).await.map(drop)
}

fn grace_seconds(pod: &Pod, limit: SignedDuration) -> u32 {
    let own = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    u32::try_from(own.clamp(0, limit.as_secs().max(0))).unwrap_or(30)
}

impl Removal {
    fn deadline_passed(&self, started: std::time::Instant) -> bool {
        let limit = Duration::try_from(self.timeout).unwrap_or(Duration::ZERO);
        started.elapsed() >= limit
    }

    /// Evicts every pod that must leave, retrying refused evictions, until none is left or
    /// the time is up. Returns what blocked the last attempt when it gives up.
    async fn drain(&self) -> Result<usize, RemovalFailed> {
        let started = std::time::Instant::now();
        let mut last_refusal: BTreeMap<(String, String), String> = BTreeMap::new();
        let mut evicted = 0usize;
        loop {
            let pods = remaining(&self.client, &self.node).await.map_err(|e| {
                RemovalFailed(format!(
                    "unable to list the pods of node {}: {e}",
                    self.node
                ))
            })?;
            if pods.is_empty() {
                return Ok(evicted);
            }
            for pod in &pods {
                if pod.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let (namespace, name) = pod_key(pod);
                let grace = grace_seconds(pod, self.timeout);
                match evict(&self.evictions, &namespace, &name, grace).await {
                    Ok(_) => {
                        evicted += 1;
                        last_refusal.remove(&(namespace, name));
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(kube::Error::Api(status)) => {
                        let cause = status
                            .details
                            .as_ref()
                            .and_then(|d| d.causes.first())
                            .map(|c| format!(": {}", c.message))
                            .unwrap_or_default();
                        tracing::info!(node = %self.node, pod = %format!("{namespace}/{name}"), code = status.code, message = %status.message, "eviction refused; retrying");
                        last_refusal.insert(
                            (namespace, name),
                            format!("{} ({}){cause}", status.message, status.code),
                        );
                    }
                    Err(e) => {
                        last_refusal.insert((namespace, name), e.to_string());
                    }
                }
            }
            if self.deadline_passed(started) {
                let blocked: Vec<String> = if last_refusal.is_empty() {
                    pods.iter()
                        .map(|p| {
                            let (ns, n) = pod_key(p);
                            format!("pod {ns}/{n} did not terminate")
                        })
                        .collect()
                } else {
                    last_refusal
                        .iter()
                        .map(|((ns, n), why)| format!("pod {ns}/{n}: {why}"))
                        .collect()
                };
                return Err(RemovalFailed(format!(
                    "pods did not leave within {:#}: {}",
                    self.timeout,
                    blocked.join("; ")
                )));
            }
            tokio::time::sleep(self.retry).await;
        }
    }

    /// Drains the node and deletes its machine. Returns the number of pods evicted.
    pub(crate) async fn run(&self) -> Result<usize, RemovalFailed> {
        let evicted = self.drain().await?;
        let node = Api::<Node>::all(self.client.clone())
            .get_opt(&self.node)
            .await
            .map_err(|e| RemovalFailed(format!("unable to read node {}: {e}", self.node)))?;
        let Some(node) = node else {
            // Gone already (the provider or an operator removed it).
            return Ok(evicted);
        };
        let target = NodeToDelete {
            provider_id: node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.clone())
                .unwrap_or_default(),
            name: self.node.clone(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            annotations: node.metadata.annotations.clone().unwrap_or_default(),
        };
        self.executor
            .delete_nodes(&self.group, std::slice::from_ref(&target))
            .await
            .map_err(|e| RemovalFailed(e.to_string()))?;
        Ok(evicted)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn daemon_mirror_and_finished_pods_stay() {
        let pod = |extra: serde_json::Value| -> Pod {
            let mut v = serde_json::json!({"metadata": {"name": "p", "namespace": "ml"}, "spec": {"containers": []}, "status": {"phase": "Running"}});
            if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
                for (k, val) in e {
                    m.insert(k.clone(), val.clone());
                }
            }
            serde_json::from_value(v).unwrap()
        };
        assert!(must_leave(&pod(serde_json::json!({}))));
        assert!(!must_leave(&pod(
            serde_json::json!({"status": {"phase": "Succeeded"}})
        )));
        assert!(!must_leave(&pod(
            serde_json::json!({"metadata": {"name": "p", "namespace": "ml",
            "annotations": {MIRROR_POD: "x"}}})
        )));
        assert!(!must_leave(&pod(
            serde_json::json!({"metadata": {"name": "p", "namespace": "ml",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": true}]}})
        )));
    }

    #[test]
    fn grace_periods_are_capped_by_the_limit() {
        let pod: Pod = serde_json::from_value(serde_json::json!({"metadata": {"name": "p"},
            "spec": {"containers": [], "terminationGracePeriodSeconds": 3600}}))
        .unwrap();
        assert_eq!(grace_seconds(&pod, SignedDuration::from_mins(10)), 600);
    }
}
