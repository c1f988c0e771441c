//! What the kubelet and the DRA driver of a fake instance do once pods come: the duties that
//! make a kubelet-less Node behave like a real one under the real kube-scheduler and
//! kube-controller-manager (see `fake-nodes-and-kind.md` §1.3–§1.5, kwok's `pod-ready` and
//! `pod-delete` stages):
//!
//! - a pod bound to one of the provider's nodes is reported Running (phase, Ready conditions,
//!   container statuses, IPs), as the kubelet does once its containers started
//!   ([`running_status`]);
//! - a pod being deleted on one of them is removed for good (grace period 0), the kubelet's
//!   final delete after its containers stopped; without it an evicted pod stays Terminating
//!   forever and its node can never drain;
//! - a device whose allocation carries `bindingConditions` gets those conditions set True in
//!   the claim's `status.devices`, as the DRA driver's controller does once the device is
//!   attached, so the scheduler's PreBind, which waits for them, lets the pod bind.
//!
//! Each node's kubelet watches only the pods bound to it (`fieldSelector=spec.nodeName=<node>`,
//! as a real kubelet does) and the driver watches the claims; a pass reads what those watches
//! hold. Listing every Pod of the cluster instead made the API server serialize all of them
//! twice a second, which on a cluster of 100,000 pods held up every other client's writes.
//!
//! [`Kubelet::sync`] is one pass; the provider runs it in a loop
//! (`FakeProvider::spawn_kubelet`).

mod devices;
mod status;
mod watched;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::watcher;
use kube::{Api, Client};

use devices::devices_ready_patch;
use status::needs_start;
pub use status::running_status;
use watched::Watched;

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
    /// Writes (or reads of a Node) that failed (tried again on a later pass).
    pub failed: usize,
    /// Watches whose last attempt failed (they retry with backoff; until then the pass
    /// acts on what they showed before, which may be nothing).
    pub watches_failing: usize,
}

/// The kubelets and the DRA driver of the provider's nodes.
pub struct Kubelet {
    client: Client,
    nodes: Api<Node>,
    /// Per owned node, the pods bound to it.
    pods_on: BTreeMap<String, Watched<Pod>>,
    /// Every claim, while the provider owns a node (allocations name their node only in
    /// their node selector, which no field selector reaches).
    claims: Option<Watched<ResourceClaim>>,
    /// Owned nodes as registered: the host addresses a started pod reports.
    registered: BTreeMap<String, Node>,
    recent: BTreeMap<String, Instant>,
}

impl std::fmt::Debug for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelet")
            .field("nodes", &self.pods_on.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
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
            nodes: Api::all(client.clone()),
            client,
            pods_on: BTreeMap::new(),
            claims: None,
            registered: BTreeMap::new(),
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

    /// Watches the pods of every node in `owned` and no other, and the claims while there
    /// is any.
    fn watch(&mut self, owned: &BTreeSet<String>) {
        self.pods_on.retain(|node, _| owned.contains(node));
        self.registered.retain(|node, _| owned.contains(node));
        for node in owned {
            if self.pods_on.contains_key(node) {
                continue;
            }
            let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
            let pods = Watched::start(
                Api::all(self.client.clone()),
                config,
                format!("pods on {node}"),
            );
            self.pods_on.insert(node.clone(), pods);
        }
        if owned.is_empty() {
            self.claims = None;
        } else if self.claims.is_none() {
            self.claims = Some(Watched::start(
                Api::all(self.client.clone()),
                watcher::Config::default(),
                "resourceclaims".to_owned(),
            ));
        }
    }

    /// The Node `name` as registered, read once; `None` (and a failure counted) while it
    /// cannot be read.
    async fn registered(&mut self, name: &str, pass: &mut Pass) -> Option<Node> {
        if let Some(node) = self.registered.get(name) {
            return Some(node.clone());
        }
        match self.nodes.get_opt(name).await {
            Ok(Some(node)) => {
                self.registered.insert(name.to_owned(), node.clone());
                Some(node)
            }
            Ok(None) => None,
            Err(err) => {
                tracing::warn!(node = name, %err, "unable to read a fake node");
                pass.failed += 1;
                None
            }
        }
    }

    /// One pass for the nodes named in `owned`: starts the pods bound to them, removes their
    /// terminating pods and readies the devices allocated on them. What it reads comes from
    /// its watches, which start on the first pass that names a node (so a pod bound to a
    /// node is handled once that node's watch has listed it); a failed write is counted in
    /// [`Pass::failed`] and tried again on a later pass.
    pub async fn sync(&mut self, owned: &BTreeSet<String>) -> Pass {
        self.watch(owned);
        let mut pass = Pass::default();
        let bound: Vec<(String, Arc<Pod>)> = self
            .pods_on
            .iter()
            .flat_map(|(node, pods)| pods.objects().into_iter().map(move |p| (node.clone(), p)))
            .collect();
        for (node, pod) in bound {
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
            } else if needs_start(&pod) {
                let Some(registered) = self.registered(&node, &mut pass).await else {
                    continue;
                };
                if !self.due(format!("start {name}")) {
                    continue;
                }
                match self.start(&pod, &registered).await {
                    Ok(()) => pass.started.push(name),
                    Err(err) => {
                        tracing::warn!(pod = %name, %err, "unable to report a pod Running");
                        pass.failed += 1;
                    }
                }
            }
        }
        pass.watches_failing = self.pods_on.values().filter(|w| w.failing()).count()
            + usize::from(self.claims.as_ref().is_some_and(Watched::failing));
        let claims = self
            .claims
            .as_ref()
            .map(Watched::objects)
            .unwrap_or_default();
        for claim in claims {
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
        pass
    }

    async fn start(&self, pod: &Pod, node: &Node) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
        );
        // The pod as the watch last showed it: a same-name pod created since (a StatefulSet's
        // replacement) has another uid, and the API server refuses the patch (409).
        let mut patch = running_status(pod, Some(node));
        patch["metadata"] = serde_json::json!({"uid": pod.metadata.uid});
        api.patch_status(
            pod.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
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
