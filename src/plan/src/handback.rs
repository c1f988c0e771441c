//! One input for the plan and for what reads the cluster after it (the scale-down
//! analysis), and back to the caller: the planner's and the analysis' snapshots hand the
//! nodes and pods they were given back, so a caller needs no second copy of them and can
//! keep them for its next plan.
//!
//! Neither changes a node it was given, and they change a pod only by binding it (the
//! planner binds pods that were not bound; the analysis also moves the pods of the nodes
//! it drains); a snapshot keeps the nodes it was given first (in name order) and the pods
//! it was given first, in order. So the nodes and pods come back as they were given, once
//! the nodes and pods added after them are taken off and the bindings put back. The
//! planner's DRA catalog hands its ResourceSlices back the same way (the ones given first,
//! in order; the template slices it adds after them are taken off), so the scale-down
//! analysis reads the planner's slices, not a copy of every device made before planning.

use dra_sim::filters::FilterState;
use dra_sim::{ClusterObjects, FeatureGates};
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::scaledown::{ScaleDownOptions, ScaleDownReport};
use crate::{PlanOptions, PlanReport, prepare_with};

/// How many nodes and pods were given, and where the pods that may come back changed were
/// bound then.
struct Given {
    nodes: usize,
    pods: usize,
    slices: usize,
    /// Pods (by index) and their node name then.
    bound_to: Vec<(usize, Option<String>)>,
}

impl Given {
    /// For the planner, which binds pods that are not bound and no other: only those are
    /// noted. Noting every pod's node name made a copy of each (100,000 strings at the
    /// controller's scale, and as many to drop when putting them back; issue #28). An
    /// empty node name is not bound either (`dra_sim::pods::is_pending`), and comes back
    /// empty.
    fn note_unbound(nodes: &[Node], pods: &[Pod], slices: usize) -> Self {
        Self::note(nodes, pods, slices, |node_name| {
            node_name.is_none_or(str::is_empty)
        })
    }

    /// For the scale-down analysis, which also moves bound pods off the nodes it drains.
    fn note_all(nodes: &[Node], pods: &[Pod], slices: usize) -> Self {
        Self::note(nodes, pods, slices, |_| true)
    }

    fn note(
        nodes: &[Node],
        pods: &[Pod],
        slices: usize,
        noted: impl Fn(Option<&str>) -> bool,
    ) -> Self {
        Self {
            nodes: nodes.len(),
            pods: pods.len(),
            slices,
            bound_to: pods
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let node_name = p.spec.as_ref()?.node_name.as_deref();
                    noted(node_name).then(|| (i, node_name.map(str::to_owned)))
                })
                .collect(),
        }
    }

    /// The nodes and pods given, from a snapshot's: the ones it added taken off, and the
    /// noted pods bound where they were.
    fn restore(self, (mut nodes, mut pods): (Vec<Node>, Vec<Pod>)) -> (Vec<Node>, Vec<Pod>) {
        nodes.truncate(self.nodes);
        pods.truncate(self.pods);
        for (i, node_name) in self.bound_to {
            if let Some(spec) = pods.get_mut(i).and_then(|p| p.spec.as_mut()) {
                spec.node_name = node_name;
            }
        }
        (nodes, pods)
    }
}

/// The plan of `objects` (as [`crate::plan`]), and `objects` handed back as they were
/// given: nodes in name order, pods and ResourceSlices in their order, none of them
/// copied. Namespaces, the other DRA objects, extras and workload references are copied
/// for the planner (they are few) and handed back untouched.
#[must_use]
pub fn plan_handing_back(
    objects: ClusterObjects,
    gates: FeatureGates,
    options: &PlanOptions,
) -> (PlanReport, ClusterObjects) {
    let handed = plan_keeping_filters(objects, None, gates, options);
    (handed.plan, handed.objects)
}

/// What [`plan_keeping_filters`] hands back.
#[derive(Debug)]
pub struct HandedBack {
    /// The plan.
    pub plan: PlanReport,
    /// The objects, as they were given.
    pub objects: ClusterObjects,
    /// The filter state of the objects' nodes and bound pods, as given, or as the planner
    /// made it when none was given (or the one given did not hold them); `None` when it
    /// could not be rolled back to that.
    pub filters: Option<FilterState>,
    /// The filter state given was used (see [`dra_sim::snapshot::Snapshot::with_filters`]).
    pub filters_reused: bool,
}

/// [`plan_handing_back`] with the filter state of `objects`' nodes (in name order) and
/// bound pods kept from an earlier plan, when the caller has one, and that state handed
/// back too, without the plan's nodes and placements: a caller planning the same cluster
/// again (the controller, each loop) keeps it, and indexes only what changed.
#[must_use]
pub fn plan_keeping_filters(
    objects: ClusterObjects,
    filters: Option<FilterState>,
    gates: FeatureGates,
    options: &PlanOptions,
) -> HandedBack {
    let mut rest = objects;
    let given = Given::note_unbound(&rest.nodes, &rest.pods, rest.resource_slices.len());
    let given_slices = given.slices;
    let planning = ClusterObjects {
        nodes: std::mem::take(&mut rest.nodes),
        pods: std::mem::take(&mut rest.pods),
        resource_slices: std::mem::take(&mut rest.resource_slices),
        ..rest.clone()
    };
    let (plan, planned) =
        prepare_with(planning, filters, gates, options).run_keeping_state(options);
    let parts = planned.into_parts();
    let (nodes, pods) = given.restore((parts.nodes, parts.pods));
    let mut resource_slices = parts.resource_slices;
    resource_slices.truncate(given_slices);
    HandedBack {
        plan,
        objects: ClusterObjects {
            nodes,
            pods,
            resource_slices,
            ..rest
        },
        filters: parts.filters,
        filters_reused: parts.filters_reused,
    }
}

/// The scale-down analysis of `objects` after `plan` (as [`crate::scaledown::analyse`]),
/// and `objects`' nodes and pods handed back as they were given: nodes in name order,
/// pods in their order, neither copied. The rest of `objects` is dropped.
#[must_use]
pub fn analyse_handing_back(
    objects: ClusterObjects,
    gates: FeatureGates,
    plan: &PlanReport,
    options: &ScaleDownOptions,
) -> (ScaleDownReport, Vec<Node>, Vec<Pod>) {
    let given = Given::note_all(&objects.nodes, &objects.pods, objects.resource_slices.len());
    let (report, snapshot) =
        crate::scaledown::analyse_keeping_snapshot(objects, gates, plan, options);
    let (nodes, pods) = given.restore(snapshot.into_nodes_and_pods());
    (report, nodes, pods)
}

#[cfg(test)]
mod tests;
