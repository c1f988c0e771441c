//! Machine type → node template, shared by the cloud providers (AWS today, GCE next).
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
//! * [`eks`]: the EKS AMI's kubelet settings (max pods, kubeReserved, evictionHard).
//! * [`nvidia`]: the ResourceSlices `gpu.nvidia.com` publishes, MIG included.
//!
//! Pure: no I/O, no clock.

pub mod eks;
pub mod nvidia;
pub mod options;
pub mod shape;
mod template;

pub use options::{GpuOptions, TemplateOptions};
pub use shape::{Architecture, Gpu, MachineShape, NeuronDevices};
pub use template::{TemplateError, node_template};
