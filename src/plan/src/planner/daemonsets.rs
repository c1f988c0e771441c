//! DaemonSet pods: every new node runs one pod of each DaemonSet that
//! selects it, and those count against the node's room.

use dra_sim::objects::ExtraObject;
use dra_sim::snapshot::Verdict;
use k8s_openapi::api::core::v1::Pod;

use super::Planner;

/// The pod each DaemonSet among `extra` runs on every node it selects:
/// `spec.template` with the DaemonSet's namespace, named after it (the node
/// name is appended per node).
pub(super) fn daemon_pods(extra: &[ExtraObject]) -> Vec<Pod> {
    extra
        .iter()
        .filter(|o| o.kind == "DaemonSet" && o.api_version == "apps/v1")
        .filter_map(|o| {
            let template = o.value.pointer("/spec/template")?.clone();
            let mut pod: Pod = serde_json::from_value(template).ok()?;
            let meta = o.value.get("metadata")?;
            pod.metadata.name = meta.get("name")?.as_str().map(str::to_string);
            pod.metadata.namespace = Some(
                meta.get("namespace")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("default")
                    .to_string(),
            );
            Some(pod)
        })
        .collect()
}

impl Planner<'_> {
    /// Places on a new node the pod of every DaemonSet whose pod the
    /// scheduler would put there, so that they count against it.
    pub(super) fn add_daemon_pods(&mut self, node_index: usize) {
        let node_name = self.snapshot.nodes()[node_index]
            .metadata
            .name
            .clone()
            .unwrap_or_default();
        for template in &self.daemon_pods {
            let mut pod = template.clone();
            let base = pod.metadata.name.take().unwrap_or_default();
            pod.metadata.name = Some(format!("{base}-{node_name}"));
            let before = self.snapshot.checkpoint();
            let pod_index = self.snapshot.add_pod(pod);
            let placed = match self.snapshot.resolve_claims(pod_index) {
                Ok(claims) => match self.snapshot.check(pod_index, node_index, &claims) {
                    Verdict::Fits(allocations) => {
                        self.snapshot
                            .bind(pod_index, node_index, &claims, allocations);
                        true
                    }
                    _ => false,
                },
                Err(_) => false,
            };
            if !placed {
                self.snapshot.rollback(before);
            }
        }
    }
}
