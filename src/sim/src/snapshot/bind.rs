//! Committing a placement: the pod bound, its new allocations recorded and
//! every claim reserved for it, with what the undo log needs to reverse it.

use k8s_openapi::api::resource::v1::{
    AllocationResult, ResourceClaimConsumerReference, ResourceClaimStatus,
};

use super::{ObjectKey, PodClaims, Snapshot, Undo, extended_claim_key, object_key};
use crate::filters::extended_resource_claim;

impl Snapshot {
    /// Commits a placement: the pod is bound to the node, each newly allocated
    /// claim gets its allocation, and every claim of the pod is reserved for it.
    pub fn bind(
        &mut self,
        pod_index: usize,
        node_index: usize,
        claims: &PodClaims,
        allocations: Vec<AllocationResult>,
    ) {
        let mut keys = claims.to_allocate.clone();
        if allocations.len() > keys.len() {
            // The extended-resource claim the scheduler creates at PreBind.
            let pod = &self.pods[pod_index];
            let pod_key = object_key(&pod.metadata);
            if let Some(mut claim) = extended_resource_claim(
                pod,
                &self.nodes[node_index],
                &self.device_classes,
                &self.gates,
            ) {
                let key = extended_claim_key(&pod_key);
                claim.metadata.name = Some(key.name.clone());
                claim.metadata.namespace = Some(key.namespace.clone());
                claim.metadata.generate_name = None;
                self.claims.insert(key.clone(), claim);
                keys.push(key);
            }
        }
        let node_name = self.nodes[node_index].metadata.name.clone();
        let saved_claims: Vec<(ObjectKey, Option<ResourceClaimStatus>)> = claims
            .allocated
            .iter()
            .chain(&keys)
            .map(|k| (k.clone(), self.claims.get(k).and_then(|c| c.status.clone())))
            .collect();
        let pod = &mut self.pods[pod_index];
        let previous_node = pod
            .spec
            .as_mut()
            .and_then(|spec| std::mem::replace(&mut spec.node_name, node_name));
        self.undo.push(Undo::PodBound {
            pod_index,
            previous_node,
            claims: saved_claims,
            allocations: allocations.clone(),
        });
        // PreFilter parsed the pod's requests when it was checked: reuse them.
        let prepared = match self.prepared.take() {
            Some((p, _, Ok(prepared))) if p == pod_index => Some(prepared),
            _ => None,
        };
        let prepared = prepared.as_ref().or_else(|| {
            self.stateless_prepared
                .get(&pod_index)
                .and_then(|p| p.as_ref().ok())
        });
        self.filters
            .add_pod_prepared(&self.pods[pod_index], node_index, prepared);
        self.generation += 1;
        let pod = &self.pods[pod_index];
        let consumer = ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".into(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        };
        for key in &keys {
            self.allocation_selectors.remove(key);
        }
        for (key, allocation) in keys.iter().zip(allocations) {
            self.allocated.add_allocation(&allocation, &self.gates);
            if let Some(claim) = self.claims.get_mut(key) {
                let status = claim
                    .status
                    .get_or_insert_with(ResourceClaimStatus::default);
                status.allocation = Some(allocation);
            }
        }
        for key in claims.allocated.iter().chain(&keys) {
            if let Some(claim) = self.claims.get_mut(key) {
                let status = claim
                    .status
                    .get_or_insert_with(ResourceClaimStatus::default);
                status
                    .reserved_for
                    .get_or_insert_with(Vec::new)
                    .push(consumer.clone());
            }
        }
    }
}
