//! The mutable cluster state one simulation works on: nodes in name order,
//! pods, claims with their allocations, and the DRA inventory.
//!
//! Placing a pod commits its claims' allocations here, so pods placed later see
//! those devices in use, exactly as the scheduler's assume cache makes them.
//!
//! The state and its accessors live here; the undo log and checkpoints in
//! `undo`, claim resolution and instantiation in `claims`, the per-node check
//! in `check`, committing a placement in `bind`, and the first-fit scan memo
//! (pod signatures) in `scan`.

mod bind;
mod check;
mod claims;
mod scan;
mod unbind;
mod undo;

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::dra::{AllocatedState, DraCatalog, ShareIdGenerator};
use crate::filters::{FilterState, Mark, PreparedPod};
use crate::gates::FeatureGates;
use crate::objects::{ClusterObjects, ObjectRef};
use crate::pods::has_required_anti_affinity;
pub use crate::pods::{is_pending, priority};
use crate::selectors::{NodeSelectorError, ParsedNodeSelector};

pub use check::Verdict;
pub use claims::{EXTENDED_RESOURCES_SUFFIX, POD_CLAIM_NAME_ANNOTATION, extended_claim_key};
pub use undo::Checkpoint;
use undo::Undo;

/// The key of a namespaced object (printed `namespace/name`).
pub type ObjectKey = ObjectRef;

/// Formats a key as `namespace/name` (the same as `key.to_string()`).
#[must_use]
pub fn key_string(key: &ObjectKey) -> String {
    key.to_string()
}

/// The key of any namespaced object (namespace `default` when unset, as the
/// API server defaults it).
#[must_use]
pub fn object_key(meta: &ObjectMeta) -> ObjectKey {
    ObjectRef::namespaced(meta)
}

/// [`Snapshot::unbind`] of a pod that is not bound to a node of the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pod {0} is not bound to a node of the snapshot")]
pub struct NotBound(pub ObjectKey);

/// What a snapshot leaves when given up ([`Snapshot::into_parts`]).
#[derive(Debug)]
pub struct Parts {
    /// Nodes in name order, then the nodes the simulation added.
    pub nodes: Vec<Node>,
    /// Pods in input order, then the pods added, each bound where the simulation put it.
    pub pods: Vec<Pod>,
    /// The ResourceSlices the snapshot was built with, in their order, then the ones added.
    pub resource_slices: Vec<ResourceSlice>,
    /// The filter state of the nodes and pods given, as the snapshot was built with it.
    pub filters: Option<FilterState>,
    /// The snapshot was given its filter state and used it (see [`Snapshot::with_filters`]).
    pub filters_reused: bool,
}

/// The claims one pod needs, resolved.
#[derive(Debug, Clone, Default)]
pub struct PodClaims {
    /// Claims that are already allocated (their node selector must match).
    pub allocated: Vec<ObjectKey>,
    /// Claims to allocate now, in pod order.
    pub to_allocate: Vec<ObjectKey>,
}

/// The cluster state of one simulation.
#[derive(Debug)]
pub struct Snapshot {
    gates: FeatureGates,
    nodes: Vec<Node>,
    node_index: HashMap<String, usize>,
    pods: Vec<Pod>,
    claims: BTreeMap<ObjectKey, ResourceClaim>,
    templates: BTreeMap<ObjectKey, ResourceClaimTemplate>,
    namespaces: BTreeMap<String, Namespace>,
    dra: DraCatalog,
    allocated: AllocatedState,
    share_ids: ShareIdGenerator,
    undo: Vec<Undo>,
    filters: FilterState,
    /// The filter state as the snapshot was built with it, to hand it back so.
    filters_base: Mark,
    /// The filter state was given ([`Snapshot::with_filters`]) and used.
    filters_reused: bool,
    device_classes: Vec<DeviceClass>,
    /// PreFilter result of the pod checked last, valid while `generation`
    /// is unchanged (placements change domain counts).
    prepared: Option<(usize, u64, Result<PreparedPod, crate::reason::Reason>)>,
    generation: u64,
    /// Per pod: its scheduling signature, once computed (`None` inside when
    /// the pod's fit is not monotonic, see [`Snapshot::signature`]).
    signatures: Vec<Option<Option<u64>>>,
    /// Per signature: every node before this index refused such a pod.
    cursors: HashMap<u64, usize>,
    /// Whether any pod has a required anti-affinity term: only then do a
    /// pod's labels decide where it fits.
    labels_matter: bool,
    /// Generated claims by (namespace, owner `uid:…`/`name:…`, pod claim entry).
    generated: HashMap<(String, String, String), ObjectKey>,
    /// PreFilter results of pods whose result does not depend on placements.
    stateless_prepared: HashMap<usize, Result<PreparedPod, crate::reason::Reason>>,
    /// Reused by [`Snapshot::signature`] to serialise a pod for hashing.
    signature_buffer: Vec<u8>,
    /// Allocated claims' node selectors, parsed; dropped when the claim's
    /// allocation changes (bind, rollback).
    allocation_selectors: HashMap<ObjectKey, Result<ParsedNodeSelector, NodeSelectorError>>,
}

/// `nodes` sorted by name (stable). The order is found on indices and applied in place,
/// cycle by cycle, each node swapped at most once into its slot: a sort of the nodes
/// themselves moves every one of them (a Node is about a kilobyte) many times, and
/// moving them into a second vector fills as many fresh pages again, which at 100,000
/// nodes was a visible part of building the snapshot (issue #28).
fn in_name_order(mut nodes: Vec<Node>) -> Vec<Node> {
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|&a, &b| nodes[a].metadata.name.cmp(&nodes[b].metadata.name));
    // Slot `k` receives the node now at `order[k]`. Along a cycle, swapping slot `j`
    // with `order[j]` brings that node in and moves slot `j`'s node on to where the
    // rest of the cycle will fetch it (or, at the cycle's end, where it belongs).
    let mut placed = vec![false; nodes.len()];
    for start in 0..nodes.len() {
        let mut slot = start;
        while !placed[slot] {
            placed[slot] = true;
            let from = order[slot];
            if from == start {
                break;
            }
            nodes.swap(slot, from);
            slot = from;
        }
    }
    nodes
}

impl Snapshot {
    /// Builds the state from loaded objects. Nodes are kept in name order.
    #[must_use]
    pub fn new(objects: ClusterObjects, gates: FeatureGates) -> Self {
        Self::build(objects, gates, None)
    }

    /// [`Snapshot::new`] with the filter state of the objects' nodes (in name order) and
    /// bound pods made before: a state kept from the last snapshot of the same cluster and
    /// brought up to date ([`FilterState::forget_bound`], [`FilterState::count_bound`]), as
    /// indexing every node and bound pod is the largest part of building a snapshot of a
    /// large cluster. A state that
    /// does not hold the nodes in name order, or holds another number of bound pods than
    /// the objects have, is not used: the snapshot indexes the objects afresh, and
    /// [`Parts::filters_reused`] says so. [`Snapshot::into_parts`] hands the state back.
    #[must_use]
    pub fn with_filters(
        objects: ClusterObjects,
        gates: FeatureGates,
        filters: FilterState,
    ) -> Self {
        Self::build(objects, gates, Some(filters))
    }

    fn build(objects: ClusterObjects, gates: FeatureGates, kept: Option<FilterState>) -> Self {
        let ClusterObjects {
            nodes,
            pods,
            namespaces,
            device_classes,
            resource_slices,
            resource_claims,
            resource_claim_templates,
            device_taint_rules,
            extra: _,
            pod_workload_refs: _,
        } = objects;
        let nodes = in_name_order(nodes);
        let labels_matter = pods.iter().any(has_required_anti_affinity);
        let (mut filters, filters_reused) = match kept {
            Some(mut kept) if kept.holds(&nodes, &pods) => {
                kept.set_namespaces(&namespaces);
                (kept, true)
            }
            _ => (FilterState::new(&nodes, &pods, &namespaces), false),
        };
        filters.set_device_classes(&device_classes, &gates);
        let filters_base = filters.mark();
        let node_index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.metadata.name.clone().unwrap_or_default(), i))
            .collect();
        let dra =
            DraCatalog::new_owning(gates, &device_classes, resource_slices, &device_taint_rules);
        let allocated = AllocatedState::from_claims(resource_claims.iter(), &gates);
        let mut snapshot = Snapshot {
            gates,
            nodes,
            node_index,
            pods,
            claims: resource_claims
                .into_iter()
                .map(|c| (object_key(&c.metadata), c))
                .collect(),
            templates: resource_claim_templates
                .into_iter()
                .map(|t| (object_key(&t.metadata), t))
                .collect(),
            namespaces: namespaces
                .into_iter()
                .map(|n| (n.metadata.name.clone().unwrap_or_default(), n))
                .collect(),
            dra,
            allocated,
            share_ids: ShareIdGenerator::default(),
            undo: Vec::new(),
            filters,
            filters_base,
            filters_reused,
            device_classes,
            prepared: None,
            generation: 0,
            signatures: Vec::new(),
            cursors: HashMap::new(),
            labels_matter,
            generated: HashMap::new(),
            stateless_prepared: HashMap::new(),
            signature_buffer: Vec::new(),
            allocation_selectors: HashMap::new(),
        };
        let keys: Vec<ObjectKey> = snapshot.claims.keys().cloned().collect();
        for key in &keys {
            snapshot.index_generated(key);
        }
        snapshot
    }

    /// Adds a node that does not exist yet (a node-group template node) with
    /// the ResourceSlices its drivers would publish. Returns its index; node
    /// indices of earlier nodes do not change.
    pub fn add_node(&mut self, node: Node, slices: Vec<ResourceSlice>) -> usize {
        let name = node.metadata.name.clone().unwrap_or_default();
        for slice in slices {
            self.dra.add_slice(slice);
        }
        let index = self.nodes.len();
        self.drop_stale_prepared();
        self.filters.add_node(&node);
        self.node_index.insert(name, index);
        self.nodes.push(node);
        self.undo.push(Undo::NodeAdded);
        self.generation += 1;
        index
    }

    /// Adds a pod that does not exist yet (a DaemonSet's pod for a template
    /// node), unbound; returns its index.
    pub fn add_pod(&mut self, pod: Pod) -> usize {
        self.pods.push(pod);
        self.undo.push(Undo::PodAdded);
        self.pods.len() - 1
    }

    /// Forgets the PreFilter result kept for the last pod checked before the
    /// filters' indexes change: it would be stale anyway, and while it shares
    /// their per-domain columns and counts, every change would copy them
    /// whole (copy on write), making each added node or pod cost O(nodes).
    pub(super) fn drop_stale_prepared(&mut self) {
        self.prepared = None;
    }

    /// The node a pod is bound to (in the snapshot or by this simulation).
    #[must_use]
    pub fn pod_node(&self, pod_index: usize) -> Option<usize> {
        let name = self.pods[pod_index].spec.as_ref()?.node_name.as_deref()?;
        self.node_index(name)
    }

    /// An allocatable resource list (a node template's), parsed once, for
    /// [`Snapshot::usage_fits`].
    pub fn allocatable_from(
        &mut self,
        list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    ) -> crate::filters::Allocatable {
        self.filters.allocatable_from(list)
    }

    /// What `node_index` has left within `target`: CPU (millicores), memory
    /// (bytes) and pod slots, each possibly negative.
    #[must_use]
    pub fn room_within(
        &self,
        node_index: usize,
        target: &crate::filters::Allocatable,
    ) -> Option<(i64, i64, i64)> {
        self.filters.room_within(node_index, target)
    }

    /// Pod `pod_index`'s requests as an amount for [`Snapshot::usage_fits`];
    /// `None` when a request is not a quantity.
    pub fn requests_of(&mut self, pod_index: usize) -> Option<crate::filters::Allocatable> {
        let pod = self.pods.get(pod_index)?;
        self.filters.requests_of(pod)
    }

    /// Whether the requests of the pods on `node_index` — plus `extra`, a
    /// pod's [`Snapshot::requests_of`], when given — fit within `target`
    /// (pod slots included): exactly when NodeResourcesFit would pass each
    /// of them, in any order, on a node with that allocatable.
    #[must_use]
    pub fn usage_fits(
        &self,
        node_index: usize,
        extra: Option<&crate::filters::Allocatable>,
        target: &crate::filters::Allocatable,
    ) -> bool {
        self.filters.usage_fits(node_index, extra, target)
    }

    /// Gives up the snapshot, keeping its nodes (in name order, then the nodes added) and
    /// its pods (in input order, then the pods added, each bound where the simulation put
    /// it): what a caller that hands the objects on needs, without a copy of either.
    #[must_use]
    pub fn into_nodes_and_pods(self) -> (Vec<Node>, Vec<Pod>) {
        (self.nodes, self.pods)
    }

    /// Gives up the snapshot, keeping its nodes and pods (as [`Snapshot::into_nodes_and_pods`]),
    /// the ResourceSlices it was built with, in their order and as they were given (see
    /// [`DraCatalog::into_initial_slices`]: the slices a caller reads after the snapshot,
    /// without a copy of every device), and its filter state as the snapshot was built with
    /// it: the nodes and pods given, without the nodes the simulation added or
    /// the placements it made. That state is `None` when it cannot be rolled back (a
    /// simulation took pods off their nodes and kept it so).
    #[must_use]
    pub fn into_parts(mut self) -> Parts {
        // PreFilter results share the filters' columns and counts: dropped first, the
        // rollback's changes to those change them in place instead of copying them whole.
        self.prepared = None;
        self.stateless_prepared = HashMap::new();
        let mut filters = self.filters;
        let filters = filters
            .roll_back_to(self.filters_base)
            .is_ok()
            .then_some(filters);
        Parts {
            nodes: self.nodes,
            pods: self.pods,
            resource_slices: self.dra.into_initial_slices(),
            filters,
            filters_reused: self.filters_reused,
        }
    }

    /// The feature gates in force.
    #[must_use]
    pub fn gates(&self) -> &FeatureGates {
        &self.gates
    }

    /// Nodes, in name order.
    #[must_use]
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The index of a node by name.
    #[must_use]
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.node_index.get(name).copied()
    }

    /// All pods, bound or pending.
    #[must_use]
    pub fn pods(&self) -> &[Pod] {
        &self.pods
    }

    /// Whether every pod of `others` (indices) matches all required pod
    /// affinity terms of pod `pod_index`, so that once one of them is placed
    /// the others can only go where it went, domain by domain of the terms'
    /// keys. `false` when the pod has no required affinity term.
    #[must_use]
    pub fn required_affinity_counts_all(&self, pod_index: usize, others: &[usize]) -> bool {
        self.filters.required_affinity_counts_all(
            &self.pods[pod_index],
            others.iter().map(|&i| &self.pods[i]),
        )
    }

    /// A namespace by name.
    #[must_use]
    pub fn namespace(&self, name: &str) -> Option<&Namespace> {
        self.namespaces.get(name)
    }

    /// A claim by key.
    #[must_use]
    pub fn claim(&self, key: &ObjectKey) -> Option<&ResourceClaim> {
        self.claims.get(key)
    }

    /// Indices of the pods waiting for a node, in the order the simulation
    /// places them: highest priority first, then oldest, then by
    /// namespace/name so that equal pods keep a stable order.
    #[must_use]
    pub fn pending_pods(&self) -> Vec<usize> {
        let mut pending: Vec<usize> = self
            .pods
            .iter()
            .enumerate()
            .filter(|(_, p)| is_pending(p))
            .map(|(i, _)| i)
            .collect();
        pending.sort_by(|&a, &b| {
            let (pa, pb) = (&self.pods[a], &self.pods[b]);
            priority(pb)
                .cmp(&priority(pa))
                .then_with(|| {
                    pa.metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| t.0)
                        .cmp(&pb.metadata.creation_timestamp.as_ref().map(|t| t.0))
                })
                .then_with(|| object_key(&pa.metadata).cmp(&object_key(&pb.metadata)))
        });
        pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, zone: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("zone".to_string(), zone.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The nodes come out sorted by name, equal names in input order (a stable sort),
    /// whatever cycles the permutation has: a fixed point, a swap, a longer cycle.
    #[test]
    fn nodes_are_put_in_name_order_in_place() {
        let input = vec![
            node("n3", "a"),
            node("n1", "a"),
            node("n5", "a"),
            node("n0", "a"),
            node("n4", "a"),
            node("n2", "b"),
            node("n2", "a"),
            node("n9", "a"),
        ];
        let mut expected = input.clone();
        expected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let sorted = in_name_order(input);
        let names: Vec<_> = sorted
            .iter()
            .map(|n| n.metadata.name.as_deref().unwrap_or_default())
            .collect();
        assert_eq!(names, ["n0", "n1", "n2", "n2", "n3", "n4", "n5", "n9"]);
        // The first `n2` given (zone b) stays first.
        assert_eq!(sorted[2].metadata.labels, node("n2", "b").metadata.labels);
        assert_eq!(sorted, expected);
        assert!(in_name_order(Vec::new()).is_empty());
    }
}
