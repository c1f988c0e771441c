//! One input for the plan and for what reads the cluster after it (the scale-down
//! analysis), and back to the caller: the planner's and the analysis' snapshots hand the
//! nodes and pods they were given back, so a caller needs no second copy of them and can
//! keep them for its next plan.
//!
//! Neither changes a node it was given, and they change a pod only by binding it; a
//! snapshot keeps the nodes it was given first (in name order) and the pods it was given
//! first, in order. So the nodes and pods come back as they were given, once the nodes
//! and pods added after them and the bindings made are taken off. The planner's DRA
//! catalog hands its ResourceSlices back the same way (the ones given first, in order;
//! the template slices it adds after them are taken off), so the scale-down analysis
//! reads the planner's slices, not a copy of every device made before planning.

use dra_sim::{ClusterObjects, FeatureGates};
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::scaledown::{ScaleDownOptions, ScaleDownReport};
use crate::{PlanOptions, PlanReport, prepare_for};

/// How many nodes and pods were given, and where each pod was bound then.
struct Given {
    nodes: usize,
    pods: usize,
    slices: usize,
    /// Per pod, its node name (`None` for a pod without a spec).
    bound_to: Vec<Option<Option<String>>>,
}

impl Given {
    fn note(nodes: &[Node], pods: &[Pod], slices: usize) -> Self {
        Self {
            nodes: nodes.len(),
            pods: pods.len(),
            slices,
            bound_to: pods
                .iter()
                .map(|p| p.spec.as_ref().map(|s| s.node_name.clone()))
                .collect(),
        }
    }

    /// The nodes and pods of a snapshot made from the ones given, as they were given.
    fn restore(self, (mut nodes, mut pods): (Vec<Node>, Vec<Pod>)) -> (Vec<Node>, Vec<Pod>) {
        nodes.truncate(self.nodes);
        pods.truncate(self.pods);
        for (pod, node_name) in pods.iter_mut().zip(self.bound_to) {
            if let (Some(spec), Some(node_name)) = (pod.spec.as_mut(), node_name) {
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
    let mut rest = objects;
    let given = Given::note(&rest.nodes, &rest.pods, rest.resource_slices.len());
    let given_slices = given.slices;
    let planning = ClusterObjects {
        nodes: std::mem::take(&mut rest.nodes),
        pods: std::mem::take(&mut rest.pods),
        resource_slices: std::mem::take(&mut rest.resource_slices),
        ..rest.clone()
    };
    let (plan, planned) = prepare_for(planning, gates, options).run_keeping_state(options);
    let (nodes, pods, mut resource_slices) = planned.into_nodes_pods_and_slices();
    let (nodes, pods) = given.restore((nodes, pods));
    resource_slices.truncate(given_slices);
    (
        plan,
        ClusterObjects {
            nodes,
            pods,
            resource_slices,
            ..rest
        },
    )
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
    let given = Given::note(&objects.nodes, &objects.pods, objects.resource_slices.len());
    let (report, snapshot) =
        crate::scaledown::analyse_keeping_snapshot(objects, gates, plan, options);
    let (nodes, pods) = given.restore(snapshot.into_nodes_and_pods());
    (report, nodes, pods)
}

#[cfg(test)]
mod tests;
