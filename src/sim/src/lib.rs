//! `dra-sim`: the pure fit simulator of dra-autoscaler.
//!
//! It answers one question the way kube-scheduler would: can this pending pod
//! run on this node — real, or a node-group template — and with which devices?
//! It re-implements the scheduler's structured DRA allocator ([`dra`]), the CEL
//! environment of device selectors ([`cel`]) and the scheduler's filters, over a
//! snapshot of Kubernetes objects ([`objects`]) read by [`loader`].
//!
//! Nothing here does I/O, reads a clock or spawns threads: callers hand in a
//! snapshot and get a decision with reasons back. That keeps it fast,
//! deterministic, testable and usable offline.

pub mod api_version;
pub mod cel;
pub mod defaults;
pub mod dra;
pub mod filters;
pub mod gates;
pub mod loader;
pub mod objects;
pub mod pods;
pub mod quantity;
pub mod reason;
pub mod report;
pub mod selectors;
pub mod simulate;
pub mod snapshot;
pub mod trim;

pub use gates::{FeatureGates, KubeVersion};

/// Stack, in bytes, that a thread running the simulator or the planner
/// should have. CEL compilation and evaluation recurse as deep as the
/// expression limits allow (see [`cel`]); with less stack left than they may
/// need they move to a fresh stack segment, which is correct but slower, so
/// the command line and the controller run their work on threads of this
/// size.
pub const STACK_BUDGET: usize = 16 << 20;
pub use loader::{LoadError, Loaded, Loader};
pub use objects::{ClusterObjects, ObjectRef};
