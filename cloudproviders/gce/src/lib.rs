//! The GCE cloud provider of dra-autoscaler: managed instance groups (zonal and regional) as
//! node groups.
//!
//! ```text
//!  gRPC (externalgrpc + NodeGroupExtensions, dra_provider::serve)
//!    └─► GceProvider (provider.rs) over dra_provider::skeleton
//!          ├─ state.rs      what calls share: Compute client, groups, scaling lock; VM labels
//!          ├─ names.rs      request ids (UUIDs), VM names and labels derived from a request
//!          ├─ discovery.rs  MIGs listed in the config or found by name prefix (cluster-
//!          │                autoscaler's `mig:namePrefix=…`), their instance templates,
//!          │                machine types, reservations → groups.rs (NodeGroup spec per MIG)
//!          ├─ kube_env.rs   a GKE node pool's labels, taints and kubeReserved from kube-env
//!          ├─ atomic.rs     gangs: MIG resize requests (flex-start / reservation-bound) or
//!          │                instances.bulkInsert with minCount, rollback of short starts
//!          ├─ errors.rs     error classes (stockout, quota, rate limit, other)
//!          └─ api/          the Compute Engine calls (Application Default Credentials), every
//!                           finished operation checked for its error
//! ```
//!
//! Templates come from `dra_provider_machines` with [`Platform::Gke`](dra_provider_machines::Platform)
//! and are registered through `dra_api::new_node`, like every other provider's.

pub mod api;
pub mod atomic;
pub mod config;
mod discovery;
pub mod errors;
pub mod groups;
pub mod kube_env;
mod names;
pub mod provider;
#[cfg(feature = "stand-in")]
pub mod stand_in;
mod state;

pub use api::{Connection, Gce};
pub use config::{Config, ConfigError, GroupConfig};
pub use provider::GceProvider;
