//! [`FakeProvider`]: the [`CloudProvider`] of the fake cloud.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dra_api::{NODE_GROUP_LABEL, NodeGroupSpec};
use dra_provider::{
    AtomicIncrease, CapacityType, CloudProvider, Instance, InstanceDetails, InstanceState,
    NodeGroupDetails, NodeGroupRef, NodeRef, ProviderError, ReservationStatus, TemplateNode,
};
use tokio::sync::Mutex;

use crate::cloud::{CloudState, InstanceRecord, Limit, StateError};
use crate::config::{Config, GroupConfig};
use crate::kube_writer::KubeWriter;

/// Failure to start the fake.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The state file is unusable.
    #[error("unable to load the fake provider's state")]
    State(#[from] StateError),
    /// The Nodes could not be listed or recreated.
    #[error("unable to restore fake instances in the API server")]
    Kube(#[source] kube::Error),
}

/// The fake cloud provider.
pub struct FakeProvider {
    config: Config,
    groups: BTreeMap<String, GroupConfig>,
    state: Mutex<CloudState>,
    state_file: Option<PathBuf>,
    kube: KubeWriter,
    write_failures: std::sync::Mutex<BTreeMap<String, u32>>,
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
}

fn kube_err(action: &str, name: &str) -> impl FnOnce(kube::Error) -> ProviderError {
    let message = format!("unable to {action} for instance {name}");
    move |err| ProviderError::Unavailable {
        message: format!("{message}: {err}"),
    }
}

impl FakeProvider {
    /// Builds the provider. State comes from `state_file` when it exists, else from the Nodes
    /// it owns in the API server; every recorded instance then gets its Node, Lease and slices
    /// back if they are missing (a kill between two writes is repaired here).
    ///
    /// # Errors
    /// [`StartError`].
    pub async fn new(
        config: Config,
        client: kube::Client,
        state_file: Option<PathBuf>,
    ) -> Result<Arc<Self>, StartError> {
        let kube = KubeWriter::new(client);
        let groups: BTreeMap<_, _> = config
            .node_groups
            .iter()
            .map(|g| (g.name.clone(), g.clone()))
            .collect();
        let state = match state_file
            .as_deref()
            .map(CloudState::load)
            .transpose()?
            .flatten()
        {
            Some(state) => state,
            None => derive_state(&kube).await.map_err(StartError::Kube)?,
        };
        let write_failures = groups
            .values()
            .map(|g| (g.name.clone(), g.faults.fail_kubernetes_writes))
            .collect();
        let provider = Arc::new(Self {
            config,
            groups,
            state: Mutex::new(state),
            state_file,
            kube,
            write_failures: std::sync::Mutex::new(write_failures),
        });
        provider.restore().await.map_err(StartError::Kube)?;
        Ok(provider)
    }

    async fn restore(self: &Arc<Self>) -> Result<(), kube::Error> {
        let state = self.state.lock().await.clone();
        for (group_name, group_state) in &state.groups {
            let Some(group) = self.groups.get(group_name) else {
                tracing::warn!(
                    group = group_name,
                    "state has instances of a group the config no longer has"
                );
                continue;
            };
            for name in group_state.instances.keys() {
                let uid = self.kube.create_node(group, name).await?;
                self.kube.publish_slices(group, name, &uid).await?;
            }
        }
        Ok(())
    }

    /// Renews every instance's Lease forever, every `leaseRenewSeconds`.
    pub fn spawn_lease_renewal(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let provider = Arc::clone(self);
        tokio::spawn(async move {
            let period = Duration::from_secs(provider.config.lease_renew_seconds.max(1));
            loop {
                tokio::time::sleep(period).await;
                let names: Vec<String> = {
                    let state = provider.state.lock().await;
                    state
                        .groups
                        .values()
                        .flat_map(|g| g.instances.keys().cloned())
                        .collect()
                };
                for name in names {
                    if let Err(err) = provider.kube.renew_lease(&name).await {
                        tracing::warn!(node = name, %err, "unable to renew lease");
                    }
                }
            }
        })
    }

    fn group(&self, id: &str) -> Result<&GroupConfig, ProviderError> {
        self.groups.get(id).ok_or_else(|| ProviderError::NotFound {
            what: format!("node group {id:?}"),
        })
    }

    fn save(&self, state: &CloudState) -> Result<(), ProviderError> {
        if let Some(path) = &self.state_file {
            state.save(path).map_err(|err| ProviderError::Internal {
                message: err.to_string(),
            })?;
        }
        Ok(())
    }

    fn injected_write_failure(&self, group: &str) -> bool {
        let mut failures = self
            .write_failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match failures.get_mut(group) {
            Some(left) if *left > 0 => {
                *left -= 1;
                true
            }
            _ => false,
        }
    }

    /// Starts `count` instances: Nodes and Leases now, slices after the configured delay. On
    /// any failure everything started by this call is removed again.
    async fn start(
        &self,
        state: &mut CloudState,
        group: &GroupConfig,
        count: i32,
    ) -> Result<Vec<InstanceRecord>, ProviderError> {
        if group.faults.start_latency_ms > 0 {
            tokio::time::sleep(Duration::from_millis(group.faults.start_latency_ms)).await;
        }
        let records = state.add_instances(group, count, unix_now());
        let mut created = Vec::new();
        for record in &records {
            let result = if self.injected_write_failure(&group.name) {
                Err(ProviderError::Unavailable {
                    message: format!(
                        "injected Kubernetes write failure for instance {}",
                        record.name
                    ),
                })
            } else {
                self.kube
                    .create_node(group, &record.name)
                    .await
                    .map_err(kube_err("create the Node", &record.name))
            };
            match result {
                Ok(uid) => {
                    created.push(record.name.clone());
                    self.publish_later(group.clone(), record.name.clone(), uid);
                }
                Err(err) => {
                    self.roll_back(
                        state,
                        &group.name,
                        &records.iter().map(|r| r.name.clone()).collect::<Vec<_>>(),
                    )
                    .await;
                    // Everything this call started is gone again: tell the client it may
                    // retry at once rather than wait for machines that will not come.
                    return Err(ProviderError::NotStarted {
                        message: format!("{err}; the instances this call started were rolled back"),
                    });
                }
            }
        }
        self.save(state)?;
        Ok(records)
    }

    fn publish_later(&self, group: GroupConfig, name: String, uid: String) {
        let kube = self.kube.clone();
        let delay = Duration::from_millis(self.config.slice_delay_ms);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Err(err) = kube.publish_slices(&group, &name, &uid).await {
                tracing::warn!(node = name, %err, "unable to publish ResourceSlices");
            }
        });
    }

    async fn roll_back(&self, state: &mut CloudState, group: &str, names: &[String]) {
        for name in names {
            if let Err(err) = self.kube.delete_node(name).await {
                tracing::warn!(node = name, %err, "rollback could not delete the Node");
            }
        }
        state.remove_instances(group, names);
        if let Err(err) = self.save(state) {
            tracing::warn!(%err, "rollback could not save state");
        }
    }

    fn refuse(
        limit: Limit,
        group: &str,
        wanted: i32,
        headroom: i32,
        rolled_back: i32,
    ) -> ProviderError {
        let message =
            format!("node group {group:?}: {wanted} instances wanted, room for {headroom}");
        match limit {
            Limit::Capacity => ProviderError::OutOfCapacity {
                code: "InsufficientInstanceCapacity".into(),
                message,
                rolled_back,
            },
            Limit::Quota => ProviderError::Quota {
                code: "QUOTA_EXCEEDED".into(),
                message,
            },
            Limit::MaxSize => ProviderError::InvalidArgument {
                message: format!("{message} below spec.maxSize"),
            },
        }
    }

    fn template_of(group: &GroupConfig) -> TemplateNode {
        let name = format!("{}-template", group.name);
        let made = dra_api::new_node(&group.name, &group.spec, &name);
        TemplateNode {
            node: made.node,
            resource_slices: made.slices,
        }
    }
}

async fn derive_state(kube: &KubeWriter) -> Result<CloudState, kube::Error> {
    let mut state = CloudState::default();
    for (group, name) in kube.owned_nodes().await? {
        let index = name
            .rsplit('-')
            .next()
            .and_then(|i| i.parse::<u64>().ok())
            .unwrap_or(0);
        state.next_index = state.next_index.max(index);
        let record = InstanceRecord {
            name: name.clone(),
            reservation_id: None,
            requested_at: unix_now(),
        };
        state.group_mut(&group).instances.insert(name, record);
    }
    Ok(state)
}

fn capacity_type(spec: &NodeGroupSpec) -> CapacityType {
    match spec.capacity_type {
        dra_api::CapacityType::Reserved => CapacityType::Reserved,
        dra_api::CapacityType::OnDemand => CapacityType::OnDemand,
        dra_api::CapacityType::Spot => CapacityType::Spot,
    }
}

fn group_ref(group: &GroupConfig) -> NodeGroupRef {
    NodeGroupRef {
        id: group.name.clone(),
        min_size: group.spec.min_size,
        max_size: group.spec.max_size,
        debug: format!(
            "fake node group {} ({})",
            group.name, group.spec.capacity_type
        ),
    }
}

#[tonic::async_trait]
impl CloudProvider for FakeProvider {
    async fn node_groups(&self) -> Result<Vec<NodeGroupRef>, ProviderError> {
        Ok(self.groups.values().map(group_ref).collect())
    }

    async fn node_group_for_node(
        &self,
        node: &NodeRef,
    ) -> Result<Option<NodeGroupRef>, ProviderError> {
        let state = self.state.lock().await;
        let name = node
            .provider_id
            .strip_prefix("fake://")
            .unwrap_or(&node.name);
        Ok(self
            .groups
            .values()
            .find(|g| {
                state
                    .groups
                    .get(&g.name)
                    .is_some_and(|s| s.instances.contains_key(name))
            })
            .or_else(|| {
                node.labels
                    .get(NODE_GROUP_LABEL)
                    .and_then(|g| self.groups.get(g))
            })
            .map(group_ref))
    }

    async fn node_price(
        &self,
        node: &NodeRef,
        start: SystemTime,
        end: SystemTime,
    ) -> Result<f64, ProviderError> {
        let group =
            self.node_group_for_node(node)
                .await?
                .ok_or_else(|| ProviderError::NotFound {
                    what: format!("node {:?}", node.name),
                })?;
        let hours = end.duration_since(start).unwrap_or_default().as_secs_f64() / 3600.0;
        Ok(self.group(&group.id)?.spec.price_per_hour * hours)
    }

    async fn gpu_label(&self) -> Result<String, ProviderError> {
        Ok("nvidia.com/gpu.product".to_owned())
    }

    async fn target_size(&self, id: &str) -> Result<i32, ProviderError> {
        self.group(id)?;
        Ok(self.state.lock().await.target(id))
    }

    async fn increase_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        let group = self.group(id)?;
        let mut state = self.state.lock().await;
        if state.target(id) + delta > group.spec.max_size {
            return Err(Self::refuse(
                Limit::MaxSize,
                id,
                delta,
                group.spec.max_size - state.target(id),
                0,
            ));
        }
        let (headroom, limit) = state.headroom(group);
        let startable = delta.min(headroom);
        if startable > 0 {
            self.start(&mut state, group, startable).await?;
        }
        // Not atomic, like an ASG: what fits is started, the rest is reported.
        if startable < delta {
            Err(Self::refuse(limit, id, delta, headroom, 0))
        } else {
            Ok(())
        }
    }

    async fn delete_nodes(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ProviderError> {
        let group = self.group(id)?;
        let mut state = self.state.lock().await;
        let mut names = Vec::new();
        for node in nodes {
            let name = node
                .provider_id
                .strip_prefix("fake://")
                .unwrap_or(&node.name)
                .to_owned();
            if !state
                .groups
                .get(id)
                .is_some_and(|g| g.instances.contains_key(&name))
            {
                return Err(ProviderError::NotFound {
                    what: format!("node {name:?} in node group {id:?}"),
                });
            }
            names.push(name);
        }
        let remaining = state.target(id) - i32::try_from(names.len()).unwrap_or(i32::MAX);
        if remaining < group.spec.min_size {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "deleting {} nodes would take node group {id:?} below spec.minSize",
                    names.len()
                ),
            });
        }
        for name in &names {
            self.kube
                .delete_node(name)
                .await
                .map_err(kube_err("delete the Node", name))?;
        }
        state.remove_instances(id, &names);
        self.save(&state)
    }

    async fn decrease_target_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        self.group(id)?;
        let mut state = self.state.lock().await;
        let pending = state.group_mut(id).pending;
        if -delta > pending {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "node group {id:?} has {pending} unstarted instances, cannot drop {}",
                    -delta
                ),
            });
        }
        state.group_mut(id).pending += delta;
        self.save(&state)
    }

    async fn nodes(&self, id: &str) -> Result<Vec<Instance>, ProviderError> {
        self.group(id)?;
        let state = self.state.lock().await;
        Ok(state
            .groups
            .get(id)
            .into_iter()
            .flat_map(|g| g.instances.values())
            .map(|r| Instance {
                id: r.provider_id(),
                state: InstanceState::Running,
                error: None,
            })
            .collect())
    }

    async fn template_node(&self, id: &str) -> Result<TemplateNode, ProviderError> {
        Ok(Self::template_of(self.group(id)?))
    }

    async fn node_group_details(
        &self,
        ids: &[String],
    ) -> Result<Vec<NodeGroupDetails>, ProviderError> {
        let state = self.state.lock().await;
        let selected: Vec<&GroupConfig> = if ids.is_empty() {
            self.groups.values().collect()
        } else {
            ids.iter()
                .map(|id| self.group(id))
                .collect::<Result<_, _>>()?
        };
        Ok(selected
            .into_iter()
            .map(|group| {
                let in_use = state.groups.get(&group.name).map_or(0, |g| {
                    i32::try_from(
                        g.instances
                            .values()
                            .filter(|r| r.reservation_id.is_some())
                            .count(),
                    )
                    .unwrap_or(0)
                });
                NodeGroupDetails {
                    id: group.name.clone(),
                    template: Self::template_of(group),
                    capacity_type: capacity_type(&group.spec),
                    reservation: group.spec.reservation.as_ref().map(|r| ReservationStatus {
                        id: r.id.clone(),
                        total: r.total,
                        in_use,
                        end_time: r.end_time.as_ref().map(|t| {
                            UNIX_EPOCH
                                + Duration::from_secs(u64::try_from(t.0.as_second()).unwrap_or(0))
                        }),
                    }),
                    price_per_hour: group.spec.price_per_hour,
                    topology_domain: group
                        .spec
                        .topology_domain
                        .as_ref()
                        .map(|t| (t.key.clone(), t.value.clone())),
                    priority: group.spec.priority,
                }
            })
            .collect())
    }

    async fn atomic_increase_size(
        &self,
        request: &AtomicIncrease,
    ) -> Result<Vec<String>, ProviderError> {
        let group = self.group(&request.id)?;
        let mut state = self.state.lock().await;
        if !request.request_id.is_empty()
            && let Some(ids) = state
                .group_mut(&group.name)
                .requests
                .get(&request.request_id)
        {
            return Ok(ids.clone());
        }
        let (headroom, limit) = state.headroom(group);
        if let Some(partial) = group.faults.partial_fulfilment
            && partial < request.min_count
        {
            // The cloud starts some, then cannot reach minCount: roll back what started.
            let started = self.start(&mut state, group, partial.min(headroom)).await?;
            let names: Vec<String> = started.iter().map(|r| r.name.clone()).collect();
            self.roll_back(&mut state, &group.name, &names).await;
            let rolled_back = i32::try_from(names.len()).unwrap_or(0);
            return Err(Self::refuse(
                Limit::Capacity,
                &group.name,
                request.min_count,
                partial,
                rolled_back,
            ));
        }
        if headroom < request.min_count {
            return Err(Self::refuse(
                limit,
                &group.name,
                request.min_count,
                headroom,
                0,
            ));
        }
        let started = self
            .start(&mut state, group, request.count.min(headroom))
            .await?;
        let ids: Vec<String> = started.iter().map(InstanceRecord::provider_id).collect();
        if !request.request_id.is_empty() {
            state
                .group_mut(&group.name)
                .requests
                .insert(request.request_id.clone(), ids.clone());
            self.save(&state)?;
        }
        Ok(ids)
    }

    async fn instance_details(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError> {
        self.group(id)?;
        let state = self.state.lock().await;
        Ok(state
            .groups
            .get(id)
            .into_iter()
            .flat_map(|g| g.instances.values())
            .map(|r| InstanceDetails {
                id: r.provider_id(),
                node_name: r.name.clone(),
                state: InstanceState::Running,
                error: None,
                reservation_id: r.reservation_id.clone(),
                requested_at: u64::try_from(r.requested_at)
                    .ok()
                    .map(|s| UNIX_EPOCH + Duration::from_secs(s)),
            })
            .collect())
    }
}
