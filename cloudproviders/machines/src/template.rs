//! [`node_template`]: machine shape + group options → the group's [`NodeTemplate`], for the node
//! image of a [`Platform`] (EKS AMI or GKE).

use std::collections::BTreeMap;

use dra_api::NodeTemplate;
use dra_api::new_node::{ARCH_LABEL, INSTANCE_TYPE_LABEL, OS_LABEL, REGION_LABEL, ZONE_LABEL};
use dra_sim::quantity::{Amount, NANO_PER_MILLI, Value};
use k8s_openapi::api::resource::v1::ResourceSliceSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::nvidia::{self, GpuDevices, GpuProduct};
use crate::options::{
    DEFAULT_CUDA_DRIVER_VERSION, DEFAULT_DRIVER_VERSION, DEFAULT_VM_MEMORY_OVERHEAD, GpuOptions,
    TemplateOptions,
};
use crate::shape::MachineShape;
use crate::{eks, gke};

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// Label the GCE persistent-disk CSI driver keys volume topology on; cluster-autoscaler's GCE
/// templates carry it with the zone.
pub const GKE_ZONE_LABEL: &str = "topology.gke.io/zone";

/// Whose node image and kubelet settings the template follows when the options leave a value
/// open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Platform {
    /// EKS AMI (`nodeadm`): max pods from the ENI limits, [`eks`] reservations, a flat share of
    /// memory for the hypervisor.
    #[default]
    Eks,
    /// GKE node image (Container-Optimized OS): [`gke`] reservations, kernel and OS shares.
    Gke,
}

/// A template that cannot be built from the shape and options given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// An override is not a Kubernetes quantity.
    #[error("{field}: {value:?} is not a Kubernetes quantity")]
    Quantity {
        /// The option, e.g. `kubeReserved.memory`.
        field: String,
        /// The text given.
        value: String,
    },
    /// An NVIDIA GPU model the built-in table does not know, with the DRA driver on.
    #[error(
        "instance type {instance_type}: NVIDIA GPU model {model:?} is not in the built-in table; set gpu.productName, gpu.architecture and gpu.cudaComputeCapability for this group"
    )]
    UnknownGpu {
        /// The instance type.
        instance_type: String,
        /// The cloud's model name.
        model: String,
    },
    /// A number in the options is out of range.
    #[error("{field}: {reason}")]
    Invalid {
        /// The option.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

fn parse(field: &str, q: &Quantity) -> Result<Amount, TemplateError> {
    Value::from_quantity(q)
        .map(|v| v.amount)
        .map_err(|_| TemplateError::Quantity {
            field: field.to_owned(),
            value: q.0.clone(),
        })
}

fn ki(bytes: u64) -> Quantity {
    Quantity(format!("{}Ki", bytes / 1024))
}

/// What is set aside of each resource before pods get any: kubeReserved + systemReserved +
/// the eviction threshold, in the resource's base unit (CPU in millicores, others in bytes).
struct Reserved {
    cpu_millis: u64,
    memory: u64,
    ephemeral: u64,
}

fn reserved(
    platform: Platform,
    shape: &MachineShape,
    options: &TemplateOptions,
    max_pods: u32,
    ephemeral_capacity: u64,
) -> Result<Reserved, TemplateError> {
    let mut out = match platform {
        Platform::Eks => Reserved {
            cpu_millis: eks::kube_reserved_cpu_millis(shape.vcpus),
            memory: eks::kube_reserved_memory_mib(max_pods) * MIB,
            ephemeral: eks::KUBE_RESERVED_EPHEMERAL_GIB * GIB,
        },
        Platform::Gke => Reserved {
            cpu_millis: gke::kube_reserved_cpu_millis(shape.vcpus),
            memory: gke::kube_reserved_memory_bytes(shape.memory_mib),
            ephemeral: 0,
        },
    };
    if let Some(kube) = &options.kube_reserved {
        out = Reserved {
            cpu_millis: 0,
            memory: 0,
            ephemeral: 0,
        };
        add(&mut out, "kubeReserved", kube)?;
    }
    add(&mut out, "systemReserved", &options.system_reserved)?;
    out.memory += match &options.eviction_hard_memory {
        Some(q) => to_u64(parse("evictionHardMemory", q)?.ceil_units()),
        None => match platform {
            Platform::Eks => eks::EVICTION_HARD_MEMORY_MIB * MIB,
            Platform::Gke => gke::EVICTION_HARD_MEMORY_MIB * MIB,
        },
    };
    let nodefs_percent = match platform {
        Platform::Eks => eks::EVICTION_HARD_NODEFS_PERCENT,
        Platform::Gke => gke::EVICTION_HARD_NODEFS_PERCENT,
    };
    out.ephemeral += ephemeral_capacity * nodefs_percent / 100;
    Ok(out)
}

/// Whole units (or milli-units), rounded up as the kubelet's `Value()` and
/// `MilliValue()` round; negative amounts count as zero.
fn to_u64(value: i128) -> u64 {
    u64::try_from(value.max(0)).unwrap_or(u64::MAX)
}

fn add(
    out: &mut Reserved,
    what: &str,
    map: &BTreeMap<String, Quantity>,
) -> Result<(), TemplateError> {
    for (name, q) in map {
        let value = parse(&format!("{what}.{name}"), q)?;
        match name.as_str() {
            "cpu" => out.cpu_millis += to_u64(value.ceil_scaled(NANO_PER_MILLI)),
            "memory" => out.memory += to_u64(value.ceil_units()),
            "ephemeral-storage" => out.ephemeral += to_u64(value.ceil_units()),
            _ => {}
        }
    }
    Ok(())
}

/// Extended resources device plugins report: `nvidia.com/gpu` (when the group runs the
/// plugin), `amd.com/gpu`, `habana.ai/gaudi`, `aws.amazon.com/neuron(core)` and
/// `vpc.amazonaws.com/efa`, the names Karpenter's AWS provider uses.
fn extended(shape: &MachineShape, gpu: &GpuOptions) -> BTreeMap<String, Quantity> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for g in &shape.gpus {
        let name = match g.manufacturer.to_ascii_lowercase().as_str() {
            "nvidia" if gpu.device_plugin => "nvidia.com/gpu",
            "amd" => "amd.com/gpu",
            "habana" => "habana.ai/gaudi",
            _ => continue,
        };
        *out.entry(name.to_owned()).or_default() += u64::from(g.count);
    }
    if let Some(n) = &shape.neuron {
        out.insert("aws.amazon.com/neuron".to_owned(), u64::from(n.count));
        out.insert(
            "aws.amazon.com/neuroncore".to_owned(),
            u64::from(n.count) * u64::from(n.cores_per_device),
        );
    }
    if shape.efa_interfaces > 0 {
        out.insert(
            "vpc.amazonaws.com/efa".to_owned(),
            u64::from(shape.efa_interfaces),
        );
    }
    out.into_iter()
        .map(|(k, v)| (k, Quantity(v.to_string())))
        .collect()
}

fn product_for(
    shape: &MachineShape,
    model: &str,
    memory_mib: u64,
    gpu: &GpuOptions,
) -> Result<GpuProduct, TemplateError> {
    let known = nvidia::nvidia_product(model, memory_mib);
    let overridden = gpu.product_name.is_some()
        && gpu.architecture.is_some()
        && gpu.cuda_compute_capability.is_some();
    let mut product = match known {
        Some(p) => p,
        None if overridden => GpuProduct {
            product_name: String::new(),
            architecture: String::new(),
            cuda_compute_capability: String::new(),
            mig_profiles: Vec::new(),
        },
        None => {
            return Err(TemplateError::UnknownGpu {
                instance_type: shape.instance_type.clone(),
                model: model.to_owned(),
            });
        }
    };
    if let Some(v) = &gpu.product_name {
        product.product_name.clone_from(v);
    }
    if let Some(v) = &gpu.architecture {
        product.architecture.clone_from(v);
    }
    if let Some(v) = &gpu.cuda_compute_capability {
        product.cuda_compute_capability.clone_from(v);
    }
    if let Some(v) = &gpu.mig_profiles {
        product.mig_profiles.clone_from(v);
    }
    Ok(product)
}

fn gpu_slices(
    shape: &MachineShape,
    gpu: &GpuOptions,
) -> Result<Vec<ResourceSliceSpec>, TemplateError> {
    let Some(nvidia) = shape
        .gpus
        .iter()
        .find(|g| g.manufacturer.eq_ignore_ascii_case("nvidia") && g.count > 0)
    else {
        return Ok(Vec::new());
    };
    if !gpu.dra {
        return Ok(Vec::new());
    }
    let memory_mib = gpu.memory_mib.unwrap_or(nvidia.memory_mib);
    let product = product_for(shape, &nvidia.name, memory_mib, gpu)?;
    Ok(nvidia::gpu_slices(&GpuDevices {
        product: &product,
        count: nvidia.count,
        memory_bytes: memory_mib * MIB,
        brand: gpu.brand.as_deref().unwrap_or("Nvidia"),
        driver_version: gpu
            .driver_version
            .as_deref()
            .unwrap_or(DEFAULT_DRIVER_VERSION),
        cuda_driver_version: gpu
            .cuda_driver_version
            .as_deref()
            .unwrap_or(DEFAULT_CUDA_DRIVER_VERSION),
        pci_bus_ids: &gpu.pci_bus_ids,
        addressing_mode: gpu.addressing_mode.as_deref(),
        mig: gpu.mig,
        layout: gpu.slice_layout,
    }))
}

/// The template of a node of shape `shape` under `options`: labels (instance type, arch, os,
/// zone, region, then the group's), capacity and allocatable as an EKS AMI kubelet reports
/// them, taints, and the slices the NVIDIA DRA driver publishes.
///
/// # Errors
/// [`TemplateError`] naming the option at fault.
pub fn node_template(
    shape: &MachineShape,
    options: &TemplateOptions,
) -> Result<NodeTemplate, TemplateError> {
    node_template_for(Platform::Eks, shape, options)
}

/// Memory the kubelet sees of the machine's: the options' flat share when set, else what the
/// platform's node image leaves.
fn memory_capacity(
    platform: Platform,
    shape: &MachineShape,
    options: &TemplateOptions,
) -> Result<u64, TemplateError> {
    let flat = |overhead: f64| -> Result<u64, TemplateError> {
        if !(0.0..1.0).contains(&overhead) {
            return Err(TemplateError::Invalid {
                field: "vmMemoryOverheadPercent",
                reason: format!("{overhead} is not in [0, 1)"),
            });
        }
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let overhead_mib = (shape.memory_mib as f64 * overhead).ceil().max(0.0) as u64;
        Ok(shape.memory_mib.saturating_sub(overhead_mib) * MIB)
    };
    match (platform, options.vm_memory_overhead_percent) {
        (_, Some(overhead)) => flat(overhead),
        (Platform::Eks, None) => flat(DEFAULT_VM_MEMORY_OVERHEAD),
        (Platform::Gke, None) => {
            let memory = shape.memory_mib * MIB;
            Ok(memory.saturating_sub(gke::kernel_reserved_bytes(memory, shape.architecture)))
        }
    }
}

/// [`node_template`] for the node image of `platform`. For [`Platform::Gke`]: memory capacity
/// less the kernel's share, boot disk less the OS's share, GKE's `kubeReserved` tiers, and the
/// `topology.gke.io/zone` label (see [`gke`]).
///
/// # Errors
/// [`TemplateError`] naming the option at fault.
pub fn node_template_for(
    platform: Platform,
    shape: &MachineShape,
    options: &TemplateOptions,
) -> Result<NodeTemplate, TemplateError> {
    let max_pods = options.max_pods.unwrap_or(shape.max_pods);
    let mut labels = BTreeMap::from([
        (INSTANCE_TYPE_LABEL.to_owned(), shape.instance_type.clone()),
        (
            ARCH_LABEL.to_owned(),
            shape.architecture.as_str().to_owned(),
        ),
        (OS_LABEL.to_owned(), "linux".to_owned()),
    ]);
    if let Some(zone) = &shape.zone {
        labels.insert(ZONE_LABEL.to_owned(), zone.clone());
        if platform == Platform::Gke {
            labels.insert(GKE_ZONE_LABEL.to_owned(), zone.clone());
        }
    }
    if let Some(region) = &shape.region {
        labels.insert(REGION_LABEL.to_owned(), region.clone());
    }
    labels.extend(options.labels.clone());

    let memory = memory_capacity(platform, shape, options)?;
    let disk = shape.root_volume_gib.map_or(0, |g| g * GIB);
    let ephemeral = match platform {
        Platform::Eks => disk,
        Platform::Gke if disk == 0 => 0,
        Platform::Gke => {
            disk.saturating_sub(gke::os_reserved_ephemeral_bytes(disk, shape.architecture))
        }
    };
    let reserved = reserved(platform, shape, options, max_pods, ephemeral)?;

    let extended = extended(shape, &options.gpu);
    let mut capacity = BTreeMap::from([
        ("cpu".to_owned(), Quantity(shape.vcpus.to_string())),
        ("memory".to_owned(), ki(memory)),
        ("pods".to_owned(), Quantity(max_pods.to_string())),
    ]);
    let cpu_millis = u64::from(shape.vcpus) * 1000;
    let mut allocatable = BTreeMap::from([
        (
            "cpu".to_owned(),
            Quantity(format!(
                "{}m",
                cpu_millis.saturating_sub(reserved.cpu_millis)
            )),
        ),
        (
            "memory".to_owned(),
            ki(memory.saturating_sub(reserved.memory)),
        ),
        ("pods".to_owned(), Quantity(max_pods.to_string())),
    ]);
    if ephemeral > 0 {
        capacity.insert("ephemeral-storage".to_owned(), ki(ephemeral));
        allocatable.insert(
            "ephemeral-storage".to_owned(),
            ki(ephemeral.saturating_sub(reserved.ephemeral)),
        );
    }
    capacity.extend(extended.clone());
    allocatable.extend(extended);
    capacity.extend(options.capacity.clone());
    allocatable.extend(options.allocatable.clone());

    let mut resource_slices = match &options.resource_slices {
        Some(slices) => slices.clone(),
        None => gpu_slices(shape, &options.gpu)?,
    };
    resource_slices.extend(options.extra_resource_slices.iter().cloned());

    Ok(NodeTemplate {
        labels,
        taints: options.taints.clone(),
        capacity,
        allocatable: Some(allocatable),
        resource_slices,
    })
}
