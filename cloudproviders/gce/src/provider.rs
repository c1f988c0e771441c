//! [`GceProvider`]: managed instance groups as a [`Cloud`], and so a `dra_provider::CloudProvider`.

use std::collections::BTreeMap;
use std::sync::Arc;

use dra_api::NODE_GROUP_LABEL;
use dra_provider::skeleton::{Cloud, ServedGroup, atomic_increase_with, sizes};
use dra_provider::{
    AtomicIncrease, InstanceDetails, InstanceError, InstanceState, NodeGroupDetails, NodeGroupRef,
    NodeRef, ProviderError, ReservationStatus, TemplateNode,
};
use tokio::sync::MutexGuard;

use crate::api::{Gce, ManagedInstanceInfo};
use crate::config::Config;
use crate::errors::error_class;
use crate::groups::Group;
use crate::names::new_request_id;
use crate::state::{Groups, Inner};
pub use crate::state::{LOCATION_LABEL, MIG_LABEL, REQUEST_LABEL, parse_provider_id, provider_id};

/// The label cluster-autoscaler's GCE provider reports as its GPU label.
pub const GPU_LABEL: &str = "cloud.google.com/gke-accelerator";

/// The GCE provider.
#[derive(Debug, Clone)]
pub struct GceProvider {
    pub(crate) inner: Arc<Inner>,
}

impl GceProvider {
    /// A provider over `gce` configured by `config`. Nothing is read until the first call.
    #[must_use]
    pub fn new(gce: Gce, config: Config) -> Self {
        Self {
            inner: Arc::new(Inner::new(gce, config)),
        }
    }

    /// The groups that could not be used and why (for logs and the CLI).
    ///
    /// # Errors
    /// Compute Engine errors while reading the groups.
    pub async fn unusable_groups(&self) -> Result<BTreeMap<String, String>, ProviderError> {
        Ok(self.inner.catalog(false).await?.bad.clone())
    }

    /// The `NodeGroup` specs of all usable groups by id (what `print-nodegroups` shows).
    ///
    /// # Errors
    /// Compute Engine errors while reading the groups.
    pub async fn specs(&self) -> Result<BTreeMap<String, dra_api::NodeGroupSpec>, ProviderError> {
        Ok(self.inner.catalog(false).await?.specs())
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

impl ServedGroup for Group {
    fn node_group_ref(&self) -> NodeGroupRef {
        NodeGroupRef {
            id: self.id.clone(),
            min_size: self.spec.min_size,
            max_size: self.spec.max_size,
            debug: format!(
                "gce managed instance group {} ({}, {}, {})",
                self.id, self.machine_type, self.spec.capacity_type, self.provisioning_model
            ),
        }
    }

    fn spec(&self) -> &dra_api::NodeGroupSpec {
        &self.spec
    }

    fn template(&self) -> TemplateNode {
        template_of(self)
    }

    fn details(&self) -> NodeGroupDetails {
        let reservation = self.reservation.as_ref().map(|r| ReservationStatus {
            id: r.name.clone(),
            total: i32::try_from(r.total).unwrap_or(i32::MAX),
            in_use: i32::try_from(r.in_use).unwrap_or(i32::MAX),
            end_time: r.end,
        });
        NodeGroupDetails::from_spec(self.id.clone(), &self.spec, template_of(self), reservation)
    }
}

#[tonic::async_trait]
impl Cloud for GceProvider {
    type Group = Group;

    const GPU_LABEL: &'static str = GPU_LABEL;

    async fn groups(&self, force: bool) -> Result<MutexGuard<'_, Groups>, ProviderError> {
        self.inner.catalog(force).await
    }

    async fn node_group_of(&self, node: &NodeRef) -> Result<Option<NodeGroupRef>, ProviderError> {
        let groups = self.inner.catalog(false).await?;
        // The label holds the NodeGroup object's name: the id, or its `object_name`.
        if let Some(label) = node.labels.get(NODE_GROUP_LABEL)
            && let Some(g) = groups
                .good
                .values()
                .find(|g| &g.id == label || &crate::groups::object_name(&g.id) == label)
        {
            return Ok(Some(g.node_group_ref()));
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
            .map(ServedGroup::node_group_ref))
    }

    async fn target(&self, id: &str) -> Result<i32, ProviderError> {
        let group = self.inner.group(id).await?;
        Ok(self.inner.size(&group).await?.0)
    }

    async fn increase(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        sizes::check_increase(id, delta)?;
        let _scaling = self.inner.scaling.lock().await;
        let group = self.inner.group(id).await?;
        let (size, tracked) = self.inner.size(&group).await?;
        sizes::check_max_size(id, size + delta, group.spec.max_size)?;
        let target = size - i32::try_from(tracked.len()).unwrap_or(0) + delta;
        tracing::info!(group = id, target, "instanceGroupManagers.resize");
        self.inner
            .gce
            .resize(&group.scope, &group.mig.name, target, &new_request_id())
            .await
    }

    async fn remove_nodes(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ProviderError> {
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
        let mut gone = Vec::new();
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
                // Gone already (deleted before, or never started): nothing to delete, and
                // no reason to keep the others of the call.
                None => gone.push(node.provider_id.clone()),
            }
        }
        if urls.is_empty() && loose.is_empty() {
            return Err(ProviderError::NotFound {
                what: format!("nodes {gone:?} in node group {id:?}"),
            });
        }
        for node in &gone {
            tracing::info!(
                group = id,
                node,
                "node to delete is not in the group (gone already)"
            );
        }
        let removed = i32::try_from(urls.len() + loose.len()).unwrap_or(i32::MAX);
        sizes::check_min_size(
            id,
            urls.len() + loose.len(),
            size - removed,
            group.spec.min_size,
        )?;
        if !urls.is_empty() {
            tracing::info!(
                group = id,
                instances = urls.len(),
                "instanceGroupManagers.deleteInstances"
            );
            self.inner
                .gce
                .delete_managed(&group.scope, &group.mig.name, &urls, &new_request_id())
                .await?;
        }
        for (zone, name) in loose {
            tracing::info!(group = id, instance = name, "instances.delete");
            self.inner.gce.delete_instance(&zone, &name).await?;
        }
        Ok(())
    }

    async fn decrease_target(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        sizes::check_decrease(id, delta)?;
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
        sizes::check_started_kept(id, existing, "VMs", target)?;
        self.inner
            .gce
            .resize(&group.scope, &group.mig.name, target, &new_request_id())
            .await
    }

    async fn start_gang(&self, request: &AtomicIncrease) -> Result<Vec<String>, ProviderError> {
        let inner = &self.inner;
        atomic_increase_with(&inner.scaling, request, move || {
            crate::atomic::start(inner, request)
        })
        .await
    }

    async fn instances(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError> {
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
        let failed: Vec<InstanceDetails> = inner
            .failed
            .of(id)
            .await
            .into_iter()
            .filter(|f| !out.iter().any(|o| o.id == f.id))
            .collect();
        out.extend(failed);
        Ok(out)
    }
}
