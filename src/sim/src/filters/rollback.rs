//! Undoing placements and template nodes, for a simulation that tries a gang
//! and rolls back when it cannot land whole. Undo is last in, first out: the
//! snapshot removes pods in the reverse order it added them, and nodes only
//! once their pods are gone.

use std::sync::PoisonError;

use k8s_openapi::api::core::v1::Pod;

use super::{FilterState, inter_pod_affinity, node_ports};

impl FilterState {
    /// The inverse of [`FilterState::add_pod`] for the pod added last.
    pub fn remove_last_pod(&mut self, pod: &Pod) {
        let Some(record) = self.pods.pop() else {
            return;
        };
        let node_index = record.node_index;
        let requested = self.pod_requested.pop().unwrap_or_default();
        if let Some(usage) = self.usage.get_mut(node_index) {
            usage.requested.sub(&requested);
            usage.pod_count -= 1;
            let ports = node_ports::pod_host_ports(pod).len();
            let keep = usage.ports.len().saturating_sub(ports);
            usage.ports.truncate(keep);
        }
        let index = self.index.get_mut().unwrap_or_else(PoisonError::into_inner);
        index.on_remove_pod(&record);
        for term in inter_pod_affinity::placed_anti_terms(pod) {
            index.remove_anti_term(&term, node_index, &self.nodes);
        }
    }

    /// The inverse of [`FilterState::add_node`] for the node added last.
    pub fn remove_last_node(&mut self) {
        let Some(last) = self.nodes.len().checked_sub(1) else {
            return;
        };
        self.index
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .on_remove_last_node(&self.nodes);
        if let Some(name) = self.nodes[last].name.as_deref()
            && self.node_ids.get(name) == Some(&last)
        {
            self.node_ids.remove(name);
        }
        self.nodes.pop();
        self.usage.pop();
    }
}
