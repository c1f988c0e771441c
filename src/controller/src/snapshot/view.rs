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
//!
//! The view also keeps the planner's index of those nodes and pods (the filter state,
//! [`dra_sim::filters::FilterState`]): a loop lends it with the copies, the planner hands
//! it back as it was lent (its plan undone), and the next loop takes off the pods that
//! changed or went and counts the new versions, where indexing every node and bound pod
//! took 90 ms a loop at 10,000 nodes and 100,000 pods. A loop whose nodes changed in what
//! the filters read (a node added, gone, relabelled, retainted, resized) indexes them
//! afresh: [`Counts::indexed`] counts those. A booting node's template is kept like a
//! copy, so a node that stays booting changes nothing.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use dra_api::NodeGroup;
use dra_sim::filters::{FilterState, Mark, same_to_filters};
use dra_sim::{ClusterObjects, ObjectRef};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};

use super::kept::{Change, Kept};
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
    /// kept: a pod pending again).
    pub dropped: usize,
    /// Updates that indexed every kept node and pod afresh for the planner's filters: the
    /// first, any after a rebuild, and any whose nodes changed in what the filters read.
    pub indexed: u64,
}

/// The planner's nodes and pods between loops (see the module's documentation).
#[derive(Default)]
pub struct View {
    nodes: Kept<Node>,
    pods: Kept<Pod>,
    /// Made for the loop, not kept: pending pods (by key), left out when the copies come
    /// back.
    loop_pods: BTreeSet<String>,
    /// The planner's index of the kept nodes and pods; `None` while lent, or when it must
    /// be made afresh.
    filters: Option<FilterState>,
    /// Where the lent index's kept part ends (the loop's nominated pods come after it).
    filters_base: Option<Mark>,
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
    /// with the kept nodes and pods lent out, and the planner's index of them: hand them
    /// back with [`View::give_back`].
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
            self.filters = None;
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
        let mut nodes_changed = false;
        let mut node_names = HashSet::with_capacity(inputs.nodes.len());
        for node in &inputs.nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            node_names.insert(name);
            let (change, at) = if let Some(template) =
                booting_template(node, name, membership, &groups, options)
            {
                built.booting_nodes.push(name.to_owned());
                self.nodes.keep_made(node, name.to_owned(), template, seen)
            } else {
                self.nodes.keep(
                    node,
                    membership.group_of(name),
                    || name.to_owned(),
                    || {
                        membership
                            .labelled(node)
                            .unwrap_or_else(|| Node::clone(node))
                    },
                    seen,
                )
            };
            copied += usize::from(change.copied());
            nodes_changed |= match &change {
                Change::Same => false,
                Change::Added => true,
                Change::Replaced(old) => !self
                    .nodes
                    .get(at)
                    .is_some_and(|new| same_to_filters(old, new)),
            };
        }
        let gone_nodes = self.nodes.sweep(seen);
        let mut dropped = gone_nodes.len();
        if nodes_changed || !gone_nodes.is_empty() {
            self.filters = None;
        }

        let priorities = Priorities::new(inputs.priority_classes.iter().map(AsRef::as_ref));
        let mut pending = Vec::new();
        let mut uncounted = Vec::new();
        // Past this many new copies (a watch re-list brings a new copy of every pod) the
        // index is made afresh: taking each old copy off and counting each new one costs
        // more than indexing once.
        let afresh_past = self.pods.len() / 4;
        let mut changed_pods = 0;
        self.loop_pods.clear();
        for pod in &inputs.pods {
            if !is_pending(pod) {
                let (change, at) =
                    self.pods
                        .keep(pod, None, || pod_key(pod), || Pod::clone(pod), seen);
                copied += usize::from(change.copied());
                changed_pods += usize::from(change.copied());
                if changed_pods > afresh_past {
                    self.filters = None;
                }
                if let Some(filters) = self.filters.as_mut()
                    && change.copied()
                    && let Some(copy) = self.pods.get(at)
                {
                    filters.count_bound(copy);
                }
                if let Change::Replaced(old) = change {
                    uncounted.push(old);
                }
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
        let gone_pods = self.pods.sweep(seen);
        dropped += gone_pods.len();
        uncounted.extend(gone_pods);
        let objects = rest(inputs, node_groups);
        let filters = self.index(&uncounted, &objects.namespaces, &pending);
        let nodes = self.nodes.lend();
        let mut pods = self.pods.lend();
        pods.extend(pending);

        self.counts.copied = copied;
        self.counts.dropped = dropped;
        built.filters = Some(filters);
        built.objects = ClusterObjects {
            nodes,
            pods,
            ..objects
        };
        built
    }

    /// The planner's index of the kept nodes and pods, brought up to date (the pods in
    /// `uncounted` taken off, the new copies counted as they were kept) or made afresh, and
    /// the loop's nominated pods (in `pending`, bound to their node) counted after it.
    fn index(
        &mut self,
        uncounted: &[Pod],
        namespaces: &[Namespace],
        pending: &[Pod],
    ) -> FilterState {
        if let Some(filters) = self.filters.as_mut() {
            let missing = filters.forget_bound(uncounted);
            if missing > 0 {
                // Not what the view counted: a bug, but one a fresh index repairs.
                tracing::warn!(
                    missing,
                    "the planner's kept index lacked pods it had counted; indexing afresh"
                );
                self.filters = None;
            }
        }
        let mut filters = match self.filters.take() {
            Some(filters) => filters,
            None => {
                self.counts.indexed += 1;
                let mut nodes: Vec<&Node> = self.nodes.items().iter().collect();
                nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
                FilterState::of_nodes(nodes.into_iter(), self.pods.items(), namespaces)
            }
        };
        self.filters_base = Some(filters.mark());
        for pod in pending {
            filters.count_bound(pod);
        }
        filters
    }

    /// Takes back the nodes and pods [`View::update`] lent, as the planner or the
    /// scale-down analysis hands them back (nodes possibly reordered; the loop's own
    /// pending pods among them are dropped), with the planner's index as the planner hands
    /// it back (`None` when it did not). Anything else is not kept: the next update copies
    /// everything again.
    pub fn give_back(&mut self, nodes: Vec<Node>, pods: Vec<Pod>, filters: Option<FilterState>) {
        if !self.out {
            return;
        }
        let no_loop_nodes = BTreeSet::new();
        let nodes = self
            .nodes
            .take_back(nodes, node_key, node_is, &no_loop_nodes);
        let pods = self.pods.take_back(pods, pod_key, pod_is, &self.loop_pods);
        self.out = !(nodes && pods);
        if self.out {
            tracing::debug!(
                "the planner's nodes and pods did not come back whole; the next loop copies them again"
            );
            return;
        }
        self.filters = filters
            .zip(self.filters_base.take())
            .and_then(|(mut filters, base)| filters.roll_back_to(base).ok().map(|()| filters));
    }
}

#[cfg(test)]
mod tests;
