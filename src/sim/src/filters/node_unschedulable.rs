//! NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes only pods
//! that tolerate the `node.kubernetes.io/unschedulable:NoSchedule` taint the
//! node lifecycle controller puts on it.

use k8s_openapi::api::core::v1::{Node, Taint, Toleration};

use super::taint_toleration::tolerations_tolerate;

/// Upstream plugin name.
pub const NAME: &str = "NodeUnschedulable";
/// Upstream's `ErrReasonUnschedulable`.
pub const REASON: &str = "node(s) were unschedulable";
/// The taint a cordon implies.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Does the node accept the pod? Upstream checks the implied taint even when
/// the node object does not carry it yet.
pub(crate) fn passes(node: &Node, tolerations: &[Toleration]) -> bool {
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    if !cordoned {
        return true;
    }
    let taint = Taint {
        key: UNSCHEDULABLE_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    tolerations_tolerate(tolerations, &taint)
}
