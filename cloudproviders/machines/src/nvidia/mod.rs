//! The NVIDIA DRA driver (`gpu.nvidia.com`, NVIDIA/k8s-dra-driver-gpu) as a template: the
//! ResourceSlices its kubelet plugin publishes for a machine's GPUs.

mod products;
mod slices;

pub use products::{GpuProduct, MigProfile, nvidia_product};
pub use slices::{DRIVER, GpuDevices, SliceLayout, gpu_slices};
