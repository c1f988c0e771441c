//! The planner's nodes and pods, kept between loops and brought up to date from the
//! stores by what changed (issue #28).
//!
//! A loop lends the kept copies to the planner and the scale-down analysis, which hand
//! them back ([`dra_plan::handback`]); the next loop compares each store entry with the
//! one its copy was made from (the same `Arc`: a watch event replaces an entry, it never
//! changes one in place) and copies only the objects that changed. So an idle loop
//! copies no node or pod, and a watch event on one pod copies that pod, where building
//! the input afresh copied every Node and Pod of the cluster. What depends on the time
//! of the loop is made afresh each loop, after the kept copies: the templates that stand
//! for booting nodes and the pending pods (both few).
//!
//! When the copies do not come back (the planner failed, scale-down did not run to its
//! end), the next loop copies everything again: [`Counts::rebuilds`] counts those.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use dra_api::NodeGroup;
use dra_sim::{ClusterObjects, ObjectRef};
use k8s_openapi::api::core::v1::{Node, Pod};

use super::kept::Kept;
use super::{BuildOptions, Built, Inputs, booting_template, rest};
use crate::membership::Membership;
use crate::pods::{Priorities, Skip, classify, is_pending, nominated_node};

/// How many copies the view made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Updates that started from nothing and copied every node and pod: the first, and
    /// any after a loop whose copies were not handed back.
    pub rebuilds: u64,
    /// Kept nodes and pods copied by the last update (new or changed in the stores).
    pub copied: usize,
    /// Kept nodes and pods dropped by the last update (gone from the stores, or no longer
    /// kept: a node now booting, a pod pending again).
    pub dropped: usize,
}

/// The planner's nodes and pods between loops (see the module's documentation).
#[derive(Default)]
pub struct View {
    nodes: Kept<Node>,
    pods: Kept<Pod>,
    /// Made for the loop, not kept: booting nodes' templates (by name) and pending pods
    /// (by key), left out when the copies come back.
    loop_nodes: BTreeSet<String>,
    loop_pods: BTreeSet<String>,
    /// The copies are lent out, or were lost.
    out: bool,
    updates: u64,
    counts: Counts,
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("nodes", &self.nodes.len())
            .field("pods", &self.pods.len())
            .field("out", &self.out)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

/// A pod's key in the view: namespace and name.
fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn node_key(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// Whether `pod`'s key is `key`, without making it.
fn pod_is(pod: &Pod, key: &str) -> bool {
    key.split_once('/').is_some_and(|(namespace, name)| {
        pod.metadata.namespace.as_deref().unwrap_or_default() == namespace
            && pod.metadata.name.as_deref().unwrap_or_default() == name
    })
}

fn node_is(node: &Node, key: &str) -> bool {
    node.metadata.name.as_deref().unwrap_or_default() == key
}

impl View {
    /// What the last update copied, and how often the view started over.
    #[must_use]
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The planner's input for the stores' contents (as [`super::build`] describes it),
    /// with the kept nodes and pods lent out: hand them back with [`View::give_back`].
    pub fn update(
        &mut self,
        inputs: &Inputs,
        membership: &Membership,
        node_groups: &[NodeGroup],
        options: &BuildOptions,
    ) -> Built {
        if self.out || self.updates == 0 {
            self.nodes = Kept::default();
            self.pods = Kept::default();
            self.counts.rebuilds += 1;
        }
        self.updates += 1;
        self.out = true;
        let seen = self.updates;
        let mut built = Built::default();
        let groups: BTreeMap<&str, &NodeGroup> = node_groups
            .iter()
            .filter_map(|g| g.metadata.name.as_deref().map(|n| (n, g)))
            .collect();

        let mut copied = 0;
        let mut templates = Vec::new();
        let mut node_names = HashSet::with_capacity(inputs.nodes.len());
        for node in &inputs.nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            node_names.insert(name);
            if let Some(template) = booting_template(node, name, membership, &groups, options) {
                templates.push(template);
                built.booting_nodes.push(name.to_owned());
                continue;
            }
            copied += usize::from(self.nodes.keep(
                node,
                membership.group_of(name),
                || name.to_owned(),
                || {
                    membership
                        .labelled(node)
                        .unwrap_or_else(|| Node::clone(node))
                },
                seen,
            ));
        }
        let mut dropped = self.nodes.sweep(seen);
        self.loop_nodes = built.booting_nodes.iter().cloned().collect();
        let mut nodes = self.nodes.lend();
        nodes.extend(templates);

        let priorities = Priorities::new(inputs.priority_classes.iter().map(AsRef::as_ref));
        let mut pending = Vec::new();
        self.loop_pods.clear();
        for pod in &inputs.pods {
            if !is_pending(pod) {
                copied += usize::from(self.pods.keep(
                    pod,
                    None,
                    || pod_key(pod),
                    || Pod::clone(pod),
                    seen,
                ));
                continue;
            }
            let workload_ref = inputs.pod_workload_refs.get(&(
                pod.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into()),
                pod.metadata.name.clone().unwrap_or_default(),
            ));
            match classify(pod, workload_ref, &options.pending, &priorities) {
                None => {
                    built.planned_for.push(ObjectRef::namespaced(&pod.metadata));
                    self.loop_pods.insert(pod_key(pod));
                    pending.push(Pod::clone(pod));
                }
                Some(Skip::Nominated) => {
                    *built.skipped.entry(Skip::Nominated).or_default() += 1;
                    // It will run on the nominated node once the victims are gone,
                    // so it holds that room now, as cluster-autoscaler models it.
                    if let Some(node) = nominated_node(pod).filter(|n| node_names.contains(*n)) {
                        let mut pod = Pod::clone(pod);
                        let node = node.to_string();
                        if let Some(spec) = pod.spec.as_mut() {
                            spec.node_name = Some(node);
                        }
                        self.loop_pods.insert(pod_key(&pod));
                        pending.push(pod);
                    }
                }
                Some(skip) => *built.skipped.entry(skip).or_default() += 1,
            }
        }
        dropped += self.pods.sweep(seen);
        let mut pods = self.pods.lend();
        pods.extend(pending);

        self.counts.copied = copied;
        self.counts.dropped = dropped;
        built.objects = ClusterObjects {
            nodes,
            pods,
            ..rest(inputs, node_groups)
        };
        built
    }

    /// Takes back the nodes and pods [`View::update`] lent, as the planner or the
    /// scale-down analysis hands them back (nodes possibly reordered; the loop's own
    /// templates and pending pods among them are dropped). Anything else is not kept:
    /// the next update copies everything again.
    pub fn give_back(&mut self, nodes: Vec<Node>, pods: Vec<Pod>) {
        if !self.out {
            return;
        }
        let nodes = self
            .nodes
            .take_back(nodes, node_key, node_is, &self.loop_nodes);
        let pods = self.pods.take_back(pods, pod_key, pod_is, &self.loop_pods);
        self.out = !(nodes && pods);
        if self.out {
            tracing::debug!(
                "the planner's nodes and pods did not come back whole; the next loop copies them again"
            );
        }
    }
}

#[cfg(test)]
mod tests;
