//! GCE accelerator types (`machineTypes.accelerators[].guestAcceleratorType`, an instance
//! template's `guestAccelerators[].acceleratorType`) as the GPU models of [`crate::Gpu`].
//!
//! Compute Engine names GPUs by type (`nvidia-h100-80gb`) and does not report their memory, so
//! the memory of one GPU comes from this table, in the same units the AWS provider gets from
//! EC2 (`GpuInfo.MemoryInfo.SizeInMiB`) for the same model, which keeps the two clouds' slices
//! alike. Names and models: "GPU machine types" (cloud.google.com/compute/docs/gpus).

use crate::shape::Gpu;

/// (accelerator type, model as [`crate::nvidia::nvidia_product`] knows it, MiB of one GPU).
const NVIDIA: &[(&str, &str, u64)] = &[
    ("nvidia-b200", "B200", 183_359),
    ("nvidia-h200-141gb", "H200", 144_384),
    ("nvidia-h100-mega-80gb", "H100", 81_920),
    ("nvidia-h100-80gb", "H100", 81_920),
    ("nvidia-a100-80gb", "A100", 81_920),
    ("nvidia-tesla-a100", "A100", 40_960),
    ("nvidia-l4", "L4", 22_888),
    ("nvidia-tesla-t4", "T4", 16_384),
    ("nvidia-tesla-v100", "V100", 16_384),
    ("nvidia-tesla-p100", "P100", 16_384),
    ("nvidia-tesla-p4", "P4", 8_192),
];

/// The GPUs `count` accelerators of `accelerator_type` are: the model and memory from the table,
/// or, for a type the table does not know, manufacturer from the `nvidia-` prefix, the type as
/// the model and no memory (the group then names the product and memory in its options).
#[must_use]
pub fn accelerator_gpus(accelerator_type: &str, count: u32) -> Gpu {
    let short = accelerator_type
        .rsplit('/')
        .next()
        .unwrap_or(accelerator_type);
    match NVIDIA.iter().find(|(name, _, _)| *name == short) {
        Some((_, model, memory)) => Gpu {
            manufacturer: "NVIDIA".to_owned(),
            name: (*model).to_owned(),
            count,
            memory_mib: *memory,
        },
        None => Gpu {
            manufacturer: if short.starts_with("nvidia-") {
                "NVIDIA".to_owned()
            } else {
                String::new()
            },
            name: short.to_owned(),
            count,
            memory_mib: 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvidia::nvidia_product;

    #[test]
    fn every_known_type_is_a_known_product() {
        for (name, _, _) in NVIDIA {
            let gpu = accelerator_gpus(name, 1);
            assert!(
                nvidia_product(&gpu.name, gpu.memory_mib).is_some(),
                "{name} -> {gpu:?}"
            );
        }
    }

    #[test]
    fn the_a100_types_differ_by_memory_and_full_urls_are_accepted() {
        let small = accelerator_gpus("nvidia-tesla-a100", 16);
        let large = accelerator_gpus(
            "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/acceleratorTypes/nvidia-a100-80gb",
            8,
        );
        assert_eq!((small.memory_mib, small.count), (40_960, 16));
        assert_eq!((large.name.as_str(), large.memory_mib), ("A100", 81_920));
        let unknown = accelerator_gpus("nvidia-rtx-pro-6000", 8);
        assert_eq!(
            (unknown.manufacturer.as_str(), unknown.memory_mib),
            ("NVIDIA", 0)
        );
    }
}
