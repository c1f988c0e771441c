//! Counting a pod's record on its node, and taking it off again, from the record alone:
//! what placing a pod, undoing it, draining a node and a state kept between snapshots all
//! do.

use std::sync::PoisonError;

use super::FilterState;
use super::requests::ResourceVec;

impl FilterState {
    /// Counts record `record` on its node: its requests, pod slot, host ports, and its
    /// place in the affinity and spread indexes.
    pub(super) fn count(&mut self, record: usize) {
        let Some(pod) = self.pods.get(record) else {
            return;
        };
        let node_index = pod.node_index;
        let Some(usage) = self.usage.get_mut(node_index) else {
            return;
        };
        if let Some(requested) = self.pod_requested.get(record) {
            usage.requested.add(requested);
        }
        usage.pod_count += 1;
        let index = self.index.get_mut().unwrap_or_else(PoisonError::into_inner);
        index.on_add_pod(pod);
        if let Some(placed) = pod.placed.as_deref() {
            usage.ports.extend(placed.ports.iter().cloned());
            for term in &placed.anti_terms {
                index.add_anti_term(term.clone(), node_index, &self.nodes);
            }
        }
    }

    /// The inverse of [`FilterState::count`]. The record keeps its node index.
    pub(super) fn uncount(&mut self, record: usize) {
        let Some(pod) = self.pods.get(record) else {
            return;
        };
        let node_index = pod.node_index;
        let Some(usage) = self.usage.get_mut(node_index) else {
            return;
        };
        let saturated = usage.requested.saturated();
        if let Some(requested) = self.pod_requested.get(record) {
            usage.requested.sub(requested);
        }
        if saturated {
            // Subtracting from a saturated total is not the sum of the rest: add them up.
            let mut rest = ResourceVec::default();
            for (i, (other, requested)) in self.pods.iter().zip(&self.pod_requested).enumerate() {
                if i != record && other.node_index == node_index {
                    rest.add(requested);
                }
            }
            usage.requested = rest;
        }
        usage.pod_count -= 1;
        let index = self.index.get_mut().unwrap_or_else(PoisonError::into_inner);
        index.on_remove_pod(pod);
        if let Some(placed) = pod.placed.as_deref() {
            for port in &placed.ports {
                if let Some(at) = usage.ports.iter().position(|p| p == port) {
                    usage.ports.remove(at);
                }
            }
            for term in &placed.anti_terms {
                index.remove_anti_term(term, node_index, &self.nodes);
            }
        }
    }
}
