//! Placement on the nodes the snapshot already has (Karpenter's existing
//! nodes): real nodes, nodes upcoming, and nodes planned for earlier gangs.

use std::collections::BTreeMap;

use dra_sim::snapshot::{PodClaims, Verdict};

use super::domains::Domain;
use super::{Attempt, Planner};
use crate::gang::Gang;

impl Planner<'_> {
    /// Places members on the first `existing` nodes of the snapshot (first
    /// fit in node order, within `domain`; nodes after them are phantoms or
    /// new); returns those still waiting.
    pub(super) fn place_on_existing(
        &mut self,
        gang: &Gang,
        claims: &BTreeMap<usize, PodClaims>,
        (domain, existing): (&Domain, usize),
        attempt: &mut Attempt,
    ) -> Vec<usize> {
        let mut unplaced: Vec<usize> = Vec::new();
        for &pod_index in &gang.pending {
            let Some(pod_claims) = claims.get(&pod_index) else {
                continue;
            };
            let mut placed = false;
            // Domain-restricted scans skip nodes for reasons other than fit,
            // so only unrestricted ones move the cursor.
            let signature = if domain.is_anywhere() {
                self.snapshot.cursor_signature(pod_index, pod_claims)
            } else {
                None
            };
            let start = self.snapshot.scan_start(signature);
            for node_index in start..existing {
                if !self.node_in_domain(node_index, domain) {
                    continue;
                }
                // Only the first refusal in a restricted domain is reported.
                let explain = !domain.is_anywhere() && attempt.existing_refusal.is_none();
                let verdict = if explain {
                    self.snapshot.check(pod_index, node_index, pod_claims)
                } else {
                    self.snapshot.check_fit(pod_index, node_index, pod_claims)
                };
                match verdict {
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
                    Verdict::Refused(reason) => {
                        if !domain.is_anywhere() && attempt.existing_refusal.is_none() {
                            attempt.existing_refusal = Some(format!(
                                "{}: {}",
                                self.node_called(node_index),
                                self.in_user_words(node_index, &reason)
                            ));
                        }
                    }
                    Verdict::Fatal(e) => {
                        let e = self.in_user_words(node_index, &e);
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
