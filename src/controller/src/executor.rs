//! The provider calls the controller makes, behind one small trait.
//!
//! [`ScaleExecutor`] is what the autoscaler needs from a cloud provider:
//! grow a group (all-or-nothing with a minimum for gangs, plain otherwise),
//! give up on machines that never registered, and delete the machines of
//! nodes scale-down removes. The gRPC adapter implements it
//! over the externalgrpc + NodeGroupExtensions services; [`memory`] is an
//! in-memory provider for tests and dry runs.
//!
//! Errors carry one [`ErrorCategory`] so the caller can tell the three outcomes
//! apart: never sent (retry soon), refused (back off, try another group) and
//! unknown (the request may have gone through: keep its placeholders and re-send
//! it with the same request id).

use futures::future::BoxFuture;

use dra_api::ScaleUpOutcome;

pub mod grpc;
pub mod memory;

/// Which provider group a NodeGroup maps to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupRef {
    /// The NodeGroup's name.
    pub name: String,
    /// `spec.provider`: which provider endpoint serves it.
    pub provider: String,
    /// `spec.providerID`: the provider's id of the group.
    pub provider_id: String,
}

/// One request to grow a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncreaseRequest {
    /// The group.
    pub group: GroupRef,
    /// Machines wanted.
    pub count: usize,
    /// `Some(min)`: start at least `min` together or none (a gang); `None`: a
    /// plain increase of `count`.
    pub atomic_min: Option<usize>,
    /// Idempotency token, also the prefix of the placeholder entries in the
    /// NodeGroup status: a retried request with it must not start machines twice.
    pub request_id: String,
}

/// A registered node to delete, as externalgrpc's `ExternalGrpcNode` names it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeToDelete {
    /// `spec.providerID` of the Node.
    pub provider_id: String,
    /// `metadata.name` of the Node.
    pub name: String,
    /// Labels of the Node.
    pub labels: std::collections::BTreeMap<String, String>,
    /// Annotations of the Node.
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// What a successful increase started.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Increased {
    /// Machines started (`count` for a plain increase).
    pub started: usize,
    /// The provider's instance ids, when it tells them.
    pub instance_ids: Vec<String>,
}

/// How a provider call failed: the one enum the provider client, the loop,
/// its metrics and its status messages share.
pub use dra_provider::ErrorCategory;

/// An instance of a group as its provider lists it.
pub use dra_provider::model::{Instance, InstanceState};

/// The outcome recorded in `status.lastScaleUp` for a failure of `category`.
#[must_use]
pub fn outcome_of(category: ErrorCategory) -> ScaleUpOutcome {
    match category {
        ErrorCategory::OutOfCapacity => ScaleUpOutcome::OutOfCapacity,
        ErrorCategory::Quota => ScaleUpOutcome::QuotaExceeded,
        _ => ScaleUpOutcome::Failed,
    }
}

/// A failed provider call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to {operation} node group {node_group:?} through provider {provider:?} ({}): {message}", category.metric_label())]
pub struct ScaleError {
    /// The provider name.
    pub provider: String,
    /// The NodeGroup.
    pub node_group: String,
    /// What was attempted (`increase`, `atomically increase`, `delete unregistered nodes of`).
    pub operation: &'static str,
    /// The class of failure.
    pub category: ErrorCategory,
    /// The provider's message.
    pub message: String,
}

impl ScaleError {
    /// A failure of `operation` on `group`.
    #[must_use]
    pub fn new(
        group: &GroupRef,
        operation: &'static str,
        category: ErrorCategory,
        message: impl Into<String>,
    ) -> Self {
        Self {
            provider: group.provider.clone(),
            node_group: group.name.clone(),
            operation,
            category,
            message: message.into(),
        }
    }
}

/// The provider calls of the scale-up step.
///
/// Implementations must be safe to call from several tasks. Each method's
/// contract:
pub trait ScaleExecutor: Send + Sync {
    /// Required. Grows the group. With `atomic_min`, starts between `min` and
    /// `count` machines together or none (rolling back a partial start); if the
    /// provider cannot do that it must fail with
    /// [`ErrorCategory::NotImplemented`] rather than start a partial gang.
    fn increase<'a>(
        &'a self,
        request: &'a IncreaseRequest,
    ) -> BoxFuture<'a, Result<Increased, ScaleError>>;

    /// Required. Gives up on `count` machines of the group that were asked for
    /// and never registered (`names` are our placeholder or instance names):
    /// the provider lowers its target and deletes whatever it started for them.
    fn delete_unregistered<'a>(
        &'a self,
        group: &'a GroupRef,
        names: &'a [String],
    ) -> BoxFuture<'a, Result<(), ScaleError>>;

    /// The instances the provider has for the group (externalgrpc `NodeGroupNodes`): ids are
    /// what a registered Node's `spec.providerID` says. Providers without it fail with
    /// [`ErrorCategory::NotImplemented`]; nodes are then known by their label.
    fn instances<'a>(
        &'a self,
        group: &'a GroupRef,
    ) -> BoxFuture<'a, Result<Vec<Instance>, ScaleError>> {
        Box::pin(async move {
            Err(ScaleError::new(
                group,
                "list instances of",
                ErrorCategory::NotImplemented,
                "this provider cannot list instances",
            ))
        })
    }

    /// The provider's group id of `node` (externalgrpc `NodeGroupForNode`) at provider
    /// `provider`; `None` when it does not manage the node.
    fn group_for_node<'a>(
        &'a self,
        provider: &'a str,
        node: &'a NodeToDelete,
    ) -> BoxFuture<'a, Result<Option<String>, ScaleError>> {
        let _ = node;
        Box::pin(async move {
            Err(ScaleError {
                provider: provider.to_owned(),
                node_group: String::new(),
                operation: "find the node group of a node at",
                category: ErrorCategory::NotImplemented,
                message: "this provider cannot tell a node's group".to_owned(),
            })
        })
    }

    /// Deletes the machines behind registered nodes of the group (externalgrpc
    /// `NodeGroupDeleteNodes`), lowering its target size by as many. A machine
    /// that no longer exists counts as deleted. Providers without it fail with
    /// [`ErrorCategory::NotImplemented`], and no node is removed.
    fn delete_nodes<'a>(
        &'a self,
        group: &'a GroupRef,
        nodes: &'a [NodeToDelete],
    ) -> BoxFuture<'a, Result<(), ScaleError>> {
        let _ = nodes;
        Box::pin(async move {
            Err(ScaleError::new(
                group,
                "delete nodes of",
                ErrorCategory::NotImplemented,
                "this provider cannot delete nodes",
            ))
        })
    }
}
