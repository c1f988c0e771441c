//! The local stack: everything needed to watch dra-autoscaler work on a laptop without a
//! cluster, and the same stack for end-to-end tests.
//!
//! * the API stand-in (`dra-fake-apiserver`), with the NodeGroup CRD and example NodeGroups;
//! * the scheduler stand-in (`dra-fake-scheduler`), so pods end Running on the nodes bought;
//! * the fake provider (`dra-provider-fake`), serving the cluster's NodeGroups;
//! * `dra-autoscaler run`.
//!
//! `dra-local-stack up` (what `e2e/local/run.sh` runs) starts them as processes with their
//! own logs, supervised one at a time (`dra-local-stack stop|start|restart NAME`, `status`:
//! [`supervise`]); [`Stack`] starts them in-process for tests, each stoppable on its own.

pub mod apply;
pub mod process;
pub mod processes;
pub mod real;
pub mod stack;
pub mod supervise;

pub use real::RealCluster;
pub use stack::{Backend, Stack, StackOptions, manifests, node_group_examples};
