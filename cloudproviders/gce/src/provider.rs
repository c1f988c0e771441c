//! [`GceProvider`]: the [`CloudProvider`] of managed instance groups.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use dra_api::NODE_GROUP_LABEL;
use dra_provider::{
    AtomicIncrease, AutoscalingOptions, CloudProvider, GroupCatalog, Instance, InstanceDetails,
    InstanceError, InstanceState, NodeGroupDetails, NodeGroupRef, NodeRef, ProviderError,
    ReservationStatus, TemplateNode, gpu, group_options,
};
use tokio::sync::Mutex;

use crate::api::{Gce, ManagedInstanceInfo, TrackedInstance};
use crate::config::Config;
use crate::errors::error_class;
use crate::groups::Group;

/// The label cluster-autoscaler's GCE provider reports as its GPU label.
pub const GPU_LABEL: &str = "cloud.google.com/gke-accelerator";
/// VM label naming the MIG a VM started outside the MIG (bulkInsert) belongs to.
pub const MIG_LABEL: &str = "dra-autoscaler-mig";
/// VM label naming that MIG's zone or region.
pub const LOCATION_LABEL: &str = "dra-autoscaler-location";
/// VM label naming the atomic request that started it.
pub const REQUEST_LABEL: &str = "dra-autoscaler-request";

/// Groups as last read.
pub(crate) type Groups = GroupCatalog<Group>;

/// Shared state of the provider (also used by the resize-request watchers).
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) gce: Gce,
    pub(crate) config: Config,
    pub(crate) groups: Mutex<Groups>,
    /// Answers to atomic requests by request id.
    pub(crate) requests: Mutex<BTreeMap<String, Vec<String>>>,
    /// Instances of failed scale-ups, reported with their error until the group is read anew
    /// after `failed_ttl`.
    pub(crate) failed: Mutex<BTreeMap<String, Vec<InstanceDetails>>>,
    /// Resize requests being watched: group id → request names.
    pub(crate) watching: Mutex<BTreeMap<String, Vec<String>>>,
    /// One scale-up or scale-down at a time: sizes are read, checked and written together.
    pub(crate) scaling: Mutex<()>,
}

/// The GCE provider.
#[derive(Debug, Clone)]
pub struct GceProvider {
    pub(crate) inner: Arc<Inner>,
}

/// `spec.providerID` of a GCE VM: `gce://<project>/<zone>/<name>`.
#[must_use]
pub fn provider_id(project: &str, zone: &str, name: &str) -> String {
    format!("gce://{project}/{zone}/{name}")
}

/// (project, zone, name) of a providerID.
#[must_use]
pub fn parse_provider_id(id: &str) -> Option<(&str, &str, &str)> {
    let rest = id.strip_prefix("gce://")?;
    let mut parts = rest.splitn(3, '/');
    Some((parts.next()?, parts.next()?, parts.next()?))
}

impl GceProvider {
    /// A provider over `gce` configured by `config`. Nothing is read until the first call.
    #[must_use]
    pub fn new(gce: Gce, config: Config) -> Self {
        Self {
            inner: Arc::new(Inner {
                gce,
                config,
                groups: Mutex::new(Groups::default()),
                requests: Mutex::new(BTreeMap::new()),
                failed: Mutex::new(BTreeMap::new()),
                watching: Mutex::new(BTreeMap::new()),
                scaling: Mutex::new(()),
            }),
        }
    }

    /// The groups that could not be used and why (for logs and the CLI).
    ///
    /// # Errors
    /// Compute Engine errors while reading the groups.
    pub async fn unusable_groups(&self) -> Result<BTreeMap<String, String>, ProviderError> {
        self.inner.ensure_groups(false).await?;
        Ok(self.inner.groups.lock().await.bad.clone())
    }

    /// The `NodeGroup` specs of all usable groups by id (what `print-nodegroups` shows).
    ///
    /// # Errors
    /// Compute Engine errors while reading the groups.
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

    /// Resize requests still being watched (queued), over all groups.
    pub async fn watched_requests(&self) -> usize {
        self.inner
            .watching
            .lock()
            .await
            .values()
            .map(Vec::len)
            .sum()
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
            tracing::warn!(group = name, reason, "managed instance group is not usable");
        }
        Ok(())
    }

    pub(crate) async fn group(&self, id: &str) -> Result<Group, ProviderError> {
        self.ensure_groups(false).await?;
        self.groups.lock().await.get(id).cloned()
    }

    /// The VMs the provider started for `group` outside its MIG.
    pub(crate) async fn tracked(
        &self,
        group: &Group,
    ) -> Result<Vec<TrackedInstance>, ProviderError> {
        let scope = group.scope.name().to_owned();
        Ok(self
            .gce
            .labelled_instances(MIG_LABEL, &group.mig.name)
            .await?
            .into_iter()
            .filter(|i| i.labels.get(LOCATION_LABEL) == Some(&scope))
            .filter(|i| !matches!(i.status.as_str(), "TERMINATED" | "STOPPING" | "SUSPENDED"))
            .collect())
    }

    /// Current size: the MIG's target plus the VMs started outside it.
    pub(crate) async fn size(
        &self,
        group: &Group,
    ) -> Result<(i32, Vec<TrackedInstance>), ProviderError> {
        let mig = self.gce.get_mig(&group.scope, &group.mig.name).await?;
        let tracked = self.tracked(group).await?;
        Ok((
            mig.target_size + i32::try_from(tracked.len()).unwrap_or(i32::MAX),
            tracked,
        ))
    }
}

fn group_ref(group: &Group) -> NodeGroupRef {
    NodeGroupRef {
        id: group.id.clone(),
        min_size: group.spec.min_size,
        max_size: group.spec.max_size,
        debug: format!(
            "gce managed instance group {} ({}, {}, {})",
            group.id, group.machine_type, group.spec.capacity_type, group.provisioning_model
        ),
    }
}

fn managed_state(m: &ManagedInstanceInfo) -> InstanceState {
    match m.current_action.as_str() {
        "CREATING" | "RECREATING" | "CREATING_WITHOUT_RETRIES" => InstanceState::Creating,
        "ABANDONING" | "DELETING" => InstanceState::Deleting,
        _ => InstanceState::Running,
    }
}

fn vm_state(status: &str) -> InstanceState {
    match status {
        "PROVISIONING" | "STAGING" | "PENDING" => InstanceState::Creating,
        "STOPPING" | "TERMINATED" | "SUSPENDING" | "SUSPENDED" | "DEPROVISIONING" => {
            InstanceState::Deleting
        }
        _ => InstanceState::Running,
    }
}

/// The error of a managed instance still being created, from its last attempt (as
/// cluster-autoscaler reports it): the first classified code wins.
fn managed_error(m: &ManagedInstanceInfo) -> Option<InstanceError> {
    if managed_state(m) != InstanceState::Creating || m.errors.is_empty() {
        return None;
    }
    let (code, _) = m
        .errors
        .iter()
        .find(|(c, _)| error_class(c) != dra_provider::ErrorClass::Other)
        .or_else(|| m.errors.first())?;
    Some(InstanceError {
        class: error_class(code),
        code: code.clone(),
        message: m
            .errors
            .iter()
            .map(|(_, msg)| msg.as_str())
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// The template Node and slices of a group, built by the one shared builder.
#[must_use]
pub fn template_of(group: &Group) -> TemplateNode {
    let node = dra_api::new_node(
        &group.id,
        &group.spec,
        &format!("template-node-for-{}", group.mig.name),
    );
    TemplateNode {
        node: node.node,
        resource_slices: node.slices,
    }
}

impl GceProvider {
    async fn details(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError> {
        let inner = &self.inner;
        let group = inner.group(id).await?;
        let project = &inner.gce.project;
        let reservation = group.reservation.as_ref().map(|r| r.name.clone());
        let managed = inner
            .gce
            .managed_instances(&group.scope, &group.mig.name)
            .await?;
        let mut out: Vec<InstanceDetails> = managed
            .iter()
            .map(|m| InstanceDetails {
                id: provider_id(project, &m.zone, &m.name),
                node_name: m.name.clone(),
                state: managed_state(m),
                error: managed_error(m),
                reservation_id: reservation.clone(),
                requested_at: None,
            })
            .collect();
        for t in inner.tracked(&group).await? {
            out.push(InstanceDetails {
                id: provider_id(project, &t.zone, &t.name),
                node_name: t.name.clone(),
                state: vm_state(&t.status),
                error: None,
                reservation_id: reservation.clone(),
                requested_at: t
                    .created
                    .as_deref()
                    .and_then(|c| c.parse::<jiff::Timestamp>().ok())
                    .map(std::time::SystemTime::from),
            });
        }
        let failed = inner
            .failed
            .lock()
            .await
            .get(id)
            .cloned()
            .unwrap_or_default();
        let failed: Vec<InstanceDetails> = failed
            .into_iter()
            .filter(|f| !out.iter().any(|o| o.id == f.id))
            .collect();
        out.extend(failed);
        Ok(out)
    }
}

#[tonic::async_trait]
impl CloudProvider for GceProvider {
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
        let groups = self.inner.groups.lock().await;
        // The label holds the NodeGroup object's name: the id, or its `object_name`.
        if let Some(label) = node.labels.get(NODE_GROUP_LABEL)
            && let Some(g) = groups
                .good
                .values()
                .find(|g| &g.id == label || &crate::groups::object_name(&g.id) == label)
        {
            return Ok(Some(group_ref(g)));
        }
        // A MIG names its VMs `<baseInstanceName>-<suffix>`; so does bulkInsert here.
        let Some((_, zone, name)) = parse_provider_id(&node.provider_id) else {
            return Ok(None);
        };
        Ok(groups
            .good
            .values()
            .find(|g| {
                g.mig.zones.iter().any(|z| z == zone)
                    && name
                        .strip_prefix(g.mig.base_instance_name.as_str())
                        .is_some_and(|rest| rest.starts_with('-'))
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
        Ok(self.inner.size(&group).await?.0)
    }

    async fn increase_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        if delta <= 0 {
            return Err(ProviderError::InvalidArgument {
                message: format!("increase of node group {id:?} needs delta > 0, got {delta}"),
            });
        }
        let _scaling = self.inner.scaling.lock().await;
        let group = self.inner.group(id).await?;
        let (size, tracked) = self.inner.size(&group).await?;
        if size + delta > group.spec.max_size {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "node group {id:?}: size {} would exceed maxSize {}",
                    size + delta,
                    group.spec.max_size
                ),
            });
        }
        let target = size - i32::try_from(tracked.len()).unwrap_or(0) + delta;
        tracing::info!(group = id, target, "instanceGroupManagers.resize");
        self.inner
            .gce
            .resize(
                &group.scope,
                &group.mig.name,
                target,
                &crate::atomic::new_request_id(),
            )
            .await
    }

    async fn delete_nodes(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ProviderError> {
        let _scaling = self.inner.scaling.lock().await;
        let group = self.inner.group(id).await?;
        let (size, tracked) = self.inner.size(&group).await?;
        let managed = self
            .inner
            .gce
            .managed_instances(&group.scope, &group.mig.name)
            .await?;
        let mut urls = Vec::new();
        let mut loose = Vec::new();
        for node in nodes {
            let found = parse_provider_id(&node.provider_id).and_then(|(_, zone, name)| {
                if managed.iter().any(|m| m.name == name && m.zone == zone) {
                    Some((true, zone, name))
                } else if tracked.iter().any(|t| t.name == name && t.zone == zone) {
                    Some((false, zone, name))
                } else {
                    None
                }
            });
            match found {
                Some((true, zone, name)) => urls.push(format!(
                    "projects/{}/zones/{zone}/instances/{name}",
                    self.inner.gce.project
                )),
                Some((false, zone, name)) => loose.push((zone.to_owned(), name.to_owned())),
                None => {
                    return Err(ProviderError::NotFound {
                        what: format!(
                            "node {:?} (providerID {:?}) in node group {id:?}",
                            node.name, node.provider_id
                        ),
                    });
                }
            }
        }
        let removed = i32::try_from(urls.len() + loose.len()).unwrap_or(i32::MAX);
        if size - removed < group.spec.min_size {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "deleting {removed} nodes would take node group {id:?} below minSize {}",
                    group.spec.min_size
                ),
            });
        }
        if !urls.is_empty() {
            tracing::info!(
                group = id,
                instances = urls.len(),
                "instanceGroupManagers.deleteInstances"
            );
            self.inner
                .gce
                .delete_managed(
                    &group.scope,
                    &group.mig.name,
                    &urls,
                    &crate::atomic::new_request_id(),
                )
                .await?;
        }
        for (zone, name) in loose {
            tracing::info!(group = id, instance = name, "instances.delete");
            self.inner.gce.delete_instance(&zone, &name).await?;
        }
        Ok(())
    }

    async fn decrease_target_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        if delta >= 0 {
            return Err(ProviderError::InvalidArgument {
                message: format!("decrease of node group {id:?} needs delta < 0, got {delta}"),
            });
        }
        let _scaling = self.inner.scaling.lock().await;
        let group = self.inner.group(id).await?;
        let mig = self
            .inner
            .gce
            .get_mig(&group.scope, &group.mig.name)
            .await?;
        let managed = self
            .inner
            .gce
            .managed_instances(&group.scope, &group.mig.name)
            .await?;
        // As cluster-autoscaler: only machines that have no VM yet can be dropped.
        let existing = i32::try_from(managed.iter().filter(|m| !m.status.is_empty()).count())
            .unwrap_or(i32::MAX);
        let target = mig.target_size + delta;
        if target < existing {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "node group {id:?} has {existing} VMs; its target cannot go to {target}"
                ),
            });
        }
        self.inner
            .gce
            .resize(
                &group.scope,
                &group.mig.name,
                target,
                &crate::atomic::new_request_id(),
            )
            .await
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
                    id: r.name.clone(),
                    total: i32::try_from(r.total).unwrap_or(i32::MAX),
                    in_use: i32::try_from(r.in_use).unwrap_or(i32::MAX),
                    end_time: r.end,
                });
                NodeGroupDetails::from_spec(g.id.clone(), &g.spec, template_of(g), reservation)
            })
            .collect())
    }

    async fn atomic_increase_size(
        &self,
        request: &AtomicIncrease,
    ) -> Result<Vec<String>, ProviderError> {
        crate::atomic::atomic_increase(&self.inner, request).await
    }

    async fn instance_details(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError> {
        self.details(id).await
    }
}
