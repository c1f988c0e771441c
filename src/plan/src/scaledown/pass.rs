//! One greedy scale-down pass over a snapshot (see the module docs of [`super`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use dra_sim::FeatureGates;
use dra_sim::objects::ClusterObjects;
use dra_sim::report::Outcome;
use dra_sim::snapshot::{Snapshot, Verdict};
use k8s_openapi::api::core::v1::Node;

use super::ScaleDownOptions;
use super::drain::Drainer;
use super::eligibility::{
    PodRole, is_being_removed, is_safe_to_evict, node_hold, pod_name, pod_role,
};
use super::gangs::{RunningGangs, running_gangs};
use super::pdb::Budgets;
use super::reasons::{Removable, Unremovable};
use super::report::{ScaleDown, ScaleDownBlocked, ScaleDownReport, Unneeded};
use super::settings::GroupSettings;
use super::utilization::{Utilization, allocated_devices, pools_by_node};
use crate::gang::GangApi;
use crate::groups::read_groups;
use crate::report::PlanReport;

/// A group's settings and how many nodes it keeps counting on in this pass.
struct GroupState {
    settings: GroupSettings,
    /// Registered plus upcoming nodes, less those removed in this pass.
    size: usize,
}

/// What removing a node took: its pods' moves.
struct Removed {
    /// No pod needed a new place.
    empty: bool,
    /// `(pod, destination node)`.
    moves: Vec<(usize, usize)>,
    /// The gang moved whole with it, if any.
    gang: Option<String>,
}

/// A node's group and utilisation, when it has a usable group.
struct Candidate {
    node: usize,
    group: String,
    utilization: Utilization,
    /// No pod needs a new place (judged before the pass, to order candidates).
    empty: bool,
}

pub(super) struct Pass<'a> {
    options: &'a ScaleDownOptions,
    snapshot: Snapshot,
    groups: BTreeMap<String, GroupState>,
    budgets: Budgets,
    gangs: RunningGangs,
    /// Node index -> pods bound there now.
    pods_on: Vec<Vec<usize>>,
    /// Node index -> why the plan needs it: a pending pod it puts there, a
    /// CapacityBuffer chunk kept there, or capacity booked there for a
    /// ProvisioningRequest.
    planned_for: BTreeMap<usize, Unremovable>,
    candidates: Vec<Candidate>,
    drainer: Drainer,
    report: ScaleDownReport,
}

fn group_of(node: &Node) -> Option<&str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(dra_api::NODE_GROUP_LABEL))
        .map(String::as_str)
}

fn node_name(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// CPU and memory requested on node `index` over its allocatable.
fn cpu_memory(snapshot: &mut Snapshot, index: usize) -> [(String, f64); 2] {
    let allocatable = snapshot.nodes()[index]
        .status
        .as_ref()
        .and_then(|s| s.allocatable.clone())
        .unwrap_or_default();
    let target = snapshot.allocatable_from(&allocatable);
    let (cpu, memory) = target.cpu_memory();
    let (cpu_left, memory_left, _) = snapshot
        .room_within(index, &target)
        .unwrap_or((cpu, memory, 0));
    let share = |total: i64, left: i64| {
        if total <= 0 {
            0.0
        } else {
            (total - left) as f64 / total as f64
        }
    };
    [
        ("cpu".to_string(), share(cpu, cpu_left)),
        ("memory".to_string(), share(memory, memory_left)),
    ]
}

/// Places the pending pods the plan put on existing nodes there, so they hold their room;
/// returns, per node, why the plan needs it (one of those pods). Stand-in pods (a
/// CapacityBuffer's chunks, a ProvisioningRequest's pods) and capacity booked for a
/// provisioned request are not in the snapshot: their nodes are needed all the same, so
/// kept capacity is never removed.
fn replay_plan(snapshot: &mut Snapshot, plan: &PlanReport) -> BTreeMap<usize, Unremovable> {
    let by_key: HashMap<String, usize> = snapshot
        .pods()
        .iter()
        .enumerate()
        .map(|(i, p)| (pod_name(p), i))
        .collect();
    let mut planned = BTreeMap::new();
    for request in &plan.provisioning_requests {
        for node in &request.booked_nodes {
            if let Some(node_index) = snapshot.node_index(node) {
                planned
                    .entry(node_index)
                    .or_insert_with(|| Unremovable::Booked {
                        request: request.provisioning_request.to_string(),
                    });
            }
        }
    }
    let stand_in = |api: GangApi| match api {
        GangApi::CapacityBuffer => Some("CapacityBuffer"),
        GangApi::ProvisioningRequest => Some("ProvisioningRequest"),
        _ => None,
    };
    let stand_ins: HashMap<String, (&str, String)> = plan
        .pod_groups
        .iter()
        .filter_map(|g| Some((stand_in(g.api)?, g)))
        .flat_map(|(kind, g)| {
            g.members
                .iter()
                .map(move |m| (m.to_string(), (kind, g.pod_group.to_string())))
        })
        .collect();
    for report in plan.pods.iter().filter(|p| p.outcome == Outcome::Fits) {
        let Some(node_index) = report.node.as_deref().and_then(|n| snapshot.node_index(n)) else {
            continue;
        };
        let Some(&pod) = by_key.get(&report.pod) else {
            if let Some((kind, owner)) = stand_ins.get(&report.pod) {
                planned
                    .entry(node_index)
                    .or_insert_with(|| Unremovable::StandInPod {
                        kind: (*kind).to_string(),
                        owner: owner.clone(),
                        pod: report.pod.clone(),
                    });
            }
            continue;
        };
        planned
            .entry(node_index)
            .or_insert_with(|| Unremovable::PendingPodPlanned {
                pod: report.pod.clone(),
            });
        if snapshot.pod_node(pod).is_some() {
            continue;
        }
        let Ok(claims) = snapshot.resolve_claims(pod) else {
            continue;
        };
        if let Verdict::Fits(allocations) = snapshot.check(pod, node_index, &claims) {
            snapshot.bind(pod, node_index, &claims, allocations);
        }
    }
    snapshot.seal();
    planned
}

impl<'a> Pass<'a> {
    pub(super) fn new(
        mut objects: ClusterObjects,
        gates: FeatureGates,
        plan: &PlanReport,
        options: &'a ScaleDownOptions,
    ) -> Self {
        let (read, _) = read_groups(&objects.extra, &objects.nodes);
        let groups: BTreeMap<String, GroupState> = read
            .into_iter()
            .map(|g| {
                let settings = GroupSettings::resolve(&g.spec, &options.defaults, options.now);
                (
                    g.name.clone(),
                    GroupState {
                        settings,
                        size: g.current + g.upcoming,
                    },
                )
            })
            .collect();
        let (budgets, _) = Budgets::read(&objects.extra);
        let pools = pools_by_node(
            &objects.resource_slices,
            &allocated_devices(&objects.resource_claims),
        );
        let extra = std::mem::take(&mut objects.extra);
        let workload_refs = std::mem::take(&mut objects.pod_workload_refs);
        let mut snapshot = Snapshot::new(objects, gates);
        let node_count = snapshot.nodes().len();

        // Utilisation before the plan's pods land: what the node holds now.
        let mut candidates = Vec::new();
        for index in 0..node_count {
            let node = &snapshot.nodes()[index];
            let name = node_name(node);
            let Some(group) = group_of(node).filter(|g| groups.contains_key(*g)) else {
                continue;
            };
            let group = group.to_string();
            if is_being_removed(node) {
                continue;
            }
            let mut resources: Vec<(String, f64)> = pools.get(&name).cloned().unwrap_or_default();
            resources.extend(cpu_memory(&mut snapshot, index));
            let utilization = Utilization::highest(resources);
            let threshold = groups[&group].settings.utilization_threshold;
            if utilization.value < threshold {
                candidates.push(Candidate {
                    node: index,
                    group,
                    utilization,
                    empty: false,
                });
            }
        }

        let planned_for = replay_plan(&mut snapshot, plan);
        let mut pods_on = vec![Vec::new(); node_count];
        let mut bound = Vec::new();
        for pod in 0..snapshot.pods().len() {
            if let Some(node) = snapshot.pod_node(pod) {
                pods_on[node].push(pod);
                bound.push(pod);
            }
        }
        let gangs = running_gangs(snapshot.pods(), &bound, &extra, &workload_refs, &gates);

        for candidate in &mut candidates {
            candidate.empty = pods_on[candidate.node]
                .iter()
                .all(|&p| pod_role(&snapshot.pods()[p], options.now, false) == PodRole::Stays);
        }
        // Emptiest first, reserved capacity last, then least used, most expensive, by name.
        candidates.sort_by(|a, b| {
            let (ga, gb) = (&groups[&a.group].settings, &groups[&b.group].settings);
            (!a.empty)
                .cmp(&!b.empty)
                .then(ga.reserved.cmp(&gb.reserved))
                .then(a.utilization.value.total_cmp(&b.utilization.value))
                .then(gb.price_per_hour.total_cmp(&ga.price_per_hour))
                .then(a.node.cmp(&b.node))
        });

        let mut excluded = vec![false; node_count];
        for (index, slot) in excluded.iter_mut().enumerate() {
            let node = &snapshot.nodes()[index];
            *slot = is_being_removed(node) || options.in_progress.contains(&node_name(node));
        }
        // Nodes that stay first, by name; then candidates, the last to go first.
        let is_candidate: BTreeSet<usize> = candidates.iter().map(|c| c.node).collect();
        let mut order: Vec<usize> = (0..node_count)
            .filter(|i| !is_candidate.contains(i))
            .collect();
        order.extend(candidates.iter().rev().map(|c| c.node));
        let drainer = Drainer::new(&snapshot, order, excluded);
        Self {
            options,
            snapshot,
            groups,
            budgets,
            gangs,
            pods_on,
            planned_for,
            candidates,
            drainer,
            report: ScaleDownReport::default(),
        }
    }

    pub(super) fn run(self) -> ScaleDownReport {
        self.run_keeping_snapshot().0
    }

    /// [`Pass::run`], also handing back the snapshot the analysis leaves.
    pub(super) fn run_keeping_snapshot(mut self) -> (ScaleDownReport, Snapshot) {
        self.finish_in_progress();
        let candidates = std::mem::take(&mut self.candidates);
        let room = if self.options.max_parallelism == 0 {
            usize::MAX
        } else {
            self.options
                .max_parallelism
                .saturating_sub(self.options.in_progress.len())
        };
        for candidate in candidates {
            let name = node_name(&self.snapshot.nodes()[candidate.node]);
            if self.options.in_progress.contains(&name) {
                continue;
            }
            match self.consider(&candidate) {
                Err(reason) => self.blocked(&candidate, reason),
                Ok(removed) => self.unneeded(&candidate, removed, room),
            }
        }
        let snapshot = &self.snapshot;
        self.report
            .scale_down_blocked
            .sort_by_key(|b| snapshot.node_index(&b.node));
        (self.report, self.snapshot)
    }

    fn blocked(&mut self, candidate: &Candidate, reason: Unremovable) {
        self.report.scale_down_blocked.push(ScaleDownBlocked {
            node: node_name(&self.snapshot.nodes()[candidate.node]),
            node_group: candidate.group.clone(),
            reason,
        });
    }

    /// Re-homes the pods of nodes whose removal is under way; a node whose pods no longer fit
    /// anywhere is abandoned.
    fn finish_in_progress(&mut self) {
        for index in 0..self.snapshot.nodes().len() {
            let node = &self.snapshot.nodes()[index];
            let name = node_name(node);
            if !self.options.in_progress.contains(&name) {
                continue;
            }
            let group = group_of(node).unwrap_or_default().to_string();
            let movers: Vec<usize> = self.pods_on[index]
                .iter()
                .copied()
                .filter(|&p| {
                    pod_role(&self.snapshot.pods()[p], self.options.now, true) != PodRole::Stays
                })
                .collect();
            match self
                .drainer
                .move_pods(&mut self.snapshot, &movers, index, false)
            {
                Ok(moves) => {
                    self.record_moves(&moves);
                    if let Some(state) = self.groups.get_mut(&group) {
                        state.size = state.size.saturating_sub(1);
                    }
                }
                Err(reason) => self.report.abandoned.push(ScaleDownBlocked {
                    node: name,
                    node_group: group,
                    reason: Unremovable::Drain(reason),
                }),
            }
        }
    }

    fn record_moves(&mut self, moves: &[(usize, usize)]) {
        for &(pod, to) in moves {
            for list in &mut self.pods_on {
                list.retain(|&p| p != pod);
            }
            self.pods_on[to].push(pod);
        }
    }

    /// Checks one candidate and, when it may go, commits its moves.
    fn consider(&mut self, candidate: &Candidate) -> Result<Removed, Unremovable> {
        let node = &self.snapshot.nodes()[candidate.node];
        let name = node_name(node);
        let state = &self.groups[&candidate.group];
        if let Some(reason) = self.options.keep.get(&name) {
            return Err(reason.clone());
        }
        if !state.settings.enabled {
            return Err(Unremovable::ScaleDownDisabled {
                node_group: candidate.group.clone(),
            });
        }
        if let Some(hold) = node_hold(node) {
            return Err(hold);
        }
        if let Some(why) = self.planned_for.get(&candidate.node) {
            return Err(why.clone());
        }
        if let Some(hold) = &state.settings.reserved_hold {
            return Err(Unremovable::Reserved(hold.clone()));
        }
        if state.size <= state.settings.min_size {
            return Err(Unremovable::MinSize {
                min: state.settings.min_size,
            });
        }
        let (movers, gang) = self.movers(candidate.node)?;
        let pods = self.snapshot.pods();
        // safe-to-evict pods skip the budget check, as cluster-autoscaler's rules do.
        let spending = self
            .budgets
            .try_spend(
                movers
                    .iter()
                    .map(|&p| &pods[p])
                    .filter(|p| !is_safe_to_evict(p)),
            )
            .map_err(Unremovable::Budget)?;
        let elsewhere = movers
            .iter()
            .any(|&p| self.snapshot.pod_node(p) != Some(candidate.node));
        let moves = self
            .drainer
            .move_pods(&mut self.snapshot, &movers, candidate.node, elsewhere)
            .map_err(Unremovable::Drain)?;
        self.budgets.spend(&spending);
        self.record_moves(&moves);
        if let Some(state) = self.groups.get_mut(&candidate.group) {
            state.size -= 1;
        }
        Ok(Removed {
            empty: movers.is_empty(),
            moves,
            gang,
        })
    }

    /// The pods that must move for node `node` to go: its own, and every member of a gang
    /// that may move whole; or why it must stay.
    fn movers(&self, node: usize) -> Result<(Vec<usize>, Option<String>), Unremovable> {
        let pods = self.snapshot.pods();
        let mut movers: Vec<usize> = Vec::new();
        let mut whole_gang = None;
        for &pod in &self.pods_on[node] {
            let role = pod_role(
                &pods[pod],
                self.options.now,
                self.budgets.covers(&pods[pod]),
            );
            if role == PodRole::Stays {
                continue;
            }
            if let Some(&g) = self.gangs.of_pod.get(&pod) {
                let gang = &self.gangs.gangs[g];
                if !gang.whole {
                    return Err(Unremovable::RunningGang {
                        gang: gang.name.clone(),
                    });
                }
                for &member in &gang.members {
                    let member_pod = &pods[member];
                    match pod_role(
                        member_pod,
                        self.options.now,
                        self.budgets.covers(member_pod),
                    ) {
                        PodRole::Stays => {}
                        PodRole::Blocks(pod) => {
                            return Err(Unremovable::GangMember {
                                gang: gang.name.clone(),
                                pod,
                            });
                        }
                        PodRole::Moves => {
                            if !movers.contains(&member) && self.snapshot.pod_node(member).is_some()
                            {
                                movers.push(member);
                            }
                        }
                    }
                }
                whole_gang = Some(gang.name.clone());
                continue;
            }
            match role {
                PodRole::Blocks(pod) => return Err(Unremovable::Pod(pod)),
                _ => {
                    if !movers.contains(&pod) {
                        movers.push(pod);
                    }
                }
            }
        }
        // The scheduler places higher priority first; keep pod order otherwise.
        movers.sort_by_key(|&p| std::cmp::Reverse(dra_sim::pods::priority(&pods[p])));
        Ok((movers, whole_gang))
    }

    /// Records a node found unneeded, and removes it now if it has been unneeded long enough
    /// and the pass has room.
    fn unneeded(&mut self, candidate: &Candidate, removed: Removed, room: usize) {
        let Removed { empty, moves, gang } = removed;
        let name = node_name(&self.snapshot.nodes()[candidate.node]);
        let since = self
            .options
            .unneeded_since
            .as_ref()
            .and_then(|m| m.get(&name).copied())
            .or(self.options.now);
        self.report.unneeded.push(Unneeded {
            node: name.clone(),
            node_group: candidate.group.clone(),
            since,
            empty,
        });
        let settings = &self.groups[&candidate.group].settings;
        let wait = if empty {
            settings.empty_unneeded_time
        } else {
            settings.unneeded_time
        };
        if let (Some(_), Some(now), Some(since)) =
            (&self.options.unneeded_since, self.options.now, since)
        {
            let ready = since.checked_add(wait).is_ok_and(|at| at < now);
            if !ready {
                let elapsed = now.duration_since(since);
                return self.blocked(
                    candidate,
                    Unremovable::NotUnneededLongEnough { elapsed, wait },
                );
            }
        }
        if self.report.scale_downs.len() >= room {
            return self.blocked(
                candidate,
                Unremovable::MaxParallelism {
                    max: self.options.max_parallelism,
                },
            );
        }
        let pods = self.snapshot.pods();
        let nodes = self.snapshot.nodes();
        let moves: Vec<(String, String)> = moves
            .iter()
            .map(|&(pod, to)| (pod_name(&pods[pod]), node_name(&nodes[to])))
            .collect();
        let reason = if empty {
            Removable::Empty
        } else {
            Removable::Underutilized {
                percent: candidate.utilization.whole_percent(),
                resource: candidate.utilization.resource.clone(),
                gang,
                moves,
            }
        };
        self.report.scale_downs.push(ScaleDown {
            node: name,
            node_group: candidate.group.clone(),
            reason,
        });
    }
}
