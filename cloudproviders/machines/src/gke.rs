//! How a GKE node's kubelet and node image set resources aside, for templates of GCE machines:
//!
//! * `kubeReserved` CPU and memory by GKE's published tiers ("Node allocatable",
//!   cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes). The memory tiers are
//!   those of node pools up to 1.36; 1.37 takes the smaller of them and a per-pod formula, so
//!   these are an upper bound on every version (a template never promises more than a node has).
//!   A node pool's real values travel in its instance template's kube-env (`kube_reserved`);
//!   the provider passes those as `kubeReserved` and these formulas are only the fallback.
//! * The memory the Linux kernel keeps and the boot-disk space the OS keeps on Container-Optimized
//!   OS, as cluster-autoscaler's GCE provider estimates them (`gce_reserved.go`
//!   `CalculateKernelReserved`, `CalculateOSReservedEphemeralStorage`), so `capacity` is what the
//!   kubelet reports.
//! * `evictionHard`: `memory.available` 100Mi and `nodefs.available` 10 %.

use crate::shape::Architecture;

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// Pods per node of a GKE Standard node pool unless it sets `maxPodsPerNode`.
pub const DEFAULT_MAX_PODS: u32 = 110;
/// `evictionHard` `memory.available`: 100Mi.
pub const EVICTION_HARD_MEMORY_MIB: u64 = 100;
/// `evictionHard` `nodefs.available`: 10 %.
pub const EVICTION_HARD_NODEFS_PERCENT: u64 = 10;

/// `kubeReserved` CPU in millicores. GKE's tiers (6 % of the first core, 1 % of the second,
/// 0.5 % of the next two, 0.25 % above four) are the ones the EKS AMI uses.
#[must_use]
pub fn kube_reserved_cpu_millis(vcpus: u32) -> u64 {
    crate::eks::kube_reserved_cpu_millis(vcpus)
}

/// `kubeReserved` memory in bytes for a machine of `memory_mib`: 255 MiB below 1 GiB, else 25 % of
/// the first 4 GiB, 20 % of the next 4, 10 % of the next 8, 6 % of the next 112 and 2 % above
/// 128 GiB.
#[must_use]
pub fn kube_reserved_memory_bytes(memory_mib: u64) -> u64 {
    let memory = memory_mib * MIB;
    if memory < GIB {
        return 255 * MIB;
    }
    // (tier size, percent)
    let tiers = [(4 * GIB, 25), (4 * GIB, 20), (8 * GIB, 10), (112 * GIB, 6)];
    let mut left = memory;
    let mut reserved = 0;
    for (size, percent) in tiers {
        let part = left.min(size);
        reserved += part * percent / 100;
        left -= part;
    }
    reserved + left * 2 / 100
}

/// Memory the kernel of a Container-Optimized OS node keeps, in bytes, for `memory` bytes of
/// machine memory (cluster-autoscaler's estimate): 1/64 of it plus 16 MiB, 64 MiB of software
/// IO TLB above 3 GiB, 8 MiB more up to 8 GiB, and a correction of 0.175 % capped at 248 MiB,
/// scaled by 0.9971 on arm64.
#[must_use]
pub fn kernel_reserved_bytes(memory: u64, arch: Architecture) -> u64 {
    let mut reserved = memory / 64 + 16 * MIB;
    if memory > 3 * GIB {
        reserved += 64 * MIB;
    }
    if memory <= 8 * GIB {
        reserved += 8 * MIB;
    }
    #[allow(clippy::cast_precision_loss)]
    let correction = (0.00175 * memory as f64).min((248 * MIB) as f64);
    reserved += to_u64(correction);
    if arch == Architecture::Arm64 {
        #[allow(clippy::cast_precision_loss)]
        let scaled = (reserved as f64 * 0.9971).round();
        reserved = to_u64(scaled);
    }
    reserved
}

/// Boot-disk bytes a Container-Optimized OS node keeps for the OS out of `disk` bytes
/// (cluster-autoscaler's estimate): 1.5635 % plus 4.148 GiB for the OS partitions, 0.1 % (at most
/// 100 MiB) of over-provisioning buffer, and 64 MiB more on arm64.
#[must_use]
pub fn os_reserved_ephemeral_bytes(disk: u64, arch: Architecture) -> u64 {
    #[allow(clippy::cast_precision_loss)]
    let disk_f = disk as f64;
    #[allow(clippy::cast_precision_loss)]
    let os = (0.015635 * disk_f).ceil() + (4.148 * GIB as f64).ceil();
    #[allow(clippy::cast_precision_loss)]
    let buffer = (0.001 * disk_f).ceil().min((100 * MIB) as f64);
    let mut reserved = to_u64(os) + to_u64(buffer);
    if arch == Architecture::Arm64 {
        reserved += 64 * MIB;
    }
    reserved
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn to_u64(value: f64) -> u64 {
    value.max(0.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_tiers_follow_the_published_examples() {
        // Below 1 GiB: 255 MiB.
        assert_eq!(kube_reserved_memory_bytes(512), 255 * MIB);
        // 4 GiB: 25 % = 1 GiB.
        assert_eq!(kube_reserved_memory_bytes(4096), GIB);
        // 16 GiB: 1 + 0.8 + 0.8 GiB.
        assert_eq!(
            kube_reserved_memory_bytes(16 * 1024),
            GIB + 4 * GIB / 5 + 4 * GIB / 5
        );
        // 32 GiB (the tiers' own example, 16 cores and 32 GiB): + 6 % of 16 GiB.
        assert_eq!(
            kube_reserved_memory_bytes(32 * 1024),
            GIB + 4 * GIB / 5 + 4 * GIB / 5 + 16 * GIB * 6 / 100
        );
    }

    #[test]
    fn cpu_tiers_match_the_published_example() {
        // 16 cores: 60 + 10 + 2 × 5 + 12 × 2.5 = 110m.
        assert_eq!(kube_reserved_cpu_millis(16), 110);
    }

    #[test]
    fn kernel_reservation_is_cluster_autoscalers_cos_estimate() {
        // 16 GiB on COS amd64: 256 MiB + 16 + 64 + min(0.175 % of 16 GiB, 248 MiB).
        let memory = 16 * GIB;
        let correction = (0.00175 * 16.0 * 1024.0 * 1024.0 * 1024.0) as u64;
        assert_eq!(
            kernel_reserved_bytes(memory, Architecture::Amd64),
            256 * MIB + 16 * MIB + 64 * MIB + correction
        );
        // The correction is capped at 248 MiB for large machines.
        let big = 1024 * GIB;
        assert_eq!(
            kernel_reserved_bytes(big, Architecture::Amd64),
            16 * GIB + 16 * MIB + 64 * MIB + 248 * MIB
        );
    }

    #[test]
    fn os_reserved_disk_is_cluster_autoscalers_cos_estimate() {
        // 100 GiB boot disk: ceil(1.5635 %) + ceil(4.148 GiB) + 100 MiB (0.1 % is more).
        let disk = 100 * GIB;
        let expected =
            (0.015635 * disk as f64).ceil() as u64 + (4.148 * GIB as f64).ceil() as u64 + 100 * MIB;
        assert_eq!(
            os_reserved_ephemeral_bytes(disk, Architecture::Amd64),
            expected
        );
    }
}
