//! Unbinding a bound pod, as a drain simulation needs: the pod leaves its node (resources,
//! ports, affinity and spread counts), its claims stop being reserved for it, and a claim no
//! other pod uses any more loses its allocation, freeing its devices — what the ResourceClaim
//! controller does once the evicted pod is gone. The pod can then be placed elsewhere, which
//! allocates its claims afresh, as the scheduler would for its replacement.
//!
//! Every change is undone by [`Snapshot::rollback`].

use std::collections::HashMap;

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaimStatus};

use super::{NotBound, ObjectKey, Snapshot, Undo, extended_claim_key, object_key};
use crate::filters::TakenOff;
use crate::objects::ObjectRef;

/// What [`Snapshot::unbind`] changed, to undo it.
#[derive(Debug)]
pub(super) struct Unbound {
    pod_index: usize,
    node: String,
    taken: Option<TakenOff>,
    claims: Vec<(ObjectKey, Option<ResourceClaimStatus>)>,
    freed: Vec<AllocationResult>,
    cursors: HashMap<u64, usize>,
}

impl Snapshot {
    /// The claims a bound pod holds: the ones its entries name (directly, through
    /// `status.resourceClaimStatuses`, or generated for it), and the extended-resource claim
    /// made when it was placed. Nothing is instantiated.
    fn held_claims(&self, pod_index: usize) -> Vec<ObjectKey> {
        let pod = &self.pods[pod_index];
        let pod_key = object_key(&pod.metadata);
        let statuses: HashMap<&str, Option<&str>> = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|s| (s.name.as_str(), s.resource_claim_name.as_deref()))
            .collect();
        let mut keys: Vec<ObjectKey> = Vec::new();
        for entry in pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_ref())
            .into_iter()
            .flatten()
        {
            let key = if let Some(name) = &entry.resource_claim_name {
                Some(ObjectRef::new(pod_key.namespace.clone(), name.clone()))
            } else {
                match statuses.get(entry.name.as_str()) {
                    Some(Some(name)) => Some(ObjectRef::new(pod_key.namespace.clone(), *name)),
                    Some(None) => None,
                    None => {
                        self.generated_claim(&pod_key, pod.metadata.uid.as_deref(), &entry.name)
                    }
                }
            };
            if let Some(key) = key
                && !keys.contains(&key)
            {
                keys.push(key);
            }
        }
        let extended = extended_claim_key(&pod_key);
        if self.claims.contains_key(&extended) {
            keys.push(extended);
        }
        keys
    }

    /// Takes bound pod `pod_index` off its node (see the module docs); it is pending
    /// afterwards.
    ///
    /// # Errors
    /// The pod is not bound to a node of the snapshot.
    pub fn unbind(&mut self, pod_index: usize) -> Result<(), NotBound> {
        let node_index = self
            .pod_node(pod_index)
            .ok_or_else(|| NotBound(object_key(&self.pods[pod_index].metadata)))?;
        self.prepared = None;
        self.generation += 1;
        let taken = self.filters.take_off(&self.pods[pod_index], node_index);
        let pod = &self.pods[pod_index];
        let (name, uid) = (
            pod.metadata.name.clone().unwrap_or_default(),
            pod.metadata.uid.clone(),
        );
        let mut saved = Vec::new();
        let mut freed = Vec::new();
        for key in self.held_claims(pod_index) {
            let Some(claim) = self.claims.get_mut(&key) else {
                continue;
            };
            saved.push((key.clone(), claim.status.clone()));
            let Some(status) = claim.status.as_mut() else {
                continue;
            };
            if let Some(reserved) = status.reserved_for.as_mut() {
                reserved.retain(|r| {
                    !(r.resource == "pods"
                        && match &uid {
                            Some(uid) if !r.uid.is_empty() => &r.uid == uid,
                            _ => r.name == name,
                        })
                });
            }
            if status.reserved_for.as_ref().is_none_or(Vec::is_empty) {
                status.reserved_for = None;
                self.allocation_selectors.remove(&key);
                if let Some(allocation) = status.allocation.take() {
                    self.allocated.remove_allocation(&allocation, &self.gates);
                    freed.push(allocation);
                }
            }
        }
        let node = self.nodes[node_index]
            .metadata
            .name
            .clone()
            .unwrap_or_default();
        if let Some(spec) = self.pods[pod_index].spec.as_mut() {
            spec.node_name = None;
        }
        // A first-fit cursor says every node before it refused a kind of pod; freed room
        // makes that untrue.
        let cursors = std::mem::take(&mut self.cursors);
        self.undo.push(Undo::PodUnbound(Box::new(Unbound {
            pod_index,
            node,
            taken,
            claims: saved,
            freed,
            cursors,
        })));
        Ok(())
    }

    /// Undoes one [`Snapshot::unbind`].
    pub(super) fn undo_unbind(&mut self, unbound: Unbound) {
        let Unbound {
            pod_index,
            node,
            taken,
            claims,
            freed,
            cursors,
        } = unbound;
        for allocation in &freed {
            self.allocated.add_allocation(allocation, &self.gates);
        }
        for (key, status) in claims {
            self.allocation_selectors.remove(&key);
            if let Some(claim) = self.claims.get_mut(&key) {
                claim.status = status;
            }
        }
        if let Some(spec) = self.pods[pod_index].spec.as_mut() {
            spec.node_name = Some(node);
        }
        if let Some(taken) = &taken {
            self.filters.put_back(taken);
        }
        self.cursors = cursors;
    }
}
