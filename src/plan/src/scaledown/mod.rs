//! Scale-down analysis: which nodes to remove, and why the other underused ones stay.
//!
//! A node is a candidate when it belongs to a NodeGroup that may shrink and its utilisation
//! ([`utilization`]: the highest of CPU, memory and each DRA pool's devices and shared counters)
//! is below the group's threshold. Candidates are taken greedily, emptiest and most expensive
//! first (reserved capacity, already paid for, last), as cluster-autoscaler does; each must pass
//!
//! - the node rules ([`eligibility`]): no do-not-disrupt or scale-down-disabled annotation, no
//!   pending pod planned onto it (a scale-up and a scale-down in one loop never fight), its
//!   group above `minSize`, a reserved group only once its reservation has ended (or by opt-in);
//! - the pod rules: no pod without a controller, no kube-system pod without a budget, no
//!   `safe-to-evict: "false"`, no local storage, no do-not-disrupt pod;
//! - gangs ([`gangs`]): no running gang member, unless the gang opted in to moving whole and all
//!   its members fit elsewhere at once;
//! - PodDisruptionBudgets ([`pdb`]), spent across the pass;
//! - the drain simulation ([`drain`]): every pod fits on another node, not one removed in this
//!   pass, with its claims re-allocated.
//!
//! A node that passes is *unneeded*; it is removed once it has been unneeded for the group's
//! unneeded time (shorter for empty nodes), at most `max_parallelism` per pass. Without history
//! (`simulate`), every unneeded node counts as unneeded long enough.
//!
//! Pure: the snapshot, the plan and `now` come in; nothing is read from a clock or the network.

pub mod drain;
pub mod drain_error;
pub mod eligibility;
pub mod gangs;
pub mod keys;
mod pass;
pub mod pdb;
pub mod reasons;
pub mod report;
pub mod settings;
pub mod utilization;

use std::collections::{BTreeMap, BTreeSet};

use dra_sim::FeatureGates;
use dra_sim::objects::ClusterObjects;
use k8s_openapi::jiff::Timestamp;

use crate::report::PlanReport;

pub use reasons::{
    BlockingPod, BlockingPodReason, PodBlock, Removable, RemovableReason, ReservedHold,
    Unremovable, UnremovableReason,
};
pub use report::{ScaleDown, ScaleDownBlocked, ScaleDownReport, Unneeded};
pub use settings::{GroupSettings, ScaleDownDefaults};

/// Settings of one analysis.
#[derive(Debug, Clone, Default)]
pub struct ScaleDownOptions {
    /// Controller-wide defaults, under each group's `spec.scaleDown`.
    pub defaults: ScaleDownDefaults,
    /// The time of the analysis (for unneeded times, reservation ends and long-terminating
    /// pods); `None` in a simulation without `--now`.
    pub now: Option<Timestamp>,
    /// When each node was first found unneeded, as the controller remembers it; `None`: no
    /// history, every unneeded node is unneeded long enough.
    pub unneeded_since: Option<BTreeMap<String, Timestamp>>,
    /// At most this many removals per pass (0: no limit).
    pub max_parallelism: usize,
    /// Nodes whose removal is under way: their pods are re-homed first, they are no
    /// destination, and the ones whose pods cannot go anywhere any more come back in
    /// [`ScaleDownReport::abandoned`].
    pub in_progress: BTreeSet<String>,
    /// Nodes never to remove in this pass, with the reason (nodes still booting:
    /// [`Unremovable::Booting`]).
    pub keep: BTreeMap<String, Unremovable>,
}

/// Analyses `objects` (NodeGroups, DaemonSets, gang objects and PodDisruptionBudgets among
/// its extra objects) after `plan`, the scale-up plan made from the same objects: pods it
/// places on existing nodes take their room there first.
#[must_use]
pub fn analyse(
    objects: ClusterObjects,
    gates: FeatureGates,
    plan: &PlanReport,
    options: &ScaleDownOptions,
) -> ScaleDownReport {
    pass::Pass::new(objects, gates, plan, options).run()
}

/// [`analyse`], also handing back the snapshot the analysis leaves (for
/// [`crate::handback::analyse_handing_back`]).
pub(crate) fn analyse_keeping_snapshot(
    objects: ClusterObjects,
    gates: FeatureGates,
    plan: &PlanReport,
    options: &ScaleDownOptions,
) -> (ScaleDownReport, dra_sim::snapshot::Snapshot) {
    pass::Pass::new(objects, gates, plan, options).run_keeping_snapshot()
}
