//! A kube-scheduler stand-in for the local stack and end-to-end tests, built on the project's
//! own fit engine: pending pods are placed with `dra-sim` (the scheduler's filters and the DRA
//! allocator) and grouped into gangs with `dra-plan`, so the pods the autoscaler bought nodes
//! for end up Running on them.
//!
//! ```text
//!  API server ──list──► run::cycle ──► claims (resourceclaim controller: claims from templates,
//!                           │            released when their pods are gone or done)
//!                           │
//!                           ├──► decide (pure: dra-sim placement, dra-plan gangs)
//!                           └──► writer: claim allocation, Binding, Running status,
//!                                PodScheduled=False/Unschedulable, Scheduled/FailedScheduling Events
//! ```
//!
//! It also plays the two components a real cluster has around the scheduler: the ResourceClaim
//! controller (claims from templates, and released when their pods go, with the garbage
//! collector's deletion of a deleted pod's claims) and the kubelet's status report (phase Running, Ready
//! containers, pod IP). It does not preempt, and it schedules in cycles (every `--interval`)
//! rather than from an event-driven queue.

pub mod claims;
pub mod decide;
pub mod message;
pub mod run;
pub mod writer;

pub use run::{Config, Summary, cycle, run};
