//! Taking a pod off its node anywhere in the placement order (a drain simulation frees the
//! pods of a node it removes), and putting it back when the simulation rolls back.
//!
//! Records are never moved: a taken-off record keeps its slot with no node, so every later
//! record keeps its index and last-in-first-out undo of placements stays valid.

use std::sync::PoisonError;

use k8s_openapi::api::core::v1::Pod;

use super::requests::bound_pod_vec;
use super::{FilterState, inter_pod_affinity, node_ports};

/// The node index of a record that is counted nowhere.
const NO_NODE: usize = usize::MAX;

/// A record taken off its node, to put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenOff {
    record: usize,
    node_index: usize,
}

impl FilterState {
    /// Takes `pod`, counted on node `node_index`, off that node: its requests, host ports,
    /// pod slot, and its place in the affinity and spread indexes. `None` when no record of
    /// such a pod is counted there (a finished pod is not).
    pub fn take_off(&mut self, pod: &Pod, node_index: usize) -> Option<TakenOff> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let terminating = pod.metadata.deletion_timestamp.is_some();
        let labels = pod.metadata.labels.as_ref();
        let candidates: Vec<usize> = self
            .pods
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.node_index == node_index
                    && &*r.namespace == namespace
                    && r.terminating == terminating
                    && r.labels.as_deref() == labels
            })
            .map(|(i, _)| i)
            .collect();
        // Records of pods alike in namespace, labels and node are interchangeable for the
        // indexes; prefer one whose requests are this pod's, so usage stays exact.
        let wanted = bound_pod_vec(pod, &mut self.resources);
        let record = candidates
            .iter()
            .copied()
            .find(|&i| self.pod_requested.get(i) == Some(&wanted))
            .or_else(|| candidates.first().copied())?;
        let requested = self.pod_requested.get(record).cloned().unwrap_or_default();
        if let Some(usage) = self.usage.get_mut(node_index) {
            usage.requested.sub(&requested);
            usage.pod_count -= 1;
            for port in node_ports::pod_host_ports(pod) {
                if let Some(at) = usage.ports.iter().position(|p| *p == port) {
                    usage.ports.remove(at);
                }
            }
        }
        let index = self.index.get_mut().unwrap_or_else(PoisonError::into_inner);
        index.on_remove_pod(&self.pods[record]);
        for term in inter_pod_affinity::placed_anti_terms(pod) {
            index.remove_anti_term(&term, node_index, &self.nodes);
        }
        self.pods[record].node_index = NO_NODE;
        Some(TakenOff { record, node_index })
    }

    /// Undoes [`FilterState::take_off`] (after everything done since was undone).
    pub fn put_back(&mut self, pod: &Pod, taken: &TakenOff) {
        let Some(record) = self.pods.get_mut(taken.record) else {
            return;
        };
        record.node_index = taken.node_index;
        let requested = self
            .pod_requested
            .get(taken.record)
            .cloned()
            .unwrap_or_default();
        if let Some(usage) = self.usage.get_mut(taken.node_index) {
            usage.requested.add(&requested);
            usage.pod_count += 1;
            usage.ports.extend(node_ports::pod_host_ports(pod));
        }
        let index = self.index.get_mut().unwrap_or_else(PoisonError::into_inner);
        index.on_add_pod(&self.pods[taken.record]);
        for term in inter_pod_affinity::placed_anti_terms(pod) {
            index.add_anti_term(term, taken.node_index, &self.nodes);
        }
    }
}
