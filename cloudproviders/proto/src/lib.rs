//! The cloud provider interface of dra-autoscaler.
//!
//! ```text
//!  controller ──ProviderClient──► one gRPC endpoint ──serve()──► impl CloudProvider
//!                                  ├ clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider
//!                                  ├ draautoscaler.provider.v1.NodeGroupExtensions
//!                                  └ grpc.health.v1.Health
//! ```
//!
//! * [`pb`]: generated messages, clients and servers for both services. The externalgrpc part
//!   is wire-compatible with cluster-autoscaler >= 1.35 (and reads <= 1.34 fields).
//! * [`CloudProvider`]: the trait a provider implements once; [`server::serve`] serves it as
//!   both services with TLS/mTLS, health and graceful shutdown.
//! * [`ProviderClient`]: deadlines, retries for idempotent calls, typed errors with
//!   [`ErrorCategory`], and a logged fallback to plain externalgrpc when the extension is absent.
//! * [`k8s_proto`]: Kubernetes protobuf bytes of `v1.Node` (externalgrpc's `nodeBytes`).
//! * [`logging`]: the one logging setup every binary of the project uses (`--log-format`).
//! * What every provider answers the same way: [`group_options`] (`NodeGroupGetOptions` from a
//!   NodeGroup spec) and [`gpu`] (`GPULabel` and `GetAvailableGPUTypes` from the templates).
//! * What every provider binary shares: [`cli`] (the `serve` flags, serving until Ctrl-C,
//!   `print-nodegroups`), [`config_file`] (reading its YAML) and [`groups`] (node groups as last
//!   read, looked up by id).
//! * [`skeleton`]: what every provider does the same way around its cloud calls: the
//!   atomic-increase contract (bounds, scaling lock, request-id replay), the size rules, the
//!   groups as last read and the failed machines.

pub mod cli;
pub mod client;
pub mod config_file;
pub mod convert;
pub mod error;
pub mod gpu;
pub mod group_options;
pub mod groups;
pub mod k8s_proto;
pub use dra_logging as logging;
pub mod model;
pub mod provider;
pub mod server;
pub mod skeleton;

/// Generated protobuf messages and gRPC stubs.
#[allow(missing_docs, clippy::all)]
pub mod pb {
    /// `clusterautoscaler.cloudprovider.v1.externalgrpc` (cluster-autoscaler's protocol).
    pub mod externalgrpc {
        tonic::include_proto!("clusterautoscaler.cloudprovider.v1.externalgrpc");
    }
    /// `draautoscaler.provider.v1` (our extension).
    pub mod extensions {
        tonic::include_proto!("draautoscaler.provider.v1");
    }
}

pub use cli::ServeArgs;
pub use client::{ClientConfig, ClientTls, ProviderClient, RetryPolicy};
pub use config_file::ConfigFileError;
pub use error::{ClientError, ErrorCategory, ProviderError};
pub use groups::{GroupCatalog, unknown_group};
pub use model::{
    AtomicIncrease, AutoscalingOptions, CapacityType, ErrorClass, Instance, InstanceDetails,
    InstanceError, InstanceState, NodeGroupDetails, NodeGroupRef, NodeRef, ReservationStatus,
    TemplateNode,
};
pub use provider::CloudProvider;
pub use server::{ServeError, ServeOptions, ServerTls, serve};
