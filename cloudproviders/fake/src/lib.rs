//! The fake cloud provider: node groups from a YAML file, an in-memory cloud whose instances
//! become real Kubernetes objects (a kubelet-less Node kept Ready by a Lease, and the
//! template's ResourceSlices published as a DRA driver would), fault injection, and state that
//! survives a restart. Served over the dra-provider gRPC harness.
//!
//! ```text
//!  gRPC ──► FakeProvider (provider.rs) ──► Cloud (cloud.rs: sizes, limits, faults, state file)
//!                                      └─► KubeWriter (kube_writer.rs: Node, Lease, slices)
//! ```

pub mod cloud;
pub mod config;
pub mod kube_writer;
pub mod provider;

pub use config::{Config, ConfigError, Faults, GroupConfig};
pub use provider::FakeProvider;
