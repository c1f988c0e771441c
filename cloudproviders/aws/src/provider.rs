//! [`AwsProvider`]: Auto Scaling groups as a [`Cloud`], and so a `dra_provider::CloudProvider`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dra_api::NODE_GROUP_LABEL;
use dra_provider::skeleton::{Cloud, ServedGroup, atomic_increase_with, sizes};
use dra_provider::{
    AtomicIncrease, InstanceDetails, InstanceState, NodeGroupDetails, NodeGroupRef, NodeRef,
    ProviderError, ReservationStatus, TemplateNode,
};
use tokio::sync::MutexGuard;

use crate::aws::{Aws, instance_id, provider_id};
use crate::config::Config;
use crate::groups::Group;
use crate::launch;
use crate::state::{Groups, Inner, Pending};

/// The label cluster-autoscaler's AWS provider reports as its GPU label.
pub const GPU_LABEL: &str = "k8s.amazonaws.com/accelerator";

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
            inner: Arc::new(Inner::new(aws, config)),
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
    ///
    /// # Errors
    /// AWS errors while reading the groups.
    pub async fn unusable_groups(&self) -> Result<BTreeMap<String, String>, ProviderError> {
        Ok(self.inner.catalog(false).await?.bad.clone())
    }

    /// The `NodeGroup` specs of all usable groups, by ASG name (what `print-nodegroups` shows).
    ///
    /// # Errors
    /// AWS errors while reading the groups.
    pub async fn specs(&self) -> Result<BTreeMap<String, dra_api::NodeGroupSpec>, ProviderError> {
        Ok(self.inner.catalog(false).await?.specs())
    }

    /// Launched instances not attached yet, over all groups.
    pub async fn pending_attach(&self) -> usize {
        self.inner.pending.lock().await.values().map(Vec::len).sum()
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

impl ServedGroup for Group {
    fn node_group_ref(&self) -> NodeGroupRef {
        NodeGroupRef {
            id: self.asg.name.clone(),
            min_size: self.spec.min_size,
            max_size: self.spec.max_size,
            debug: format!(
                "aws Auto Scaling group {} ({}, {})",
                self.asg.name, self.instance_type, self.spec.capacity_type
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
            id: r.id.clone(),
            total: r.total,
            in_use: r.total - r.available,
            end_time: r.end,
        });
        NodeGroupDetails::from_spec(
            self.asg.name.clone(),
            &self.spec,
            template_of(self),
            reservation,
        )
    }
}

#[tonic::async_trait]
impl Cloud for AwsProvider {
    type Group = Group;

    const GPU_LABEL: &'static str = GPU_LABEL;

    async fn groups(&self, force: bool) -> Result<MutexGuard<'_, Groups>, ProviderError> {
        self.inner.catalog(force).await
    }

    async fn node_group_of(&self, node: &NodeRef) -> Result<Option<NodeGroupRef>, ProviderError> {
        self.inner.ensure_groups(false).await?;
        let id = instance_id(&node.provider_id).map(ToOwned::to_owned);
        let pending = self.inner.pending.lock().await.clone();
        let groups = self.inner.groups.current().await;
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
            .map(ServedGroup::node_group_ref))
    }

    async fn target(&self, id: &str) -> Result<i32, ProviderError> {
        let group = self.inner.group(id).await?;
        Ok(self.inner.target(&group).await)
    }

    async fn increase(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        sizes::check_increase(id, delta)?;
        let _scaling = self.inner.scaling.lock().await;
        self.inner.ensure_groups(true).await?;
        let group = self.inner.group(id).await?;
        let target = self.inner.target(&group).await + delta;
        sizes::check_max_size(id, target, group.spec.max_size)?;
        tracing::info!(
            group = id,
            desired = group.asg.desired + delta,
            "SetDesiredCapacity"
        );
        self.inner
            .aws
            .set_desired(id, group.asg.desired + delta)
            .await?;
        self.inner.groups.invalidate().await;
        Ok(())
    }

    async fn remove_nodes(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ProviderError> {
        let _scaling = self.inner.scaling.lock().await;
        self.inner.ensure_groups(true).await?;
        let group = self.inner.group(id).await?;
        let pending = self.inner.pending_of(id).await;
        let victims = victims(&group, &pending, nodes);
        if victims.is_empty() {
            return Err(ProviderError::NotFound {
                what: format!(
                    "nodes {:?} in node group {id:?}",
                    nodes.iter().map(|n| &n.provider_id).collect::<Vec<_>>()
                ),
            });
        }
        for gone in &victims.gone {
            tracing::info!(
                group = id,
                node = gone,
                "node to delete is not in the group (gone already)"
            );
        }
        let count = victims.attached.len() + victims.pending.len() + victims.placeholders;
        let target = group.asg.desired + i32::try_from(pending.len()).unwrap_or(i32::MAX);
        let remaining = target - i32::try_from(count).unwrap_or(i32::MAX);
        sizes::check_min_size(id, count, remaining, group.spec.min_size)?;
        for instance in &victims.attached {
            tracing::info!(group = id, instance, "TerminateInstanceInAutoScalingGroup");
            self.inner.aws.terminate_in_group(instance).await?;
        }
        if !victims.pending.is_empty() {
            // Launched for a gang and not attached yet: they are not in the group's desired
            // capacity, so they only need terminating (the attach task lets them go).
            tracing::info!(group = id, instances = ?victims.pending, "TerminateInstances (launched, not attached)");
            self.inner.aws.terminate(&victims.pending).await?;
            if let Some(list) = self.inner.pending.lock().await.get_mut(id) {
                list.retain(|p| !victims.pending.contains(&p.id));
            }
        }
        if victims.placeholders > 0 {
            // Desired but never started by the group: only the desired capacity drops.
            let desired = group.asg.desired - i32::try_from(victims.placeholders).unwrap_or(0);
            tracing::info!(
                group = id,
                desired,
                "SetDesiredCapacity (never-started placeholders)"
            );
            self.inner.aws.set_desired(id, desired).await?;
        }
        self.inner
            .failed
            .forget(id, nodes.iter().map(|n| n.provider_id.as_str()))
            .await;
        self.inner.groups.invalidate().await;
        Ok(())
    }

    async fn decrease_target(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        sizes::check_decrease(id, delta)?;
        let _scaling = self.inner.scaling.lock().await;
        self.inner.ensure_groups(true).await?;
        let group = self.inner.group(id).await?;
        let target = group.asg.desired + delta;
        let existing = i32::try_from(group.asg.instances.len()).unwrap_or(i32::MAX);
        sizes::check_started_kept(id, existing, "instances", target)?;
        self.inner.aws.set_desired(id, target).await?;
        self.inner.groups.invalidate().await;
        Ok(())
    }

    async fn start_gang(&self, request: &AtomicIncrease) -> Result<Vec<String>, ProviderError> {
        let inner = &self.inner;
        atomic_increase_with(&inner.scaling, request, move || {
            launch::launch(inner, request)
        })
        .await
    }

    async fn instances(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError> {
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
            id: placeholder_id(&group.asg.name, n),
            node_name: String::new(),
            state: InstanceState::Creating,
            error: None,
            reservation_id: None,
            requested_at: None,
        }));
        out.extend(self.inner.failed.of(id).await);
        Ok(out)
    }
}

/// What `DeleteNodes` of a group is asked to remove, sorted by how.
#[derive(Debug, Default, PartialEq, Eq)]
struct Victims {
    /// Instances of the Auto Scaling group (terminated with the desired capacity).
    attached: Vec<String>,
    /// Instances launched for a gang and not attached yet.
    pending: Vec<String>,
    /// Placeholders of desired capacity the group never started (`aws:///placeholder/…`).
    placeholders: usize,
    /// Named nodes the group does not have (any more).
    gone: Vec<String>,
}

impl Victims {
    fn is_empty(&self) -> bool {
        self.attached.is_empty() && self.pending.is_empty() && self.placeholders == 0
    }
}

/// Sorts `nodes` (named by providerID, as the controller names machines that never
/// registered, or by their Node) into [`Victims`].
fn victims(group: &Group, pending: &[Pending], nodes: &[NodeRef]) -> Victims {
    let mut out = Victims::default();
    let placeholders_left = usize::try_from(group.asg.desired)
        .unwrap_or(0)
        .saturating_sub(group.asg.instances.len());
    for node in nodes {
        if is_placeholder(&node.provider_id, &group.asg.name) {
            if out.placeholders < placeholders_left {
                out.placeholders += 1;
            } else {
                out.gone.push(node.provider_id.clone());
            }
            continue;
        }
        match instance_id(&node.provider_id) {
            Some(i) if group.asg.instances.iter().any(|m| m.id == i) => {
                out.attached.push(i.to_owned());
            }
            Some(i) if pending.iter().any(|p| p.id == i) => out.pending.push(i.to_owned()),
            _ => out.gone.push(if node.provider_id.is_empty() {
                node.name.clone()
            } else {
                node.provider_id.clone()
            }),
        }
    }
    out
}

/// The id `NodeGroupNodes` gives the `n`th never-started machine of group `asg`.
fn placeholder_id(asg: &str, n: usize) -> String {
    format!("aws:///placeholder/{asg}-{n}")
}

fn is_placeholder(provider_id: &str, asg: &str) -> bool {
    provider_id
        .strip_prefix("aws:///placeholder/")
        .and_then(|rest| rest.strip_prefix(asg))
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|n| n.parse::<usize>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_recognised_only_for_their_own_group() {
        assert!(is_placeholder(&placeholder_id("p5", 3), "p5"));
        assert!(!is_placeholder(&placeholder_id("p5", 3), "p5-spot"));
        assert!(!is_placeholder(&placeholder_id("p5-spot", 0), "p5"));
        assert!(!is_placeholder("aws:///us-east-1a/i-0abc", "p5"));
    }
}
