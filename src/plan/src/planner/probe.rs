//! What one fresh node of a group takes of the waiting members: a probe (a
//! node added, members placed first fit, everything rolled back), and the
//! cache that answers for identical pods without probing again.

use std::collections::BTreeMap;

use dra_sim::snapshot::{PodClaims, Verdict};

use super::{Attempt, Planner};
use crate::groups::template_node;

/// How many waiting members a probe tries on a fresh node: enough to see a
/// large node fill up, few enough that probing every group stays cheap.
const PROBE_SAMPLE: usize = 256;

/// How many identical pods one fresh node of a group takes: at least
/// `per_node`, exactly that many when `exact` (a probe had more waiting).
///
/// What it knows holds for every pod of the signature, so it keeps no pod:
/// an answer names the pods it is asked about, never the pod it learnt from.
#[derive(Debug, Clone, Default)]
pub(super) struct Capacity {
    per_node: usize,
    exact: bool,
    per_pod: (i64, i64),
    /// Why such a pod is refused (once the node is full, or outright).
    refusal: Option<String>,
    /// The error the scheduler fails such a pod with on such a node.
    error: Option<String>,
}

impl Capacity {
    /// The probe result for `waiting`, identical pods, if known.
    fn answer(&self, waiting: &[usize]) -> Option<Probe> {
        if let Some(error) = &self.error {
            return Some(Probe {
                errors: waiting.iter().map(|&p| (p, error.clone())).collect(),
                ..Probe::default()
            });
        }
        if !self.exact && waiting.len() > self.per_node {
            return None;
        }
        let yielded = waiting.len().min(self.per_node);
        let count = i64::try_from(yielded).unwrap_or(i64::MAX);
        Some(Probe {
            yielded,
            requested: (self.per_pod.0 * count, self.per_pod.1 * count),
            refusal: match (yielded, waiting.first(), &self.refusal) {
                (0, Some(&first), Some(reason)) => Some((first, reason.clone())),
                _ => None,
            },
            errors: Vec::new(),
        })
    }

    fn learn(&mut self, waiting: usize, probe: &Probe) {
        if probe.yielded > 0 {
            let count = i64::try_from(probe.yielded).unwrap_or(i64::MAX);
            self.per_pod = (probe.requested.0 / count, probe.requested.1 / count);
        }
        self.refusal = probe.refusal.as_ref().map(|(_, reason)| reason.clone());
        self.error = probe.errors.first().map(|(_, error)| error.clone());
        self.per_node = self.per_node.max(probe.yielded);
        self.exact |= probe.yielded < waiting;
    }
}

/// What one fresh node of a group takes of a set of waiting members.
#[derive(Debug, Clone, Default)]
pub(super) struct Probe {
    /// How many of them it takes.
    pub(super) yielded: usize,
    /// The CPU (milli) and memory those ask.
    pub(super) requested: (i64, i64),
    /// The first member refused, and why (in words a user can read).
    pub(super) refusal: Option<(usize, String)>,
    /// Members the scheduler would fail with an error there, and the error.
    pub(super) errors: Vec<(usize, String)>,
}

impl Planner<'_> {
    /// The signature all `waiting` pods share, when they share one and a
    /// fresh node does not depend on the rest of the cluster (no pod's terms
    /// read labels): then what one probe learns holds for all of them.
    pub(super) fn uniform_signature(&mut self, waiting: &[usize]) -> Option<u64> {
        if self.snapshot.labels_matter() {
            None
        } else {
            let first = waiting.first().and_then(|&p| self.snapshot.signature(p));
            let all_same = waiting.iter().all(|&p| self.snapshot.signature(p) == first);
            first.filter(|_| all_same)
        }
    }

    /// What one fresh node of `group` takes of `waiting`: from the cache
    /// when the pods are `uniform` and it knows, else probed (and learnt).
    pub(super) fn fresh_node_takes(
        &mut self,
        group: usize,
        waiting: &[usize],
        claims: &BTreeMap<usize, PodClaims>,
        uniform: Option<u64>,
    ) -> Probe {
        let cache_key = uniform.map(|sig| (group, sig));
        let known = cache_key
            .and_then(|k| self.capacities.get(&k))
            .and_then(|c| c.answer(waiting));
        if let Some(answer) = known {
            return answer;
        }
        // A fresh node is judged by what the first members fill; a big batch
        // need not be tried in full on every group.
        let sample = &waiting[..waiting.len().min(PROBE_SAMPLE)];
        let result = self.probe(group, sample, claims);
        if let Some(k) = cache_key {
            self.capacities
                .entry(k)
                .or_default()
                .learn(waiting.len(), &result);
        }
        result
    }

    /// Adds one fresh node of `group`, places waiting members on it first
    /// fit, and rolls everything back.
    fn probe(
        &mut self,
        group: usize,
        waiting: &[usize],
        claims: &BTreeMap<usize, PodClaims>,
    ) -> Probe {
        let checkpoint = self.snapshot.checkpoint();
        let mut scratch = Attempt::default();
        let g = &self.groups[group];
        let (node, slices) = template_node(g, &format!("{}-probe", g.name));
        let node_index = self.snapshot.add_node(node, slices);
        self.add_daemon_pods(node_index);
        let mut result = Probe::default();
        for &pod_index in waiting {
            let Some(pod_claims) = claims.get(&pod_index) else {
                continue;
            };
            // Once a refusal is on record (in upstream's words), members the
            // full node cannot hold need no full check.
            if result.refusal.is_some() && self.surely_too_full(pod_index, node_index, group) {
                continue;
            }
            match self.snapshot.check(pod_index, node_index, pod_claims) {
                Verdict::Fits(allocations) => {
                    // PodRequests as NodeResourcesFit counts them (init
                    // containers, sidecars, overhead), not a container sum.
                    let (cpu, mem) = self.requests(pod_index).map_or((0, 0), |a| a.cpu_memory());
                    result.requested = (result.requested.0 + cpu, result.requested.1 + mem);
                    self.place(
                        &mut scratch,
                        pod_index,
                        node_index,
                        Some(group),
                        pod_claims,
                        allocations,
                    );
                    result.yielded += 1;
                }
                Verdict::Refused(reason) | Verdict::Unresolvable(reason) => {
                    if result.refusal.is_none() {
                        result.refusal = Some((pod_index, self.in_user_words(node_index, reason)));
                    }
                }
                Verdict::Fatal(error) => {
                    result
                        .errors
                        .push((pod_index, self.in_user_words(node_index, error)));
                }
            }
        }
        self.snapshot.rollback(checkpoint);
        result
    }
}
