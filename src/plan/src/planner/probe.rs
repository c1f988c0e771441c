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
/// an answer names the pods it is asked about, never the pod it learnt from,
/// and their own claims (identical pods of one ResourceClaimTemplate have a
/// claim each: a text about one pod's claim is reworded for the other's).
#[derive(Debug, Clone, Default)]
pub(super) struct Capacity {
    per_node: usize,
    exact: bool,
    per_pod: (i64, i64),
    /// Why such a pod is refused (once the node is full, or outright), and
    /// the claims of the pod it was said of.
    refusal: Option<(String, Vec<String>)>,
    /// The error the scheduler fails such a pod with on such a node, and the
    /// claims of the pod it was said of.
    error: Option<(String, Vec<String>)>,
}

/// A pod's claims, as reasons name them (`namespace/name`), in pod order.
fn claim_names(claims: Option<&PodClaims>) -> Vec<String> {
    claims
        .map(|c| {
            c.to_allocate
                .iter()
                .chain(&c.allocated)
                .map(ToString::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `text`, said of a pod with the claims `from`, as said of a pod of the same
/// signature with the claims `to` (same order): each claim name of the first,
/// where it stands as a whole name, becomes the second's.
fn in_own_claims(text: &str, from: &[String], to: &[String]) -> String {
    if from.len() != to.len() || from == to {
        return text.to_string();
    }
    // A name character on either side means a longer name, not this one.
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '/' | '_');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while !rest.is_empty() {
        let after_name = out.chars().next_back().is_some_and(is_name_char);
        if !after_name {
            for (old, new) in from.iter().zip(to) {
                if let Some(tail) = rest.strip_prefix(old.as_str())
                    && !tail.chars().next().is_some_and(is_name_char)
                {
                    out.push_str(new);
                    rest = tail;
                    continue 'scan;
                }
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

impl Capacity {
    /// The probe result for `waiting`, identical pods, if known, in words
    /// about each pod's own claims.
    fn answer(&self, waiting: &[usize], claims: &BTreeMap<usize, PodClaims>) -> Option<Probe> {
        let own = |said: &(String, Vec<String>), pod: usize| {
            in_own_claims(&said.0, &said.1, &claim_names(claims.get(&pod)))
        };
        if let Some(error) = &self.error {
            return Some(Probe {
                errors: waiting.iter().map(|&p| (p, own(error, p))).collect(),
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
                (0, Some(&first), Some(reason)) => Some((first, own(reason, first))),
                _ => None,
            },
            errors: Vec::new(),
        })
    }

    fn learn(&mut self, waiting: usize, probe: &Probe, claims: &BTreeMap<usize, PodClaims>) {
        if probe.yielded > 0 {
            let count = i64::try_from(probe.yielded).unwrap_or(i64::MAX);
            self.per_pod = (probe.requested.0 / count, probe.requested.1 / count);
        }
        let said = |(pod, text): &(usize, String)| (text.clone(), claim_names(claims.get(pod)));
        self.refusal = probe.refusal.as_ref().map(said);
        self.error = probe.errors.first().map(said);
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
            .and_then(|c| c.answer(waiting, claims));
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
                .learn(waiting.len(), &result, claims);
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
            // Only the first refusal is reported: later ones need no words.
            let verdict = if result.refusal.is_none() {
                self.snapshot.check(pod_index, node_index, pod_claims)
            } else {
                self.snapshot.check_fit(pod_index, node_index, pod_claims)
            };
            match verdict {
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
                        result.refusal = Some((pod_index, self.in_user_words(node_index, &reason)));
                    }
                }
                Verdict::Fatal(error) => {
                    result
                        .errors
                        .push((pod_index, self.in_user_words(node_index, &error)));
                }
            }
        }
        self.snapshot.rollback(checkpoint);
        result
    }
}
