//! Drain simulation: the pods of a node that goes must all fit elsewhere, under the full fit
//! engine (every filter, and the DRA allocator re-allocating their claims once their devices
//! are freed), never on a node being removed. Moves are committed as the pass goes, so a node
//! considered later sees the room the earlier moves took — greedy multi-node removal.
//!
//! Destinations are tried in one fixed order, first fit, as cluster-autoscaler's removal
//! simulator does. To keep that cheap over thousands of nodes, a cursor per kind of pod (the
//! snapshot's scheduling signature) remembers where the last one fitted: room on a destination
//! only shrinks while pods are moved in, so every node before the cursor still refuses such a
//! pod. Anything that frees room on a destination (a rolled-back attempt, a gang moved whole
//! off nodes that stay) resets the cursors.

use std::collections::{BTreeMap, HashMap};

use dra_sim::snapshot::{Snapshot, Verdict};

use super::drain_error::{DrainError, MoveFailure};
use super::eligibility::pod_name;

/// Where pods of a pass may go.
pub(super) struct Drainer {
    /// Destination node indices, in the order tried.
    order: Vec<usize>,
    /// Per node index: never a destination (removed in this pass, being removed).
    excluded: Vec<bool>,
    /// Scheduling signature -> position in `order` where a scan may start.
    cursors: HashMap<u64, usize>,
    /// Whether signatures may be trusted: not when a pod's labels decide where others fit
    /// (required anti-affinity), since moving a pod away can then make room elsewhere.
    use_cursors: bool,
}

/// How many distinct refusal reasons a "cannot move" message lists.
const REASONS_SHOWN: usize = 3;

impl Drainer {
    /// Pods go to `order` (node indices) in that order, never to `excluded` ones.
    pub(super) fn new(snapshot: &Snapshot, order: Vec<usize>, excluded: Vec<bool>) -> Self {
        Self {
            order,
            excluded,
            cursors: HashMap::new(),
            use_cursors: !snapshot.labels_matter(),
        }
    }

    /// Node `node_index` is no destination from now on.
    pub(super) fn exclude(&mut self, node_index: usize) {
        if let Some(slot) = self.excluded.get_mut(node_index) {
            *slot = true;
        }
    }

    /// Unbinds `pods` and places each elsewhere, in order, never on `removing` (the node
    /// being drained). On success the moves stay in the snapshot, `removing` is no destination
    /// any more, and `(pod, node)` pairs are returned; otherwise everything is rolled back and
    /// the reason names the pod that could not move. `frees_destinations`: some of the pods
    /// sit on nodes that stay destinations (a gang moved whole).
    pub(super) fn move_pods(
        &mut self,
        snapshot: &mut Snapshot,
        pods: &[usize],
        removing: usize,
        frees_destinations: bool,
    ) -> Result<Vec<(usize, usize)>, DrainError> {
        let saved_cursors = self.cursors.clone();
        let was_excluded = self.excluded.get(removing).copied().unwrap_or(true);
        self.exclude(removing);
        let checkpoint = snapshot.checkpoint();
        let fail = |snapshot: &mut Snapshot, this: &mut Self, reason: DrainError| {
            snapshot.rollback(checkpoint);
            this.cursors = saved_cursors.clone();
            if let Some(slot) = this.excluded.get_mut(removing) {
                *slot = was_excluded;
            }
            Err(reason)
        };
        for &pod in pods {
            if let Err(e) = snapshot.unbind(pod) {
                return fail(snapshot, self, DrainError::Unbind(e.to_string()));
            }
        }
        if frees_destinations {
            self.cursors.clear();
        }
        let mut moves = Vec::with_capacity(pods.len());
        for &pod in pods {
            match self.place(snapshot, pod) {
                Ok(node) => moves.push((pod, node)),
                Err(reason) => return fail(snapshot, self, reason),
            }
        }
        snapshot.commit(checkpoint);
        Ok(moves)
    }

    /// First fit for one pending pod; binds it there.
    fn place(&mut self, snapshot: &mut Snapshot, pod: usize) -> Result<usize, DrainError> {
        let name = pod_name(&snapshot.pods()[pod]);
        let cannot = |why| DrainError::CannotMove {
            pod: name.clone(),
            why,
        };
        let claims = snapshot
            .resolve_claims(pod)
            .map_err(|e| cannot(MoveFailure::Unplaceable(e.to_string())))?;
        let signature = if self.use_cursors {
            snapshot.cursor_signature(pod, &claims)
        } else {
            None
        };
        let start = signature
            .and_then(|s| self.cursors.get(&s).copied())
            .unwrap_or(0);
        let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
        // From the cursor on; when nothing fits there, the nodes before it too: they refused
        // such a pod before, and are asked again only to say why (and, should room have
        // opened after all, to take it).
        for range in [start..self.order.len(), 0..start] {
            for position in range {
                let node = self.order[position];
                if self.excluded[node] {
                    continue;
                }
                match snapshot.check(pod, node, &claims) {
                    Verdict::Fits(allocations) => {
                        snapshot.bind(pod, node, &claims, allocations);
                        if let Some(s) = signature {
                            self.cursors.insert(s, position);
                        }
                        return Ok(node);
                    }
                    Verdict::Refused(reason) => {
                        *refusals.entry(reason.to_string()).or_default() += 1
                    }
                    Verdict::Fatal(reason) | Verdict::Unresolvable(reason) => {
                        return Err(cannot(MoveFailure::Unplaceable(reason.to_string())));
                    }
                }
            }
        }
        if let Some(s) = signature {
            self.cursors.insert(s, self.order.len());
        }
        Err(cannot(summary(&refusals)))
    }
}

/// `no other node fits it (2 nodes: Insufficient cpu; 1 node: …)`, most frequent first.
fn summary(refusals: &BTreeMap<String, usize>) -> MoveFailure {
    if refusals.is_empty() {
        return MoveFailure::NoOtherNode;
    }
    let mut by_count: Vec<(&String, &usize)> = refusals.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let shown = by_count
        .iter()
        .take(REASONS_SHOWN)
        .map(|(reason, n)| (**n, (*reason).clone()))
        .collect();
    let more = by_count.len().saturating_sub(REASONS_SHOWN);
    MoveFailure::Refused { shown, more }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_summarised_most_frequent_first() {
        let mut r = BTreeMap::new();
        r.insert("Insufficient cpu".to_string(), 1);
        r.insert("node(s) had untolerated taint".to_string(), 3);
        let words = "no other node fits it (3 nodes: node(s) had untolerated taint; 1 node: Insufficient cpu)";
        assert_eq!(summary(&r).to_string(), words);
        assert_eq!(MoveFailure::parse(words), summary(&r));
        assert_eq!(
            summary(&BTreeMap::new()).to_string(),
            "no other node to move to"
        );
    }

    #[test]
    fn a_refusal_holding_a_semicolon_and_more_reasons_read_back() {
        let failure = MoveFailure::Refused {
            shown: vec![
                (2, "cannot allocate all claims: a; b".into()),
                (1, "Insufficient cpu".into()),
            ],
            more: 4,
        };
        let words = failure.to_string();
        assert_eq!(
            words,
            "no other node fits it (2 nodes: cannot allocate all claims: a; b; 1 node: Insufficient cpu; 4 more reasons)"
        );
        assert_eq!(MoveFailure::parse(&words), failure);
        let error = DrainError::CannotMove {
            pod: "ml/a".into(),
            why: failure,
        };
        assert_eq!(DrainError::parse(&error.to_string()), Some(error));
    }
}
