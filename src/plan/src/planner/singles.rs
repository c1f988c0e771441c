//! Single pods: planned together per priority, as one batch with no
//! minimum, so new nodes are chosen for what the batch fills; each pod
//! lands or waits on its own.

use std::collections::{BTreeMap, BTreeSet};

use dra_sim::report::Outcome;

use super::domains::Domain;
use super::new_nodes::NoNewNode;
use super::{Attempt, Placement, Planner, ScaleUps};
use crate::gang::{Gang, GangApi, GangRef};
use crate::report::{GangOutcome, PlanReport, PodGroupReport};

impl Planner<'_> {
    /// Plans a batch of single pods: existing nodes first, then new nodes
    /// chosen for the whole batch; every pod lands or waits on its own.
    pub(super) fn plan_singles(
        &mut self,
        singles: &[Gang],
        report: &mut PlanReport,
        scale_ups: &mut ScaleUps,
    ) {
        let pending: Vec<usize> = singles
            .iter()
            .flat_map(|g| g.pending.iter().copied())
            .collect();
        let (claims, claim_errors) = self.resolve_claims(&pending);
        let batch = Gang {
            api: GangApi::Single,
            name: GangRef::default(),
            min_count: 0,
            pending,
            bound: 0,
            topology_key: None,
            blocked: None,
            priority: singles.first().map_or(0, |g| g.priority),
            existing_only: false,
        };
        let start = self.snapshot.checkpoint();
        let mut attempt = Attempt::default();
        let existing = self.snapshot.nodes().len();
        let mut unplaced =
            self.place_on_existing(&batch, &claims, (&Domain::Anywhere, existing), &mut attempt);
        // Choosing between groups that differ only in size is a packing
        // question: fill large nodes, buy each as the size the expander
        // prefers among those that hold it. What that cannot place goes
        // group by group, with reasons.
        let packed_from = attempt.placements.len();
        unplaced = self.pack_by_size(unplaced, &claims, &mut attempt);
        // Packing places in its own order; the report lists the packed pods
        // in that order, in the slots they held, so that among new nodes of
        // one packing the report's order is the sequence that was checked.
        // (Pods placed on existing nodes were checked before, and pods left
        // to the group-by-group path after, whatever their slots.)
        let packed: Vec<usize> = attempt.placements[packed_from..]
            .iter()
            .map(|p| p.pod_index)
            .collect();
        let singles: Vec<&Gang> = {
            let by_pod: BTreeMap<usize, &Gang> = singles
                .iter()
                .filter_map(|g| g.pending.first().map(|&p| (p, g)))
                .collect();
            let is_packed: BTreeSet<usize> = packed.iter().copied().collect();
            let mut next = packed.iter();
            singles
                .iter()
                .map(|g| match g.pending.first() {
                    Some(p) if is_packed.contains(p) => next
                        .next()
                        .and_then(|q| by_pod.get(q).copied())
                        .unwrap_or(g),
                    _ => g,
                })
                .collect()
        };
        self.open_new_nodes(&batch, &claims, &Domain::Anywhere, &mut attempt, unplaced);
        self.snapshot.commit(start);
        self.snapshot.seal();
        let placed: BTreeMap<usize, &Placement> = attempt
            .placements
            .iter()
            .map(|p| (p.pod_index, p))
            .collect();
        let mut nodes_per_group: BTreeMap<usize, BTreeSet<GangRef>> = BTreeMap::new();
        for (&g, &count) in &attempt.new_nodes {
            self.used[g] += count;
            scale_ups.entry(g).or_insert((0, BTreeSet::new(), 0)).0 += count;
        }
        // Each pod left waiting is told why, in its own terms: what each group
        // has against it, never what another pod of the batch ran into.
        let mut own_reasons: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for gang in &singles {
            for &pod_index in &gang.pending {
                let waits = !placed.contains_key(&pod_index)
                    && !claim_errors.contains_key(&pod_index)
                    && !attempt.errors.contains_key(&pod_index);
                let Some(pod_claims) = claims.get(&pod_index).filter(|_| waits) else {
                    continue;
                };
                match self.why_no_new_node(pod_index, pod_claims) {
                    NoNewNode::Refused(reasons) => {
                        own_reasons.insert(pod_index, reasons);
                    }
                    NoNewNode::Fails(error) => {
                        attempt.errors.insert(pod_index, error);
                    }
                }
            }
        }
        for gang in singles {
            for &pod_index in &gang.pending {
                let name = self.name(pod_index);
                let (outcome, pod_report) = match (
                    placed.get(&pod_index),
                    claim_errors.get(&pod_index),
                    attempt.errors.get(&pod_index),
                ) {
                    (Some(p), _, _) => {
                        if let Some(g) = p.new_group {
                            nodes_per_group
                                .entry(g)
                                .or_default()
                                .insert(gang.name.clone());
                        }
                        (GangOutcome::Lands, self.placed(p))
                    }
                    (None, Some(e), _) => (GangOutcome::Waits, self.refused_by(pod_index, e)),
                    (None, None, Some(e)) => (
                        GangOutcome::Waits,
                        self.pod_report(pod_index, Outcome::Error, None, vec![e.clone()]),
                    ),
                    (None, None, None) => {
                        let mut reasons =
                            vec!["no existing node and no node group can take it".to_string()];
                        reasons.extend(own_reasons.remove(&pod_index).unwrap_or_default());
                        (GangOutcome::Waits, self.unschedulable(pod_index, reasons))
                    }
                };
                // A buffer chunk is reported under its buffer.
                let (pod_group, api) = match gang.api {
                    GangApi::CapacityBuffer => (gang.name.clone(), gang.api),
                    _ => (GangRef::object(name), GangApi::Single),
                };
                report.pod_groups.push(PodGroupReport {
                    pod_group,
                    api,
                    outcome,
                    min_count: 1,
                    members: vec![self.name(pod_index)],
                    reasons: if outcome == GangOutcome::Waits {
                        pod_report.reasons.clone()
                    } else {
                        Vec::new()
                    },
                });
                report.pods.push(pod_report);
            }
        }
        for (g, gangs) in nodes_per_group {
            scale_ups
                .entry(g)
                .or_insert((0, BTreeSet::new(), 0))
                .1
                .extend(gangs);
        }
    }
}
