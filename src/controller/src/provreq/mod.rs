//! ProvisioningRequests (`autoscaling.x-k8s.io/v1`) and CapacityBuffers
//! (`v1beta1`) on the controller side: which to watch ([`apis`]), the
//! conditions cluster-autoscaler writes on a request, computed from the plan
//! and this loop's scale-ups ([`conditions`]), and writing them with each
//! buffer's status ([`write`]). `dra_plan::provreq` and `dra_plan::buffers`
//! decide what happens to each.

pub mod apis;
pub mod conditions;
pub mod write;

use crate::snapshot::GangObject;

/// Whether `objects` hold a ProvisioningRequest or a CapacityBuffer, which
/// the planner plans whether or not a pod is pending.
#[must_use]
pub fn any_planned(objects: &[GangObject]) -> bool {
    objects
        .iter()
        .any(|o| o.kind == dra_plan::provreq::KIND || o.kind == dra_plan::buffers::KIND)
}
