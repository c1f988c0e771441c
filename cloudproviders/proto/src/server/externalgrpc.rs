//! `clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider` over a [`CloudProvider`].

use std::sync::Arc;
use std::time::UNIX_EPOCH;

use tonic::{Request, Response, Status};

use crate::convert::{either_time, options_from_pb, options_to_pb};
use crate::error::ProviderError;
use crate::k8s_proto::{encode_node, encode_resource_slice};
use crate::model::NodeRef;
use crate::pb::externalgrpc as ca;
use crate::pb::externalgrpc::cloud_provider_server::CloudProvider as Service;
use crate::provider::CloudProvider;
use crate::server::detached;

/// The externalgrpc service of one provider.
pub struct ExternalGrpcService<P> {
    provider: Arc<P>,
    legacy_fields: bool,
}

impl<P> ExternalGrpcService<P> {
    /// Wraps `provider`; `legacy_fields` also fills the fields <= 1.34 clients read.
    pub fn new(provider: Arc<P>, legacy_fields: bool) -> Self {
        Self {
            provider,
            legacy_fields,
        }
    }
}

fn node_of(node: Option<ca::ExternalGrpcNode>) -> Result<NodeRef, Status> {
    node.map(NodeRef::from)
        .ok_or_else(|| Status::invalid_argument("request field node is missing"))
}

fn ok<T>(value: T) -> Result<Response<T>, Status> {
    Ok(Response::new(value))
}

#[tonic::async_trait]
impl<P: CloudProvider> Service for ExternalGrpcService<P> {
    async fn node_groups(
        &self,
        _: Request<ca::NodeGroupsRequest>,
    ) -> Result<Response<ca::NodeGroupsResponse>, Status> {
        let groups = self.provider.node_groups().await?;
        ok(ca::NodeGroupsResponse {
            node_groups: groups.iter().map(Into::into).collect(),
        })
    }

    async fn node_group_for_node(
        &self,
        request: Request<ca::NodeGroupForNodeRequest>,
    ) -> Result<Response<ca::NodeGroupForNodeResponse>, Status> {
        let node = node_of(request.into_inner().node)?;
        let group = self.provider.node_group_for_node(&node).await?;
        // "Not managed" is a node group with an empty id, never an absent message.
        ok(ca::NodeGroupForNodeResponse {
            node_group: Some(group.as_ref().map(Into::into).unwrap_or_default()),
        })
    }

    async fn pricing_node_price(
        &self,
        request: Request<ca::PricingNodePriceRequest>,
    ) -> Result<Response<ca::PricingNodePriceResponse>, Status> {
        let request = request.into_inner();
        let start = either_time(
            request.start_timestamp.as_ref(),
            request.legacy_start_time.as_ref(),
        );
        let end = either_time(
            request.end_timestamp.as_ref(),
            request.legacy_end_time.as_ref(),
        );
        let node = node_of(request.node)?;
        let price = self
            .provider
            .node_price(
                &node,
                start.unwrap_or(UNIX_EPOCH),
                end.unwrap_or(UNIX_EPOCH),
            )
            .await?;
        ok(ca::PricingNodePriceResponse { price })
    }

    async fn pricing_pod_price(
        &self,
        request: Request<ca::PricingPodPriceRequest>,
    ) -> Result<Response<ca::PricingPodPriceResponse>, Status> {
        let request = request.into_inner();
        let start = either_time(
            request.start_timestamp.as_ref(),
            request.legacy_start_time.as_ref(),
        );
        let end = either_time(
            request.end_timestamp.as_ref(),
            request.legacy_end_time.as_ref(),
        );
        let pod = if request.pod_bytes.is_empty() {
            &request.legacy_pod
        } else {
            &request.pod_bytes
        };
        let price = self
            .provider
            .pod_price(pod, start.unwrap_or(UNIX_EPOCH), end.unwrap_or(UNIX_EPOCH))
            .await?;
        ok(ca::PricingPodPriceResponse { price })
    }

    async fn gpu_label(
        &self,
        _: Request<ca::GpuLabelRequest>,
    ) -> Result<Response<ca::GpuLabelResponse>, Status> {
        ok(ca::GpuLabelResponse {
            label: self.provider.gpu_label().await?,
        })
    }

    async fn get_available_gpu_types(
        &self,
        _: Request<ca::GetAvailableGpuTypesRequest>,
    ) -> Result<Response<ca::GetAvailableGpuTypesResponse>, Status> {
        let types = self.provider.available_gpu_types().await?;
        ok(ca::GetAvailableGpuTypesResponse {
            gpu_types: types
                .into_iter()
                .map(|name| (name, prost_types::Any::default()))
                .collect(),
        })
    }

    async fn cleanup(
        &self,
        _: Request<ca::CleanupRequest>,
    ) -> Result<Response<ca::CleanupResponse>, Status> {
        self.provider.cleanup().await?;
        ok(ca::CleanupResponse {})
    }

    async fn refresh(
        &self,
        _: Request<ca::RefreshRequest>,
    ) -> Result<Response<ca::RefreshResponse>, Status> {
        self.provider.refresh().await?;
        ok(ca::RefreshResponse {})
    }

    async fn node_group_target_size(
        &self,
        request: Request<ca::NodeGroupTargetSizeRequest>,
    ) -> Result<Response<ca::NodeGroupTargetSizeResponse>, Status> {
        let target_size = self.provider.target_size(&request.into_inner().id).await?;
        ok(ca::NodeGroupTargetSizeResponse { target_size })
    }

    async fn node_group_increase_size(
        &self,
        request: Request<ca::NodeGroupIncreaseSizeRequest>,
    ) -> Result<Response<ca::NodeGroupIncreaseSizeResponse>, Status> {
        let request = request.into_inner();
        if request.delta <= 0 {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "NodeGroupIncreaseSize.delta must be > 0, got {}",
                    request.delta
                ),
            }
            .into());
        }
        let provider = Arc::clone(&self.provider);
        detached("NodeGroupIncreaseSize", async move {
            provider.increase_size(&request.id, request.delta).await
        })
        .await?;
        ok(ca::NodeGroupIncreaseSizeResponse {})
    }

    async fn node_group_delete_nodes(
        &self,
        request: Request<ca::NodeGroupDeleteNodesRequest>,
    ) -> Result<Response<ca::NodeGroupDeleteNodesResponse>, Status> {
        let request = request.into_inner();
        let nodes: Vec<NodeRef> = request.nodes.into_iter().map(Into::into).collect();
        let provider = Arc::clone(&self.provider);
        detached("NodeGroupDeleteNodes", async move {
            provider.delete_nodes(&request.id, &nodes).await
        })
        .await?;
        ok(ca::NodeGroupDeleteNodesResponse {})
    }

    async fn node_group_decrease_target_size(
        &self,
        request: Request<ca::NodeGroupDecreaseTargetSizeRequest>,
    ) -> Result<Response<ca::NodeGroupDecreaseTargetSizeResponse>, Status> {
        let request = request.into_inner();
        if request.delta >= 0 {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "NodeGroupDecreaseTargetSize.delta must be < 0, got {}",
                    request.delta
                ),
            }
            .into());
        }
        let provider = Arc::clone(&self.provider);
        detached("NodeGroupDecreaseTargetSize", async move {
            provider
                .decrease_target_size(&request.id, request.delta)
                .await
        })
        .await?;
        ok(ca::NodeGroupDecreaseTargetSizeResponse {})
    }

    async fn node_group_nodes(
        &self,
        request: Request<ca::NodeGroupNodesRequest>,
    ) -> Result<Response<ca::NodeGroupNodesResponse>, Status> {
        let instances = self.provider.nodes(&request.into_inner().id).await?;
        ok(ca::NodeGroupNodesResponse {
            instances: instances.iter().map(Into::into).collect(),
        })
    }

    async fn node_group_template_node_info(
        &self,
        request: Request<ca::NodeGroupTemplateNodeInfoRequest>,
    ) -> Result<Response<ca::NodeGroupTemplateNodeInfoResponse>, Status> {
        let template = self
            .provider
            .template_node(&request.into_inner().id)
            .await?;
        let node_bytes = encode_node(&template.node);
        // One Go-Marshal()ed ResourceSlice per entry (kubernetes/autoscaler#10303): what lets
        // cluster-autoscaler scale a group from zero for pods with ResourceClaims. Peers
        // without that field skip it.
        let resource_slice_bytes = template
            .resource_slices
            .iter()
            .map(encode_resource_slice)
            .collect();
        ok(ca::NodeGroupTemplateNodeInfoResponse {
            legacy_node_info: if self.legacy_fields {
                node_bytes.clone()
            } else {
                Vec::new()
            },
            node_bytes,
            resource_slice_bytes,
        })
    }

    async fn node_group_get_options(
        &self,
        request: Request<ca::NodeGroupAutoscalingOptionsRequest>,
    ) -> Result<Response<ca::NodeGroupAutoscalingOptionsResponse>, Status> {
        let request = request.into_inner();
        let defaults = request
            .defaults
            .as_ref()
            .map(options_from_pb)
            .unwrap_or_default();
        let options = self.provider.options(&request.id, &defaults).await?;
        ok(ca::NodeGroupAutoscalingOptionsResponse {
            node_group_autoscaling_options: options.map(|o| options_to_pb(&o, self.legacy_fields)),
        })
    }
}
