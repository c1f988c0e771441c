//! What a cloud says about a machine type: the input of [`crate::node_template`].
//!
//! Filled by a provider from its own API (EC2 `DescribeInstanceTypes`, GCE `machineTypes.get`)
//! or written by hand; nothing here knows which cloud it came from.

use serde::{Deserialize, Serialize};

/// CPU architecture as the kubelet reports it (`kubernetes.io/arch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    /// x86-64 (`amd64`).
    #[default]
    Amd64,
    /// 64-bit ARM (`arm64`).
    Arm64,
}

impl Architecture {
    /// The value of `kubernetes.io/arch` (Go's `GOARCH`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Amd64 => "amd64",
            Self::Arm64 => "arm64",
        }
    }
}

/// One kind of GPU in a machine (EC2 `GpuInfo.Gpus[]`, GCE `accelerators[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Gpu {
    /// Maker as the cloud names it: `NVIDIA`, `AMD`, `Habana`, ...
    pub manufacturer: String,
    /// Model as the cloud names it: `H100`, `A100`, `L4`, `nvidia-h100-80gb`, ...
    pub name: String,
    /// GPUs of this kind in one machine.
    pub count: u32,
    /// Memory of one GPU in MiB.
    pub memory_mib: u64,
}

/// AWS Neuron accelerators (Inferentia, Trainium) of a machine (EC2 `NeuronInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NeuronDevices {
    /// Device name, e.g. `Trainium`, `Inferentia2`.
    pub name: String,
    /// Devices in one machine.
    pub count: u32,
    /// NeuronCores per device.
    pub cores_per_device: u32,
    /// Memory of one device in MiB.
    pub memory_mib: u64,
}

/// The shape of one machine type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineShape {
    /// Instance or machine type name, e.g. `p5.48xlarge`.
    pub instance_type: String,
    /// Virtual CPUs.
    pub vcpus: u32,
    /// Memory the cloud sells, in MiB (before the hypervisor's share is taken).
    pub memory_mib: u64,
    /// CPU architecture.
    #[serde(default)]
    pub architecture: Architecture,
    /// Pods the kubelet is configured to run (see [`crate::eks::max_pods`]).
    pub max_pods: u32,
    /// GPUs, one entry per kind.
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    /// Neuron devices.
    #[serde(default)]
    pub neuron: Option<NeuronDevices>,
    /// EFA interfaces the machine can attach (0 = no EFA).
    #[serde(default)]
    pub efa_interfaces: u32,
    /// Zone every machine of the group lands in, when it is one zone.
    #[serde(default)]
    pub zone: Option<String>,
    /// Region of the machines.
    #[serde(default)]
    pub region: Option<String>,
    /// Size of the root volume in GiB, which the kubelet reports as `ephemeral-storage`.
    #[serde(default)]
    pub root_volume_gib: Option<u64>,
}
