//! Gang planning: a gang tried whole in each topology domain it may use
//! (see [`super::domains`]), the domain the expander prefers among those
//! where it lands kept, and nothing kept when it cannot land.

use std::collections::{BTreeMap, BTreeSet};

use dra_sim::reason::Reason;
use dra_sim::report::Outcome;
use dra_sim::snapshot::{PodClaims, Verdict};

use super::domains::Domain;
use super::expander::{Expander, waste};
use super::{Attempt, Placement, Planner, ScaleUps};
use crate::gang::Gang;
use crate::report::{GangOutcome, PlanReport, PodGroupReport};

impl Planner<'_> {
    /// Plans one gang: lands whole (its placements and new nodes committed)
    /// or waits with the reasons of every domain tried.
    pub(super) fn plan_gang(
        &mut self,
        gang: &Gang,
        report: &mut PlanReport,
        scale_ups: &mut ScaleUps,
    ) {
        let members = gang.pending.iter().map(|&i| self.name(i)).collect();
        let mut gang_report = PodGroupReport {
            pod_group: gang.name.clone(),
            api: gang.api,
            outcome: GangOutcome::Waits,
            min_count: gang.min_count,
            members,
            reasons: Vec::new(),
        };
        if let Some(reason) = &gang.blocked {
            gang_report.reasons.push(reason.clone());
            for &pod_index in &gang.pending {
                report
                    .pods
                    .push(self.unschedulable(pod_index, vec![reason.clone()]));
            }
            report.pod_groups.push(gang_report);
            return;
        }

        let (claims, claim_errors) = self.resolve_claims(&gang.pending);

        // The domains are read before phantom nodes join the snapshot; the
        // attempts see the phantoms, the plan is replayed without them.
        let existing = self.snapshot.nodes().len();
        let keys = self.colocation_keys(gang);
        let domains = self.domains(&keys, existing);
        let before = self.snapshot.checkpoint();
        let phantoms = self.add_gang_phantoms(gang);
        let start = self.snapshot.checkpoint();
        let mut best: Option<Attempt> = None;
        let mut all_reasons = Vec::new();
        // Members the scheduler would fail with an error, in any domain (the
        // first error seen for each).
        let mut errors: BTreeMap<usize, String> = BTreeMap::new();
        // With one domain and no phantom the attempt is kept in place when it
        // lands, instead of being rolled back and replayed.
        let keep = domains.len() == 1 && phantoms == 0;
        let mut kept = false;
        for domain in &domains {
            let attempt = self.attempt(gang, &claims, domain, existing);
            for (&pod, error) in &attempt.errors {
                errors.entry(pod).or_insert_with(|| error.clone());
            }
            let lands = attempt.placements.len() >= gang.needed();
            if keep && lands {
                kept = true;
            } else {
                self.snapshot.rollback(start);
            }
            if !lands {
                let prefix = self.domain_prefix(domain);
                all_reasons.extend(attempt.reasons.iter().map(|r| format!("{prefix}{r}")));
                continue;
            }
            let better = best
                .as_ref()
                .is_none_or(|b| self.better_attempt(&attempt, b));
            if better {
                best = Some(attempt);
            }
        }
        if domains.is_empty() {
            all_reasons.push(format!(
                "no node or node group has the topology label {}",
                keys.join(", ")
            ));
        }

        let Some(chosen) = best else {
            self.snapshot.rollback(before);
            self.report_waits(
                gang,
                gang_report,
                (all_reasons, &errors, &claim_errors),
                report,
            );
            return;
        };
        let attempt = if kept {
            chosen
        } else {
            self.snapshot.rollback(before);
            let replayed = self.replay(&chosen, &claims);
            if replayed.placements.len() < gang.needed() {
                // Not expected: the replay checks what the attempt checked,
                // without phantoms, which only ever admit more.
                self.snapshot.rollback(before);
                self.report_waits(
                    gang,
                    gang_report,
                    (replayed.reasons, &replayed.errors, &claim_errors),
                    report,
                );
                return;
            }
            replayed
        };
        self.snapshot.commit(before);
        self.snapshot.seal();
        for (&g, &count) in &attempt.new_nodes {
            self.used[g] += count;
            let entry = scale_ups.entry(g).or_insert((0, BTreeSet::new(), 0));
            entry.0 += count;
            entry.1.insert(gang.name.clone());
            // A gang only lands if all its new nodes start; single pods need
            // no companions.
            if gang.api.is_gang() {
                entry.2 += count;
            }
        }
        gang_report.outcome = GangOutcome::Lands;
        let placed: BTreeMap<usize, &Placement> = attempt
            .placements
            .iter()
            .map(|p| (p.pod_index, p))
            .collect();
        for &pod_index in &gang.pending {
            match placed.get(&pod_index) {
                Some(p) => report.pods.push(self.placed(p)),
                None => report.pods.push(match claim_errors.get(&pod_index) {
                    Some(e) => self.refused_by(pod_index, e),
                    None => self.unschedulable(
                        pod_index,
                        vec!["the gang lands without this member; no node takes it".into()],
                    ),
                }),
            }
        }
        report.pod_groups.push(gang_report);
    }

    /// Reports a gang that waits: the reasons of every domain tried, then
    /// each member that keeps the gang from starting wherever it goes (an
    /// error, or claims PreFilter refuses) with its own reason; each member
    /// is told its own error or refusal when it has one, else the gang's.
    fn report_waits(
        &self,
        gang: &Gang,
        mut gang_report: PodGroupReport,
        (reasons, errors, claim_errors): (
            Vec<String>,
            &BTreeMap<usize, String>,
            &BTreeMap<usize, Reason>,
        ),
        report: &mut PlanReport,
    ) {
        gang_report.reasons = dedup(reasons);
        gang_report.reasons.extend(
            errors
                .iter()
                .map(|(&pod, why)| format!("pod {}: {why}", self.name(pod)))
                .chain(
                    claim_errors
                        .iter()
                        .map(|(&pod, why)| format!("pod {}: {why}", self.name(pod))),
                ),
        );
        if gang_report.reasons.is_empty() {
            gang_report.reasons.push("no node fits the gang".into());
        }
        for &pod_index in &gang.pending {
            if let Some(e) = errors.get(&pod_index) {
                report
                    .pods
                    .push(self.pod_report(pod_index, Outcome::Error, None, vec![e.clone()]));
            } else if let Some(e) = claim_errors.get(&pod_index) {
                // PreFilter refuses it on every node: unschedulable, for its
                // own reason.
                report.pods.push(self.refused_by(pod_index, e));
            } else {
                report
                    .pods
                    .push(self.unschedulable(pod_index, gang_report.reasons.clone()));
            }
        }
        report.pod_groups.push(gang_report);
    }

    /// Places as many members as possible in `domain`: first on the first
    /// `existing` nodes in name order, then on new nodes chosen by the
    /// expander. Leaves the snapshot changed; the caller rolls back or
    /// commits.
    fn attempt(
        &mut self,
        gang: &Gang,
        claims: &BTreeMap<usize, PodClaims>,
        domain: &Domain,
        existing: usize,
    ) -> Attempt {
        let mut attempt = Attempt::default();
        let unplaced = self.place_on_existing(gang, claims, (domain, existing), &mut attempt);
        if gang.existing_only {
            if !unplaced.is_empty() {
                attempt.reasons.push(format!(
                    "existing capacity holds {} of the {} pods, and a check-capacity request never adds nodes",
                    attempt.placements.len(),
                    gang.pending.len()
                ));
            }
        } else {
            self.open_new_nodes(gang, claims, domain, &mut attempt, unplaced);
        }
        if self.options.expander == Expander::LeastWaste {
            attempt.waste = self.waste_of(&attempt);
        }
        attempt
    }

    /// The share of CPU and memory the attempt's new nodes leave unused by
    /// its members, averaged over those nodes (0 without new nodes).
    fn waste_of(&mut self, attempt: &Attempt) -> f64 {
        let mut per_node: BTreeMap<usize, (usize, (i64, i64))> = BTreeMap::new();
        for p in &attempt.placements {
            let Some(group) = p.new_group else {
                continue;
            };
            let (cpu, memory) = self
                .requests(p.pod_index)
                .map_or((0, 0), |a| a.cpu_memory());
            let entry = per_node.entry(p.node_index).or_insert((group, (0, 0)));
            entry.1 = (entry.1.0 + cpu, entry.1.1 + memory);
        }
        if per_node.is_empty() {
            return 0.0;
        }
        let total: f64 = per_node
            .values()
            .map(|&(g, requested)| waste(&self.groups[g], requested))
            .sum();
        total / per_node.len() as f64
    }

    /// Places the members of `chosen` again on the same nodes — existing
    /// ones by index, new ones opened anew, of the same groups in the same
    /// order (so with the same names) — checking each placement again. The
    /// attempt saw phantom nodes; this puts only what is bought in the plan.
    fn replay(&mut self, chosen: &Attempt, claims: &BTreeMap<usize, PodClaims>) -> Attempt {
        let mut attempt = Attempt::default();
        let mut opened: BTreeMap<usize, usize> = BTreeMap::new();
        for p in &chosen.placements {
            let node_index = match (p.new_group, opened.get(&p.node_index)) {
                (None, _) => p.node_index,
                (Some(_), Some(&index)) => index,
                (Some(group), None) => {
                    let index = self.add_new_node(group, &mut attempt);
                    opened.insert(p.node_index, index);
                    index
                }
            };
            let Some(pod_claims) = claims.get(&p.pod_index) else {
                continue;
            };
            match self.snapshot.check(p.pod_index, node_index, pod_claims) {
                Verdict::Fits(allocations) => self.place(
                    &mut attempt,
                    p.pod_index,
                    node_index,
                    p.new_group,
                    pod_claims,
                    allocations,
                ),
                Verdict::Refused(reason)
                | Verdict::Unresolvable(reason)
                | Verdict::Fatal(reason) => attempt.reasons.push(format!(
                    "pod {} fits node {} while planning but not when the plan is replayed: {reason}",
                    self.name(p.pod_index),
                    self.snapshot.nodes()[node_index]
                        .metadata
                        .name
                        .as_deref()
                        .unwrap_or_default()
                )),
            }
        }
        attempt
    }
}

fn dedup(reasons: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    reasons
        .into_iter()
        .filter(|r| seen.insert(r.clone()))
        .collect()
}
