//! `draautoscaler.provider.v1.NodeGroupExtensions` over a [`CloudProvider`].

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::convert::details_to_pb;
use crate::error::ProviderError;
use crate::model::AtomicIncrease;
use crate::pb::extensions as ext;
use crate::pb::extensions::node_group_extensions_server::NodeGroupExtensions as Service;
use crate::provider::CloudProvider;
use crate::server::detached;

/// The extension service of one provider.
pub struct ExtensionsService<P> {
    provider: Arc<P>,
}

impl<P> ExtensionsService<P> {
    /// Wraps `provider`.
    pub fn new(provider: Arc<P>) -> Self {
        Self { provider }
    }
}

#[tonic::async_trait]
impl<P: CloudProvider> Service for ExtensionsService<P> {
    async fn node_group_infos(
        &self,
        request: Request<ext::NodeGroupInfosRequest>,
    ) -> Result<Response<ext::NodeGroupInfosResponse>, Status> {
        let details = self
            .provider
            .node_group_details(&request.into_inner().ids)
            .await?;
        let node_groups = details
            .iter()
            .map(details_to_pb)
            .collect::<Result<_, _>>()
            .map_err(|err| {
                Status::from(ProviderError::Internal {
                    message: format!("{err}: {}", err.source),
                })
            })?;
        Ok(Response::new(ext::NodeGroupInfosResponse { node_groups }))
    }

    async fn atomic_increase_size(
        &self,
        request: Request<ext::AtomicIncreaseSizeRequest>,
    ) -> Result<Response<ext::AtomicIncreaseSizeResponse>, Status> {
        let request = request.into_inner();
        if request.count <= 0 || request.min_count <= 0 || request.min_count > request.count {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "AtomicIncreaseSize needs 0 < minCount <= count, got minCount {} and count {}",
                    request.min_count, request.count
                ),
            }
            .into());
        }
        let provider = Arc::clone(&self.provider);
        let instance_ids = detached("AtomicIncreaseSize", async move {
            provider
                .atomic_increase_size(&AtomicIncrease {
                    id: request.id,
                    count: request.count,
                    min_count: request.min_count,
                    request_id: request.request_id,
                })
                .await
        })
        .await?;
        Ok(Response::new(ext::AtomicIncreaseSizeResponse {
            instance_ids,
        }))
    }

    async fn instance_statuses(
        &self,
        request: Request<ext::InstanceStatusesRequest>,
    ) -> Result<Response<ext::InstanceStatusesResponse>, Status> {
        let instances = self
            .provider
            .instance_details(&request.into_inner().id)
            .await?;
        Ok(Response::new(ext::InstanceStatusesResponse {
            instances: instances.iter().map(Into::into).collect(),
        }))
    }
}
