//! The Kubernetes side of a fake instance: what a kubelet and a DRA driver would write.
//!
//! Per instance: a Node created with its status (Ready, pressure conditions False, capacity and
//! allocatable from the template), a Lease in `kube-node-lease` that is renewed like a
//! kubelet's so the node lifecycle controller never marks the node Unknown, and, after the
//! configured delay, the template's ResourceSlices with `nodeName` and pool name set to the
//! node and an owner reference to it (see fake-nodes-and-kind.md §1.5, §2.4).

use std::collections::BTreeMap;

use dra_api::NODE_GROUP_LABEL;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo};
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

use crate::config::GroupConfig;

/// Label on slices naming the node they belong to, so they can be found and removed.
pub const SLICE_NODE_LABEL: &str = "dra-autoscaler.io/node";
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

    /// The Node an instance of `group` registers as.
    #[must_use]
    pub fn node_object(group: &GroupConfig, name: &str) -> Node {
        let template = &group.spec.template;
        let mut labels = template.labels.clone();
        labels.insert(NODE_GROUP_LABEL.to_owned(), group.name.clone());
        labels.insert("kubernetes.io/hostname".to_owned(), name.to_owned());
        labels
            .entry("kubernetes.io/os".to_owned())
            .or_insert_with(|| "linux".to_owned());
        labels
            .entry("kubernetes.io/arch".to_owned())
            .or_insert_with(|| "amd64".to_owned());
        if let Some(domain) = &group.spec.topology_domain {
            labels.insert(domain.key.clone(), domain.value.clone());
        }
        let time = Time(now());
        let condition = |type_: &str, status: &str, reason: &str| NodeCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: Some(reason.to_owned()),
            last_heartbeat_time: Some(time.clone()),
            last_transition_time: Some(time.clone()),
            message: Some("set by dra-provider-fake".to_owned()),
        };
        Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(labels),
                annotations: Some(BTreeMap::from([(
                    "kwok.x-k8s.io/node".to_owned(),
                    "fake".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(format!("fake://{name}")),
                taints: Some(template.taints.clone()).filter(|t| !t.is_empty()),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(template.capacity.clone()),
                allocatable: Some(template.effective_allocatable().clone()),
                phase: Some("Running".to_owned()),
                conditions: Some(vec![
                    condition("Ready", "True", "KubeletReady"),
                    condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                    condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                    condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                    condition("NetworkUnavailable", "False", "RouteCreated"),
                ]),
                node_info: Some(NodeSystemInfo {
                    architecture: "amd64".to_owned(),
                    operating_system: "linux".to_owned(),
                    kubelet_version: "fake".to_owned(),
                    os_image: "dra-provider-fake".to_owned(),
                    ..NodeSystemInfo::default()
                }),
                ..NodeStatus::default()
            }),
        }
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

    /// Publishes the template's slices for node `name`, as the node's DRA driver would.
    ///
    /// # Errors
    /// The API server's error.
    pub async fn publish_slices(
        &self,
        group: &GroupConfig,
        name: &str,
        uid: &str,
    ) -> Result<(), kube::Error> {
        let specs = group.spec.template.slices_for_node(name);
        for (index, mut spec) in specs.into_iter().enumerate() {
            if spec.pool.resource_slice_count == 0 {
                let same_driver = group
                    .spec
                    .template
                    .resource_slices
                    .iter()
                    .filter(|s| s.driver == spec.driver);
                spec.pool.resource_slice_count = i64::try_from(same_driver.count()).unwrap_or(1);
            }
            spec.pool.generation = spec.pool.generation.max(1);
            let slice_name = format!("{name}-{}-{index}", spec.driver.replace('.', "-"));
            let slice = ResourceSlice {
                metadata: ObjectMeta {
                    name: Some(slice_name),
                    labels: Some(BTreeMap::from([
                        (SLICE_NODE_LABEL.to_owned(), name.to_owned()),
                        (NODE_GROUP_LABEL.to_owned(), group.name.clone()),
                    ])),
                    owner_references: Some(vec![owner(name, uid)]),
                    ..ObjectMeta::default()
                },
                spec,
            };
            match self.slices.create(&PostParams::default(), &slice).await {
                Err(kube::Error::Api(status)) if status.is_already_exists() => {}
                other => drop(other?),
            }
        }
        Ok(())
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

    /// Nodes this provider owns, as `(group, node name)`.
    ///
    /// # Errors
    /// The API server's error.
    pub async fn owned_nodes(&self) -> Result<Vec<(String, String)>, kube::Error> {
        let nodes = self
            .nodes
            .list(&ListParams::default().labels(NODE_GROUP_LABEL))
            .await?;
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
                let group = n.metadata.labels.as_ref()?.get(NODE_GROUP_LABEL)?.clone();
                Some((group, n.metadata.name?))
            })
            .collect())
    }
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
