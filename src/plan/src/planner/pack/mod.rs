//! Packing single pods onto new nodes whose size is chosen last.
//!
//! Node groups whose nodes look the same to the pods' scheduling terms —
//! same taints, same values for every label key a pod or DaemonSet names in
//! a node selector, required node affinity, spread or pod (anti-)affinity
//! term, or that an allocated claim or a network-attached slice selects on,
//! no ResourceSlices — differ only in size and price: a *size class*.
//! Pods are placed under the full filters on nodes of the class's largest
//! member with room: first where the pod fits within the size the node
//! would be bought at now (it costs nothing more), else first fit, else on a
//! new node of the class where the pod alone costs least. Pods with required
//! anti-affinity go first, so that the rest fill around them. Each node is
//! then bought as the cheapest member (with room) whose allocatable holds
//! what it took, and every placement is checked again, in order, on the
//! node as bought: anything the classes did not look at can only make a pod
//! fall through to the group-by-group path, never make a plan claim a fit
//! the scheduler would refuse. This is how a plan covers thousands of pods with few well-filled
//! nodes instead of probing every group for every node.
//!
//! Topology spread is planned against the domains new nodes *could* add: an
//! empty phantom node per class with room (see [`super::domains`]), never
//! bound to, keeps each class's zone (or any other key) and a fresh hostname
//! in the spread's minimum, as gang members see them too.

use std::collections::BTreeMap;

use dra_sim::filters::Allocatable;
use dra_sim::pods::has_required_anti_affinity;
use dra_sim::snapshot::{PodClaims, Verdict};

use super::expander::ClassChoice;
use super::{Attempt, Planner};
use crate::groups::template_node;

mod classes;

pub(super) use classes::{SizeClasses, dra_label_keys};

/// The size classes of one packing, with the template each is filled on.
struct Sizing {
    known: SizeClasses,
    /// Per class: the member nodes are filled on (the largest with room),
    /// or `None` when no member has room.
    fill: Vec<Option<usize>>,
}

/// What one scratch packing pass decided, and the room its nodes have left.
#[derive(Debug, Default)]
struct Pass {
    /// Per node opened: its class.
    opened: Vec<usize>,
    /// Per class: how many nodes of it were opened.
    opened_per_class: Vec<usize>,
    /// Per node opened: how many pods it took.
    holds: Vec<usize>,
    /// Per node opened: the member it is bought as, if any can be.
    bought: Vec<Option<usize>>,
    /// (pod, node slot) in placement order.
    placed: Vec<(usize, usize)>,
    /// Pods no class took.
    left_over: Vec<usize>,
    /// Per node opened: the position, in its class's members (buying
    /// order), of the first member that holds what the node has — the size
    /// it would be bought at now.
    size: Vec<usize>,
    /// Nodes that may still have room within that size: a pod placed there
    /// costs nothing more.
    with_room: Vec<usize>,
    /// Where in `with_room` the next look starts.
    next_look: usize,
    /// Index of the first node opened by the pass.
    first_open: usize,
    /// The least CPU and memory any waiting pod asks: a node with less room
    /// is dropped from `with_room`.
    smallest: (i64, i64),
}

impl Pass {
    /// Whether some node that took pods cannot be bought.
    fn unbought(&self) -> bool {
        self.holds
            .iter()
            .zip(&self.bought)
            .any(|(&holds, bought)| holds > 0 && bought.is_none())
    }
}

/// How many nodes with room left within their current size a pod looks at
/// before first fit: bounds the cost per pod when many nodes have room.
const FREE_FIT_SCAN: usize = 16;

impl Pass {
    /// Records a placement on `slot`: its size may grow; a new slot joins.
    fn placed(&mut self, planner: &Planner<'_>, sizing: &Sizing, pod_index: usize, slot: usize) {
        self.holds[slot] += 1;
        self.placed.push((pod_index, slot));
        if self.size.len() <= slot {
            self.size.resize(slot + 1, 0);
            self.with_room.push(slot);
        }
        // What a node holds only grows, so a member that could not hold it
        // before cannot now: the search resumes where it stopped.
        let members = &sizing.known.classes[self.opened[slot]].members;
        let node_index = self.first_open + slot;
        while self.size[slot] < members.len()
            && !sizing
                .known
                .allocatables
                .get(&members[self.size[slot]])
                .is_some_and(|a| planner.snapshot.usage_fits(node_index, None, a))
        {
            self.size[slot] += 1;
        }
    }
}

impl Planner<'_> {
    /// Places `waiting` single pods on new nodes chosen by size class (see
    /// the module docs) and records them in `attempt`; returns the pods it
    /// could not place, in queue order, for the group-by-group path and its
    /// reasons.
    pub(super) fn pack_by_size(
        &mut self,
        waiting: Vec<usize>,
        claims: &BTreeMap<usize, PodClaims>,
        attempt: &mut Attempt,
    ) -> Vec<usize> {
        let known = self.size_classes();
        if known.classes.is_empty() || waiting.is_empty() {
            self.size_classes = Some(known);
            return waiting;
        }
        let position: BTreeMap<usize, usize> =
            waiting.iter().enumerate().map(|(i, &p)| (p, i)).collect();
        // Pods with required anti-affinity go first, each opening or taking
        // a node that no conflicting pod has yet; the rest then fill around
        // them in queue order, which mixes CPU-heavy and memory-heavy pods on
        // each node (sorting by size would segregate them and leave one
        // resource idle on every node bought).
        let (mut reordered, rest): (Vec<usize>, Vec<usize>) = waiting
            .iter()
            .partition(|&&p| has_required_anti_affinity(&self.snapshot.pods()[p]));
        let moved = !reordered.is_empty() && !rest.is_empty();
        reordered.extend(rest);
        let sizing = self.sizing(known, attempt);
        let mut pass = self.pack_pass(&reordered, claims, &sizing, attempt);
        // When some filled node cannot be bought (a size limit binds), pods
        // that jumped the queue could hold capacity an older pod would get
        // from the scheduler: plan again in queue order.
        if moved && pass.unbought() {
            pass = self.pack_pass(&waiting, claims, &sizing, attempt);
        }
        let mut left_over = self.buy(pass, claims, attempt);
        self.size_classes = Some(sizing.known);
        left_over.sort_by_key(|p| position.get(p).copied().unwrap_or(usize::MAX));
        left_over
    }

    /// The classes of this pass, each filled on its largest member that
    /// still has room (a node filled beyond every member with room could
    /// not be bought).
    fn sizing(&self, known: SizeClasses, attempt: &Attempt) -> Sizing {
        let has_room = |g: usize| {
            self.budget
                .left(g, |h| {
                    self.used[h] + attempt.new_nodes.get(&h).copied().unwrap_or(0)
                })
                .is_ok_and(|n| n > 0)
        };
        let fill: Vec<Option<usize>> = known
            .classes
            .iter()
            .map(|class| {
                class
                    .members
                    .iter()
                    .copied()
                    .filter(|&g| has_room(g))
                    .max_by_key(|g| {
                        (
                            known.allocatables.get(g).map(Allocatable::cpu_memory),
                            std::cmp::Reverse(*g),
                        )
                    })
            })
            .collect();
        Sizing { known, fill }
    }

    /// Packs `order` in a scratch state: nodes of the classes' fill
    /// templates, first fit after free fit; decides which member each filled
    /// node is bought as; rolls everything back.
    fn pack_pass(
        &mut self,
        order: &[usize],
        claims: &BTreeMap<usize, PodClaims>,
        sizing: &Sizing,
        attempt: &Attempt,
    ) -> Pass {
        let before = self.snapshot.checkpoint();
        let mut phantoms = Vec::with_capacity(sizing.fill.len());
        for fill in &sizing.fill {
            // A class with no room left keeps no phantom: it adds no domain.
            phantoms.push(fill.map(|g| self.add_phantom_node(g)));
        }
        let first_open = self.snapshot.nodes().len();
        // Pods of one signature ask the same: parse each signature once.
        let mut by_signature: std::collections::HashMap<u64, Option<Allocatable>> =
            std::collections::HashMap::new();
        let amounts: Vec<Option<Allocatable>> = order
            .iter()
            .map(|&p| match self.snapshot.signature(p) {
                Some(signature) => by_signature
                    .entry(signature)
                    .or_insert_with(|| self.snapshot.requests_of(p))
                    .clone(),
                None => self.snapshot.requests_of(p),
            })
            .collect();
        let smallest = amounts
            .iter()
            .flatten()
            .map(Allocatable::cpu_memory)
            .fold((i64::MAX, i64::MAX), |(c, m), (pc, pm)| {
                (c.min(pc), m.min(pm))
            });
        let mut pass = Pass {
            first_open,
            smallest,
            opened_per_class: vec![0; sizing.fill.len()],
            ..Pass::default()
        };
        for (&pod_index, amount) in order.iter().zip(amounts) {
            let Some(pod_claims) = claims.get(&pod_index) else {
                continue;
            };
            let mut home = amount
                .as_ref()
                .and_then(|amount| self.free_fit(pod_index, pod_claims, amount, sizing, &mut pass));
            if home.is_none() {
                home = self.first_fit(pod_index, pod_claims, first_open);
            }
            if home.is_none() {
                home = self.open_sized_node(
                    pod_index,
                    pod_claims,
                    amount.as_ref(),
                    (sizing, &phantoms),
                    &attempt.new_nodes,
                    &mut pass,
                );
            }
            match home {
                Some(node_index) => pass.placed(self, sizing, pod_index, node_index - first_open),
                None => pass.left_over.push(pod_index),
            }
        }

        // Buy each node as the cheapest member of its class that holds it.
        let mut tentative: BTreeMap<usize, usize> = BTreeMap::new();
        for (slot, &c) in pass.opened.iter().enumerate() {
            if pass.holds[slot] == 0 {
                pass.bought.push(None);
                continue;
            }
            let node_index = first_open + slot;
            let choice = self
                .pick_member(
                    &sizing.known.classes[c].members,
                    (node_index, None),
                    &sizing.known.allocatables,
                    |h| {
                        self.used[h]
                            + attempt.new_nodes.get(&h).copied().unwrap_or(0)
                            + tentative.get(&h).copied().unwrap_or(0)
                    },
                )
                .map(|(g, _)| g);
            if let Some(g) = choice {
                *tentative.entry(g).or_default() += 1;
            }
            pass.bought.push(choice);
        }
        self.snapshot.rollback(before);
        pass
    }

    /// First fit over the nodes opened by this pass, from the pod
    /// signature's cursor.
    fn first_fit(
        &mut self,
        pod_index: usize,
        pod_claims: &PodClaims,
        first_open: usize,
    ) -> Option<usize> {
        let signature = self.snapshot.cursor_signature(pod_index, pod_claims);
        let start = self.snapshot.scan_start(signature).max(first_open);
        for node_index in start..self.snapshot.nodes().len() {
            if let Verdict::Fits(allocations) =
                self.snapshot.check_fit(pod_index, node_index, pod_claims)
            {
                self.snapshot.refused_before(signature, node_index);
                self.snapshot
                    .bind(pod_index, node_index, pod_claims, allocations);
                return Some(node_index);
            }
        }
        let end = self.snapshot.nodes().len();
        self.snapshot.refused_before(signature, end);
        None
    }

    /// Makes the pass real: the bought nodes, then every placement checked
    /// again on them in the pass's order. A node none of whose pods passes
    /// again (a key the classes did not see, such as an allocated claim's
    /// node selector) is not bought: the purchase is redone without it.
    /// Returns the pods not placed.
    fn buy(
        &mut self,
        mut pass: Pass,
        claims: &BTreeMap<usize, PodClaims>,
        attempt: &mut Attempt,
    ) -> Vec<usize> {
        for _round in 0..3 {
            let before = self.snapshot.checkpoint();
            let saved = (
                attempt.placements.len(),
                attempt.new_nodes.clone(),
                attempt.cost,
            );
            let real: Vec<Option<usize>> = pass
                .bought
                .iter()
                .map(|choice| choice.map(|g| self.add_new_node(g, attempt)))
                .collect();
            let mut landed = vec![0usize; real.len()];
            let mut left_over = pass.left_over.clone();
            for &(pod_index, slot) in &pass.placed {
                let Some(pod_claims) = claims.get(&pod_index) else {
                    continue;
                };
                let Some(node_index) = real[slot] else {
                    left_over.push(pod_index);
                    continue;
                };
                match self.snapshot.check_fit(pod_index, node_index, pod_claims) {
                    Verdict::Fits(allocations) => {
                        landed[slot] += 1;
                        self.place(
                            attempt,
                            pod_index,
                            node_index,
                            pass.bought[slot],
                            pod_claims,
                            allocations,
                        );
                    }
                    _ => left_over.push(pod_index),
                }
            }
            let empty: Vec<usize> = (0..real.len())
                .filter(|&slot| real[slot].is_some() && landed[slot] == 0)
                .collect();
            if empty.is_empty() {
                return left_over;
            }
            self.snapshot.rollback(before);
            attempt.placements.truncate(saved.0);
            attempt.new_nodes = saved.1;
            attempt.cost = saved.2;
            for slot in empty {
                pass.bought[slot] = None;
            }
        }
        // Still not settled: buy nothing from this pass.
        let mut all = pass.left_over;
        all.extend(pass.placed.iter().map(|&(p, _)| p));
        all
    }

    /// Places the pod on a node opened by this pass whose current size
    /// holds it too (checked in full), trying at most [`FREE_FIT_SCAN`]
    /// nodes; drops nodes with no room left for the smallest pod.
    fn free_fit(
        &mut self,
        pod_index: usize,
        pod_claims: &PodClaims,
        amount: &Allocatable,
        sizing: &Sizing,
        pass: &mut Pass,
    ) -> Option<usize> {
        let (first_open, smallest) = (pass.first_open, pass.smallest);
        // Each pod looks at the next few nodes in turn, so that every node
        // with room is offered to some pods at a bounded cost per pod.
        let mut looked = 0;
        while looked < FREE_FIT_SCAN && !pass.with_room.is_empty() {
            let k = pass.next_look % pass.with_room.len();
            let slot = pass.with_room[k];
            let node_index = first_open + slot;
            let class = &sizing.known.classes[pass.opened[slot]];
            let target = class
                .members
                .get(pass.size[slot])
                .and_then(|g| sizing.known.allocatables.get(g));
            let room = target.and_then(|t| self.snapshot.room_within(node_index, t));
            if room.is_none_or(|(cpu, memory, pods)| {
                cpu < smallest.0 || memory < smallest.1 || pods < 1
            }) {
                pass.with_room.swap_remove(k);
                continue;
            }
            looked += 1;
            pass.next_look = k + 1;
            let Some(target) = target else { continue };
            if !self.snapshot.usage_fits(node_index, Some(amount), target) {
                continue;
            }
            if let Verdict::Fits(allocations) =
                self.snapshot.check_fit(pod_index, node_index, pod_claims)
            {
                self.snapshot
                    .bind(pod_index, node_index, pod_claims, allocations);
                return Some(node_index);
            }
        }
        None
    }

    /// Opens a node of the class the expander prefers for this pod alone (its
    /// phantom accepts the pod; the member the expander picks holds it), and
    /// places the pod on it. `None` when no class takes the pod.
    fn open_sized_node(
        &mut self,
        pod_index: usize,
        pod_claims: &PodClaims,
        amount: Option<&Allocatable>,
        (sizing, phantoms): (&Sizing, &[Option<usize>]),
        planned: &BTreeMap<usize, usize>,
        pass: &mut Pass,
    ) -> Option<usize> {
        // A pod whose requests do not parse is left to the group-by-group
        // path, which reports why.
        let amount = amount?;
        let SizeClasses {
            classes,
            allocatables,
        } = &sizing.known;
        let mut best: Option<ClassChoice> = None;
        for (c, class) in classes.iter().enumerate() {
            let Some(phantom) = phantoms.get(c).copied().flatten() else {
                continue;
            };
            if !matches!(
                self.snapshot.check_fit(pod_index, phantom, pod_claims),
                Verdict::Fits(_)
            ) {
                continue;
            }
            let Some((member, score)) =
                self.pick_member(&class.members, (phantom, Some(amount)), allocatables, |h| {
                    self.used[h] + planned.get(&h).copied().unwrap_or(0)
                })
            else {
                continue;
            };
            let candidate = ClassChoice {
                class: c,
                member,
                score,
                opened: pass.opened_per_class[c],
            };
            if best.is_none_or(|b| self.better_class(candidate, b)) {
                best = Some(candidate);
            }
        }
        let c = best?.class;
        let group = &self.groups[sizing.fill[c]?];
        let name = format!("{}_fill_{}", group.name, pass.opened.len());
        let (node, _) = template_node(group, &name);
        let node_index = self.snapshot.add_node(node, Vec::new());
        self.add_daemon_pods(node_index);
        pass.opened.push(c);
        pass.opened_per_class[c] += 1;
        pass.holds.push(0);
        match self.snapshot.check_fit(pod_index, node_index, pod_claims) {
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
