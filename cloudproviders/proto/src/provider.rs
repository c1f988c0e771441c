//! The one trait every dra-autoscaler provider implements. The server harness serves it as
//! both externalgrpc's `CloudProvider` and our `NodeGroupExtensions`.

use std::time::SystemTime;

use crate::error::ProviderError;
use crate::model::{
    AtomicIncrease, AutoscalingOptions, Instance, InstanceDetails, NodeGroupDetails, NodeGroupRef,
    NodeRef, TemplateNode,
};

/// A cloud provider. Required methods are those externalgrpc requires; the optional ones
/// default to [`ProviderError::NotImplemented`], which the harness answers with UNIMPLEMENTED
/// (what callers of optional externalgrpc methods expect).
#[tonic::async_trait]
pub trait CloudProvider: Send + Sync + 'static {
    /// Required. All node groups.
    async fn node_groups(&self) -> Result<Vec<NodeGroupRef>, ProviderError>;

    /// Required. The group a node belongs to; `None` when the provider does not manage it.
    async fn node_group_for_node(
        &self,
        node: &NodeRef,
    ) -> Result<Option<NodeGroupRef>, ProviderError>;

    /// Optional. Price of running `node` between `start` and `end`.
    async fn node_price(
        &self,
        node: &NodeRef,
        start: SystemTime,
        end: SystemTime,
    ) -> Result<f64, ProviderError> {
        let _ = (node, start, end);
        Err(ProviderError::NotImplemented {
            method: "PricingNodePrice",
        })
    }

    /// Optional. Price of running a pod (Go `Marshal()` bytes of a v1.Pod) over a period.
    async fn pod_price(
        &self,
        pod_bytes: &[u8],
        start: SystemTime,
        end: SystemTime,
    ) -> Result<f64, ProviderError> {
        let _ = (pod_bytes, start, end);
        Err(ProviderError::NotImplemented {
            method: "PricingPodPrice",
        })
    }

    /// Required. The label that marks GPU nodes.
    async fn gpu_label(&self) -> Result<String, ProviderError>;

    /// Required. GPU type names the provider offers.
    async fn available_gpu_types(&self) -> Result<Vec<String>, ProviderError> {
        Ok(Vec::new())
    }

    /// Required. Release resources before shutdown; the default has nothing to release.
    async fn cleanup(&self) -> Result<(), ProviderError> {
        Ok(())
    }

    /// Required. Called before every autoscaler loop; the default keeps no cache.
    async fn refresh(&self) -> Result<(), ProviderError> {
        Ok(())
    }

    /// Required. Current target size of group `id`.
    async fn target_size(&self, id: &str) -> Result<i32, ProviderError>;

    /// Required. Grow group `id` by `delta` (> 0); best effort, not atomic.
    async fn increase_size(&self, id: &str, delta: i32) -> Result<(), ProviderError>;

    /// Required. Delete the given nodes of group `id` and shrink its target with them.
    async fn delete_nodes(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ProviderError>;

    /// Required. Shrink the target of group `id` by `-delta` (delta < 0) without deleting nodes.
    async fn decrease_target_size(&self, id: &str, delta: i32) -> Result<(), ProviderError>;

    /// Required. Instances of group `id`.
    async fn nodes(&self, id: &str) -> Result<Vec<Instance>, ProviderError>;

    /// Optional. The template of group `id`.
    async fn template_node(&self, id: &str) -> Result<TemplateNode, ProviderError> {
        let _ = id;
        Err(ProviderError::NotImplemented {
            method: "NodeGroupTemplateNodeInfo",
        })
    }

    /// Optional. Options for group `id`; `None` means "use `defaults`".
    async fn options(
        &self,
        id: &str,
        defaults: &AutoscalingOptions,
    ) -> Result<Option<AutoscalingOptions>, ProviderError> {
        let _ = (id, defaults);
        Err(ProviderError::NotImplemented {
            method: "NodeGroupGetOptions",
        })
    }

    /// Extension, optional. Full details of the named groups (all when `ids` is empty).
    async fn node_group_details(
        &self,
        ids: &[String],
    ) -> Result<Vec<NodeGroupDetails>, ProviderError> {
        let _ = ids;
        Err(ProviderError::NotImplemented {
            method: "NodeGroupInfos",
        })
    }

    /// Extension, optional. Start between `min_count` and `count` instances together or none;
    /// a partial start must be rolled back before returning
    /// [`ProviderError::OutOfCapacity`]/[`ProviderError::Quota`]. Returns the instance ids.
    async fn atomic_increase_size(
        &self,
        request: &AtomicIncrease,
    ) -> Result<Vec<String>, ProviderError> {
        let _ = request;
        Err(ProviderError::NotImplemented {
            method: "AtomicIncreaseSize",
        })
    }

    /// Extension, optional. Instances of group `id` with error class and reservation.
    async fn instance_details(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError> {
        let _ = id;
        Err(ProviderError::NotImplemented {
            method: "InstanceStatuses",
        })
    }
}
