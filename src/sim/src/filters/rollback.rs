//! Undoing placements and template nodes, for a simulation that tries a gang
//! and rolls back when it cannot land whole. Undo is last in, first out: the
//! snapshot removes pods in the reverse order it added them, and nodes only
//! once their pods are gone.

use std::sync::PoisonError;

use super::FilterState;
use super::unbind::NO_NODE;

impl FilterState {
    /// The inverse of [`FilterState::add_pod`] for the pod added last.
    pub fn remove_last_pod(&mut self) {
        let Some(last) = self.pods.len().checked_sub(1) else {
            return;
        };
        if self.pods[last].node_index == NO_NODE {
            // Taken off after it was added, and not put back.
            self.taken_off = self.taken_off.saturating_sub(1);
        } else {
            self.uncount(last);
        }
        self.pods.pop();
        self.pod_requested.pop();
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
