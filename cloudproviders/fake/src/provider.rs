//! [`FakeProvider`]: the fake cloud, its groups and the start/rollback of instances. The gRPC
//! calls themselves are in [`crate::calls`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dra_provider::{NodeGroupRef, ProviderError, TemplateNode, unknown_group};
use tokio::sync::Mutex;

use crate::cloud::{CloudState, InstanceRecord, Limit, StateError};
use crate::config::{Config, GroupConfig};
use crate::groups::{self, Resolved, Skipped};
use crate::kube_writer::{KubeWriter, Owner};
use crate::publisher::Publishers;

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
    pub(crate) config: Config,
    groups: RwLock<BTreeMap<String, Arc<GroupConfig>>>,
    /// The NodeGroups skipped at the last change, so each reason is logged once.
    skipped: std::sync::Mutex<Vec<Skipped>>,
    pub(crate) state: Mutex<CloudState>,
    state_file: Option<PathBuf>,
    pub(crate) kube: KubeWriter,
    write_failures: std::sync::Mutex<BTreeMap<String, u32>>,
    publishers: Publishers,
    watch_task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for FakeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeProvider")
            .field("groups", &self.group_ids())
            .finish_non_exhaustive()
    }
}

pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
}

pub(crate) fn kube_err(action: &str, name: &str) -> impl FnOnce(kube::Error) -> ProviderError {
    let message = format!("unable to {action} for instance {name}");
    move |err| ProviderError::Unavailable {
        message: format!("{message}: {err}"),
    }
}

impl FakeProvider {
    /// Builds the provider. Groups come from the file and from the NodeGroups in the API server
    /// (listed once now, then watched). State comes from `state_file` when it exists, else from
    /// the Nodes it owns in the API server; every recorded instance then gets its Node, Lease
    /// and slices back if they are missing (a kill between two writes is repaired here).
    ///
    /// # Errors
    /// [`StartError`].
    pub async fn new(
        config: Config,
        client: kube::Client,
        state_file: Option<PathBuf>,
    ) -> Result<Arc<Self>, StartError> {
        let kube = KubeWriter::new(client.clone());
        let listed = match groups::list_node_groups(&client).await {
            Ok(listed) => listed,
            Err(err) => {
                tracing::warn!(%err, "unable to list NodeGroups; serving the config file's groups until the watch succeeds");
                None
            }
        };
        if listed.is_none() {
            tracing::info!(
                "the API server does not serve NodeGroups (yet); serving the config file's groups"
            );
        }
        let provider = Arc::new(Self {
            config,
            groups: RwLock::new(BTreeMap::new()),
            skipped: std::sync::Mutex::new(Vec::new()),
            state: Mutex::new(CloudState::default()),
            state_file,
            kube,
            write_failures: std::sync::Mutex::new(BTreeMap::new()),
            publishers: Publishers::default(),
            watch_task: std::sync::Mutex::new(None),
        });
        provider.set_groups(&listed.unwrap_or_default());
        let state = match provider
            .state_file
            .as_deref()
            .map(CloudState::load)
            .transpose()?
            .flatten()
        {
            Some(state) => state,
            None => provider.derive_state().await.map_err(StartError::Kube)?,
        };
        *provider.state.lock().await = state;
        provider.restore().await.map_err(StartError::Kube)?;
        let weak = Arc::downgrade(&provider);
        let task = tokio::spawn(groups::watch_node_groups(client, move |objects| {
            if let Some(provider) = Weak::upgrade(&weak) {
                provider.set_groups(&objects);
            }
        }));
        *lock(&provider.watch_task) = Some(task);
        Ok(provider)
    }

    /// Recomputes the served groups from the file and `objects` (the NodeGroups in the API
    /// server), logging what changed.
    fn set_groups(&self, objects: &[serde_json::Value]) {
        let Resolved { groups, skipped } = groups::resolve(&self.config, objects);
        {
            let mut previous = lock(&self.skipped);
            for reason in skipped.iter().filter(|r| !previous.contains(r)) {
                tracing::warn!(reason = %reason, "NodeGroup not served");
            }
            *previous = skipped;
        }
        let mut current = self
            .groups
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (id, group) in &groups {
            if current.get(id).is_none_or(|old| **old != *group) {
                tracing::info!(
                    group = %id,
                    node_group = %group.node_group,
                    min = group.spec.min_size,
                    max = group.spec.max_size,
                    capacity_type = %group.spec.capacity_type,
                    "serving node group"
                );
            }
        }
        for id in current.keys().filter(|id| !groups.contains_key(*id)) {
            tracing::info!(group = %id, "node group no longer served");
        }
        *current = groups
            .into_iter()
            .map(|(id, group)| (id, Arc::new(group)))
            .collect();
    }

    /// The ids of the groups served now.
    #[must_use]
    pub fn group_ids(&self) -> Vec<String> {
        self.read_groups().keys().cloned().collect()
    }

    fn read_groups(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<GroupConfig>>> {
        self.groups
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every group served now.
    pub(crate) fn all_groups(&self) -> Vec<Arc<GroupConfig>> {
        self.read_groups().values().cloned().collect()
    }

    /// The group with id `id`.
    pub(crate) fn group(&self, id: &str) -> Result<Arc<GroupConfig>, ProviderError> {
        self.read_groups()
            .get(id)
            .cloned()
            .ok_or_else(|| unknown_group(id))
    }

    /// The group whose Nodes carry `node_group` in the node-group label.
    pub(crate) fn group_labelled(&self, node_group: &str) -> Option<Arc<GroupConfig>> {
        self.read_groups()
            .values()
            .find(|g| g.node_group == node_group)
            .cloned()
    }

    /// The state from the Nodes this provider owns (their annotation names the group id; on
    /// Nodes of earlier versions, the label names the NodeGroup, which maps to a group id, and
    /// an unknown label is kept as the id).
    async fn derive_state(&self) -> Result<CloudState, kube::Error> {
        let mut state = CloudState::default();
        for (owner, name) in self.kube.owned_nodes().await? {
            let id = match owner {
                Owner::GroupId(id) => id,
                Owner::NodeGroup(label) => self
                    .group_labelled(&label)
                    .map_or(label, |g| g.name.clone()),
            };
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
            state.group_mut(&id).instances.insert(name, record);
        }
        Ok(state)
    }

    async fn restore(self: &Arc<Self>) -> Result<(), kube::Error> {
        let state = self.state.lock().await.clone();
        for (group_name, group_state) in &state.groups {
            let Ok(group) = self.group(group_name) else {
                if !group_state.instances.is_empty() {
                    tracing::warn!(
                        group = group_name,
                        instances = group_state.instances.len(),
                        "state has instances of a group that is not served (yet); they are kept"
                    );
                }
                continue;
            };
            for name in group_state.instances.keys() {
                let uid = self.kube.create_node(&group, name).await?;
                self.kube
                    .publish_slices(&group, name, &uid, || true)
                    .await?;
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

    /// Plays the kubelet and the DRA driver of every instance ([`crate::kubelet`]): every
    /// `period`, pods bound to the instances' Nodes are reported Running, their terminating
    /// pods removed, and device binding conditions set.
    pub fn spawn_kubelet(
        self: &Arc<Self>,
        client: kube::Client,
        period: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let provider = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut kubelet = crate::kubelet::Kubelet::new(client);
            loop {
                tokio::time::sleep(period).await;
                let Some(provider) = Weak::upgrade(&provider) else {
                    return;
                };
                let owned: std::collections::BTreeSet<String> = {
                    let state = provider.state.lock().await;
                    state
                        .groups
                        .values()
                        .flat_map(|g| g.instances.keys().cloned())
                        .collect()
                };
                drop(provider);
                kubelet.sync(&owned).await;
            }
        })
    }

    pub(crate) fn save(&self, state: &CloudState) -> Result<(), ProviderError> {
        if let Some(path) = &self.state_file {
            state.save(path).map_err(|err| ProviderError::Internal {
                message: err.to_string(),
            })?;
        }
        Ok(())
    }

    fn injected_write_failure(&self, group: &GroupConfig) -> bool {
        let mut failures = lock(&self.write_failures);
        let left = failures
            .entry(group.name.clone())
            .or_insert(group.faults.fail_kubernetes_writes);
        if *left > 0 {
            *left -= 1;
            true
        } else {
            false
        }
    }

    /// Starts `count` instances: Nodes and Leases now, slices after the configured delay. On
    /// any failure everything started by this call is removed again.
    pub(crate) async fn start(
        &self,
        state: &mut CloudState,
        group: &GroupConfig,
        count: i32,
    ) -> Result<Vec<InstanceRecord>, ProviderError> {
        if group.faults.start_latency_ms > 0 {
            tokio::time::sleep(Duration::from_millis(group.faults.start_latency_ms)).await;
        }
        let records = state.add_instances(group, count, unix_now());
        for record in &records {
            let result = if self.injected_write_failure(group) {
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
                    tracing::info!(group = %group.name, node = %record.name, "started instance");
                    self.publishers.start(
                        self.kube.clone(),
                        group.clone(),
                        record.name.clone(),
                        uid,
                        Duration::from_millis(self.config.slice_delay_ms),
                    );
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

    /// Removes the instances `names` of group `group`: their slice publication first (so no
    /// slice can appear after the deletion), then slices, Lease and Node.
    pub(crate) async fn delete_instance(&self, name: &str) -> Result<(), kube::Error> {
        self.publishers.stop(name).await;
        self.kube.delete_node(name).await
    }

    pub(crate) async fn roll_back(&self, state: &mut CloudState, group: &str, names: &[String]) {
        for name in names {
            match self.delete_instance(name).await {
                Ok(()) => tracing::info!(group, node = name, "rolled back instance"),
                Err(err) => tracing::warn!(node = name, %err, "rollback could not delete the Node"),
            }
        }
        state.remove_instances(group, names);
        if let Err(err) = self.save(state) {
            tracing::warn!(%err, "rollback could not save state");
        }
    }

    pub(crate) fn refuse(
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

    pub(crate) fn template_of(group: &GroupConfig) -> TemplateNode {
        let name = format!("{}-template", group.name);
        let made = dra_api::new_node(&group.node_group, &group.spec, &name);
        TemplateNode {
            node: made.node,
            resource_slices: made.slices,
        }
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.watch_task).take() {
            task.abort();
        }
    }
}

pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn group_ref(group: &GroupConfig) -> NodeGroupRef {
    NodeGroupRef {
        id: group.name.clone(),
        min_size: group.spec.min_size,
        max_size: group.spec.max_size,
        debug: format!(
            "fake node group {} of NodeGroup {} ({})",
            group.name, group.node_group, group.spec.capacity_type
        ),
    }
}
