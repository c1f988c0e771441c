//! What a provider reports of the node groups it serves, from one description per group: the
//! answers of `NodeGroups`, `GPULabel`, `GetAvailableGPUTypes` and `NodeGroupInfos`, the same
//! for every provider that keeps its groups in a [`GroupCatalog`].

use std::collections::BTreeMap;

use crate::error::ProviderError;
use crate::gpu;
use crate::groups::GroupCatalog;
use crate::model::{NodeGroupDetails, NodeGroupRef, TemplateNode};

/// A node group as its provider serves it.
pub trait ServedGroup {
    /// The group as externalgrpc describes it (id, sizes, debug text).
    fn node_group_ref(&self) -> NodeGroupRef;
    /// Its NodeGroup spec.
    fn spec(&self) -> &dra_api::NodeGroupSpec;
    /// The Node and slices a new machine of it registers with.
    fn template(&self) -> TemplateNode;
    /// Everything the extension reports of it.
    fn details(&self) -> NodeGroupDetails;
}

impl<G: ServedGroup> GroupCatalog<G> {
    /// `NodeGroups`: every usable group.
    #[must_use]
    pub fn refs(&self) -> Vec<NodeGroupRef> {
        self.good
            .values()
            .map(ServedGroup::node_group_ref)
            .collect()
    }

    /// `GPULabel`: `cloud_label` (what cluster-autoscaler's own provider for the cloud
    /// reports) unless a group with DRA-only GPUs carries it ([`gpu`] says why).
    #[must_use]
    pub fn gpu_label(&self, cloud_label: &str) -> String {
        gpu::gpu_label(cloud_label, self.good.values().map(|g| &g.spec().template))
    }

    /// `GetAvailableGPUTypes`: the values the groups' templates give `label`.
    #[must_use]
    pub fn gpu_types(&self, label: &str) -> Vec<String> {
        gpu::gpu_types(label, self.good.values().map(|g| &g.spec().template))
    }

    /// `NodeGroupInfos`: the details of the groups named in `ids` (all when empty).
    ///
    /// # Errors
    /// [`ProviderError::NotFound`] for an id that is not a usable group.
    pub fn details(&self, ids: &[String]) -> Result<Vec<NodeGroupDetails>, ProviderError> {
        Ok(self
            .select(ids)?
            .into_iter()
            .map(ServedGroup::details)
            .collect())
    }

    /// The NodeGroup specs of the usable groups by id (what `print-nodegroups` shows).
    #[must_use]
    pub fn specs(&self) -> BTreeMap<String, dra_api::NodeGroupSpec> {
        self.good
            .iter()
            .map(|(id, g)| (id.clone(), g.spec().clone()))
            .collect()
    }
}
