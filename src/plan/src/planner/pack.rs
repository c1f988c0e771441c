//! Packing single pods onto new nodes whose size is chosen last.
//!
//! Node groups whose nodes look the same to every pending pod — same taints,
//! same values for every label key some pod or DaemonSet refers to, no
//! ResourceSlices — differ only in size and price: a *size class*. Pods are
//! placed first fit, under the full filters, on nodes of the class's largest
//! template; each such node is then bought as the cheapest member of the
//! class (with room) whose allocatable holds what the node took, and every
//! placement is checked again on the node as bought. This is how a plan
//! covers thousands of pods with few well-filled nodes instead of probing
//! every group for every node.
//!
//! Topology spread is planned against the domains new nodes *could* add: an
//! empty "phantom" node per class, never bound to, keeps each class's zone
//! (or any other key) and a fresh hostname in the spread's minimum. The
//! minimum the scheduler later sees on the real nodes can only be higher, so
//! every placement stays within `maxSkew` whichever of the planned nodes
//! exist first.

use std::collections::{BTreeMap, BTreeSet};

use dra_sim::filters::Allocatable;
use dra_sim::snapshot::{PodClaims, Verdict};
use k8s_openapi::api::core::v1::Pod;

use super::{Attempt, Planner};
use crate::groups::template_node;

/// The size classes of a plan and their members' allocatable, computed
/// once per plan.
#[derive(Debug, Default)]
pub(super) struct SizeClasses {
    classes: Vec<SizeClass>,
    /// Per member group: its template's allocatable.
    allocatables: BTreeMap<usize, Allocatable>,
}

/// The size classes of one packing pass, with their phantom nodes.
struct Sizing {
    classes: Vec<SizeClass>,
    /// Per class: its empty phantom node.
    phantoms: Vec<usize>,
    /// Per member group: its template's allocatable.
    allocatables: BTreeMap<usize, Allocatable>,
}

/// Node groups that differ only in size and price for the pods at hand.
#[derive(Debug, Clone)]
pub(super) struct SizeClass {
    /// Members by price, capacity type, then name: the first with room that
    /// holds a node's pods is bought.
    members: Vec<usize>,
    /// The member whose allocatable covers every other member's.
    largest: usize,
}

/// Label keys the filters read for any of `pods`: node selectors, required
/// node affinity, spread and pod (anti-)affinity topology keys.
fn keys_that_matter<'a>(pods: impl Iterator<Item = &'a Pod>) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for spec in pods.filter_map(|p| p.spec.as_ref()) {
        keys.extend(spec.node_selector.iter().flat_map(|s| s.keys().cloned()));
        if let Some(affinity) = &spec.affinity {
            let terms = affinity
                .node_affinity
                .as_ref()
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .map(|r| r.node_selector_terms.as_slice())
                .unwrap_or_default();
            for term in terms {
                keys.extend(
                    term.match_expressions
                        .iter()
                        .flatten()
                        .map(|e| e.key.clone()),
                );
            }
            let pod_terms = affinity
                .pod_affinity
                .iter()
                .filter_map(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .chain(affinity.pod_anti_affinity.iter().filter_map(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .as_ref()
                }))
                .flatten();
            keys.extend(pod_terms.map(|t| t.topology_key.clone()));
        }
        keys.extend(
            spec.topology_spread_constraints
                .iter()
                .flatten()
                .map(|c| c.topology_key.clone()),
        );
    }
    keys
}

/// Whether the pod has a required pod anti-affinity term.
fn has_required_anti_affinity(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_some_and(|terms| !terms.is_empty())
}

impl Planner<'_> {
    /// The size classes of the groups, computed once per plan (which keys
    /// matter depends on all pods, known up front); the caller puts them
    /// back in `self.size_classes` when done.
    fn size_classes(&mut self) -> SizeClasses {
        if let Some(known) = self.size_classes.take() {
            return known;
        }
        let keys = keys_that_matter(self.snapshot.pods().iter().chain(self.daemon_pods.iter()));
        let mut by_look: BTreeMap<String, Vec<(usize, Allocatable)>> = BTreeMap::new();
        let mut allocatables = BTreeMap::new();
        for (g, group) in self.groups.iter().enumerate() {
            if !group.spec.template.resource_slices.is_empty() {
                continue;
            }
            // One name for all: the hostname label follows the node's name,
            // which says nothing about the group.
            let (node, _) = template_node(group, "size-class");
            let labels = node.metadata.labels.clone().unwrap_or_default();
            let seen: Vec<(&String, Option<&String>)> =
                keys.iter().map(|k| (k, labels.get(k))).collect();
            let look =
                serde_json::to_string(&(seen, &group.spec.template.taints)).unwrap_or_default();
            let allocatable = self.snapshot.allocatable_of(&node);
            allocatables.insert(g, allocatable.clone());
            by_look.entry(look).or_default().push((g, allocatable));
        }
        let mut classes = Vec::new();
        for (_, mut members) in by_look {
            // Largest first; each class takes every remaining member its
            // largest covers, so a member never lands in a class whose nodes
            // it could not replace.
            members.sort_by_key(|(g, a)| (std::cmp::Reverse(a.cpu_memory()), *g));
            while let Some((largest, big)) = members.first().cloned() {
                let (inside, rest): (Vec<_>, Vec<_>) =
                    members.into_iter().partition(|(_, a)| big.covers(a));
                members = rest;
                let mut ids: Vec<usize> = inside.into_iter().map(|(g, _)| g).collect();
                ids.sort_by(|&a, &b| {
                    let (ga, gb) = (&self.groups[a], &self.groups[b]);
                    ga.spec
                        .price_per_hour
                        .total_cmp(&gb.spec.price_per_hour)
                        .then_with(|| ga.capacity_rank().cmp(&gb.capacity_rank()))
                        .then_with(|| ga.name.cmp(&gb.name))
                });
                classes.push(SizeClass {
                    members: ids,
                    largest,
                });
            }
        }
        SizeClasses {
            classes,
            allocatables,
        }
    }

    /// Places `waiting` single pods on new nodes chosen by size class (see
    /// the module docs) and records them in `attempt`; returns the pods it
    /// could not place, for the group-by-group path and its reasons.
    pub(super) fn pack_by_size(
        &mut self,
        waiting: Vec<usize>,
        claims: &BTreeMap<usize, PodClaims>,
        attempt: &mut Attempt,
    ) -> Vec<usize> {
        let SizeClasses {
            classes,
            allocatables,
        } = self.size_classes();
        if classes.is_empty() || waiting.is_empty() {
            self.size_classes = Some(SizeClasses {
                classes,
                allocatables,
            });
            return waiting;
        }
        // Pods with required anti-affinity go first, each opening or taking
        // a node that no conflicting pod has yet; the rest then fill around
        // them in queue order, which mixes CPU-heavy and memory-heavy pods on
        // each node (sorting by size would segregate them and leave one
        // resource idle on every node bought).
        let (mut waiting, rest): (Vec<usize>, Vec<usize>) = waiting
            .into_iter()
            .partition(|&p| has_required_anti_affinity(&self.snapshot.pods()[p]));
        waiting.extend(rest);
        let before = self.snapshot.checkpoint();
        let phantoms: Vec<usize> = classes
            .iter()
            .map(|class| {
                let group = &self.groups[class.largest];
                let (node, _) = template_node(group, &format!("{}-phantom", group.name));
                let index = self.snapshot.add_node(node, Vec::new());
                self.add_daemon_pods(index);
                index
            })
            .collect();
        let sizing = Sizing {
            classes,
            phantoms,
            allocatables,
        };
        let first_open = self.snapshot.nodes().len();
        // Per node opened here: its class; per pod placed: its node.
        let mut opened: Vec<usize> = Vec::new();
        let mut placed: Vec<(usize, usize)> = Vec::new();
        let mut holds: Vec<usize> = Vec::new();
        let mut left_over = Vec::new();
        for pod_index in waiting {
            let Some(pod_claims) = claims.get(&pod_index) else {
                continue;
            };
            let signature = self.snapshot.signature(pod_index);
            let start = self.snapshot.scan_start(signature).max(first_open);
            let mut home = None;
            for node_index in start..self.snapshot.nodes().len() {
                if let Verdict::Fits(allocations) =
                    self.snapshot.check(pod_index, node_index, pod_claims)
                {
                    self.snapshot.refused_before(signature, node_index);
                    self.snapshot
                        .bind(pod_index, node_index, pod_claims, allocations);
                    home = Some(node_index);
                    break;
                }
            }
            if home.is_none() {
                let end = self.snapshot.nodes().len();
                self.snapshot.refused_before(signature, end);
                home = self.open_sized_node(
                    pod_index,
                    pod_claims,
                    &sizing,
                    &attempt.new_nodes,
                    &mut opened,
                );
                holds.resize(opened.len(), 0);
            }
            match home {
                Some(node_index) => {
                    let slot = node_index - first_open;
                    holds[slot] += 1;
                    placed.push((pod_index, slot));
                }
                None => left_over.push(pod_index),
            }
        }

        // Buy each node as the cheapest member of its class that holds it.
        let mut tentative: BTreeMap<usize, usize> = BTreeMap::new();
        let mut bought: Vec<Option<usize>> = Vec::with_capacity(opened.len());
        for (slot, &c) in opened.iter().enumerate() {
            if holds[slot] == 0 {
                bought.push(None);
                continue;
            }
            let node_index = first_open + slot;
            let choice = sizing.classes[c].members.iter().copied().find(|&g| {
                let has_room = self
                    .budget
                    .left(g, |h| {
                        self.used[h]
                            + attempt.new_nodes.get(&h).copied().unwrap_or(0)
                            + tentative.get(&h).copied().unwrap_or(0)
                    })
                    .is_ok_and(|n| n > 0);
                has_room
                    && sizing
                        .allocatables
                        .get(&g)
                        .is_some_and(|a| self.snapshot.usage_fits(node_index, None, a))
            });
            if let Some(g) = choice {
                *tentative.entry(g).or_default() += 1;
            }
            bought.push(choice);
        }
        self.snapshot.rollback(before);

        // The real nodes, then every placement checked again on them in the
        // same order.
        let real: Vec<Option<usize>> = bought
            .iter()
            .map(|choice| choice.map(|g| self.add_new_node(g, attempt)))
            .collect();
        for (pod_index, slot) in placed {
            let Some(pod_claims) = claims.get(&pod_index) else {
                continue;
            };
            let Some(node_index) = real[slot] else {
                left_over.push(pod_index);
                continue;
            };
            match self.snapshot.check(pod_index, node_index, pod_claims) {
                Verdict::Fits(allocations) => self.place(
                    attempt,
                    pod_index,
                    node_index,
                    bought[slot],
                    pod_claims,
                    allocations,
                ),
                _ => left_over.push(pod_index),
            }
        }
        self.size_classes = Some(SizeClasses {
            classes: sizing.classes,
            allocatables: sizing.allocatables,
        });
        // Pods that fell through go on in their queue order.
        left_over.sort_unstable();
        left_over
    }

    /// Opens a node of the class where this pod alone would cost least (its
    /// phantom accepts the pod; the cheapest member with room holds it), and
    /// places the pod on it. `None` when no class takes the pod.
    fn open_sized_node(
        &mut self,
        pod_index: usize,
        pod_claims: &PodClaims,
        sizing: &Sizing,
        planned: &BTreeMap<usize, usize>,
        opened: &mut Vec<usize>,
    ) -> Option<usize> {
        let Sizing {
            classes,
            phantoms,
            allocatables,
        } = sizing;
        let mut best: Option<(usize, usize)> = None;
        for (c, class) in classes.iter().enumerate() {
            if !matches!(
                self.snapshot.check(pod_index, phantoms[c], pod_claims),
                Verdict::Fits(_)
            ) {
                continue;
            }
            let cheapest = class.members.iter().copied().find(|&g| {
                let has_room = self
                    .budget
                    .left(g, |h| self.used[h] + planned.get(&h).copied().unwrap_or(0))
                    .is_ok_and(|n| n > 0);
                has_room
                    && allocatables
                        .get(&g)
                        .is_some_and(|a| self.snapshot.usage_fits(phantoms[c], Some(pod_index), a))
            });
            let Some(g) = cheapest else {
                continue;
            };
            // Equally cheap classes (zones, say) take turns, as
            // cluster-autoscaler's balancing of similar node groups does:
            // a later pod that must spread finds a node in every class.
            let opened_in = |c: usize| opened.iter().filter(|&&o| o == c).count();
            let better = best.is_none_or(|(bc, b)| {
                let (ga, gb) = (&self.groups[g], &self.groups[b]);
                ga.spec
                    .price_per_hour
                    .total_cmp(&gb.spec.price_per_hour)
                    .then_with(|| ga.capacity_rank().cmp(&gb.capacity_rank()))
                    .then_with(|| opened_in(c).cmp(&opened_in(bc)))
                    .then_with(|| ga.name.cmp(&gb.name))
                    .is_lt()
            });
            if better {
                best = Some((c, g));
            }
        }
        let (c, _) = best?;
        let group = &self.groups[classes[c].largest];
        let name = format!("{}-fill-{}", group.name, opened.len());
        let (node, _) = template_node(group, &name);
        let node_index = self.snapshot.add_node(node, Vec::new());
        self.add_daemon_pods(node_index);
        opened.push(c);
        match self.snapshot.check(pod_index, node_index, pod_claims) {
            Verdict::Fits(allocations) => {
                self.snapshot
                    .bind(pod_index, node_index, pod_claims, allocations);
                Some(node_index)
            }
            // The phantom took it, so this cannot happen short of a filter
            // reading the node's name; the empty node is simply not bought.
            _ => None,
        }
    }
}
