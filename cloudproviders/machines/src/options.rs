//! Per-group settings of the template: defaults follow the EKS AMI and the NVIDIA DRA driver;
//! every field can be overridden in the provider's config (camelCase YAML).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::api::resource::v1::ResourceSliceSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

use crate::nvidia::{MigProfile, SliceLayout};

/// The share of a machine's memory the hypervisor and firmware keep, so the kubelet's
/// `capacity.memory` is below what the cloud sells (Karpenter's `VM_MEMORY_OVERHEAD_PERCENT`
/// default).
pub const DEFAULT_VM_MEMORY_OVERHEAD: f64 = 0.075;
/// NVIDIA driver of the node image when the group does not say (EKS AL2023 NVIDIA AMI line).
pub const DEFAULT_DRIVER_VERSION: &str = "570.172.08";
/// CUDA driver version that goes with [`DEFAULT_DRIVER_VERSION`].
pub const DEFAULT_CUDA_DRIVER_VERSION: &str = "12.8";

/// How a group's node template is derived from its machine shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplateOptions {
    /// Labels added to the generated ones (and overriding them).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Taints of the node.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// Capacity entries that replace or add to the computed ones.
    #[serde(default)]
    pub capacity: BTreeMap<String, Quantity>,
    /// Allocatable entries that replace or add to the computed ones.
    #[serde(default)]
    pub allocatable: BTreeMap<String, Quantity>,
    /// The kubelet's `maxPods`, when the node image sets something else than the ENI formula.
    #[serde(default)]
    pub max_pods: Option<u32>,
    /// `kubeReserved` (`cpu`, `memory`, `ephemeral-storage`); replaces the EKS AMI's formula.
    #[serde(default)]
    pub kube_reserved: Option<BTreeMap<String, Quantity>>,
    /// `systemReserved`; the EKS AMI sets none.
    #[serde(default)]
    pub system_reserved: BTreeMap<String, Quantity>,
    /// `evictionHard` `memory.available`; the EKS AMI's is 100Mi.
    #[serde(default)]
    pub eviction_hard_memory: Option<Quantity>,
    /// Share of memory the kubelet never sees (0.075 unless set).
    #[serde(default)]
    pub vm_memory_overhead_percent: Option<f64>,
    /// GPU settings.
    #[serde(default)]
    pub gpu: GpuOptions,
    /// Slices that replace the generated ones entirely.
    #[serde(default)]
    pub resource_slices: Option<Vec<ResourceSliceSpec>>,
    /// Slices published in addition to the generated ones (other DRA drivers).
    #[serde(default)]
    pub extra_resource_slices: Vec<ResourceSliceSpec>,
}

/// GPU settings of a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuOptions {
    /// Publish the NVIDIA DRA driver's slices (default true).
    #[serde(default = "yes")]
    pub dra: bool,
    /// Also report `nvidia.com/gpu` as an extended resource, as the device plugin does.
    #[serde(default)]
    pub device_plugin: bool,
    /// MIG partitions are published (the node runs the driver with MIG on).
    #[serde(default)]
    pub mig: bool,
    /// Memory of one GPU in MiB, overriding what the cloud or the built-in table says (needed
    /// for GPU models the table does not know on clouds that do not report memory, like GCE).
    #[serde(default)]
    pub memory_mib: Option<u64>,
    /// NVIDIA driver version of the node image.
    #[serde(default)]
    pub driver_version: Option<String>,
    /// CUDA driver version of the node image.
    #[serde(default)]
    pub cuda_driver_version: Option<String>,
    /// NVML brand (`Nvidia` unless set).
    #[serde(default)]
    pub brand: Option<String>,
    /// NVML product name, overriding the built-in table.
    #[serde(default)]
    pub product_name: Option<String>,
    /// Architecture name, overriding the built-in table.
    #[serde(default)]
    pub architecture: Option<String>,
    /// CUDA compute capability, overriding the built-in table.
    #[serde(default)]
    pub cuda_compute_capability: Option<String>,
    /// MIG profiles, overriding the built-in table.
    #[serde(default)]
    pub mig_profiles: Option<Vec<MigProfile>>,
    /// PCI bus ids of the GPUs in minor order (`resource.kubernetes.io/pciBusID`).
    #[serde(default)]
    pub pci_bus_ids: Vec<String>,
    /// `addressingMode` of coherent-memory systems.
    #[serde(default)]
    pub addressing_mode: Option<String>,
    /// Slice layout: `split` (Kubernetes 1.35+, default) or `combined` (1.34).
    #[serde(default)]
    pub slice_layout: SliceLayout,
}

fn yes() -> bool {
    true
}

impl Default for GpuOptions {
    fn default() -> Self {
        Self {
            dra: true,
            device_plugin: false,
            mig: false,
            memory_mib: None,
            driver_version: None,
            cuda_driver_version: None,
            brand: None,
            product_name: None,
            architecture: None,
            cuda_compute_capability: None,
            mig_profiles: None,
            pci_bus_ids: Vec::new(),
            addressing_mode: None,
            slice_layout: SliceLayout::default(),
        }
    }
}
