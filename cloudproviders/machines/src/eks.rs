//! How an EKS node's kubelet is configured by the EKS AMI's `nodeadm`
//! (awslabs/amazon-eks-ami, `nodeadm/internal/kubelet`): max pods from the ENI limits of the
//! default network card, `kubeReserved` from max pods and the CPU count, and `evictionHard`.
//! Allocatable = capacity − kubeReserved − systemReserved − evictionHard, as the kubelet
//! computes it.

/// `evictionHard` `memory.available` of the EKS AMI: 100Mi.
pub const EVICTION_HARD_MEMORY_MIB: u64 = 100;
/// `evictionHard` `nodefs.available` of the EKS AMI: 10 %.
pub const EVICTION_HARD_NODEFS_PERCENT: u64 = 10;
/// `kubeReserved` `ephemeral-storage` of the EKS AMI: 1Gi.
pub const KUBE_RESERVED_EPHEMERAL_GIB: u64 = 1;
/// The kubelet's default `maxPods`, used by nodeadm when it cannot learn the ENI limits.
pub const DEFAULT_MAX_PODS: u32 = 110;

/// Max pods as nodeadm computes it for the VPC CNI without prefix delegation:
/// `ENIs of the default network card × (IPv4 addresses per ENI − 1) + 2`.
#[must_use]
pub fn max_pods(enis_on_default_card: u32, ipv4_per_eni: u32) -> u32 {
    enis_on_default_card * ipv4_per_eni.saturating_sub(1) + 2
}

/// `kubeReserved` CPU in millicores: 6 % of the first core, 1 % of the second, 0.5 % of the
/// third and fourth, 0.25 % of every core above four (nodeadm `getCPUMillicoresToReserve`).
#[must_use]
pub fn kube_reserved_cpu_millis(vcpus: u32) -> u64 {
    let total = u64::from(vcpus) * 1000;
    // (range start, range end, hundredths of a percent)
    let bands = [(0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50)];
    let mut reserved: u64 = bands
        .iter()
        .filter(|(start, _, _)| total > *start)
        .map(|(start, end, rate)| (total.min(*end) - start) * rate / 10_000)
        .sum();
    if total > 4000 {
        reserved += (total - 4000) * 25 / 10_000;
    }
    reserved
}

/// `kubeReserved` memory in MiB: `11 × maxPods + 255` (nodeadm `getMemoryMebibytesToReserve`).
#[must_use]
pub fn kube_reserved_memory_mib(max_pods: u32) -> u64 {
    11 * u64::from(max_pods) + 255
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_pods_matches_the_eks_ami_table() {
        // nodeadm instance-info.jsonl: p5.48xlarge defaultMaxENIs 2, 50 IPs per ENI;
        // g6.xlarge 4 and 15; trn1.32xlarge 5 and 50. eni-max-pods.txt lists 100, 58, 247.
        assert_eq!(max_pods(2, 50), 100);
        assert_eq!(max_pods(4, 15), 58);
        assert_eq!(max_pods(5, 50), 247);
    }

    #[test]
    fn cpu_reservation_follows_the_bands() {
        assert_eq!(kube_reserved_cpu_millis(1), 60);
        assert_eq!(kube_reserved_cpu_millis(2), 70);
        assert_eq!(kube_reserved_cpu_millis(4), 80);
        // 80m for the first four cores plus 0.25 % of the other 188.
        assert_eq!(kube_reserved_cpu_millis(192), 80 + 470);
    }

    #[test]
    fn memory_reservation_is_eleven_mib_per_pod_plus_255() {
        assert_eq!(kube_reserved_memory_mib(110), 1465);
        assert_eq!(kube_reserved_memory_mib(100), 1355);
    }
}
