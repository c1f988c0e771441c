//! Taking a pod off its node anywhere in the placement order (a drain simulation frees the
//! pods of a node it removes), and putting it back when the simulation rolls back.
//!
//! Records are never moved: a taken-off record keeps its slot with no node, so every later
//! record keeps its index and last-in-first-out undo of placements stays valid.

use k8s_openapi::api::core::v1::Pod;

use super::index::{Placed, PodRecord};
use super::requests::{ResourceVec, bound_pod_vec};
use super::{FilterState, inter_pod_affinity, node_ports};

/// The node index of a record that is counted nowhere.
pub(super) const NO_NODE: usize = usize::MAX;

/// A record taken off its node, to put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenOff {
    record: usize,
    node_index: usize,
}

/// What identifies a pod's record on its node: records alike in all of it are
/// interchangeable, for the usage and for the indexes.
pub(super) struct Wanted<'a> {
    namespace: &'a str,
    labels: Option<&'a crate::selectors::Labels>,
    terminating: bool,
    requested: ResourceVec,
    placed: Option<Box<Placed>>,
}

impl<'a> Wanted<'a> {
    pub(super) fn of(pod: &'a Pod, state: &mut FilterState) -> Self {
        Self {
            namespace: pod.metadata.namespace.as_deref().unwrap_or("default"),
            labels: pod.metadata.labels.as_ref(),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            requested: bound_pod_vec(pod, &mut state.resources),
            placed: Placed::of(
                node_ports::pod_host_ports(pod),
                inter_pod_affinity::placed_anti_terms(pod),
            ),
        }
    }

    /// Whether `record` (with `requested`) is such a pod's on `node_index`; `exact` also
    /// asks for the same requests, host ports and anti-affinity terms.
    pub(super) fn is(
        &self,
        record: &PodRecord,
        requested: &ResourceVec,
        node_index: usize,
        exact: bool,
    ) -> bool {
        record.node_index == node_index
            && &*record.namespace == self.namespace
            && record.terminating == self.terminating
            && record.labels.as_deref() == self.labels
            && (!exact || (*requested == self.requested && record.placed == self.placed))
    }
}

impl FilterState {
    /// Takes `pod`, counted on node `node_index`, off that node: its requests, host ports,
    /// pod slot, and its place in the affinity and spread indexes. `None` when no record of
    /// such a pod is counted there (a finished pod is not).
    pub fn take_off(&mut self, pod: &Pod, node_index: usize) -> Option<TakenOff> {
        let wanted = Wanted::of(pod, self);
        // Records of pods alike in namespace, labels and node are interchangeable for the
        // indexes; prefer one whose requests (and ports, and terms) are this pod's, so
        // usage stays exact.
        let alike = |exact: bool| {
            self.pods
                .iter()
                .zip(&self.pod_requested)
                .position(|(r, requested)| wanted.is(r, requested, node_index, exact))
        };
        let record = alike(true).or_else(|| alike(false))?;
        self.uncount(record);
        self.pods[record].node_index = NO_NODE;
        self.taken_off += 1;
        Some(TakenOff { record, node_index })
    }

    /// Undoes [`FilterState::take_off`] (after everything done since was undone).
    pub fn put_back(&mut self, taken: &TakenOff) {
        let Some(record) = self.pods.get_mut(taken.record) else {
            return;
        };
        record.node_index = taken.node_index;
        self.taken_off = self.taken_off.saturating_sub(1);
        self.count(taken.record);
    }
}
