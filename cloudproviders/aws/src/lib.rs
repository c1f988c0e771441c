//! The AWS cloud provider of dra-autoscaler: Auto Scaling groups as node groups.
//!
//! ```text
//!  gRPC (externalgrpc + NodeGroupExtensions, dra_provider::serve)
//!    └─► AwsProvider (provider.rs) over dra_provider::skeleton
//!          ├─ state.rs      what calls share: SDK client, groups, scaling lock, pending attaches
//!          ├─ discovery.rs  ASGs by cluster-autoscaler's tags or the config; launch templates,
//!          │                subnets, reservations → groups.rs (NodeGroup spec per ASG)
//!          ├─ instance_types.rs  DescribeInstanceTypes (cached) → dra_provider_machines
//!          ├─ launch.rs + fleet.rs  gang starts: CreateFleet instant with MinTargetCapacity,
//!          │                reservation checks, rollback, AttachInstances once running
//!          ├─ errors.rs     error classes, insufficient-capacity cache
//!          └─ aws.rs        the SDK calls (default credential chain)
//! ```

pub mod aws;
pub mod config;
mod discovery;
pub mod errors;
pub mod fleet;
pub mod groups;
pub mod instance_types;
mod launch;
pub mod moto;
pub mod provider;
mod state;

pub use aws::Aws;
pub use config::{Config, ConfigError, GroupConfig};
pub use provider::AwsProvider;
