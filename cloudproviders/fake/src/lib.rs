//! The fake cloud provider: node groups from the `NodeGroup` objects in the API server (and/or a
//! YAML file, which also injects faults), an in-memory cloud whose instances become real
//! Kubernetes objects (a kubelet-less Node kept Ready by a Lease, and the template's
//! ResourceSlices published as a DRA driver would), and state that survives a restart. Served
//! over the dra-provider gRPC harness.
//!
//! ```text
//!  gRPC ──► calls.rs ──► FakeProvider (provider.rs) ──► Cloud (cloud.rs: sizes, limits, faults, state file)
//!                              │                     └─► KubeWriter (kube_writer.rs: Node, Lease, slices)
//!                              ├─ groups.rs: file groups + NodeGroups watched in the API server
//!                              └─ publisher.rs: delayed slices, stopped before any deletion
//! ```

mod calls;
pub mod cloud;
pub mod config;
pub mod groups;
pub mod kube_writer;
pub mod kubelet;
pub mod provider;
pub mod publisher;

pub use config::{Config, ConfigError, Faults, GroupConfig, GroupEntry};
pub use provider::FakeProvider;
