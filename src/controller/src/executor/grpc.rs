//! [`ScaleExecutor`] over the provider gRPC client (`dra-provider`): one
//! client per provider name, chosen by the NodeGroup's `spec.provider`.

use std::collections::BTreeMap;

use dra_provider::ProviderClient;
use dra_provider::model::AtomicIncrease;
use futures::future::BoxFuture;

use super::{
    ErrorCategory, GroupRef, IncreaseRequest, Increased, Instance, NodeToDelete, ScaleError,
    ScaleExecutor,
};

/// See the module docs.
#[derive(Debug, Default)]
pub struct GrpcExecutor {
    clients: BTreeMap<String, ProviderClient>,
}

fn count_i32(group: &GroupRef, operation: &'static str, n: usize) -> Result<i32, ScaleError> {
    i32::try_from(n).map_err(|_| {
        ScaleError::new(
            group,
            operation,
            ErrorCategory::Rejected,
            format!("count {n} is too large"),
        )
    })
}

impl GrpcExecutor {
    /// An executor with the given clients, keyed by provider name.
    #[must_use]
    pub fn new(clients: BTreeMap<String, ProviderClient>) -> Self {
        Self { clients }
    }

    fn client(
        &self,
        group: &GroupRef,
        operation: &'static str,
    ) -> Result<&ProviderClient, ScaleError> {
        self.clients.get(&group.provider).ok_or_else(|| {
            ScaleError::new(
                group,
                operation,
                ErrorCategory::Config,
                format!(
                    "no endpoint for provider {:?} (spec.provider); configured: {}",
                    group.provider,
                    self.clients.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )
        })
    }

    async fn do_increase(&self, request: &IncreaseRequest) -> Result<Increased, ScaleError> {
        let group = &request.group;
        match request.atomic_min {
            Some(min) => {
                let op = "atomically increase";
                let client = self.client(group, op)?;
                let ids = client
                    .atomic_increase_size(&AtomicIncrease {
                        id: group.provider_id.clone(),
                        count: count_i32(group, op, request.count)?,
                        min_count: count_i32(group, op, min)?,
                        request_id: request.request_id.clone(),
                    })
                    .await
                    .map_err(|e| ScaleError::new(group, op, e.category(), e.to_string()))?;
                Ok(Increased {
                    started: ids.len(),
                    instance_ids: ids,
                })
            }
            None => {
                let op = "increase";
                let client = self.client(group, op)?;
                client
                    .increase_size(&group.provider_id, count_i32(group, op, request.count)?)
                    .await
                    .map_err(|e| ScaleError::new(group, op, e.category(), e.to_string()))?;
                Ok(Increased {
                    started: request.count,
                    instance_ids: Vec::new(),
                })
            }
        }
    }

    async fn do_delete(&self, group: &GroupRef, names: &[String]) -> Result<(), ScaleError> {
        let op = "delete unregistered nodes of";
        let client = self.client(group, op)?;
        // externalgrpc's DecreaseTargetSize is exactly "forget machines that
        // never registered"; the delta is negative.
        let delta = -count_i32(group, op, names.len())?;
        client
            .decrease_target_size(&group.provider_id, delta)
            .await
            .map_err(|e| ScaleError::new(group, op, e.category(), e.to_string()))
    }
}

impl GrpcExecutor {
    async fn do_delete_nodes(
        &self,
        group: &GroupRef,
        nodes: &[NodeToDelete],
    ) -> Result<(), ScaleError> {
        let op = "delete nodes of";
        let client = self.client(group, op)?;
        let refs: Vec<dra_provider::model::NodeRef> = nodes.iter().map(node_ref).collect();
        match client.delete_nodes(&group.provider_id, &refs).await {
            Ok(()) => Ok(()),
            // The machine is gone already (a removal finished before a restart).
            Err(dra_provider::ClientError::Rpc { status, .. })
                if status.code() == tonic::Code::NotFound =>
            {
                tracing::info!(node_group = %group.name, message = status.message(), "machines already gone");
                Ok(())
            }
            Err(e) => Err(ScaleError::new(group, op, e.category(), e.to_string())),
        }
    }
}

fn node_ref(node: &NodeToDelete) -> dra_provider::model::NodeRef {
    dra_provider::model::NodeRef {
        provider_id: node.provider_id.clone(),
        name: node.name.clone(),
        labels: node.labels.clone(),
        annotations: node.annotations.clone(),
    }
}

impl GrpcExecutor {
    async fn do_instances(&self, group: &GroupRef) -> Result<Vec<Instance>, ScaleError> {
        let op = "list instances of";
        let client = self.client(group, op)?;
        client
            .nodes(&group.provider_id)
            .await
            .map_err(|e| ScaleError::new(group, op, e.category(), e.to_string()))
    }

    async fn do_group_for_node(
        &self,
        provider: &str,
        node: &NodeToDelete,
    ) -> Result<Option<String>, ScaleError> {
        let error = |category, message: String| ScaleError {
            provider: provider.to_owned(),
            node_group: String::new(),
            operation: "find the node group of a node at",
            category,
            message,
        };
        let client = self.clients.get(provider).ok_or_else(|| {
            error(
                ErrorCategory::Config,
                format!("no endpoint for provider {provider:?}"),
            )
        })?;
        client
            .node_group_for_node(&node_ref(node))
            .await
            .map(|group| group.map(|g| g.id))
            .map_err(|e| error(e.category(), e.to_string()))
    }
}

impl ScaleExecutor for GrpcExecutor {
    fn increase<'a>(
        &'a self,
        request: &'a IncreaseRequest,
    ) -> BoxFuture<'a, Result<Increased, ScaleError>> {
        Box::pin(self.do_increase(request))
    }

    fn delete_unregistered<'a>(
        &'a self,
        group: &'a GroupRef,
        names: &'a [String],
    ) -> BoxFuture<'a, Result<(), ScaleError>> {
        Box::pin(self.do_delete(group, names))
    }

    fn delete_nodes<'a>(
        &'a self,
        group: &'a GroupRef,
        nodes: &'a [NodeToDelete],
    ) -> BoxFuture<'a, Result<(), ScaleError>> {
        Box::pin(self.do_delete_nodes(group, nodes))
    }

    fn instances<'a>(
        &'a self,
        group: &'a GroupRef,
    ) -> BoxFuture<'a, Result<Vec<Instance>, ScaleError>> {
        Box::pin(self.do_instances(group))
    }

    fn group_for_node<'a>(
        &'a self,
        provider: &'a str,
        node: &'a NodeToDelete,
    ) -> BoxFuture<'a, Result<Option<String>, ScaleError>> {
        Box::pin(self.do_group_for_node(provider, node))
    }
}
