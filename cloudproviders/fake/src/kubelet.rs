//! What the kubelet and the DRA driver of a fake instance do once pods come: the duties that
//! make a kubelet-less Node behave like a real one under the real kube-scheduler and
//! kube-controller-manager (see `fake-nodes-and-kind.md` §1.3–§1.5, kwok's `pod-ready` and
//! `pod-delete` stages):
//!
//! - a pod bound to one of the provider's nodes is reported Running (phase, Ready conditions,
//!   container statuses, IPs), as the kubelet does once its containers started;
//! - a pod being deleted on one of them is removed for good (grace period 0), the kubelet's
//!   final delete after its containers stopped; without it an evicted pod stays Terminating
//!   forever and its node can never drain;
//! - a device whose allocation carries `bindingConditions` gets those conditions set True in
//!   the claim's `status.devices`, as the DRA driver's controller does once the device is
//!   attached, so the scheduler's PreBind, which waits for them, lets the pod bind.
//!
//! [`Kubelet::sync`] is one pass over the cluster; the provider runs it in a loop
//! (`FakeProvider::spawn_kubelet`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, ResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use serde_json::{Value, json};

/// A write that is not repeated sooner than this for the same object (the store shows the
/// result of a write a moment later; repeating it at once would only be noise).
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The `reason` of the device conditions the fake driver sets.
pub const DEVICE_READY_REASON: &str = "FakeDriverReady";

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pass {
    /// Pods reported Running (`namespace/name`).
    pub started: Vec<String>,
    /// Terminating pods removed for good.
    pub removed: Vec<String>,
    /// Claims whose device binding conditions were set (`namespace/name`).
    pub devices_ready: Vec<String>,
    /// Writes that failed (tried again on a later pass).
    pub failed: usize,
}

/// The kubelets and the DRA driver of the provider's nodes.
pub struct Kubelet {
    pods: Api<Pod>,
    nodes: Api<Node>,
    claims: Api<ResourceClaim>,
    client: Client,
    recent: BTreeMap<String, Instant>,
}

impl std::fmt::Debug for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelet").finish_non_exhaustive()
    }
}

fn key(namespace: Option<&str>, name: Option<&str>) -> String {
    format!(
        "{}/{}",
        namespace.unwrap_or_default(),
        name.unwrap_or_default()
    )
}

impl Kubelet {
    /// Acts through `client`.
    #[must_use]
    pub fn new(client: Client) -> Self {
        Self {
            pods: Api::all(client.clone()),
            nodes: Api::all(client.clone()),
            claims: Api::all(client.clone()),
            client,
            recent: BTreeMap::new(),
        }
    }

    fn due(&mut self, what: String) -> bool {
        let now = Instant::now();
        self.recent
            .retain(|_, at| now.duration_since(*at) < RETRY_AFTER);
        if self.recent.contains_key(&what) {
            return false;
        }
        self.recent.insert(what, now);
        true
    }

    /// One pass for the nodes named in `owned`: starts the pods bound to them, removes their
    /// terminating pods and readies the devices allocated on them.
    ///
    /// # Errors
    /// Listing pods, nodes or claims failed (single writes that fail are counted in
    /// [`Pass::failed`] and tried again on a later pass).
    pub async fn sync(&mut self, owned: &BTreeSet<String>) -> Result<Pass, kube::Error> {
        let mut pass = Pass::default();
        if owned.is_empty() {
            return Ok(pass);
        }
        let nodes: BTreeMap<String, Node> = self
            .nodes
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|n| Some((n.metadata.name.clone()?, n)))
            .filter(|(name, _)| owned.contains(name))
            .collect();
        for pod in self.pods.list(&ListParams::default()).await?.items {
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
                continue;
            };
            let Some(node) = nodes.get(node) else {
                continue;
            };
            let name = key(
                pod.metadata.namespace.as_deref(),
                pod.metadata.name.as_deref(),
            );
            if pod.metadata.deletion_timestamp.is_some() {
                if self.due(format!("delete {name}")) {
                    match self.remove(&pod).await {
                        Ok(()) => pass.removed.push(name),
                        Err(err) => {
                            tracing::warn!(pod = %name, %err, "unable to remove a terminating pod");
                            pass.failed += 1;
                        }
                    }
                }
            } else if needs_start(&pod) && self.due(format!("start {name}")) {
                match self.start(&pod, node).await {
                    Ok(()) => pass.started.push(name),
                    Err(err) => {
                        tracing::warn!(pod = %name, %err, "unable to report a pod Running");
                        pass.failed += 1;
                    }
                }
            }
        }
        for claim in self.claims.list(&ListParams::default()).await?.items {
            let Some(patch) = devices_ready_patch(&claim, owned) else {
                continue;
            };
            let name = key(
                claim.metadata.namespace.as_deref(),
                claim.metadata.name.as_deref(),
            );
            if !self.due(format!("claim {name}")) {
                continue;
            }
            let api: Api<ResourceClaim> = Api::namespaced(
                self.client.clone(),
                claim.metadata.namespace.as_deref().unwrap_or_default(),
            );
            let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
            match api
                .patch_status(claim_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => pass.devices_ready.push(name),
                Err(err) => {
                    tracing::warn!(claim = %name, %err, "unable to set device binding conditions");
                    pass.failed += 1;
                }
            }
        }
        for name in &pass.started {
            tracing::info!(pod = %name, "pod started on a fake node");
        }
        for name in &pass.removed {
            tracing::info!(pod = %name, "terminating pod removed from a fake node");
        }
        for name in &pass.devices_ready {
            tracing::info!(claim = %name, "device binding conditions set");
        }
        Ok(pass)
    }

    async fn start(&self, pod: &Pod, node: &Node) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
        );
        api.patch_status(
            pod.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&running_status(pod, Some(node))),
        )
        .await
        .map(drop)
    }

    async fn remove(&self, pod: &Pod) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api
            .delete(pod.metadata.name.as_deref().unwrap_or_default(), &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(err) => Err(err),
        }
    }
}

/// A pod the kubelet has not reported started yet (and that is not finished).
fn needs_start(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running" | "Succeeded" | "Failed")
    )
}

/// The node a claim's allocation is for: its node selector's `metadata.name` field (what the
/// allocator writes for node-local devices).
fn allocated_node(claim: &ResourceClaim) -> Option<&str> {
    let terms = &claim
        .status
        .as_ref()?
        .allocation
        .as_ref()?
        .node_selector
        .as_ref()?
        .node_selector_terms;
    terms.iter().find_map(|term| {
        term.match_fields.iter().flatten().find_map(|field| {
            (field.key == "metadata.name" && field.operator == "In")
                .then(|| field.values.as_ref()?.first().map(String::as_str))
                .flatten()
        })
    })
}

/// The merge patch of a claim's `status.devices` that sets, for every device allocated on one
/// of `owned`'s nodes, each of its `bindingConditions` True; `None` when nothing is missing.
/// Entries for other devices and other conditions are kept (a merge patch replaces the list).
fn devices_ready_patch(claim: &ResourceClaim, owned: &BTreeSet<String>) -> Option<Value> {
    let node = allocated_node(claim)?;
    if !owned.contains(node) {
        return None;
    }
    let status = claim.status.as_ref()?;
    let results = status
        .allocation
        .as_ref()?
        .devices
        .as_ref()?
        .results
        .as_deref()?;
    let mut devices: Vec<AllocatedDeviceStatus> = status.devices.clone().unwrap_or_default();
    let mut changed = false;
    for result in results {
        let wanted = result.binding_conditions.as_deref().unwrap_or_default();
        if wanted.is_empty() {
            continue;
        }
        let position = devices.iter().position(|d| {
            d.driver == result.driver && d.pool == result.pool && d.device == result.device
        });
        let entry = match position {
            Some(i) => &mut devices[i],
            None => {
                devices.push(AllocatedDeviceStatus {
                    driver: result.driver.clone(),
                    pool: result.pool.clone(),
                    device: result.device.clone(),
                    share_id: result.share_id.clone(),
                    ..AllocatedDeviceStatus::default()
                });
                let last = devices.len() - 1;
                &mut devices[last]
            }
        };
        let conditions = entry.conditions.get_or_insert_with(Vec::new);
        for type_ in wanted {
            let ready = conditions
                .iter()
                .any(|c| &c.type_ == type_ && c.status == "True");
            if ready {
                continue;
            }
            conditions.retain(|c| &c.type_ != type_);
            conditions.push(Condition {
                type_: type_.clone(),
                status: "True".to_owned(),
                reason: DEVICE_READY_REASON.to_owned(),
                message: "the fake DRA driver attached the device".to_owned(),
                last_transition_time: Time(Timestamp::now()),
                observed_generation: claim.metadata.generation,
            });
            changed = true;
        }
    }
    changed.then(|| json!({"status": {"devices": devices}}))
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

    fn claim(yaml: &str) -> ResourceClaim {
        serde_saphyr::from_str(yaml).expect("claim parses")
    }

    const ALLOCATED: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default, generation: 1}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu}}]
status:
  allocation:
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-a]}]
    devices:
      results:
      - {request: gpu, driver: gpu.example.com, pool: node-a, device: gpu-0, bindingConditions: [Attached, Healthy]}
      - {request: gpu, driver: gpu.example.com, pool: node-a, device: gpu-1}
"#;

    fn owned(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn every_binding_condition_of_a_device_on_an_owned_node_is_set_true() {
        let patch = devices_ready_patch(&claim(ALLOCATED), &owned(&["node-a"])).expect("patch");
        let devices = patch["status"]["devices"].as_array().expect("devices");
        assert_eq!(
            devices.len(),
            1,
            "only the device with binding conditions: {patch}"
        );
        assert_eq!(devices[0]["device"], "gpu-0");
        let types: Vec<&str> = devices[0]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .map(|c| {
                assert_eq!(c["status"], "True");
                c["type"].as_str().expect("type")
            })
            .collect();
        assert_eq!(types, ["Attached", "Healthy"]);
    }

    #[test]
    fn devices_on_other_nodes_or_already_ready_are_left_alone() {
        assert!(devices_ready_patch(&claim(ALLOCATED), &owned(&["node-b"])).is_none());
        let first = devices_ready_patch(&claim(ALLOCATED), &owned(&["node-a"])).expect("patch");
        let mut ready = claim(ALLOCATED);
        let devices: Vec<AllocatedDeviceStatus> =
            serde_json::from_value(first["status"]["devices"].clone()).expect("devices");
        if let Some(status) = ready.status.as_mut() {
            status.devices = Some(devices);
        }
        assert!(devices_ready_patch(&ready, &owned(&["node-a"])).is_none());
    }

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
