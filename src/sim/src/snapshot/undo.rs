//! The undo log: checkpoints, and rolling back every node added, pod added,
//! pod bound and scan cursor moved since one.

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaimStatus};

use super::{ObjectKey, Snapshot};

/// A point the snapshot can roll back to. Checkpoints nest: rolling back to
/// an older one undoes everything after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a checkpoint does nothing unless rolled back to"]
pub struct Checkpoint(pub(super) usize);

/// One change, with what is needed to undo it.
#[derive(Debug)]
pub(super) enum Undo {
    NodeAdded,
    PodAdded,
    Cursor {
        signature: u64,
        previous: Option<usize>,
    },
    PodBound {
        pod_index: usize,
        previous_node: Option<String>,
        claims: Vec<(ObjectKey, Option<ResourceClaimStatus>)>,
        allocations: Vec<AllocationResult>,
    },
    PodUnbound(Box<super::unbind::Unbound>),
}

impl Snapshot {
    /// Marks the current state so that [`Snapshot::rollback`] can return to it.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint(self.undo.len())
    }

    /// Keeps everything since `checkpoint`. Committing the outermost checkpoint
    /// drops the undo log, so long simulations do not accumulate it.
    pub fn commit(&mut self, checkpoint: Checkpoint) {
        if checkpoint.0 == 0 {
            self.undo.clear();
        }
    }

    /// Makes everything so far permanent: drops the undo log. Only for a
    /// caller that holds no checkpoint (older checkpoints become invalid).
    pub fn seal(&mut self) {
        self.undo.clear();
    }

    /// Undoes every node added and pod bound since `checkpoint`.
    pub fn rollback(&mut self, checkpoint: Checkpoint) {
        self.drop_stale_prepared();
        self.generation += 1;
        while self.undo.len() > checkpoint.0 {
            let Some(change) = self.undo.pop() else {
                break;
            };
            match change {
                Undo::Cursor {
                    signature,
                    previous,
                } => match previous {
                    Some(p) => {
                        self.cursors.insert(signature, p);
                    }
                    None => {
                        self.cursors.remove(&signature);
                    }
                },
                Undo::PodAdded => {
                    let index = self.pods.len().saturating_sub(1);
                    self.pods.pop();
                    self.signatures.truncate(index);
                    self.stateless_prepared.remove(&index);
                    if matches!(&self.prepared, Some((p, _, _)) if *p == index) {
                        self.prepared = None;
                    }
                }
                Undo::NodeAdded => {
                    self.filters.remove_last_node();
                    if let Some(node) = self.nodes.pop() {
                        let name = node.metadata.name.unwrap_or_default();
                        self.dra.remove_slices_for_node(&name);
                        self.node_index.remove(&name);
                    }
                }
                Undo::PodUnbound(unbound) => self.undo_unbind(*unbound),
                Undo::PodBound {
                    pod_index,
                    previous_node,
                    claims,
                    allocations,
                } => {
                    self.filters.remove_last_pod();
                    if let Some(spec) = self.pods[pod_index].spec.as_mut() {
                        spec.node_name = previous_node;
                    }
                    for allocation in &allocations {
                        self.allocated.remove_allocation(allocation, &self.gates);
                    }
                    for (key, status) in claims {
                        self.allocation_selectors.remove(&key);
                        if let Some(claim) = self.claims.get_mut(&key) {
                            claim.status = status;
                        }
                    }
                }
            }
        }
    }
}
