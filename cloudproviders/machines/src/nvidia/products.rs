//! What NVML reports for the GPU models clouds sell, keyed by the cloud's model name and memory.
//!
//! `productName`, `architecture` (go-nvlib's names) and the CUDA compute capability are the
//! values the NVIDIA DRA driver copies into its device attributes. MIG geometry follows NVIDIA's
//! GPU-instance profiles: seven compute slices and eight memory slices, profile ids as
//! `nvidia-smi mig -lgip` prints them (19 = 1g, 20 = 1g+me, 15 = 1g with two memory slices,
//! 14 = 2g, 9 = 3g, 5 = 4g, 0 = 7g); per-profile engine counts and memory from NVIDIA's NVML
//! mocks (NVIDIA/go-nvml `pkg/nvml/mock/shared/gpus`). Every value can be overridden per group.

use serde::{Deserialize, Serialize};

/// One GPU-instance (MIG) profile of a GPU model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigProfile {
    /// Profile name as NVML prints it, e.g. `1g.10gb`, `1g.10gb+me`.
    pub name: String,
    /// NVML GPU-instance profile id (part of the device name).
    pub id: u32,
    /// Memory slices one instance spans (placement size).
    pub memory_slices: u32,
    /// First memory slice of each possible placement.
    pub placements: Vec<u32>,
    /// Streaming multiprocessors.
    pub multiprocessors: u64,
    /// Copy engines.
    pub copy_engines: u64,
    /// Video decoders.
    pub decoders: u64,
    /// Video encoders.
    pub encoders: u64,
    /// JPEG engines.
    pub jpeg_engines: u64,
    /// Optical-flow engines.
    pub ofa_engines: u64,
    /// Memory in MiB.
    pub memory_mib: u64,
}

/// What NVML reports for one GPU model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuProduct {
    /// `nvmlDeviceGetName`, e.g. `NVIDIA H100 80GB HBM3`.
    pub product_name: String,
    /// go-nvlib's architecture name: `Ampere`, `Hopper`, `Blackwell`, `Ada Lovelace`, `Turing`.
    pub architecture: String,
    /// CUDA compute capability, `major.minor`.
    pub cuda_compute_capability: String,
    /// MIG profiles; empty when the GPU has no MIG.
    #[serde(default)]
    pub mig_profiles: Vec<MigProfile>,
}

/// Engine counts of one profile: (SMs, copy engines, decoders, encoders, JPEG, OFA, MiB).
type Engines = (u64, u64, u64, u64, u64, u64, u64);

fn profile(name: &str, id: u32, slices: u32, placements: &[u32], e: Engines) -> MigProfile {
    MigProfile {
        name: name.to_owned(),
        id,
        memory_slices: slices,
        placements: placements.to_vec(),
        multiprocessors: e.0,
        copy_engines: e.1,
        decoders: e.2,
        encoders: e.3,
        jpeg_engines: e.4,
        ofa_engines: e.5,
        memory_mib: e.6,
    }
}

/// The seven GPU-instance profiles every MIG GPU has, in one geometry: names and engines vary.
fn seven_profiles(names: [&str; 7], engines: [Engines; 7]) -> Vec<MigProfile> {
    let geometry: [(u32, u32, &[u32]); 7] = [
        (19, 1, &[0, 1, 2, 3, 4, 5, 6]),
        (20, 1, &[0, 1, 2, 3, 4, 5, 6]),
        (15, 2, &[0, 2, 4, 6]),
        (14, 2, &[0, 2, 4]),
        (9, 4, &[0, 4]),
        (5, 4, &[0]),
        (0, 8, &[0]),
    ];
    geometry
        .iter()
        .zip(names)
        .zip(engines)
        .map(|(((id, slices, placements), name), e)| profile(name, *id, *slices, placements, e))
        .collect()
}

fn a100_40gb() -> Vec<MigProfile> {
    seven_profiles(
        [
            "1g.5gb",
            "1g.5gb+me",
            "1g.10gb",
            "2g.10gb",
            "3g.20gb",
            "4g.20gb",
            "7g.40gb",
        ],
        [
            (14, 1, 1, 0, 0, 0, 4864),
            (14, 1, 1, 0, 1, 1, 4864),
            (14, 1, 1, 0, 0, 0, 9856),
            (28, 2, 1, 0, 0, 0, 9856),
            (42, 3, 2, 0, 0, 0, 19968),
            (56, 4, 2, 0, 0, 0, 19968),
            (96, 7, 5, 0, 1, 1, 40192),
        ],
    )
}

fn a100_80gb() -> Vec<MigProfile> {
    seven_profiles(
        [
            "1g.10gb",
            "1g.10gb+me",
            "1g.20gb",
            "2g.20gb",
            "3g.40gb",
            "4g.40gb",
            "7g.80gb",
        ],
        [
            (14, 1, 1, 0, 0, 0, 9856),
            (14, 1, 1, 0, 1, 1, 9856),
            (14, 1, 1, 0, 0, 0, 19968),
            (28, 2, 1, 0, 0, 0, 19968),
            (42, 3, 2, 0, 0, 0, 40192),
            (56, 4, 2, 0, 0, 0, 40192),
            (98, 7, 5, 0, 1, 1, 80384),
        ],
    )
}

fn h100_80gb() -> Vec<MigProfile> {
    seven_profiles(
        [
            "1g.10gb",
            "1g.10gb+me",
            "1g.20gb",
            "2g.20gb",
            "3g.40gb",
            "4g.40gb",
            "7g.80gb",
        ],
        [
            (16, 1, 1, 0, 0, 0, 10240),
            (16, 1, 1, 0, 1, 1, 10240),
            (16, 1, 1, 0, 0, 0, 20480),
            (32, 2, 1, 0, 0, 0, 20480),
            (48, 3, 2, 0, 0, 0, 40960),
            (64, 4, 2, 0, 0, 0, 40960),
            (112, 7, 5, 0, 0, 0, 81920),
        ],
    )
}

fn h200_141gb() -> Vec<MigProfile> {
    seven_profiles(
        [
            "1g.18gb",
            "1g.18gb+me",
            "1g.35gb",
            "2g.35gb",
            "3g.71gb",
            "4g.71gb",
            "7g.141gb",
        ],
        [
            (16, 1, 1, 0, 0, 0, 18432),
            (16, 1, 1, 0, 1, 1, 18432),
            (16, 1, 1, 0, 0, 0, 35840),
            (32, 2, 1, 0, 0, 0, 35840),
            (48, 3, 2, 0, 0, 0, 72704),
            (64, 4, 2, 0, 0, 0, 72704),
            (112, 7, 5, 0, 0, 0, 144_384),
        ],
    )
}

fn b200_180gb() -> Vec<MigProfile> {
    seven_profiles(
        [
            "1g.23gb",
            "1g.23gb+me",
            "1g.45gb",
            "2g.45gb",
            "3g.90gb",
            "4g.90gb",
            "7g.180gb",
        ],
        [
            (18, 1, 1, 0, 0, 0, 23552),
            (18, 1, 1, 1, 1, 1, 23552),
            (18, 1, 1, 0, 0, 0, 46080),
            (36, 2, 2, 1, 1, 1, 46080),
            (54, 3, 3, 2, 2, 2, 92160),
            (72, 4, 4, 2, 2, 2, 92160),
            (126, 7, 7, 4, 4, 4, 184_320),
        ],
    )
}

fn product(name: &str, arch: &str, cc: &str, mig: Vec<MigProfile>) -> GpuProduct {
    GpuProduct {
        product_name: name.to_owned(),
        architecture: arch.to_owned(),
        cuda_compute_capability: cc.to_owned(),
        mig_profiles: mig,
    }
}

/// The product a cloud's NVIDIA GPU model is, when we know it. `model` is the cloud's name
/// (EC2 `H100`, GCE `nvidia-h100-80gb`), matched case-insensitively; `memory_mib` tells the
/// 40 GB A100 from the 80 GB one.
#[must_use]
pub fn nvidia_product(model: &str, memory_mib: u64) -> Option<GpuProduct> {
    let model = model.to_ascii_lowercase();
    let model = model.strip_prefix("nvidia-").unwrap_or(&model);
    let model = model.strip_prefix("tesla-").unwrap_or(model);
    let family = model.split(['-', ' ']).next().unwrap_or(model);
    Some(match family {
        "a100" if memory_mib > 48 * 1024 => {
            product("NVIDIA A100-SXM4-80GB", "Ampere", "8.0", a100_80gb())
        }
        "a100" => product("NVIDIA A100-SXM4-40GB", "Ampere", "8.0", a100_40gb()),
        "h100" => product("NVIDIA H100 80GB HBM3", "Hopper", "9.0", h100_80gb()),
        "h200" => product("NVIDIA H200", "Hopper", "9.0", h200_141gb()),
        "b200" => product("NVIDIA B200", "Blackwell", "10.0", b200_180gb()),
        "b300" => product("NVIDIA B300", "Blackwell", "10.3", Vec::new()),
        "l4" => product("NVIDIA L4", "Ada Lovelace", "8.9", Vec::new()),
        "l40s" => product("NVIDIA L40S", "Ada Lovelace", "8.9", Vec::new()),
        "a10g" => product("NVIDIA A10G", "Ampere", "8.6", Vec::new()),
        "t4" => product("Tesla T4", "Turing", "7.5", Vec::new()),
        "t4g" => product("NVIDIA T4G", "Turing", "7.5", Vec::new()),
        "v100" => product("Tesla V100-SXM2-16GB", "Volta", "7.0", Vec::new()),
        "p100" => product("Tesla P100-PCIE-16GB", "Pascal", "6.0", Vec::new()),
        "p4" => product("Tesla P4", "Pascal", "6.1", Vec::new()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_40_and_80_gb_a100_are_told_apart_by_memory() {
        let small = nvidia_product("A100", 40960).expect("known");
        let large = nvidia_product("A100", 81920).expect("known");
        assert_eq!(small.product_name, "NVIDIA A100-SXM4-40GB");
        assert_eq!(large.product_name, "NVIDIA A100-SXM4-80GB");
        assert_eq!(small.mig_profiles[0].name, "1g.5gb");
        assert_eq!(large.mig_profiles[0].name, "1g.10gb");
    }

    #[test]
    fn gce_accelerator_names_map_to_the_same_products() {
        let aws = nvidia_product("H100", 81920).expect("known");
        let gce = nvidia_product("nvidia-h100-80gb", 81920).expect("known");
        assert_eq!(aws, gce);
        assert_eq!(
            nvidia_product("nvidia-l4", 22888)
                .expect("known")
                .architecture,
            "Ada Lovelace"
        );
        assert!(nvidia_product("nvidia-unknown-9000", 1).is_none());
    }

    #[test]
    fn every_mig_geometry_fills_eight_memory_slices_at_most() {
        for model in ["A100", "H100", "H200", "B200"] {
            let gpu = nvidia_product(model, 81920).expect("known");
            assert_eq!(gpu.mig_profiles.len(), 7, "{model}");
            for p in &gpu.mig_profiles {
                for start in &p.placements {
                    assert!(start + p.memory_slices <= 8, "{model} {}", p.name);
                }
            }
        }
    }
}
