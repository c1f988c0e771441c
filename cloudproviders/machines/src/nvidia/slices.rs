//! The ResourceSlices `gpu.nvidia.com` publishes for one node, as its kubelet plugin builds them
//! (cmd/gpu-kubelet-plugin: `deviceinfo.go`, `partitions.go`, `mig.go`, `driver.go`).
//!
//! * Without MIG: one slice with one device per GPU, named `gpu-<minor>`, attributes `type=gpu`,
//!   `uuid`, `productName`, `brand`, `architecture`, `cudaComputeCapability`, `driverVersion`,
//!   `cudaDriverVersion` (the last three as versions), plus `resource.kubernetes.io/pciBusID`
//!   and `addressingMode` when known; capacity `memory` in bytes.
//! * With MIG (the driver's DynamicMIG): per GPU one shared counter set `gpu-<minor>-counter-set`
//!   holding every capacity as a counter (`multiprocessors`, `copy-engines`, `decoders`,
//!   `encoders`, `jpeg-engines`, `ofa-engines`, `memory`, the per-dimension maximum over all
//!   profiles) plus `memory-slice-<i>` = 1 per memory slice; the full GPU consumes all of it and
//!   every possible MIG placement `gpu-<minor>-mig-<profile>-<profileId>-<start>` (type `mig`)
//!   consumes its profile's counters and its memory slices. Devices are sorted by name within a
//!   GPU. Kubernetes 1.35+ gets one slice with all counter sets followed by one device slice per
//!   GPU; 1.34 gets one slice per GPU holding its counter set and devices.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    Counter, CounterSet, Device, DeviceAttribute, DeviceCapacity, DeviceCounterConsumption,
    ResourcePool, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

use super::products::{GpuProduct, MigProfile};

/// The driver name the NVIDIA DRA driver registers.
pub const DRIVER: &str = "gpu.nvidia.com";
/// Prefix of the standard device attributes (k8s.io/dynamic-resource-allocation/deviceattribute).
const STANDARD_PREFIX: &str = "resource.kubernetes.io/";

/// How the driver splits shared counters and devices into slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum SliceLayout {
    /// Kubernetes 1.35 and later: one slice with every counter set, then one per GPU.
    #[default]
    Split,
    /// Kubernetes 1.34: one slice per GPU with its counter set and devices.
    Combined,
}

/// The GPUs of one machine, as the driver will see them.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuDevices<'a> {
    /// What NVML reports for the model.
    pub product: &'a GpuProduct,
    /// GPUs in the machine.
    pub count: u32,
    /// Memory of one GPU in bytes (`memory` capacity of a whole GPU without MIG).
    pub memory_bytes: u64,
    /// NVML brand string (`Nvidia` for data-center GPUs on current drivers).
    pub brand: &'a str,
    /// NVIDIA driver version of the node image.
    pub driver_version: &'a str,
    /// CUDA driver version of the node image.
    pub cuda_driver_version: &'a str,
    /// PCI bus ids of the GPUs in minor order, when known for the machine type.
    pub pci_bus_ids: &'a [String],
    /// `addressingMode` on coherent-memory systems (`HMM`, `ATS`), when known.
    pub addressing_mode: Option<&'a str>,
    /// Whether MIG partitions are published (the group turns MIG on).
    pub mig: bool,
    /// Slice layout for the cluster's Kubernetes version.
    pub layout: SliceLayout,
}

fn string(value: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(value.to_owned()),
        ..DeviceAttribute::default()
    }
}

/// A version attribute the way the driver writes it: `semver.MustParse(v).String()`, which
/// completes `9.0` to `9.0.0` and drops leading zeros.
fn version(value: &str) -> DeviceAttribute {
    let mut parts: Vec<String> = value
        .split('.')
        .map(|p| p.trim_start_matches('0'))
        .map(|p| {
            if p.is_empty() {
                "0".to_owned()
            } else {
                p.to_owned()
            }
        })
        .collect();
    while parts.len() < 3 {
        parts.push("0".to_owned());
    }
    DeviceAttribute {
        version: Some(parts.join(".")),
        ..DeviceAttribute::default()
    }
}

fn quantity(value: u64) -> Quantity {
    Quantity(value.to_string())
}

fn capacity(value: u64) -> DeviceCapacity {
    DeviceCapacity {
        value: quantity(value),
        ..DeviceCapacity::default()
    }
}

/// A placeholder GPU uuid for a template: the real one is only known once NVML runs.
fn uuid(minor: u32) -> String {
    format!("GPU-00000000-0000-0000-0000-{minor:012}")
}

fn common_attributes(gpus: &GpuDevices<'_>, minor: u32) -> BTreeMap<String, DeviceAttribute> {
    let product = gpus.product;
    let mut attrs = BTreeMap::from([
        ("productName".to_owned(), string(&product.product_name)),
        ("brand".to_owned(), string(gpus.brand)),
        ("architecture".to_owned(), string(&product.architecture)),
        (
            "cudaComputeCapability".to_owned(),
            version(&product.cuda_compute_capability),
        ),
        ("driverVersion".to_owned(), version(gpus.driver_version)),
        (
            "cudaDriverVersion".to_owned(),
            version(gpus.cuda_driver_version),
        ),
    ]);
    if let Some(bus) = usize::try_from(minor)
        .ok()
        .and_then(|i| gpus.pci_bus_ids.get(i))
    {
        attrs.insert(format!("{STANDARD_PREFIX}pciBusID"), string(bus));
    }
    if let Some(mode) = gpus.addressing_mode {
        attrs.insert("addressingMode".to_owned(), string(mode));
    }
    attrs
}

fn gpu_attributes(gpus: &GpuDevices<'_>, minor: u32) -> BTreeMap<String, DeviceAttribute> {
    let mut attrs = common_attributes(gpus, minor);
    attrs.insert("type".to_owned(), string("gpu"));
    attrs.insert("uuid".to_owned(), string(&uuid(minor)));
    attrs
}

/// A profile's capacities under the driver's names (`CommonCapacitiesMig`), memory in bytes.
fn mig_capacities(p: &MigProfile) -> BTreeMap<&'static str, u64> {
    BTreeMap::from([
        ("multiprocessors", p.multiprocessors),
        ("copyEngines", p.copy_engines),
        ("decoders", p.decoders),
        ("encoders", p.encoders),
        ("jpegEngines", p.jpeg_engines),
        ("ofaEngines", p.ofa_engines),
        ("memory", p.memory_mib * 1024 * 1024),
    ])
}

/// The counter name of a capacity (`camelToDNSName`): `copyEngines` -> `copy-engines`.
fn counter_name(capacity: &str) -> String {
    let mut out = String::new();
    for (i, c) in capacity.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

fn counters(
    capacities: &BTreeMap<&'static str, u64>,
    slices: std::ops::Range<u32>,
) -> BTreeMap<String, Counter> {
    let mut counters: BTreeMap<String, Counter> = capacities
        .iter()
        .map(|(name, value)| {
            (
                counter_name(name),
                Counter {
                    value: quantity(*value),
                },
            )
        })
        .collect();
    for slice in slices {
        counters.insert(
            format!("memory-slice-{slice}"),
            Counter { value: quantity(1) },
        );
    }
    counters
}

/// Per capacity, the largest value any profile has (`inspectMigProfilesAndPlacements`), and
/// the memory slice count (the largest placement size).
fn full_gpu_capacities(profiles: &[MigProfile]) -> (BTreeMap<&'static str, u64>, u32) {
    let mut max: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut slices = 0;
    for p in profiles {
        for (name, value) in mig_capacities(p) {
            let entry = max.entry(name).or_default();
            *entry = (*entry).max(value);
        }
        slices = slices.max(p.memory_slices);
    }
    (max, slices)
}

/// RFC 1123 form of a profile name inside a device name: `1g.10gb+me` -> `1g10gb-me`.
fn profile_token(name: &str) -> String {
    name.replace('.', "")
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect::<String>()
        .trim_matches('-')
        .to_owned()
}

fn plain_device(gpus: &GpuDevices<'_>, minor: u32) -> Device {
    Device {
        name: format!("gpu-{minor}"),
        attributes: Some(gpu_attributes(gpus, minor)),
        capacity: Some(BTreeMap::from([(
            "memory".to_owned(),
            capacity(gpus.memory_bytes),
        )])),
        ..Device::default()
    }
}

/// Devices and the counter set of one GPU in MIG mode.
fn partitioned(gpus: &GpuDevices<'_>, minor: u32) -> (Vec<Device>, CounterSet) {
    let profiles = &gpus.product.mig_profiles;
    let (full, slice_count) = full_gpu_capacities(profiles);
    let set = format!("gpu-{minor}-counter-set");
    let all_counters = counters(&full, 0..slice_count);
    let mut devices = vec![Device {
        name: format!("gpu-{minor}"),
        attributes: Some(gpu_attributes(gpus, minor)),
        capacity: Some(
            full.iter()
                .map(|(name, value)| ((*name).to_owned(), capacity(*value)))
                .collect(),
        ),
        consumes_counters: Some(vec![DeviceCounterConsumption {
            counter_set: set.clone(),
            counters: all_counters.clone(),
            ..DeviceCounterConsumption::default()
        }]),
        ..Device::default()
    }];
    for p in profiles {
        let caps = mig_capacities(p);
        for start in &p.placements {
            let mut attrs = common_attributes(gpus, minor);
            attrs.insert("type".to_owned(), string("mig"));
            attrs.insert("parentUUID".to_owned(), string(&uuid(minor)));
            attrs.insert("profile".to_owned(), string(&p.name));
            devices.push(Device {
                name: format!(
                    "gpu-{minor}-mig-{}-{}-{start}",
                    profile_token(&p.name),
                    p.id
                ),
                attributes: Some(attrs),
                capacity: Some(
                    caps.iter()
                        .map(|(name, value)| ((*name).to_owned(), capacity(*value)))
                        .collect(),
                ),
                consumes_counters: Some(vec![DeviceCounterConsumption {
                    counter_set: set.clone(),
                    counters: counters(&caps, *start..start + p.memory_slices),
                    ..DeviceCounterConsumption::default()
                }]),
                ..Device::default()
            });
        }
    }
    devices.sort_by(|a, b| a.name.cmp(&b.name));
    (
        devices,
        CounterSet {
            name: set,
            counters: all_counters,
        },
    )
}

fn slice(devices: Option<Vec<Device>>, counters: Option<Vec<CounterSet>>) -> ResourceSliceSpec {
    ResourceSliceSpec {
        driver: DRIVER.to_owned(),
        // Pool name and node name are the node's, filled in per node (NodeTemplate).
        pool: ResourcePool {
            name: String::new(),
            generation: 1,
            resource_slice_count: 0,
        },
        devices,
        shared_counters: counters,
        ..ResourceSliceSpec::default()
    }
}

/// The slices the driver publishes for `gpus` (none for zero GPUs). MIG is used only when asked
/// for and the product has MIG profiles.
#[must_use]
pub fn gpu_slices(gpus: &GpuDevices<'_>) -> Vec<ResourceSliceSpec> {
    if gpus.count == 0 {
        return Vec::new();
    }
    let mut out = if gpus.mig && !gpus.product.mig_profiles.is_empty() {
        let per_gpu: Vec<(Vec<Device>, CounterSet)> =
            (0..gpus.count).map(|m| partitioned(gpus, m)).collect();
        match gpus.layout {
            SliceLayout::Split => {
                let sets = per_gpu.iter().map(|(_, set)| set.clone()).collect();
                std::iter::once(slice(None, Some(sets)))
                    .chain(per_gpu.into_iter().map(|(d, _)| slice(Some(d), None)))
                    .collect()
            }
            SliceLayout::Combined => per_gpu
                .into_iter()
                .map(|(d, set)| slice(Some(d), Some(vec![set])))
                .collect(),
        }
    } else {
        vec![slice(
            Some((0..gpus.count).map(|m| plain_device(gpus, m)).collect()),
            None,
        )]
    };
    let total = i64::try_from(out.len()).unwrap_or(1);
    for s in &mut out {
        s.pool.resource_slice_count = total;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvidia::nvidia_product;

    fn h100(count: u32, mig: bool, layout: SliceLayout) -> Vec<ResourceSliceSpec> {
        let product = nvidia_product("H100", 81920).expect("known");
        gpu_slices(&GpuDevices {
            product: &product,
            count,
            memory_bytes: 81920 * 1024 * 1024,
            brand: "Nvidia",
            driver_version: "570.172.08",
            cuda_driver_version: "12.8",
            pci_bus_ids: &[],
            addressing_mode: None,
            mig,
            layout,
        })
    }

    fn attr<'a>(device: &'a Device, name: &str) -> &'a DeviceAttribute {
        &device.attributes.as_ref().expect("attributes")[name]
    }

    #[test]
    fn without_mig_one_slice_holds_one_device_per_gpu() {
        let slices = h100(8, false, SliceLayout::Split);
        assert_eq!(slices.len(), 1);
        assert_eq!(slices[0].driver, "gpu.nvidia.com");
        assert_eq!(slices[0].pool.resource_slice_count, 1);
        let devices = slices[0].devices.as_ref().expect("devices");
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"
            ]
        );
        let gpu = &devices[3];
        assert_eq!(attr(gpu, "type").string.as_deref(), Some("gpu"));
        assert_eq!(
            attr(gpu, "productName").string.as_deref(),
            Some("NVIDIA H100 80GB HBM3")
        );
        assert_eq!(attr(gpu, "architecture").string.as_deref(), Some("Hopper"));
        // Versions as semver.MustParse(...).String() prints them.
        assert_eq!(
            attr(gpu, "cudaComputeCapability").version.as_deref(),
            Some("9.0.0")
        );
        assert_eq!(
            attr(gpu, "driverVersion").version.as_deref(),
            Some("570.172.8")
        );
        assert_eq!(
            attr(gpu, "cudaDriverVersion").version.as_deref(),
            Some("12.8.0")
        );
        assert_eq!(
            gpu.capacity.as_ref().expect("capacity")["memory"].value.0,
            (81920u64 * 1024 * 1024).to_string()
        );
        assert!(gpu.consumes_counters.is_none());
    }

    #[test]
    fn mig_on_kubernetes_135_puts_counter_sets_first_then_one_slice_per_gpu() {
        let slices = h100(2, true, SliceLayout::Split);
        assert_eq!(slices.len(), 3);
        assert!(slices.iter().all(|s| s.pool.resource_slice_count == 3));
        let sets = slices[0].shared_counters.as_ref().expect("counter sets");
        assert!(slices[0].devices.is_none());
        assert_eq!(sets[0].name, "gpu-0-counter-set");
        assert_eq!(sets[1].name, "gpu-1-counter-set");
        let set = &sets[0].counters;
        assert_eq!(set["multiprocessors"].value.0, "112");
        assert_eq!(set["copy-engines"].value.0, "7");
        assert_eq!(set["jpeg-engines"].value.0, "1");
        assert_eq!(set["memory"].value.0, (81920u64 << 20).to_string());
        assert_eq!(
            (0..8)
                .filter(|i| set.contains_key(&format!("memory-slice-{i}")))
                .count(),
            8
        );
        let devices = slices[1].devices.as_ref().expect("devices of gpu 0");
        // 7 + 7 + 4 + 3 + 2 + 1 + 1 placements and the whole GPU.
        assert_eq!(devices.len(), 26);
        assert!(devices.windows(2).all(|w| w[0].name < w[1].name), "sorted");
        let mig = devices
            .iter()
            .find(|d| d.name == "gpu-0-mig-3g40gb-9-4")
            .expect("3g.40gb at memory slice 4");
        assert_eq!(attr(mig, "type").string.as_deref(), Some("mig"));
        assert_eq!(attr(mig, "profile").string.as_deref(), Some("3g.40gb"));
        let consumed = &mig.consumes_counters.as_ref().expect("consumes")[0];
        assert_eq!(consumed.counter_set, "gpu-0-counter-set");
        for slice in 4..8 {
            assert_eq!(
                consumed.counters[&format!("memory-slice-{slice}")].value.0,
                "1"
            );
        }
        assert!(!consumed.counters.contains_key("memory-slice-3"));
        assert!(devices.iter().any(|d| d.name == "gpu-0-mig-1g10gb-me-20-6"));
    }

    #[test]
    fn mig_on_kubernetes_134_combines_counters_and_devices_per_gpu() {
        let slices = h100(2, true, SliceLayout::Combined);
        assert_eq!(slices.len(), 2);
        for (i, s) in slices.iter().enumerate() {
            let sets = s.shared_counters.as_ref().expect("counter set");
            assert_eq!(sets.len(), 1);
            assert_eq!(sets[0].name, format!("gpu-{i}-counter-set"));
            assert!(s.devices.as_ref().is_some_and(|d| d.len() == 26));
        }
    }

    #[test]
    fn mig_is_ignored_for_gpus_without_mig() {
        let product = nvidia_product("L4", 22888).expect("known");
        let slices = gpu_slices(&GpuDevices {
            product: &product,
            count: 1,
            memory_bytes: 22888 << 20,
            brand: "Nvidia",
            driver_version: "570.172.08",
            cuda_driver_version: "12.8",
            pci_bus_ids: &["0000:31:00.0".to_owned()],
            addressing_mode: None,
            mig: true,
            layout: SliceLayout::Split,
        });
        assert_eq!(slices.len(), 1);
        let device = &slices[0].devices.as_ref().expect("devices")[0];
        assert_eq!(
            attr(device, "resource.kubernetes.io/pciBusID")
                .string
                .as_deref(),
            Some("0000:31:00.0")
        );
    }
}
