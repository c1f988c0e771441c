//! What every role of the planner shares: the options a plan runs under and
//! the record of one attempt (placements, new nodes, cost, reasons).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::Expander;
use crate::gang::GangRef;
use crate::provreq::RetryBackoff;

/// Planner settings. `now` is an input, never read from a clock.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Group choice.
    pub expander: Expander,
    /// The current time, for reservation end times; `None` ignores them.
    pub now: Option<Timestamp>,
    /// A reservation ending sooner than this from `now` is not used.
    pub min_reservation_left: SignedDuration,
    /// cluster-autoscaler's `--check-capacity-processor-instance`: which
    /// ProvisioningRequests this autoscaler serves (see
    /// [`crate::provreq`]); empty serves those that name no instance.
    pub check_capacity_processor_instance: String,
    /// The retry backoffs of ProvisioningRequests left `Provisioned=False`
    /// by earlier plans, with upstream's initial and maximum backoff (see
    /// [`crate::provreq::backoff`]). Read, never changed, by a plan.
    pub provisioning_request_backoff: RetryBackoff,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            expander: Expander::default(),
            now: None,
            min_reservation_left: SignedDuration::from_hours(1),
            check_capacity_processor_instance: String::new(),
            provisioning_request_backoff: RetryBackoff::default(),
        }
    }
}

/// The scale-ups of a plan as it is built, per group index: (new nodes, the
/// gangs they serve, nodes that must start together).
pub(super) type ScaleUps = BTreeMap<usize, (usize, BTreeSet<GangRef>, usize)>;

/// One member's place in an attempt.
#[derive(Debug, Clone)]
pub(super) struct Placement {
    pub(super) pod_index: usize,
    pub(super) node_index: usize,
    /// The group of the node when it is new in this plan.
    pub(super) new_group: Option<usize>,
    pub(super) reported: Vec<dra_sim::report::ClaimAllocation>,
}

/// The result of trying one gang in one topology domain.
#[derive(Debug, Clone, Default)]
pub(super) struct Attempt {
    pub(super) placements: Vec<Placement>,
    /// New nodes per group index.
    pub(super) new_nodes: BTreeMap<usize, usize>,
    pub(super) cost: f64,
    /// Why members could not be placed, per group or overall.
    pub(super) reasons: Vec<String>,
    /// Members whose claims the scheduler would fail outright.
    pub(super) errors: BTreeMap<usize, String>,
    /// In a restricted domain, the first refusal an existing node of it
    /// gave (`node NAME: reason`), said when the gang does not fit there.
    pub(super) existing_refusal: Option<String>,
    /// Under least-waste, the share of CPU and memory its new nodes leave
    /// unused (see [`super::expander::Expander::LeastWaste`]).
    pub(super) waste: f64,
}

impl Attempt {
    pub(super) fn node_count(&self) -> usize {
        self.new_nodes.values().sum()
    }
}
