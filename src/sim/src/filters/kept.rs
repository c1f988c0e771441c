//! A filter state kept from one snapshot of a cluster to the next (issue #28).
//!
//! Indexing a cluster for the filters reads every node and every bound pod: at 10,000
//! nodes and 100,000 pods, about 90 ms, the largest part of building a snapshot. A caller
//! that plans the same cluster again and again (the controller, each loop) keeps the
//! state instead, and brings it up to date by what changed: the pods that left their node
//! ([`FilterState::forget_bound`]) and the ones bound since ([`FilterState::count_bound`]).
//! A snapshot given such a state ([`crate::snapshot::Snapshot::with_filters`]) hands it
//! back as it was given: the plan's nodes and placements come after the state's own, so
//! rolling back to a [`Mark`] taken before undoes them ([`FilterState::roll_back_to`]).
//!
//! Nodes are not changed in place: a state whose nodes changed is built again. Pods are
//! what changes all the time (each watch event on a pod); nodes come and go far less
//! often, and their heartbeats change nothing the filters read ([`same_to_filters`]).

use std::collections::BTreeMap;
use std::sync::PoisonError;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};

use super::labels::NamespaceRegistry;
use super::requests::ResourceVec;
use super::unbind::{NO_NODE, Wanted};
use super::{FilterState, is_active};

/// How many nodes and pod records a state held: rolling back to it undoes what came after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    nodes: usize,
    pods: usize,
}

/// Why a state cannot be rolled back to a mark.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RollBackError {
    /// A simulation took pods off their nodes and did not put them back (a drain it kept).
    #[error("{0} pod(s) taken off their node were not put back")]
    TakenOff(usize),
    /// The state holds fewer nodes or pods than the mark: it is not the state marked.
    #[error("the state holds fewer nodes or pods than when it was marked")]
    BeforeMark,
}

/// Whether two versions of a node are the same to the filters: the same name, labels,
/// taints and allocatable resources. Everything else a Node carries (conditions, heartbeats,
/// images, addresses) the state does not hold.
#[must_use]
pub fn same_to_filters(a: &Node, b: &Node) -> bool {
    a.metadata.name == b.metadata.name
        && a.metadata.labels == b.metadata.labels
        && taints(a) == taints(b)
        && allocatable(a) == allocatable(b)
}

fn taints(node: &Node) -> Option<&Vec<k8s_openapi::api::core::v1::Taint>> {
    node.spec.as_ref().and_then(|s| s.taints.as_ref())
}

fn allocatable(
    node: &Node,
) -> Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>> {
    node.status.as_ref().and_then(|s| s.allocatable.as_ref())
}

impl FilterState {
    /// The state as it stands, to roll back to.
    #[must_use]
    pub fn mark(&self) -> Mark {
        Mark {
            nodes: self.nodes.len(),
            pods: self.pods.len(),
        }
    }

    /// Undoes every node added and pod counted since `mark`, last first, and forgets what
    /// was built on demand since (see `Index::forget_derived`).
    ///
    /// # Errors
    /// Pods were taken off and not put back, or the state is not the one marked; the
    /// state is then left as it is, and only good for dropping.
    pub fn roll_back_to(&mut self, mark: Mark) -> Result<(), RollBackError> {
        if self.taken_off > 0 {
            return Err(RollBackError::TakenOff(self.taken_off));
        }
        if self.nodes.len() < mark.nodes || self.pods.len() < mark.pods {
            return Err(RollBackError::BeforeMark);
        }
        self.index
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .forget_matchers();
        while self.pods.len() > mark.pods {
            self.remove_last_pod();
        }
        while self.nodes.len() > mark.nodes {
            self.remove_last_node();
        }
        self.index
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .forget_derived();
        self.interned.forget_unshared();
        Ok(())
    }

    /// The node a pod is counted on, as [`FilterState::new`] counts it: bound to a node of
    /// the state and not finished.
    fn counted_node(&self, pod: &Pod) -> Option<usize> {
        let name = pod.spec.as_ref()?.node_name.as_deref()?;
        is_active(pod).then(|| self.node_index(name)).flatten()
    }

    /// Counts `pod` when [`FilterState::new`] would: bound to a node of the state and not
    /// finished. Returns whether it did.
    pub fn count_bound(&mut self, pod: &Pod) -> bool {
        let Some(node_index) = self.counted_node(pod) else {
            return false;
        };
        self.add_pod(pod, node_index);
        true
    }

    /// Takes `pods`, each counted before as [`FilterState::count_bound`] counts it (a pod
    /// that was not counted is passed over), off their nodes for good. Returns how many
    /// counted pods had no record exactly like theirs on their node: the state does not
    /// hold what its caller thinks, and is only good for building again.
    ///
    /// Between simulations only: with pods taken off and not put back, nothing is taken
    /// and every counted pod is reported missing.
    pub fn forget_bound<'a>(&mut self, pods: impl IntoIterator<Item = &'a Pod>) -> usize {
        let mut wanted = Vec::new();
        for pod in pods {
            if let Some(node_index) = self.counted_node(pod) {
                wanted.push((node_index, Wanted::of(pod, self)));
            }
        }
        if wanted.is_empty() {
            return 0;
        }
        if self.taken_off > 0 {
            return wanted.len();
        }
        // One pass over the records for all of them (a scan per pod was O(pods) each), each
        // record looking only at the pods of its node: after a watch re-list every pod of the
        // cluster comes back as a new copy, and a look at all of them per record was
        // quadratic.
        let mut on_node: Vec<Vec<usize>> = vec![Vec::new(); self.nodes.len()];
        for (i, (node_index, _)) in wanted.iter().enumerate() {
            if let Some(candidates) = on_node.get_mut(*node_index) {
                candidates.push(i);
            }
        }
        let mut found = Vec::new();
        for (i, (record, requested)) in self.pods.iter().zip(&self.pod_requested).enumerate() {
            let Some(candidates) = on_node.get_mut(record.node_index) else {
                continue;
            };
            if candidates.is_empty() {
                continue;
            }
            let first = candidates.iter().position(|&w| {
                let (node_index, pod) = &wanted[w];
                pod.is(record, requested, *node_index, true)
            });
            if let Some(at) = first {
                candidates.swap_remove(at);
                found.push(i);
            }
        }
        for &i in &found {
            self.uncount(i);
            self.pods[i].node_index = NO_NODE;
        }
        self.drop_uncounted();
        wanted.len() - found.len()
    }

    /// Drops the records counted nowhere, and the namespaces and label sets only they had.
    fn drop_uncounted(&mut self) {
        let mut counted = self.pods.iter().map(|r| r.node_index != NO_NODE);
        self.pod_requested
            .retain(|_| counted.next().unwrap_or(false));
        self.pods.retain(|r| r.node_index != NO_NODE);
        self.interned.forget_unshared();
    }

    /// Replaces the namespaces the state knows with `namespaces`, plus those its pods are
    /// in, as [`FilterState::new`] makes them: a namespace's labels may have changed since
    /// the state was made.
    pub fn set_namespaces(&mut self, namespaces: &[Namespace]) {
        let mut registry = NamespaceRegistry::new(namespaces);
        for name in self.interned.namespace_names() {
            registry.note(name);
        }
        self.namespaces = registry;
    }

    /// Whether the state holds `nodes` (in this order, by name) and as many counted pods
    /// as `pods` has: what a snapshot checks before it uses a state it is given. A sanity
    /// check against a caller that lost count, not a proof: a record of the wrong pod is
    /// not seen here (the tests compare [`FilterState::summary`] with a fresh state's).
    #[must_use]
    pub fn holds(&self, nodes: &[Node], pods: &[Pod]) -> bool {
        self.taken_off == 0
            && self.nodes.len() == nodes.len()
            && self
                .nodes
                .iter()
                .zip(nodes)
                .all(|(record, node)| record.name == node.metadata.name)
            && pods.iter().filter_map(|p| self.counted_node(p)).count() == self.pods.len()
    }

    /// What the state counts, in a form two states can be compared by: equal summaries
    /// filter every pod alike. For tests of a state kept between snapshots against one
    /// built afresh.
    #[must_use]
    pub fn summary(&self) -> Summary {
        let names = self.resources.names();
        let nodes = self
            .nodes
            .iter()
            .zip(&self.usage)
            .map(|(record, usage)| {
                let mut ports: Vec<String> = usage.ports.iter().map(|p| format!("{p:?}")).collect();
                ports.sort();
                NodeSummary {
                    name: record.name.clone(),
                    allocatable: named(&usage.allocatable, &names),
                    allowed_pods: usage.allowed_pods,
                    requested: named(&usage.requested, &names),
                    pod_count: usage.pod_count,
                    ports,
                }
            })
            .collect();
        let mut records: Vec<String> = self
            .pods
            .iter()
            .zip(&self.pod_requested)
            .filter(|(r, _)| r.node_index != NO_NODE)
            .map(|(r, requested)| {
                let node = self.nodes.get(r.node_index).and_then(|n| n.name.as_deref());
                format!(
                    "{node:?} {} {:?} terminating={} {:?} {:?}",
                    r.namespace,
                    r.labels,
                    r.terminating,
                    named(requested, &names),
                    r.placed
                )
            })
            .collect();
        records.sort();
        let mut index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        let mut anti: Vec<String> = index
            .anti_counts_per_node(&self.nodes)
            .into_iter()
            .map(|(term, per_node)| format!("{term:?} {per_node:?}"))
            .collect();
        anti.sort();
        Summary {
            nodes,
            records,
            anti,
            namespaces: self.namespaces.entries(),
        }
    }
}

/// A resource vector by resource name, zero amounts left out.
fn named(vec: &ResourceVec, names: &[&str]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (name, value) in [
        ("cpu", vec.milli_cpu),
        ("memory", vec.memory),
        ("ephemeral-storage", vec.ephemeral_storage),
    ] {
        if value != 0 {
            out.insert(name.to_owned(), value);
        }
    }
    for (id, value) in vec.scalars.iter().enumerate() {
        if *value != 0 {
            let name = names.get(id).copied().unwrap_or("?");
            out.insert(name.to_owned(), *value);
        }
    }
    out
}

/// One node as a [`Summary`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSummary {
    /// The node's name.
    pub name: Option<String>,
    /// Allocatable resources by name (CPU in millicores).
    pub allocatable: BTreeMap<String, i64>,
    /// `allocatable.pods`.
    pub allowed_pods: i64,
    /// What the pods counted on it request, by name.
    pub requested: BTreeMap<String, i64>,
    /// How many pods are counted on it.
    pub pod_count: i64,
    /// Host ports in use, sorted.
    pub ports: Vec<String>,
}

/// What a filter state counts ([`FilterState::summary`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Per node, in index order.
    pub nodes: Vec<NodeSummary>,
    /// Every counted pod's record, sorted.
    pub records: Vec<String>,
    /// Placed pods' anti-affinity terms with their count per node, sorted.
    pub anti: Vec<String>,
    /// The namespaces known, with their labels.
    pub namespaces: Vec<(String, BTreeMap<String, String>)>,
}
