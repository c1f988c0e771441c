//! [`AwsProvider`]: the [`CloudProvider`] of Auto Scaling groups.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use dra_api::NODE_GROUP_LABEL;
use dra_provider::{
    AtomicIncrease, AutoscalingOptions, CloudProvider, GroupCatalog, Instance, InstanceDetails,
    InstanceError, InstanceState, NodeGroupDetails, NodeGroupRef, NodeRef, ProviderError,
    ReservationStatus, TemplateNode, gpu, group_options,
};
use tokio::sync::Mutex;

use crate::aws::{Aws, instance_id, provider_id};
use crate::config::Config;
use crate::errors::UnavailableOfferings;
use crate::groups::Group;
use crate::instance_types::InstanceTypes;
use crate::launch::{self, Pending};

/// The label cluster-autoscaler's AWS provider reports as its GPU label.
pub const GPU_LABEL: &str = "k8s.amazonaws.com/accelerator";

/// Groups as last read from AWS.
pub(crate) type Groups = GroupCatalog<Group>;

/// Shared state of the provider (also used by background attach tasks).
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) aws: Aws,
    pub(crate) config: Config,
    pub(crate) types: InstanceTypes,
    pub(crate) ice: UnavailableOfferings,
    pub(crate) groups: Mutex<Groups>,
    /// Answers to atomic requests by request id.
    pub(crate) requests: Mutex<BTreeMap<String, Vec<String>>>,
    /// Launched instances waiting to be attached, by group.
    pub(crate) pending: Mutex<BTreeMap<String, Vec<Pending>>>,
    /// Launches that failed after starting (attach failures), by group.
    pub(crate) failed: Mutex<BTreeMap<String, Vec<InstanceDetails>>>,
    /// One scale-up or scale-down at a time: sizes are read, checked and written together.
    pub(crate) scaling: Mutex<()>,
    /// How often (ms) a launched instance is checked for `running` before attaching it.
    pub(crate) attach_poll_ms: AtomicU64,
}

/// The AWS provider.
#[derive(Debug, Clone)]
pub struct AwsProvider {
    pub(crate) inner: Arc<Inner>,
}

impl AwsProvider {
    /// A provider over `aws` configured by `config`. Nothing is read until the first call.
    #[must_use]
    pub fn new(aws: Aws, config: Config) -> Self {
        Self {
            inner: Arc::new(Inner {
                types: InstanceTypes::new(Duration::from_secs(config.instance_type_ttl_seconds)),
                ice: UnavailableOfferings::new(Duration::from_secs(config.ice_ttl_seconds)),
                aws,
                config,
                groups: Mutex::new(Groups::default()),
                requests: Mutex::new(BTreeMap::new()),
                pending: Mutex::new(BTreeMap::new()),
                failed: Mutex::new(BTreeMap::new()),
                scaling: Mutex::new(()),
                attach_poll_ms: AtomicU64::new(2000),
            }),
        }
    }

    /// Changes how often launched instances are polled before attaching (tests use a short one).
    #[must_use]
    pub fn with_attach_poll(self, poll: Duration) -> Self {
        self.inner.attach_poll_ms.store(
            u64::try_from(poll.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self
    }

    /// The groups that could not be used and why (for logs and the CLI).
    pub async fn unusable_groups(&self) -> Result<BTreeMap<String, String>, ProviderError> {
        self.inner.ensure_groups(false).await?;
        Ok(self.inner.groups.lock().await.bad.clone())
    }

    /// The `NodeGroup` specs of all usable groups, by ASG name (what `print-nodegroups` shows).
    ///
    /// # Errors
    /// AWS errors while reading the groups.
    pub async fn specs(&self) -> Result<BTreeMap<String, dra_api::NodeGroupSpec>, ProviderError> {
        self.inner.ensure_groups(false).await?;
        Ok(self
            .inner
            .groups
            .lock()
            .await
            .good
            .iter()
            .map(|(k, g)| (k.clone(), g.spec.clone()))
            .collect())
    }

    /// Launched instances not attached yet, over all groups.
    pub async fn pending_attach(&self) -> usize {
        self.inner.pending.lock().await.values().map(Vec::len).sum()
    }
}

impl Inner {
    /// Reads groups again when forced or older than `refreshSeconds`.
    pub(crate) async fn ensure_groups(&self, force: bool) -> Result<(), ProviderError> {
        let mut groups = self.groups.lock().await;
        if groups.is_fresh(Duration::from_secs(self.config.refresh_seconds)) && !force {
            return Ok(());
        }
        *groups = crate::discovery::read_groups(self).await?;
        for (name, reason) in &groups.bad {
            tracing::warn!(group = name, reason, "Auto Scaling group is not usable");
        }
        Ok(())
    }

    pub(crate) async fn group(&self, id: &str) -> Result<Group, ProviderError> {
        self.ensure_groups(false).await?;
        self.groups.lock().await.get(id).cloned()
    }

    pub(crate) fn attach_poll(&self) -> Duration {
        Duration::from_millis(self.attach_poll_ms.load(Ordering::Relaxed))
    }

    pub(crate) async fn pending_of(&self, id: &str) -> Vec<Pending> {
        self.pending
            .lock()
            .await
            .get(id)
            .cloned()
            .unwrap_or_default()
    }
}

fn group_ref(group: &Group) -> NodeGroupRef {
    NodeGroupRef {
        id: group.asg.name.clone(),
        min_size: group.spec.min_size,
        max_size: group.spec.max_size,
        debug: format!(
            "aws Auto Scaling group {} ({}, {})",
            group.asg.name, group.instance_type, group.spec.capacity_type
        ),
    }
}

fn lifecycle_state(state: &str) -> InstanceState {
    if state.starts_with("Pending") || state.starts_with("Warmed") {
        InstanceState::Creating
    } else if state.starts_with("Terminat") || state.starts_with("Detach") {
        InstanceState::Deleting
    } else if state.is_empty() {
        InstanceState::Unspecified
    } else {
        InstanceState::Running
    }
}

/// The template Node and slices of a group, built by the one shared builder.
#[must_use]
pub fn template_of(group: &Group) -> TemplateNode {
    let node = dra_api::new_node(
        &group.asg.name,
        &group.spec,
        &format!("template-node-for-{}", group.asg.name),
    );
    TemplateNode {
        node: node.node,
        resource_slices: node.slices,
    }
}

impl AwsProvider {
    async fn details(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError> {
        let group = self.inner.group(id).await?;
        let reservation = group.reservation.as_ref().map(|r| r.id.clone());
        let mut out: Vec<InstanceDetails> = group
            .asg
            .instances
            .iter()
            .map(|i| InstanceDetails {
                id: provider_id(&i.zone, &i.id),
                node_name: String::new(),
                state: lifecycle_state(&i.lifecycle),
                error: None,
                reservation_id: reservation.clone(),
                requested_at: None,
            })
            .collect();
        let pending = self.inner.pending_of(id).await;
        out.extend(pending.iter().map(|p| InstanceDetails {
            id: provider_id(&p.zone, &p.id),
            node_name: String::new(),
            state: InstanceState::Creating,
            error: None,
            reservation_id: reservation.clone(),
            requested_at: Some(p.requested_at),
        }));
        // Desired but not (yet) started by the ASG: placeholders, as cluster-autoscaler shows
        // them, so the controller can count and time them out.
        let missing = usize::try_from(group.asg.desired)
            .unwrap_or(0)
            .saturating_sub(group.asg.instances.len());
        out.extend((0..missing).map(|n| InstanceDetails {
            id: format!("aws:///placeholder/{}-{n}", group.asg.name),
            node_name: String::new(),
            state: InstanceState::Creating,
            error: None,
            reservation_id: None,
            requested_at: None,
        }));
        out.extend(
            self.inner
                .failed
                .lock()
                .await
                .get(id)
                .cloned()
                .unwrap_or_default(),
        );
        Ok(out)
    }
}

#[tonic::async_trait]
impl CloudProvider for AwsProvider {
    async fn node_groups(&self) -> Result<Vec<NodeGroupRef>, ProviderError> {
        self.inner.ensure_groups(false).await?;
        Ok(self
            .inner
            .groups
            .lock()
            .await
            .good
            .values()
            .map(group_ref)
            .collect())
    }

    async fn node_group_for_node(
        &self,
        node: &NodeRef,
    ) -> Result<Option<NodeGroupRef>, ProviderError> {
        self.inner.ensure_groups(false).await?;
        let id = instance_id(&node.provider_id).map(ToOwned::to_owned);
        let pending = self.inner.pending.lock().await.clone();
        let groups = self.inner.groups.lock().await;
        let by_instance = id.as_deref().and_then(|id| {
            groups.good.values().find(|g| {
                g.asg.instances.iter().any(|i| i.id == id)
                    || pending
                        .get(&g.asg.name)
                        .is_some_and(|p| p.iter().any(|p| p.id == id))
            })
        });
        Ok(by_instance
            .or_else(|| {
                node.labels
                    .get(NODE_GROUP_LABEL)
                    .and_then(|g| groups.good.get(g))
            })
            .map(group_ref))
    }

    /// The label cluster-autoscaler's own provider for this cloud reports, unless a group
    /// with DRA-only GPUs carries it (`dra_provider::gpu` says why).
    async fn gpu_label(&self) -> Result<String, ProviderError> {
        self.inner.ensure_groups(false).await?;
        let groups = self.inner.groups.lock().await;
        Ok(gpu::gpu_label(
            GPU_LABEL,
            groups.good.values().map(|g| &g.spec.template),
        ))
    }

    /// The values the groups' templates give the GPU label.
    async fn available_gpu_types(&self) -> Result<Vec<String>, ProviderError> {
        let label = self.gpu_label().await?;
        let groups = self.inner.groups.lock().await;
        Ok(gpu::gpu_types(
            &label,
            groups.good.values().map(|g| &g.spec.template),
        ))
    }

    async fn refresh(&self) -> Result<(), ProviderError> {
        self.inner.ensure_groups(false).await
    }

    async fn target_size(&self, id: &str) -> Result<i32, ProviderError> {
        let group = self.inner.group(id).await?;
        let pending = i32::try_from(self.inner.pending_of(id).await.len()).unwrap_or(0);
        Ok(group.asg.desired + pending)
    }

    async fn increase_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        if delta <= 0 {
            return Err(ProviderError::InvalidArgument {
                message: format!("increase of node group {id:?} needs delta > 0, got {delta}"),
            });
        }
        let _scaling = self.inner.scaling.lock().await;
        self.inner.ensure_groups(true).await?;
        let group = self.inner.group(id).await?;
        let pending = i32::try_from(self.inner.pending_of(id).await.len()).unwrap_or(0);
        let target = group.asg.desired + pending + delta;
        if target > group.spec.max_size {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "node group {id:?}: size {target} would exceed maxSize {}",
                    group.spec.max_size
                ),
            });
        }
        tracing::info!(
            group = id,
            desired = group.asg.desired + delta,
            "SetDesiredCapacity"
        );
        self.inner
            .aws
            .set_desired(id, group.asg.desired + delta)
            .await?;
        self.inner.groups.lock().await.read_at = None;
        Ok(())
    }

    async fn delete_nodes(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ProviderError> {
        let _scaling = self.inner.scaling.lock().await;
        self.inner.ensure_groups(true).await?;
        let group = self.inner.group(id).await?;
        let mut victims = Vec::new();
        for node in nodes {
            let instance = instance_id(&node.provider_id)
                .filter(|i| group.asg.instances.iter().any(|m| m.id == *i))
                .ok_or_else(|| ProviderError::NotFound {
                    what: format!(
                        "node {:?} (providerID {:?}) in node group {id:?}",
                        node.name, node.provider_id
                    ),
                })?;
            victims.push(instance.to_owned());
        }
        let remaining = group.asg.desired - i32::try_from(victims.len()).unwrap_or(i32::MAX);
        if remaining < group.spec.min_size {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "deleting {} nodes would take node group {id:?} below minSize {}",
                    victims.len(),
                    group.spec.min_size
                ),
            });
        }
        for instance in &victims {
            tracing::info!(group = id, instance, "TerminateInstanceInAutoScalingGroup");
            self.inner.aws.terminate_in_group(instance).await?;
        }
        self.inner.groups.lock().await.read_at = None;
        Ok(())
    }

    async fn decrease_target_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        if delta >= 0 {
            return Err(ProviderError::InvalidArgument {
                message: format!("decrease of node group {id:?} needs delta < 0, got {delta}"),
            });
        }
        let _scaling = self.inner.scaling.lock().await;
        self.inner.ensure_groups(true).await?;
        let group = self.inner.group(id).await?;
        let target = group.asg.desired + delta;
        let existing = i32::try_from(group.asg.instances.len()).unwrap_or(i32::MAX);
        // As cluster-autoscaler: only machines that were never started can be dropped.
        if target < existing {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "node group {id:?} has {existing} instances; its target cannot go to {target}"
                ),
            });
        }
        self.inner.aws.set_desired(id, target).await?;
        self.inner.groups.lock().await.read_at = None;
        Ok(())
    }

    async fn nodes(&self, id: &str) -> Result<Vec<Instance>, ProviderError> {
        Ok(self
            .details(id)
            .await?
            .into_iter()
            .map(Instance::from)
            .collect())
    }

    async fn template_node(&self, id: &str) -> Result<TemplateNode, ProviderError> {
        Ok(template_of(&self.inner.group(id).await?))
    }

    /// From the group's `scaleDown` setting (`dra_provider::group_options`).
    async fn options(
        &self,
        id: &str,
        defaults: &AutoscalingOptions,
    ) -> Result<Option<AutoscalingOptions>, ProviderError> {
        let group = self.inner.group(id).await?;
        group_options::options_for(id, &group.spec, defaults)
    }

    async fn node_group_details(
        &self,
        ids: &[String],
    ) -> Result<Vec<NodeGroupDetails>, ProviderError> {
        self.inner.ensure_groups(false).await?;
        let groups = self.inner.groups.lock().await;
        let selected = groups.select(ids)?;
        Ok(selected
            .into_iter()
            .map(|g| {
                let reservation = g.reservation.as_ref().map(|r| ReservationStatus {
                    id: r.id.clone(),
                    total: r.total,
                    in_use: r.total - r.available,
                    end_time: r.end,
                });
                NodeGroupDetails::from_spec(
                    g.asg.name.clone(),
                    &g.spec,
                    template_of(g),
                    reservation,
                )
            })
            .collect())
    }

    async fn atomic_increase_size(
        &self,
        request: &AtomicIncrease,
    ) -> Result<Vec<String>, ProviderError> {
        launch::atomic_increase(&self.inner, request).await
    }

    async fn instance_details(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError> {
        self.details(id).await
    }
}

/// A failed instance as the extension reports it.
#[must_use]
pub(crate) fn failed_instance(
    id: String,
    code: &str,
    message: String,
    at: SystemTime,
) -> InstanceDetails {
    InstanceDetails {
        id,
        node_name: String::new(),
        state: InstanceState::Deleting,
        error: Some(InstanceError {
            class: crate::errors::error_class(code),
            code: code.to_owned(),
            message,
        }),
        reservation_id: None,
        requested_at: Some(at),
    }
}
