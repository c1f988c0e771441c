//! Machine type → node template, shared by the cloud providers (AWS and GCE).
//!
//! ```text
//!  MachineShape (vCPUs, memory, arch, max pods, GPUs, Neuron, EFA, zone)   TemplateOptions
//!            └──────────────────────── node_template ──────────────────────────┘
//!                                          │
//!                     dra_api::NodeTemplate (labels, capacity, allocatable, taints, slices)
//!                                          │
//!                       dra_api::new_node → the Node and slices a machine registers
//! ```
//!
//! * [`shape`]: what the cloud says about a machine type.
//! * [`options`]: per-group overrides, with the defaults the EKS AMI and NVIDIA's driver use.
//! * [`settings`]: what a provider's config says about a group besides its id, and the
//!   `NodeGroup` spec made from it and what the cloud says.
//! * [`eks`]: the EKS AMI's kubelet settings (max pods, kubeReserved, evictionHard).
//! * [`gke`]: the GKE node image's (kubeReserved tiers, kernel and OS shares, evictionHard).
//! * [`gce`]: GCE accelerator type names as GPU models with their memory.
//! * [`nvidia`]: the ResourceSlices `gpu.nvidia.com` publishes, MIG included.
//!
//! Pure: no I/O, no clock.

pub mod eks;
pub mod gce;
pub mod gke;
pub mod nvidia;
pub mod options;
pub mod settings;
pub mod shape;
mod template;

pub use options::{GpuOptions, TemplateOptions};
pub use settings::{CloudGroup, GroupSettings, SettingsError};
pub use shape::{Architecture, Gpu, MachineShape, NeuronDevices};
pub use template::{GKE_ZONE_LABEL, Platform, TemplateError, node_template, node_template_for};
