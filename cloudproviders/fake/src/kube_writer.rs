//! The Kubernetes side of a fake instance: what a kubelet and a DRA driver would write.
//!
//! Per instance: a Node created with its status (Ready, pressure conditions False, capacity and
//! allocatable from the template) and labelled as a kubelet registers by default — its
//! hostname, OS and architecture, the template's labels (instance type, zone, region and what
//! a node pool's `--node-labels` give) and the configured `nodeLabels`, but not
//! `dra-autoscaler.io/node-group` unless configured: the autoscaler knows the Node by its
//! `spec.providerID` (`fake://<name>`), as it knows a cloud's; a Lease in `kube-node-lease` that is renewed like a
//! kubelet's so the node lifecycle controller never marks the node Unknown, and, after the
//! configured delay, the template's ResourceSlices with `nodeName` and pool name set to the
//! node and an owner reference to it (see fake-nodes-and-kind.md §1.5, §2.4).

use std::collections::BTreeMap;

use dra_api::NODE_GROUP_LABEL;

/// Annotation on each fake Node naming the group id it was started in: the fake cloud's own
/// record of the instance (what an instance tag is to a cloud), read back when the fake
/// restarts without a state file.
pub const GROUP_ANNOTATION: &str = "fake.dra-autoscaler.io/group";
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

use crate::config::GroupConfig;

pub use dra_api::SLICE_NODE_LABEL;
/// Lease duration (kubelet default).
pub const LEASE_DURATION_SECONDS: i32 = 40;
const HOLDER: &str = "dra-provider-fake";

/// Writes fake instances into the API server.
#[derive(Clone)]
pub struct KubeWriter {
    nodes: Api<Node>,
    slices: Api<ResourceSlice>,
    leases: Api<Lease>,
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

fn ignore_not_found(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        other => other,
    }
}

impl KubeWriter {
    /// Uses `client` for all writes.
    #[must_use]
    pub fn new(client: Client) -> Self {
        Self {
            nodes: Api::all(client.clone()),
            slices: Api::all(client.clone()),
            leases: Api::namespaced(client, "kube-node-lease"),
        }
    }

    /// The Node an instance of `group` registers as: the shared [`dra_api::new_node`] object (the
    /// one the planner simulates) without the node-group label a kubelet does not set, with the
    /// configured `nodeLabels`, plus what only a running machine has: heartbeat times, a
    /// provider id, the kwok marker and the kubelet's version.
    #[must_use]
    pub fn node_object(group: &GroupConfig, name: &str) -> Node {
        let mut node = dra_api::new_node(&group.node_group, &group.spec, name).node;
        let time = Time(now());
        let labels = node.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.remove(NODE_GROUP_LABEL);
        labels.extend(group.node_labels.clone());
        node.metadata.annotations = Some(BTreeMap::from([
            ("kwok.x-k8s.io/node".to_owned(), "fake".to_owned()),
            (GROUP_ANNOTATION.to_owned(), group.name.clone()),
        ]));
        if let Some(spec) = node.spec.as_mut() {
            spec.provider_id = Some(format!("fake://{name}"));
        }
        if let Some(status) = node.status.as_mut() {
            for condition in status.conditions.iter_mut().flatten() {
                condition.last_heartbeat_time = Some(time.clone());
                condition.last_transition_time = Some(time.clone());
                condition.message = Some("set by dra-provider-fake".to_owned());
            }
            if let Some(info) = status.node_info.as_mut() {
                info.kubelet_version = "fake".to_owned();
                info.os_image = "dra-provider-fake".to_owned();
            }
            status.addresses = Some(vec![
                NodeAddress {
                    type_: "InternalIP".to_owned(),
                    address: internal_ip(name),
                },
                NodeAddress {
                    type_: "Hostname".to_owned(),
                    address: name.to_owned(),
                },
            ]);
        }
        node
    }

    /// Creates the Node (with status, as a kubelet registering does) and its Lease; an existing
    /// Node is kept. Returns the Node's uid.
    ///
    /// # Errors
    /// The API server's error.
    pub async fn create_node(
        &self,
        group: &GroupConfig,
        name: &str,
    ) -> Result<String, kube::Error> {
        let node = Self::node_object(group, name);
        let created = match self.nodes.create(&PostParams::default(), &node).await {
            Ok(created) => created,
            Err(kube::Error::Api(status)) if status.is_already_exists() => {
                self.nodes.get(name).await?
            }
            Err(err) => return Err(err),
        };
        // Some API servers drop status on create; write it through the subresource too.
        if created
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_none()
        {
            let patch = serde_json::json!({ "status": node.status });
            self.nodes
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        let uid = created.metadata.uid.unwrap_or_default();
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                owner_references: Some(vec![owner(name, &uid)]),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(HOLDER.to_owned()),
                lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
                renew_time: Some(MicroTime(now())),
                ..LeaseSpec::default()
            }),
        };
        match self.leases.create(&PostParams::default(), &lease).await {
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            other => drop(other?),
        }
        Ok(uid)
    }

    /// Publishes the template's slices for node `name`, as the node's DRA driver would, while
    /// `keep_going` says so (it is asked before each create). Returns how many were created.
    ///
    /// # Errors
    /// The API server's error.
    pub async fn publish_slices(
        &self,
        group: &GroupConfig,
        name: &str,
        uid: &str,
        keep_going: impl Fn() -> bool,
    ) -> Result<usize, kube::Error> {
        let mut created = 0;
        for mut slice in dra_api::new_node(&group.node_group, &group.spec, name).slices {
            if !keep_going() {
                break;
            }
            slice.metadata.owner_references = Some(vec![owner(name, uid)]);
            match self.slices.create(&PostParams::default(), &slice).await {
                Ok(_) => created += 1,
                Err(kube::Error::Api(status)) if status.is_already_exists() => {}
                Err(err) => return Err(err),
            }
        }
        Ok(created)
    }

    /// Renews the Lease of node `name` (`renewTime = now`).
    ///
    /// # Errors
    /// The API server's error.
    pub async fn renew_lease(&self, name: &str) -> Result<(), kube::Error> {
        let patch = serde_json::json!({ "spec": { "renewTime": MicroTime(now()) } });
        self.leases
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
    }

    /// Removes node `name`, its slices and its Lease; missing objects are fine.
    ///
    /// # Errors
    /// The API server's error.
    pub async fn delete_node(&self, name: &str) -> Result<(), kube::Error> {
        let selector = ListParams::default().labels(&format!("{SLICE_NODE_LABEL}={name}"));
        for slice in self.slices.list(&selector).await?.items {
            if let Some(slice_name) = slice.metadata.name {
                ignore_not_found(
                    self.slices
                        .delete(&slice_name, &DeleteParams::default())
                        .await
                        .map(drop),
                )?;
            }
        }
        ignore_not_found(
            self.leases
                .delete(name, &DeleteParams::default())
                .await
                .map(drop),
        )?;
        ignore_not_found(
            self.nodes
                .delete(name, &DeleteParams::default())
                .await
                .map(drop),
        )
    }

    /// Nodes this provider owns (a `fake://` providerID), as `(owner, node name)`.
    ///
    /// # Errors
    /// The API server's error.
    pub async fn owned_nodes(&self) -> Result<Vec<(Owner, String)>, kube::Error> {
        let nodes = self.nodes.list(&ListParams::default()).await?;
        Ok(nodes
            .items
            .into_iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .is_some_and(|p| p.starts_with("fake://"))
            })
            .filter_map(|n| {
                let annotated = n
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(GROUP_ANNOTATION))
                    .cloned()
                    .map(Owner::GroupId);
                // Nodes of earlier versions of the fake carried only the label.
                let labelled = || {
                    n.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(NODE_GROUP_LABEL))
                        .cloned()
                        .map(Owner::NodeGroup)
                };
                let owner = annotated.or_else(labelled)?;
                Some((owner, n.metadata.name?))
            })
            .collect())
    }
}

/// How a Node found in the API server names the group it was started in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The group id, from [`GROUP_ANNOTATION`].
    GroupId(String),
    /// The NodeGroup's name, from the node-group label.
    NodeGroup(String),
}

/// A stable private address for node `name` (the fake has no network; kubectl and pod
/// statuses show it as the node's and the pods' host IP).
fn internal_ip(name: &str) -> String {
    let hash = name.bytes().fold(2_166_136_261_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    });
    let [_, _, c, d] = hash.to_be_bytes();
    format!("192.168.{c}.{}", d.max(1))
}

fn owner(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Node".to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        controller: Some(true),
        ..OwnerReference::default()
    }
}
