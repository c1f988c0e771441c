//! Annotation, label and taint keys scale-down reads or writes. The controller and the
//! analysis share them from here.

/// Taint the controller puts on a node it is removing (effect `NoSchedule`, value the Unix time
/// it was put on), so that no pod lands there meanwhile; a restarted controller finds the
/// removals it had started by it.
pub const TO_BE_DELETED_TAINT: &str = "dra-autoscaler.io/to-be-deleted";

/// cluster-autoscaler's equivalent taint: a node it is removing is no destination either.
pub const CA_TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

/// cluster-autoscaler's node annotation: `"true"` keeps the node.
pub const SCALE_DOWN_DISABLED: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";

/// cluster-autoscaler's pod annotation: `"true"` lets a pod move whatever else would keep it
/// (no controller, kube-system, local storage); `"false"` keeps its node.
pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";

/// cluster-autoscaler's pod annotation listing (comma-separated) local volumes that do not
/// keep the node.
pub const SAFE_TO_EVICT_LOCAL_VOLUMES: &str =
    "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes";

/// cluster-autoscaler's pod annotation marking a pod as a DaemonSet pod without the owner.
pub const DAEMONSET_POD: &str = "cluster-autoscaler.kubernetes.io/daemonset-pod";

/// Karpenter's annotation, on a pod or a node: `"true"` keeps the node.
pub const KARPENTER_DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// Our own annotation, on a pod or a node: `"true"` keeps the node.
pub const DO_NOT_DISRUPT: &str = "dra-autoscaler.io/do-not-disrupt";

/// On a gang object (or, for Kueue pod groups that have none, on a member pod): `whole` lets
/// the autoscaler move the gang, but only all its members at once.
pub const GANG_DISRUPTION: &str = "dra-autoscaler.io/gang-disruption";

/// The one value of [`GANG_DISRUPTION`] that opts in.
pub const GANG_DISRUPTION_WHOLE: &str = "whole";

/// The kubelet's annotation on mirror pods of static pods.
pub const MIRROR_POD: &str = "kubernetes.io/config.mirror";

/// Whether an annotation (or label) map sets `key` to `"true"`.
#[must_use]
pub fn is_true(map: Option<&std::collections::BTreeMap<String, String>>, key: &str) -> bool {
    map.and_then(|m| m.get(key)).is_some_and(|v| v == "true")
}
