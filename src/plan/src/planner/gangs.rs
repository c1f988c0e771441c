//! Gang planning: a gang tried whole in each topology domain it may use,
//! the cheapest domain where it lands kept, and nothing kept when it cannot
//! land.

use std::collections::{BTreeMap, BTreeSet};

use dra_sim::report::Outcome;
use dra_sim::snapshot::PodClaims;

use super::{Attempt, Placement, Planner, ScaleUps};
use crate::gang::Gang;
use crate::groups::domain_of;
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

        // Resolve claims once; a member whose claims cannot be resolved can
        // never be placed.
        let mut claims: BTreeMap<usize, PodClaims> = BTreeMap::new();
        let mut claim_errors: BTreeMap<usize, String> = BTreeMap::new();
        for &pod_index in &gang.pending {
            match self.snapshot.resolve_claims(pod_index) {
                Ok(c) => {
                    claims.insert(pod_index, c);
                }
                Err(e) => {
                    claim_errors.insert(pod_index, e);
                }
            }
        }

        let domains: Vec<Option<String>> = match &gang.topology_key {
            Some(key) => self.domains(key).into_iter().map(Some).collect(),
            None => vec![None],
        };
        let start = self.snapshot.checkpoint();
        let mut best: Option<(Attempt, Option<String>)> = None;
        let mut all_reasons = Vec::new();
        // With one domain the attempt is kept in place when it lands, instead
        // of being rolled back and replayed.
        let single = domains.len() == 1;
        let mut kept = false;
        for domain in &domains {
            let attempt = self.attempt(gang, &claims, domain.as_deref());
            let lands = attempt.placements.len() >= gang.needed();
            if single && lands {
                kept = true;
            } else {
                self.snapshot.rollback(start);
            }
            if !lands {
                let prefix = domain
                    .as_ref()
                    .zip(gang.topology_key.as_ref())
                    .map(|(d, k)| format!("{k}={d}: "))
                    .unwrap_or_default();
                all_reasons.extend(attempt.reasons.iter().map(|r| format!("{prefix}{r}")));
                if best.is_none() && domains.len() == 1 {
                    best = Some((attempt, domain.clone()));
                }
                continue;
            }
            let better = match &best {
                None => true,
                Some((b, _)) if b.placements.len() < gang.needed() => true,
                Some((b, _)) => (attempt.cost, attempt.node_count()) < (b.cost, b.node_count()),
            };
            if better {
                best = Some((attempt, domain.clone()));
            }
        }
        if domains.is_empty() {
            all_reasons.push(format!(
                "no node or node group has the topology label {}",
                gang.topology_key.as_deref().unwrap_or_default()
            ));
        }

        let landed = best
            .as_ref()
            .is_some_and(|(a, _)| a.placements.len() >= gang.needed());
        if !landed {
            gang_report.reasons = dedup(all_reasons);
            if gang_report.reasons.is_empty() {
                gang_report.reasons.push("no node fits the gang".into());
            }
            let errors = best.map(|(a, _)| a.errors).unwrap_or_default();
            for &pod_index in &gang.pending {
                if let Some(e) = claim_errors
                    .get(&pod_index)
                    .or_else(|| errors.get(&pod_index))
                {
                    report.pods.push(self.pod_report(
                        pod_index,
                        Outcome::Error,
                        None,
                        vec![e.clone()],
                    ));
                } else {
                    report
                        .pods
                        .push(self.unschedulable(pod_index, gang_report.reasons.clone()));
                }
            }
            report.pod_groups.push(gang_report);
            return;
        }

        // Replay the chosen attempt for real (attempts are deterministic),
        // unless it was kept.
        let (chosen, domain) = best.unwrap_or_default();
        let attempt = if kept {
            chosen
        } else {
            self.attempt(gang, &claims, domain.as_deref())
        };
        self.snapshot.commit(start);
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
                Some(p) => {
                    let node = self.snapshot.nodes()[p.node_index].metadata.name.clone();
                    let mut r = self.pod_report(
                        pod_index,
                        if p.new_group.is_some() {
                            Outcome::FitsNewNode
                        } else {
                            Outcome::Fits
                        },
                        node,
                        Vec::new(),
                    );
                    r.node_group = p.new_group.map(|g| self.groups[g].name.clone());
                    r.allocations = Some(p.reported.clone());
                    report.pods.push(r);
                }
                None => {
                    let reason = claim_errors.get(&pod_index).cloned().unwrap_or_else(|| {
                        "the gang lands without this member; no node takes it".into()
                    });
                    report
                        .pods
                        .push(self.unschedulable(pod_index, vec![reason]));
                }
            }
        }
        report.pod_groups.push(gang_report);
    }

    /// Every value of `key` among existing nodes and node groups, sorted.
    fn domains(&self, key: &str) -> Vec<String> {
        let mut values: BTreeSet<String> = self
            .snapshot
            .nodes()
            .iter()
            .filter_map(|n| n.metadata.labels.as_ref()?.get(key).cloned())
            .collect();
        values.extend(self.groups.iter().filter_map(|g| domain_of(g, key)));
        values.into_iter().collect()
    }

    /// Places as many members as possible: first on existing nodes in name
    /// order, then on new nodes chosen by the expander. Leaves the snapshot
    /// changed; the caller rolls back or commits.
    fn attempt(
        &mut self,
        gang: &Gang,
        claims: &BTreeMap<usize, PodClaims>,
        domain: Option<&str>,
    ) -> Attempt {
        let mut attempt = Attempt::default();
        let unplaced = self.place_on_existing(gang, claims, domain, &mut attempt);
        if gang.existing_only {
            if !unplaced.is_empty() {
                attempt.reasons.push(format!(
                    "existing capacity holds {} of the {} pods, and class {} never adds nodes",
                    attempt.placements.len(),
                    gang.pending.len(),
                    crate::provreq::CHECK_CAPACITY_CLASS
                ));
            }
        } else {
            self.open_new_nodes(gang, claims, domain, &mut attempt, unplaced);
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
