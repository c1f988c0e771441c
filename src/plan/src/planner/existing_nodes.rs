//! Placement on the nodes the snapshot already has (Karpenter's existing
//! nodes): real nodes, nodes upcoming, and nodes planned for earlier gangs.

use std::collections::BTreeMap;

use dra_sim::snapshot::{PodClaims, Verdict};

use super::{Attempt, Planner};
use crate::gang::Gang;

impl Planner<'_> {
    /// Whether the node has `key=domain` (any node when unrestricted).
    fn node_in_domain(&self, node_index: usize, key: Option<&str>, domain: Option<&str>) -> bool {
        match (key, domain) {
            (Some(key), Some(domain)) => self.snapshot.nodes()[node_index]
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(key))
                .is_some_and(|v| v == domain),
            _ => true,
        }
    }

    /// Places members on the nodes the snapshot has (first fit in node
    /// order, within the domain); returns those still waiting.
    pub(super) fn place_on_existing(
        &mut self,
        gang: &Gang,
        claims: &BTreeMap<usize, PodClaims>,
        domain: Option<&str>,
        attempt: &mut Attempt,
    ) -> Vec<usize> {
        let key = gang.topology_key.as_deref();
        let mut unplaced: Vec<usize> = Vec::new();
        let existing = self.snapshot.nodes().len();
        for &pod_index in &gang.pending {
            let Some(pod_claims) = claims.get(&pod_index) else {
                continue;
            };
            let mut placed = false;
            // Domain-restricted scans skip nodes for reasons other than fit,
            // so only unrestricted ones move the cursor.
            let signature = if domain.is_none() {
                self.snapshot.signature(pod_index)
            } else {
                None
            };
            let start = self.snapshot.scan_start(signature);
            for node_index in start..existing {
                if !self.node_in_domain(node_index, key, domain) {
                    continue;
                }
                match self.snapshot.check(pod_index, node_index, pod_claims) {
                    Verdict::Fits(allocations) => {
                        self.snapshot.refused_before(signature, node_index);
                        self.place(
                            attempt,
                            pod_index,
                            node_index,
                            None,
                            pod_claims,
                            allocations,
                        );
                        placed = true;
                        break;
                    }
                    Verdict::Refused(_) => {}
                    Verdict::Fatal(e) => {
                        let e = self.in_user_words(node_index, e);
                        attempt.errors.insert(pod_index, e);
                        break;
                    }
                    Verdict::Unresolvable(_) => break,
                }
            }
            if !placed && !attempt.errors.contains_key(&pod_index) {
                self.snapshot.refused_before(signature, existing);
                unplaced.push(pod_index);
            }
        }
        unplaced
    }
}
