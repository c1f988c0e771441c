//! The scale-up planner: for each pending gang, in priority order, the
//! cheapest set of new nodes — possibly from several groups — such that at
//! least `minCount` members fit *simultaneously* under the full fit engine.
//!
//! Every gang is tried in a checkpoint of the snapshot and committed only when
//! it lands whole, so a plan never contains part of a gang. Existing free
//! capacity (including nodes already upcoming and nodes planned for earlier
//! gangs) is used before anything new is bought.

use std::collections::{BTreeMap, BTreeSet};

use dra_sim::FeatureGates;
use dra_sim::objects::{ClusterObjects, ExtraObject};
use dra_sim::report::{Outcome, PodReport};
use dra_sim::simulate::report_allocations;
use dra_sim::snapshot::{PodClaims, Snapshot, Verdict, key_string, object_key};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::gang::{Gang, GangApi, detect_gangs};
use crate::groups::{Budget, Group, domain_of, read_groups, template_node};
use crate::report::{GangOutcome, PlanReport, PodGroupReport, ScaleUp};

mod pack;

/// How to choose between groups that can all take a gang.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expander {
    /// Lowest summed `pricePerHour` of the new nodes (reserved capacity at its
    /// own price, normally 0); ties go to fewer nodes, then capacity type
    /// (reserved, on-demand, spot), then group name.
    #[default]
    LeastCost,
    /// Highest `priority` first, then as least-cost.
    Priority,
    /// Least unused CPU and memory on the new nodes, then as least-cost.
    LeastWaste,
}

impl std::str::FromStr for Expander {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "least-cost" => Ok(Self::LeastCost),
            "priority" => Ok(Self::Priority),
            "least-waste" => Ok(Self::LeastWaste),
            other => Err(format!(
                "unknown expander {other:?}: expected least-cost, priority or least-waste"
            )),
        }
    }
}

/// Planner settings. `now` is an input, never read from a clock.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Group choice.
    pub expander: Expander,
    /// The current time, for reservation end times; `None` ignores them.
    pub now: Option<Timestamp>,
    /// A reservation ending sooner than this from `now` is not used.
    pub min_reservation_left: SignedDuration,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            expander: Expander::default(),
            now: None,
            min_reservation_left: SignedDuration::from_hours(1),
        }
    }
}

/// How many waiting members a probe tries on a fresh node: enough to see a
/// large node fill up, few enough that probing every group stays cheap.
const PROBE_SAMPLE: usize = 256;

/// One member's place in an attempt.
#[derive(Debug, Clone)]
struct Placement {
    pod_index: usize,
    node_index: usize,
    /// The group of the node when it is new in this plan.
    new_group: Option<usize>,
    reported: Vec<dra_sim::report::ClaimAllocation>,
}

/// The result of trying one gang in one topology domain.
#[derive(Debug, Clone, Default)]
struct Attempt {
    placements: Vec<Placement>,
    /// New nodes per group index.
    new_nodes: BTreeMap<usize, usize>,
    cost: f64,
    /// Why members could not be placed, per group or overall.
    reasons: Vec<String>,
    /// Members whose claims the scheduler would fail outright.
    errors: BTreeMap<usize, String>,
}

impl Attempt {
    fn node_count(&self) -> usize {
        self.new_nodes.values().sum()
    }
}

/// How many identical pods one fresh node of a group takes: at least
/// `per_node`, exactly that many when `exact` (a probe had more waiting).
#[derive(Debug, Clone)]
struct Capacity {
    per_node: usize,
    exact: bool,
    per_pod: (i64, i64),
    refusal: Option<String>,
}

impl Capacity {
    /// The probe result for `waiting` identical pods, if known.
    fn answer(&self, waiting: usize) -> Option<Probe> {
        if !self.exact && waiting > self.per_node {
            return None;
        }
        let yielded = waiting.min(self.per_node);
        let count = i64::try_from(yielded).unwrap_or(i64::MAX);
        Some(Probe {
            yielded,
            requested: (self.per_pod.0 * count, self.per_pod.1 * count),
            refusal: if yielded == 0 {
                self.refusal.clone()
            } else {
                None
            },
        })
    }

    fn learn(&mut self, waiting: usize, probe: &Probe) {
        if probe.yielded > 0 {
            let count = i64::try_from(probe.yielded).unwrap_or(i64::MAX);
            self.per_pod = (probe.requested.0 / count, probe.requested.1 / count);
        }
        self.refusal.clone_from(&probe.refusal);
        self.per_node = self.per_node.max(probe.yielded);
        self.exact |= probe.yielded < waiting;
    }
}

/// What one fresh node of a group takes of a set of waiting members.
#[derive(Debug, Clone)]
struct Probe {
    yielded: usize,
    requested: (i64, i64),
    refusal: Option<String>,
}

struct Planner<'a> {
    snapshot: Snapshot,
    /// The pod every DaemonSet would run on a new node.
    daemon_pods: Vec<Pod>,
    /// What one fresh node of a group takes of pods of one signature: a
    /// fresh node does not depend on the rest of the cluster when no pod has
    /// anti-affinity, so identical pods are probed once per group.
    capacities: std::collections::HashMap<(usize, u64), Capacity>,
    groups: &'a [Group],
    budget: Budget,
    used: Vec<usize>,
    options: &'a PlanOptions,
    /// Members' names, for reasons.
    names: BTreeMap<usize, String>,
    /// Node groups that differ only in size, once computed.
    size_classes: Option<pack::SizeClasses>,
    /// Node label keys the DRA allocator reads (see [`Prepared`]).
    dra_label_keys: BTreeSet<String>,
}

/// Plans scale-ups for every pending gang of `objects`.
#[must_use]
pub fn plan(objects: ClusterObjects, gates: FeatureGates, options: &PlanOptions) -> PlanReport {
    prepare(objects, gates).run(options)
}

/// A cluster read and indexed for planning: node groups validated, the
/// snapshot built, gangs detected. Planning itself is [`Prepared::run`];
/// the split lets benchmarks time the plan apart from building its input.
#[derive(Debug)]
pub struct Prepared {
    groups: Vec<Group>,
    node_group_errors: Vec<crate::groups::GroupError>,
    daemon_pods: Vec<Pod>,
    snapshot: Snapshot,
    pending: Vec<usize>,
    gangs: Vec<Gang>,
    /// Node label keys the DRA allocator reads: allocated claims' and
    /// network-attached slices' node selectors.
    dra_label_keys: BTreeSet<String>,
}

/// Reads and indexes `objects` for [`Prepared::run`].
#[must_use]
pub fn prepare(mut objects: ClusterObjects, gates: FeatureGates) -> Prepared {
    let (groups, node_group_errors) = read_groups(&objects.extra, &objects.nodes);
    add_missing_template_slices(&mut objects, &groups);
    let extra = std::mem::take(&mut objects.extra);
    let daemon_pods = daemon_pods(&extra);
    let dra_label_keys = pack::dra_label_keys(&objects);
    let workload_refs = std::mem::take(&mut objects.pod_workload_refs);
    let snapshot = Snapshot::new(objects, gates);
    let pending = snapshot.pending_pods();
    let mut gangs = detect_gangs(snapshot.pods(), &pending, &extra, &workload_refs, &gates);
    gangs = split_satisfied_gangs(gangs);
    // Stable: equal priorities keep placement order.
    gangs.sort_by_key(|g| std::cmp::Reverse(g.priority));
    Prepared {
        groups,
        node_group_errors,
        daemon_pods,
        snapshot,
        pending,
        gangs,
        dra_label_keys,
    }
}

impl Prepared {
    /// Plans scale-ups for every pending gang.
    #[must_use]
    pub fn run(self, options: &PlanOptions) -> PlanReport {
        self.run_keeping_state(options).0
    }

    /// [`Prepared::run`], also handing back the state planning leaves: the
    /// snapshot with the plan's nodes and placements, to inspect, or to drop
    /// where its cost does not count (a benchmark times the plan alone, as
    /// it builds the input untimed).
    #[must_use]
    pub fn run_keeping_state(self, options: &PlanOptions) -> (PlanReport, Planned) {
        let Self {
            groups,
            node_group_errors,
            daemon_pods,
            snapshot,
            pending,
            gangs,
            dra_label_keys,
        } = self;
        let (report, snapshot, names) = run(
            &groups,
            (node_group_errors, daemon_pods, dra_label_keys),
            snapshot,
            &pending,
            &gangs,
            options,
        );
        (
            report,
            Planned {
                snapshot,
                _scratch: (names, gangs),
            },
        )
    }
}

/// The state a plan leaves behind (see [`Prepared::run_keeping_state`]).
#[derive(Debug)]
pub struct Planned {
    snapshot: Snapshot,
    /// Pod names and gangs: nothing to read, only to drop with the rest.
    _scratch: (BTreeMap<usize, String>, Vec<Gang>),
}

impl Planned {
    /// The snapshot with the planned nodes added and the placed pods bound.
    #[must_use]
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
}

fn run(
    groups: &[Group],
    (node_group_errors, daemon_pods, dra_label_keys): (
        Vec<crate::groups::GroupError>,
        Vec<Pod>,
        BTreeSet<String>,
    ),
    snapshot: Snapshot,
    pending: &[usize],
    gangs: &[Gang],
    options: &PlanOptions,
) -> (PlanReport, Snapshot, BTreeMap<usize, String>) {
    let names = pending
        .iter()
        .map(|&i| (i, key_string(&object_key(&snapshot.pods()[i].metadata))))
        .collect();
    let mut planner = Planner {
        budget: Budget::new(groups, options.now, options.min_reservation_left),
        used: vec![0; groups.len()],
        snapshot,
        daemon_pods,
        capacities: std::collections::HashMap::new(),
        groups,
        options,
        names,
        size_classes: None,
        dra_label_keys,
    };
    // Nodes already requested count as capacity (with their DaemonSet pods),
    // so the same pods never trigger a second scale-up while those nodes boot.
    for group in groups {
        for i in 0..group.upcoming {
            let (node, slices) = template_node(group, &format!("{}-upcoming-{i}", group.name));
            let node_index = planner.snapshot.add_node(node, slices);
            planner.add_daemon_pods(node_index);
        }
    }
    planner.snapshot.seal();
    let mut report = PlanReport {
        node_group_errors,
        ..PlanReport::default()
    };
    let mut scale_ups: BTreeMap<usize, (usize, BTreeSet<String>, usize)> = BTreeMap::new();
    // Single pods of one priority are planned together, as one batch with no
    // minimum: each lands on its own, but new nodes are chosen for what the
    // batch fills, not for one pod (which would buy the smallest node that
    // fits each pod).
    let mut i = 0;
    while i < gangs.len() {
        let is_single = |g: &Gang| g.api == GangApi::Single && g.blocked.is_none();
        if is_single(&gangs[i]) {
            let mut j = i;
            while j < gangs.len() && is_single(&gangs[j]) && gangs[j].priority == gangs[i].priority
            {
                j += 1;
            }
            planner.plan_singles(&gangs[i..j], &mut report, &mut scale_ups);
            i = j;
        } else {
            planner.plan_gang(&gangs[i], &mut report, &mut scale_ups);
            i += 1;
        }
    }
    report.scale_ups = scale_ups
        .into_iter()
        .map(|(g, (count, gangs, min_count))| {
            let group = &groups[g];
            ScaleUp {
                node_group: group.name.clone(),
                count,
                pod_groups: gangs.into_iter().collect(),
                capacity_type: group.spec.capacity_type.as_str().to_string(),
                price_per_hour: group.spec.price_per_hour * count as f64,
                min_count: min_count.max(1),
            }
        })
        .collect();
    (report, planner.snapshot, planner.names)
}

/// The pod each DaemonSet among `extra` runs on every node it selects:
/// `spec.template` with the DaemonSet's namespace, named after it (the node
/// name is appended per node).
fn daemon_pods(extra: &[ExtraObject]) -> Vec<Pod> {
    extra
        .iter()
        .filter(|o| o.kind == "DaemonSet" && o.api_version == "apps/v1")
        .filter_map(|o| {
            let template = o.value.pointer("/spec/template")?.clone();
            let mut pod: Pod = serde_json::from_value(template).ok()?;
            let meta = o.value.get("metadata")?;
            pod.metadata.name = meta.get("name")?.as_str().map(str::to_string);
            pod.metadata.namespace = Some(
                meta.get("namespace")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("default")
                    .to_string(),
            );
            Some(pod)
        })
        .collect()
}

/// Existing nodes of a group whose drivers have not published their slices
/// yet get the template's slices, so they count as the capacity they will be.
fn add_missing_template_slices(objects: &mut ClusterObjects, groups: &[Group]) {
    let with_slices: BTreeSet<String> = objects
        .resource_slices
        .iter()
        .filter_map(|s| s.spec.node_name.clone())
        .collect();
    let mut added = Vec::new();
    for node in &objects.nodes {
        let Some(name) = node.metadata.name.as_deref() else {
            continue;
        };
        let Some(group_name) = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(dra_api::NODE_GROUP_LABEL))
        else {
            continue;
        };
        let Some(group) = groups.iter().find(|g| &g.name == group_name) else {
            continue;
        };
        if group.spec.template.resource_slices.is_empty() || with_slices.contains(name) {
            continue;
        }
        added.extend(template_node(group, name).1);
    }
    objects.resource_slices.extend(added);
}

/// A gang whose bound members already reach `minCount` needs nothing to start
/// together: its pending members are scheduled one by one.
fn split_satisfied_gangs(gangs: Vec<Gang>) -> Vec<Gang> {
    let mut out = Vec::with_capacity(gangs.len());
    for gang in gangs {
        if gang.needed() == 0 && gang.blocked.is_none() && gang.api != GangApi::Single {
            for &pod_index in &gang.pending {
                out.push(Gang {
                    api: GangApi::Single,
                    name: gang.name.clone(),
                    min_count: 1,
                    pending: vec![pod_index],
                    bound: 0,
                    topology_key: None,
                    blocked: None,
                    priority: gang.priority,
                });
            }
        } else {
            out.push(gang);
        }
    }
    out
}

fn api_name(api: GangApi) -> &'static str {
    match api {
        GangApi::Single => "single",
        GangApi::PodGroup => "pod-group",
        GangApi::Workload => "workload",
        GangApi::Coscheduling => "coscheduling",
        GangApi::Volcano => "volcano",
        GangApi::Kueue => "kueue",
    }
}

impl Planner<'_> {
    fn name(&self, pod_index: usize) -> String {
        self.names.get(&pod_index).cloned().unwrap_or_default()
    }

    /// Plans a batch of single pods: existing nodes first, then new nodes
    /// chosen for the whole batch; every pod lands or waits on its own.
    fn plan_singles(
        &mut self,
        singles: &[Gang],
        report: &mut PlanReport,
        scale_ups: &mut BTreeMap<usize, (usize, BTreeSet<String>, usize)>,
    ) {
        let mut claims: BTreeMap<usize, PodClaims> = BTreeMap::new();
        let mut claim_errors: BTreeMap<usize, String> = BTreeMap::new();
        for gang in singles {
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
        }
        let batch = Gang {
            api: GangApi::Single,
            name: String::new(),
            min_count: 0,
            pending: singles
                .iter()
                .flat_map(|g| g.pending.iter().copied())
                .collect(),
            bound: 0,
            topology_key: None,
            blocked: None,
            priority: singles.first().map_or(0, |g| g.priority),
        };
        let start = self.snapshot.checkpoint();
        let mut attempt = Attempt::default();
        let mut unplaced = self.place_on_existing(&batch, &claims, None, &mut attempt);
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
        self.open_new_nodes(&batch, &claims, None, &mut attempt, unplaced);
        self.snapshot.commit(start);
        self.snapshot.seal();
        let placed: BTreeMap<usize, &Placement> = attempt
            .placements
            .iter()
            .map(|p| (p.pod_index, p))
            .collect();
        let mut nodes_per_group: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
        for (&g, &count) in &attempt.new_nodes {
            self.used[g] += count;
            scale_ups.entry(g).or_insert((0, BTreeSet::new(), 0)).0 += count;
        }
        let batch_reasons: Vec<String> = attempt
            .reasons
            .iter()
            .filter(|r| r.starts_with("node group"))
            .cloned()
            .collect();
        for gang in singles {
            for &pod_index in &gang.pending {
                let name = self.name(pod_index);
                let (outcome, pod_report) = match (
                    placed.get(&pod_index),
                    claim_errors.get(&pod_index),
                    attempt.errors.get(&pod_index),
                ) {
                    (Some(p), _, _) => {
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
                        if let Some(g) = p.new_group {
                            r.node_group = Some(self.groups[g].name.clone());
                            nodes_per_group
                                .entry(g)
                                .or_default()
                                .insert(gang.name.clone());
                        }
                        r.allocations = Some(p.reported.clone());
                        (GangOutcome::Lands, r)
                    }
                    (None, Some(e), _) => (
                        GangOutcome::Waits,
                        self.pod_report(pod_index, Outcome::Unschedulable, None, vec![e.clone()]),
                    ),
                    (None, None, Some(e)) => (
                        GangOutcome::Waits,
                        self.pod_report(pod_index, Outcome::Error, None, vec![e.clone()]),
                    ),
                    (None, None, None) => {
                        let mut reasons =
                            vec!["no existing node and no node group can take it".to_string()];
                        reasons.extend(batch_reasons.iter().cloned());
                        (GangOutcome::Waits, self.unschedulable(pod_index, reasons))
                    }
                };
                report.pod_groups.push(PodGroupReport {
                    pod_group: name,
                    api: api_name(GangApi::Single).to_string(),
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

    fn plan_gang(
        &mut self,
        gang: &Gang,
        report: &mut PlanReport,
        scale_ups: &mut BTreeMap<usize, (usize, BTreeSet<String>, usize)>,
    ) {
        let members: Vec<String> = gang.pending.iter().map(|&i| self.name(i)).collect();
        let mut gang_report = PodGroupReport {
            pod_group: gang.name.clone(),
            api: api_name(gang.api).to_string(),
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
            if gang.api != GangApi::Single {
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

    fn pod_report(
        &self,
        pod_index: usize,
        outcome: Outcome,
        node: Option<String>,
        reasons: Vec<String>,
    ) -> PodReport {
        PodReport {
            pod: self.name(pod_index),
            outcome,
            node,
            node_group: None,
            allocations: None,
            reasons,
        }
    }

    fn unschedulable(&self, pod_index: usize, reasons: Vec<String>) -> PodReport {
        self.pod_report(pod_index, Outcome::Unschedulable, None, reasons)
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

    fn node_in_domain(&self, node_index: usize, key: Option<&str>, domain: Option<&str>) -> bool {
        match (key, domain) {
            (Some(key), Some(domain)) => self.snapshot.nodes()[node_index]
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(key))
                .is_some_and(|v| v == domain),
            _ => true,
        }
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
        self.open_new_nodes(gang, claims, domain, &mut attempt, unplaced);
        attempt
    }

    /// Places members on the nodes the snapshot has (first fit in node
    /// order, within the domain); returns those still waiting.
    fn place_on_existing(
        &mut self,
        gang: &Gang,
        claims: &BTreeMap<usize, PodClaims>,
        domain: Option<&str>,
        attempt: &mut Attempt,
    ) -> Vec<usize> {
        let key = gang.topology_key.as_deref();
        let mut unplaced: Vec<usize> = Vec::new();
        let existing = self.snapshot.nodes().len();
        for &pod_index in &gang.pending {
            let Some(pod_claims) = claims.get(&pod_index) else {
                continue;
            };
            let mut placed = false;
            // Domain-restricted scans skip nodes for reasons other than fit,
            // so only unrestricted ones move the cursor.
            let signature = if domain.is_none() {
                self.snapshot.signature(pod_index)
            } else {
                None
            };
            let start = self.snapshot.scan_start(signature);
            for node_index in start..existing {
                if !self.node_in_domain(node_index, key, domain) {
                    continue;
                }
                match self.snapshot.check(pod_index, node_index, pod_claims) {
                    Verdict::Fits(allocations) => {
                        self.snapshot.refused_before(signature, node_index);
                        self.place(
                            attempt,
                            pod_index,
                            node_index,
                            None,
                            pod_claims,
                            allocations,
                        );
                        placed = true;
                        break;
                    }
                    Verdict::Refused(_) => {}
                    Verdict::Fatal(e) => {
                        attempt.errors.insert(pod_index, e);
                        break;
                    }
                    Verdict::Unresolvable(_) => break,
                }
            }
            if !placed && !attempt.errors.contains_key(&pod_index) {
                self.snapshot.refused_before(signature, existing);
                unplaced.push(pod_index);
            }
        }
        unplaced
    }

    /// Opens new nodes for the waiting members: the best group by the
    /// expander, filled while it keeps yielding as well, then re-ranked.
    /// Records why members stay unplaced.
    fn open_new_nodes(
        &mut self,
        gang: &Gang,
        claims: &BTreeMap<usize, PodClaims>,
        domain: Option<&str>,
        attempt: &mut Attempt,
        mut unplaced: Vec<usize>,
    ) {
        if unplaced.is_empty() {
            return;
        }
        let key = gang.topology_key.as_deref();
        // New nodes: pick the best group for the members still waiting, fill
        // nodes of it while it keeps yielding as well, and re-rank when not.
        let mut rejected: BTreeMap<usize, String> = BTreeMap::new();
        let mut excluded: BTreeSet<usize> = BTreeSet::new();
        while !unplaced.is_empty() {
            let Some(choice) = self.best_group(
                &unplaced,
                claims,
                (key, domain),
                attempt,
                &mut rejected,
                &excluded,
            ) else {
                break;
            };
            let group = choice.group;
            loop {
                let before_node = self.snapshot.checkpoint();
                let node_index = self.add_new_node(group, attempt);
                let before = unplaced.len();
                unplaced = self.fill_node(node_index, group, unplaced, claims, attempt);
                let yielded = before - unplaced.len();
                if yielded == 0 {
                    // The probe promised more than a real node takes (the
                    // cluster changed since): drop the empty node and the
                    // group for this attempt.
                    self.snapshot.rollback(before_node);
                    if let Some(count) = attempt.new_nodes.get_mut(&group) {
                        *count -= 1;
                        if *count == 0 {
                            attempt.new_nodes.remove(&group);
                        }
                    }
                    attempt.cost -= self.groups[group].spec.price_per_hour;
                    excluded.insert(group);
                    break;
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
            attempt.reasons.extend(
                rejected
                    .into_iter()
                    .map(|(g, r)| format!("node group {}: {r}", self.groups[g].name)),
            );
        }
    }

    fn room_left(&self, group: usize, attempt: &Attempt) -> Result<usize, String> {
        self.budget.left(group, |g| {
            self.used[g] + attempt.new_nodes.get(&g).copied().unwrap_or(0)
        })
    }

    fn add_new_node(&mut self, group: usize, attempt: &mut Attempt) -> usize {
        let g = &self.groups[group];
        let ordinal = self.used[group] + attempt.new_nodes.get(&group).copied().unwrap_or(0);
        let (node, slices) = template_node(g, &format!("{}-new-{ordinal}", g.name));
        *attempt.new_nodes.entry(group).or_default() += 1;
        attempt.cost += g.spec.price_per_hour;
        let node_index = self.snapshot.add_node(node, slices);
        self.add_daemon_pods(node_index);
        node_index
    }

    /// Places on a new node the pod of every DaemonSet whose pod the
    /// scheduler would put there, so that they count against it.
    fn add_daemon_pods(&mut self, node_index: usize) {
        let node_name = self.snapshot.nodes()[node_index]
            .metadata
            .name
            .clone()
            .unwrap_or_default();
        for template in &self.daemon_pods {
            let mut pod = template.clone();
            let base = pod.metadata.name.take().unwrap_or_default();
            pod.metadata.name = Some(format!("{base}-{node_name}"));
            let before = self.snapshot.checkpoint();
            let pod_index = self.snapshot.add_pod(pod);
            let placed = match self.snapshot.resolve_claims(pod_index) {
                Ok(claims) => match self.snapshot.check(pod_index, node_index, &claims) {
                    Verdict::Fits(allocations) => {
                        self.snapshot
                            .bind(pod_index, node_index, &claims, allocations);
                        true
                    }
                    _ => false,
                },
                Err(_) => false,
            };
            if !placed {
                self.snapshot.rollback(before);
            }
        }
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
            match self.snapshot.check(pod_index, node_index, pod_claims) {
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
                    attempt.errors.insert(pod_index, e);
                }
            }
        }
        still
    }

    fn place(
        &mut self,
        attempt: &mut Attempt,
        pod_index: usize,
        node_index: usize,
        new_group: Option<usize>,
        claims: &PodClaims,
        allocations: Vec<k8s_openapi::api::resource::v1::AllocationResult>,
    ) {
        // Most pods allocate nothing: skip building their keys.
        let reported = if allocations.is_empty() {
            Vec::new()
        } else {
            let pod_key = object_key(&self.snapshot.pods()[pod_index].metadata);
            report_allocations(&pod_key, claims, &allocations)
        };
        self.snapshot
            .bind(pod_index, node_index, claims, allocations);
        attempt.placements.push(Placement {
            pod_index,
            node_index,
            new_group,
            reported,
        });
    }

    /// Probes one new node of every group with room (in the domain) and
    /// ranks them by the expander. Records why each group was rejected.
    fn best_group(
        &mut self,
        waiting: &[usize],
        claims: &BTreeMap<usize, PodClaims>,
        (key, domain): (Option<&str>, Option<&str>),
        attempt: &Attempt,
        rejected: &mut BTreeMap<usize, String>,
        excluded: &BTreeSet<usize>,
    ) -> Option<Choice> {
        let mut best: Option<Choice> = None;
        let uniform = if self.snapshot.labels_matter() {
            None
        } else {
            let first = waiting.first().and_then(|&p| self.snapshot.signature(p));
            let all_same = waiting.iter().all(|&p| self.snapshot.signature(p) == first);
            first.filter(|_| all_same)
        };
        for group in 0..self.groups.len() {
            if excluded.contains(&group) {
                continue;
            }
            if let (Some(key), Some(domain)) = (key, domain)
                && domain_of(&self.groups[group], key).as_deref() != Some(domain)
            {
                continue;
            }
            if let Err(reason) = self.room_left(group, attempt) {
                rejected.insert(group, reason);
                continue;
            }
            let g = &self.groups[group];
            let cache_key = uniform.map(|sig| (group, sig));
            let known = cache_key
                .and_then(|k| self.capacities.get(&k))
                .and_then(|c| c.answer(waiting.len()));
            let result = match known {
                Some(answer) => answer,
                None => {
                    // A fresh node is judged by what the first members fill;
                    // a big batch need not be tried in full on every group.
                    let sample = &waiting[..waiting.len().min(PROBE_SAMPLE)];
                    let result = self.probe(group, sample, claims);
                    if let Some(k) = cache_key {
                        self.capacities
                            .entry(k)
                            .or_insert(Capacity {
                                per_node: 0,
                                exact: false,
                                per_pod: (0, 0),
                                refusal: None,
                            })
                            .learn(waiting.len(), &result);
                    }
                    result
                }
            };
            if result.yielded == 0 {
                rejected.insert(
                    group,
                    result
                        .refusal
                        .unwrap_or_else(|| "no waiting member fits a new node".into()),
                );
                continue;
            }
            let (yielded, requested) = (result.yielded, result.requested);
            rejected.remove(&group);
            let candidate = Choice {
                group,
                yield_per_node: yielded,
                waste: waste(g, requested),
            };
            if best.as_ref().is_none_or(|b| self.better(&candidate, b)) {
                best = Some(candidate);
            }
        }
        best
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
        let mut result = Probe {
            yielded: 0,
            requested: (0, 0),
            refusal: None,
        };
        for &pod_index in waiting {
            let Some(pod_claims) = claims.get(&pod_index) else {
                continue;
            };
            match self.snapshot.check(pod_index, node_index, pod_claims) {
                Verdict::Fits(allocations) => {
                    // PodRequests as NodeResourcesFit counts them (init
                    // containers, sidecars, overhead), not a container sum.
                    let (cpu, mem) = self
                        .snapshot
                        .requests_of(pod_index)
                        .map_or((0, 0), |a| a.cpu_memory());
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
                Verdict::Refused(reason)
                | Verdict::Fatal(reason)
                | Verdict::Unresolvable(reason) => {
                    if result.refusal.is_none() {
                        result.refusal = Some(format!("pod {}: {reason}", self.name(pod_index)));
                    }
                }
            }
        }
        self.snapshot.rollback(checkpoint);
        result
    }

    /// Is `a` a better next group than `b` under the expander?
    fn better(&self, a: &Choice, b: &Choice) -> bool {
        let (ga, gb) = (&self.groups[a.group], &self.groups[b.group]);
        // Cost per member placed: the least-cost objective, node by node.
        let per_member = |g: &Group, c: &Choice| g.spec.price_per_hour / c.yield_per_node as f64;
        let least_cost = per_member(ga, a)
            .total_cmp(&per_member(gb, b))
            .then_with(|| b.yield_per_node.cmp(&a.yield_per_node))
            .then_with(|| ga.capacity_rank().cmp(&gb.capacity_rank()))
            .then_with(|| ga.name.cmp(&gb.name));
        let order = match self.options.expander {
            Expander::LeastCost => least_cost,
            Expander::Priority => gb.spec.priority.cmp(&ga.spec.priority).then(least_cost),
            Expander::LeastWaste => a.waste.total_cmp(&b.waste).then(least_cost),
        };
        order.is_lt()
    }
}

#[derive(Debug, Clone)]
struct Choice {
    group: usize,
    yield_per_node: usize,
    waste: f64,
}

/// Fraction of a new node's CPU and memory left unused by what was placed.
fn waste(group: &Group, requested: (i64, i64)) -> f64 {
    let allocatable = group.spec.template.effective_allocatable();
    let cpu = allocatable
        .get("cpu")
        .map_or(0, |q| dra_sim::quantity::milli_value(&q.0).unwrap_or(0));
    let mem = allocatable
        .get("memory")
        .map_or(0, |q| dra_sim::quantity::value(&q.0).unwrap_or(0));
    let frac = |used: i64, total: i64| {
        if total > 0 {
            1.0 - (used as f64 / total as f64).min(1.0)
        } else {
            0.0
        }
    };
    (frac(requested.0, cpu) + frac(requested.1, mem)) / 2.0
}

fn dedup(reasons: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    reasons
        .into_iter()
        .filter(|r| seen.insert(r.clone()))
        .collect()
}
