//! `dra-controller`: the part of dra-autoscaler that talks to a live cluster.
//!
//! ```text
//!  API server ──watch──► reflector stores (watch) ──► snapshot::build ──► dra_plan::plan
//!       ▲                                                                    │
//!       │ status, Events, Lease                                              ▼
//!       └──────────────── autoscaler::run_once ◄──── executor (provider gRPC / in-memory)
//! ```
//!
//! * [`watch`]: reflectors per kind and discovery of the optional gang APIs;
//!   [`rediscovery`]: those installed while running, watched from then on.
//! * [`membership`]: which NodeGroup each Node belongs to, by the instances its
//!   provider lists (providerID), the node-group label, or `NodeGroupForNode`.
//! * [`snapshot`] and [`pods`]: the pure conversion from stores to the
//!   planner's [`dra_sim::ClusterObjects`], and which pending pods count.
//! * [`inflight`] and [`backoff`]: the pure bookkeeping of requested nodes and
//!   failures in the NodeGroup status, which makes restarts and leader changes
//!   safe.
//! * [`autoscaler`]: one loop; [`status`] writes NodeGroup status; [`executor`]
//!   talks to providers; [`events`] and [`notices`] tell operators why.
//! * [`provreq`] and [`buffers`]: ProvisioningRequests and CapacityBuffers
//!   watched, fed to the planner, and their conditions and status written.
//! * [`scaledown`]: after the plan, which nodes to remove, and removing them
//!   (taint, evictions, provider delete), crash-safely.
//! * [`lease`], [`metrics`], [`health`]: running as a replicated Deployment.
//! * [`args`] and [`run`]: `dra-autoscaler run`.
//!
//! Only this crate (and the providers) does I/O; the simulator and the planner
//! stay pure.

pub mod args;
pub mod autoscaler;
pub mod backoff;
pub mod buffers;
pub mod catalog;
pub mod conditions;
pub mod events;
pub mod executor;
pub mod health;
pub mod inflight;
pub mod lease;
pub mod membership;
pub mod metrics;
pub mod notices;
pub mod pods;
pub mod provreq;
pub mod rediscovery;
pub mod run;
pub mod scaledown;
pub mod signal;
pub mod snapshot;
pub mod status;
pub mod validity;
pub mod watch;

pub use args::{PlanArgs, RunArgs};
pub use run::{run, run_until};

#[cfg(test)]
mod test_support;
