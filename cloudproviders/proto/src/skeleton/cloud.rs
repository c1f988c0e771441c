//! A provider as its cloud calls plus the skeleton: a [`Cloud`] implements what differs
//! between clouds, and is a [`CloudProvider`] through the one implementation below, so every
//! such provider answers the group-level calls (`NodeGroups`, `GPULabel`,
//! `GetAvailableGPUTypes`, `Refresh`, `NodeGroupNodes`, `NodeGroupTemplateNodeInfo`,
//! `NodeGroupGetOptions`, `NodeGroupInfos`, `InstanceStatuses`) the same way.

use tokio::sync::MutexGuard;

use crate::error::ProviderError;
use crate::group_options;
use crate::groups::GroupCatalog;
use crate::model::{
    AtomicIncrease, AutoscalingOptions, Instance, InstanceDetails, NodeGroupDetails, NodeGroupRef,
    NodeRef, TemplateNode,
};
use crate::provider::CloudProvider;
use crate::skeleton::served::ServedGroup;

/// What a cloud adds to the skeleton: its groups, how it finds a node's group, its sizes,
/// scaling calls and instances.
#[tonic::async_trait]
pub trait Cloud: Send + Sync + 'static {
    /// A node group as the cloud serves it.
    type Group: ServedGroup + Clone + Send + Sync;

    /// The label cluster-autoscaler's own provider for this cloud reports as `GPULabel`.
    const GPU_LABEL: &'static str;

    /// The groups, read again from the cloud when `force`d or too old.
    async fn groups(
        &self,
        force: bool,
    ) -> Result<MutexGuard<'_, GroupCatalog<Self::Group>>, ProviderError>;

    /// `NodeGroupForNode`: the group a node belongs to; `None` when not one of ours.
    async fn node_group_of(&self, node: &NodeRef) -> Result<Option<NodeGroupRef>, ProviderError>;

    /// `NodeGroupTargetSize` of group `id`.
    async fn target(&self, id: &str) -> Result<i32, ProviderError>;

    /// `NodeGroupIncreaseSize` of group `id` by `delta`.
    async fn increase(&self, id: &str, delta: i32) -> Result<(), ProviderError>;

    /// `NodeGroupDeleteNodes` of group `id`.
    async fn remove_nodes(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ProviderError>;

    /// `NodeGroupDecreaseTargetSize` of group `id` by `delta` (< 0).
    async fn decrease_target(&self, id: &str, delta: i32) -> Result<(), ProviderError>;

    /// The machines of group `id` with the extension's facts (`InstanceStatuses`; also
    /// `NodeGroupNodes` without them).
    async fn instances(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError>;

    /// `AtomicIncreaseSize`, usually [`crate::skeleton::atomic_increase`] over the cloud's
    /// [`crate::skeleton::GangStarts`].
    async fn start_gang(&self, request: &AtomicIncrease) -> Result<Vec<String>, ProviderError>;

    /// The usable group `id`.
    ///
    /// # Errors
    /// Those of [`GroupCatalog::get`] and of reading the groups.
    async fn group(&self, id: &str) -> Result<Self::Group, ProviderError> {
        self.groups(false).await?.get(id).cloned()
    }
}

#[tonic::async_trait]
impl<C: Cloud> CloudProvider for C {
    async fn node_groups(&self) -> Result<Vec<NodeGroupRef>, ProviderError> {
        Ok(self.groups(false).await?.refs())
    }

    async fn node_group_for_node(
        &self,
        node: &NodeRef,
    ) -> Result<Option<NodeGroupRef>, ProviderError> {
        self.node_group_of(node).await
    }

    /// The label cluster-autoscaler's own provider for this cloud reports, unless a group
    /// with DRA-only GPUs carries it (`dra_provider::gpu` says why).
    async fn gpu_label(&self) -> Result<String, ProviderError> {
        Ok(self.groups(false).await?.gpu_label(C::GPU_LABEL))
    }

    /// The values the groups' templates give the GPU label.
    async fn available_gpu_types(&self) -> Result<Vec<String>, ProviderError> {
        let groups = self.groups(false).await?;
        Ok(groups.gpu_types(&groups.gpu_label(C::GPU_LABEL)))
    }

    async fn refresh(&self) -> Result<(), ProviderError> {
        self.groups(false).await.map(drop)
    }

    async fn target_size(&self, id: &str) -> Result<i32, ProviderError> {
        self.target(id).await
    }

    async fn increase_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        self.increase(id, delta).await
    }

    async fn delete_nodes(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ProviderError> {
        self.remove_nodes(id, nodes).await
    }

    async fn decrease_target_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        self.decrease_target(id, delta).await
    }

    async fn nodes(&self, id: &str) -> Result<Vec<Instance>, ProviderError> {
        Ok(self
            .instances(id)
            .await?
            .into_iter()
            .map(Instance::from)
            .collect())
    }

    async fn template_node(&self, id: &str) -> Result<TemplateNode, ProviderError> {
        Ok(self.group(id).await?.template())
    }

    /// From the group's `scaleDown` setting (`dra_provider::group_options`).
    async fn options(
        &self,
        id: &str,
        defaults: &AutoscalingOptions,
    ) -> Result<Option<AutoscalingOptions>, ProviderError> {
        let group = self.group(id).await?;
        group_options::options_for(id, group.spec(), defaults)
    }

    async fn node_group_details(
        &self,
        ids: &[String],
    ) -> Result<Vec<NodeGroupDetails>, ProviderError> {
        self.groups(false).await?.details(ids)
    }

    async fn atomic_increase_size(
        &self,
        request: &AtomicIncrease,
    ) -> Result<Vec<String>, ProviderError> {
        self.start_gang(request).await
    }

    async fn instance_details(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError> {
        self.instances(id).await
    }
}
