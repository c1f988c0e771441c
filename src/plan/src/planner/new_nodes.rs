//! Opening new nodes group by group (Karpenter's node claims): the best
//! group for the members still waiting, by the expander, filled while it
//! keeps yielding as well, then re-ranked; and why groups were ruled out.

use std::collections::{BTreeMap, BTreeSet};

use dra_sim::snapshot::{PodClaims, Verdict};

use super::domains::Domain;
use super::expander::{Choice, waste};
use super::{Attempt, Planner};
use crate::gang::Gang;
use crate::groups::{NoRoom, template_node};

/// What fresh nodes say about one waiting pod ([`Planner::why_no_new_node`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NoNewNode {
    /// Why each group's fresh node refuses it (`node group X: ...`); empty when one
    /// would take it.
    Refused(Vec<String>),
    /// The error the scheduler would fail the pod with on such a node.
    Fails(String),
}

impl Planner<'_> {
    /// Opens new nodes in `domain` for the waiting members: the best group
    /// by the expander, filled while each new node of it takes as many as
    /// the first, then re-ranked. Records why members stay unplaced.
    pub(super) fn open_new_nodes(
        &mut self,
        gang: &Gang,
        claims: &BTreeMap<usize, PodClaims>,
        domain: &Domain,
        attempt: &mut Attempt,
        mut unplaced: Vec<usize>,
    ) {
        if unplaced.is_empty() {
            return;
        }
        let mut rejected: BTreeMap<usize, String> = BTreeMap::new();
        let mut excluded: BTreeSet<usize> = BTreeSet::new();
        // The nodes this call opened, with their group: a member one of them turned away
        // (a spread's skew, an affinity) may fit there once others are placed elsewhere,
        // and the scheduler would put it there rather than on a node nobody bought yet.
        let mut opened: Vec<(usize, usize)> = Vec::new();
        'rank: while !unplaced.is_empty() {
            for &(node_index, group) in &opened {
                if unplaced.is_empty() {
                    break 'rank;
                }
                unplaced = self.fill_node(node_index, group, unplaced, claims, attempt);
            }
            unplaced.retain(|p| !attempt.errors.contains_key(p));
            if unplaced.is_empty() {
                break;
            }
            let choice =
                self.best_group(&unplaced, claims, domain, attempt, &mut rejected, &excluded);
            // A member the scheduler would fail with an error waits no more.
            unplaced.retain(|p| !attempt.errors.contains_key(p));
            let Some(choice) = choice else {
                break;
            };
            let group = choice.group;
            let mut first = true;
            loop {
                let before_node = self.snapshot.checkpoint();
                let node_index = self.add_new_node(group, attempt);
                let before = unplaced.len();
                unplaced = self.fill_node(node_index, group, unplaced, claims, attempt);
                let yielded = before - unplaced.len();
                if yielded == 0 {
                    self.snapshot.rollback(before_node);
                    if let Some(count) = attempt.new_nodes.get_mut(&group) {
                        *count -= 1;
                        if *count == 0 {
                            attempt.new_nodes.remove(&group);
                        }
                    }
                    attempt.cost -= self.groups[group].spec.price_per_hour;
                    // The first node took nothing although the probe said it
                    // would (the cluster changed since): drop the group for
                    // this attempt. A later one took nothing because members
                    // placed since changed what fits (a spread's skew, say):
                    // re-rank, which probes the group again.
                    if first {
                        excluded.insert(group);
                    }
                    break;
                }
                first = false;
                opened.push((node_index, group));
                if domain.one_new_node() {
                    break 'rank;
                }
                // Another node of this group is only as good as the first
                // if enough members remain to fill it; otherwise re-rank.
                if unplaced.len() < choice.yield_per_node
                    || yielded < choice.yield_per_node
                    || self.room_left(group, attempt).unwrap_or(0) == 0
                {
                    break;
                }
            }
        }
        if !unplaced.is_empty() {
            let placed = attempt.placements.len();
            attempt.reasons.push(format!(
                "{placed} of {} pending members can be placed, {} needed",
                gang.pending.len(),
                gang.needed()
            ));
            attempt.reasons.extend(attempt.existing_refusal.clone());
            attempt.reasons.extend(
                rejected
                    .into_iter()
                    .map(|(g, r)| format!("node group {}: {r}", self.groups[g].name)),
            );
            if !domain.is_anywhere()
                && !(0..self.groups.len()).any(|g| self.group_in_domain(g, domain))
            {
                attempt
                    .reasons
                    .push("no node group's new nodes are in this domain".into());
            }
        }
    }

    /// Why no new node takes `pod_index`, group by group (`node group X:
    /// ...`): the group's limit, or what a fresh node of it has against the
    /// pod. Nothing for a group a fresh node of which would take it; the
    /// error instead when the scheduler would fail the pod on such a node.
    pub(super) fn why_no_new_node(&mut self, pod_index: usize, claims: &PodClaims) -> NoNewNode {
        let waiting = [pod_index];
        let claims = BTreeMap::from([(pod_index, claims.clone())]);
        let uniform = self.uniform_signature(&waiting);
        let mut reasons = Vec::new();
        for group in 0..self.groups.len() {
            if let Err(limit) = self.budget.left(group, |g| self.used[g]) {
                reasons.push(format!("node group {}: {limit}", self.groups[group].name));
                continue;
            }
            let result = self.fresh_node_takes(group, &waiting, &claims, uniform);
            if let Some((_, error)) = result.errors.into_iter().next() {
                return NoNewNode::Fails(error);
            }
            if let Some((pod, why)) = result.refusal {
                reasons.push(format!(
                    "node group {}: pod {}: {why}",
                    self.groups[group].name,
                    self.name(pod)
                ));
            }
        }
        NoNewNode::Refused(reasons)
    }

    /// How many more nodes of `group` the budget allows, counting the
    /// attempt's own.
    fn room_left(&self, group: usize, attempt: &Attempt) -> Result<usize, NoRoom> {
        self.budget.left(group, |g| {
            self.used[g] + attempt.new_nodes.get(&g).copied().unwrap_or(0)
        })
    }

    /// Adds a node of `group` to the snapshot (with its DaemonSet pods) and
    /// counts it in the attempt.
    pub(super) fn add_new_node(&mut self, group: usize, attempt: &mut Attempt) -> usize {
        let g = &self.groups[group];
        let ordinal = self.used[group] + attempt.new_nodes.get(&group).copied().unwrap_or(0);
        let (node, slices) = template_node(g, &format!("{}-new-{ordinal}", g.name));
        *attempt.new_nodes.entry(group).or_default() += 1;
        attempt.cost += g.spec.price_per_hour;
        let node_index = self.snapshot.add_node(node, slices);
        self.add_daemon_pods(node_index);
        node_index
    }

    /// Places waiting members on `node_index` (first fit, in order); returns
    /// those still waiting.
    fn fill_node(
        &mut self,
        node_index: usize,
        group: usize,
        waiting: Vec<usize>,
        claims: &BTreeMap<usize, PodClaims>,
        attempt: &mut Attempt,
    ) -> Vec<usize> {
        let mut still = Vec::new();
        for pod_index in waiting {
            let Some(pod_claims) = claims.get(&pod_index) else {
                continue;
            };
            if self.surely_too_full(pod_index, node_index, group) {
                still.push(pod_index);
                continue;
            }
            match self.snapshot.check_fit(pod_index, node_index, pod_claims) {
                Verdict::Fits(allocations) => {
                    self.place(
                        attempt,
                        pod_index,
                        node_index,
                        Some(group),
                        pod_claims,
                        allocations,
                    );
                }
                Verdict::Refused(_) | Verdict::Unresolvable(_) => still.push(pod_index),
                Verdict::Fatal(e) => {
                    let e = self.in_user_words(node_index, &e);
                    attempt.errors.insert(pod_index, e);
                }
            }
        }
        still
    }

    /// Probes one new node of every group with room (in the domain) and
    /// ranks them by the expander. Records why each group was rejected, and
    /// in `attempt` the members the scheduler would fail with an error.
    fn best_group(
        &mut self,
        waiting: &[usize],
        claims: &BTreeMap<usize, PodClaims>,
        domain: &Domain,
        attempt: &mut Attempt,
        rejected: &mut BTreeMap<usize, String>,
        excluded: &BTreeSet<usize>,
    ) -> Option<Choice> {
        let mut best: Option<Choice> = None;
        let uniform = self.uniform_signature(waiting);
        for group in 0..self.groups.len() {
            if excluded.contains(&group) {
                continue;
            }
            if !self.group_in_domain(group, domain) {
                continue;
            }
            let room = match self.room_left(group, attempt) {
                Ok(room) => room,
                Err(reason) => {
                    rejected.insert(group, reason.to_string());
                    continue;
                }
            };
            let g = &self.groups[group];
            let result = self.fresh_node_takes(group, waiting, claims, uniform);
            for (pod, error) in result.errors {
                attempt.errors.entry(pod).or_insert(error);
            }
            if result.yielded == 0 {
                // Named after a member of this gang (or batch) that was
                // refused: never another object's reason.
                let reason = match result.refusal {
                    Some((pod, why)) => format!("pod {}: {why}", self.name(pod)),
                    None => "no waiting member fits a new node".into(),
                };
                rejected.insert(group, reason);
                continue;
            }
            let (yielded, requested) = (result.yielded, result.requested);
            rejected.remove(&group);
            let candidate = Choice {
                group,
                yield_per_node: yielded,
                waste: waste(g, requested),
                holds_rest: room.saturating_mul(yielded) >= waiting.len(),
            };
            if best.as_ref().is_none_or(|b| self.better(&candidate, b)) {
                best = Some(candidate);
            }
        }
        best
    }
}
