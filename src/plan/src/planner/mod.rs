//! The scale-up planner: for each pending gang, in priority order, the
//! cheapest set of new nodes — possibly from several groups — such that at
//! least `minCount` members fit *simultaneously* under the full fit engine.
//!
//! Every gang is tried in a checkpoint of the snapshot and committed only when
//! it lands whole, so a plan never contains part of a gang. Existing free
//! capacity (including nodes already upcoming and nodes planned for earlier
//! gangs) is used before anything new is bought.
//!
//! The planner is split by role, as cluster-autoscaler splits its expanders
//! and Karpenter its scheduler, existing-node and node-claim code:
//! - this module: reading the input ([`prepare`]), the planning loop over
//!   gangs in priority order, and the report entries every role writes;
//! - [`types`]: options and the record of one attempt;
//! - [`gangs`]: a gang tried whole, in each topology domain;
//! - [`domains`]: the domains a gang is tried in, and the phantom nodes that
//!   stand for the domains new nodes could add;
//! - [`singles`]: a batch of single pods, each landing or waiting alone;
//! - [`existing_nodes`]: first fit on the nodes the snapshot has;
//! - [`new_nodes`]: opening nodes group by group, ranked by the expander;
//! - [`probe`]: what one fresh node of a group takes, cached per pod shape;
//! - [`pack`]: single pods packed onto nodes whose size is chosen last;
//! - [`expander`]: every rule that chooses between groups or sizes;
//! - [`daemonsets`]: the DaemonSet pods every new node runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use dra_sim::FeatureGates;
use dra_sim::ObjectRef;
use dra_sim::filters::{Allocatable, FilterState};
use dra_sim::objects::ClusterObjects;
use dra_sim::reason::Reason;
use dra_sim::report::{Outcome, PodReport};
use dra_sim::simulate::report_allocations;
use dra_sim::snapshot::{PodClaims, Snapshot, object_key};
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::gang::{Gang, GangApi, detect_gangs};
use crate::groups::{Budget, Group, read_groups, template_node};
use crate::report::{PlanReport, ScaleUp};

mod daemonsets;
mod domains;
mod existing_nodes;
mod expander;
mod gangs;
mod limits;
mod new_nodes;
mod pack;
mod probe;
mod singles;
mod stand_ins;
mod types;

pub use expander::Expander;
pub use types::PlanOptions;
use types::{Attempt, Placement, ScaleUps};

/// The state of one plan: the snapshot with what earlier gangs were given,
/// the groups and their room, and what is known about fresh nodes.
struct Planner<'a> {
    snapshot: Snapshot,
    /// The pod every DaemonSet would run on a new node.
    daemon_pods: Vec<Pod>,
    /// What one fresh node of a group takes of pods of one signature: a
    /// fresh node does not depend on the rest of the cluster when no pod has
    /// anti-affinity, so identical pods are probed once per group.
    capacities: std::collections::HashMap<(usize, u64), probe::Capacity>,
    groups: &'a [Group],
    budget: Budget,
    used: Vec<usize>,
    options: &'a PlanOptions,
    /// Members' names, for reasons.
    names: BTreeMap<usize, ObjectRef>,
    /// Node groups that differ only in size, once computed.
    size_classes: Option<pack::SizeClasses>,
    /// Node label keys the DRA allocator reads (see [`Prepared`]).
    dra_label_keys: BTreeSet<String>,
    /// Nodes `0..cluster_nodes` are the cluster's own; the rest the plan
    /// made (upcoming, new, probes), whose names mean nothing to a user.
    cluster_nodes: usize,
    /// Nodes `cluster_nodes..upcoming_end` stand for nodes already requested.
    upcoming_end: usize,
    /// Per group, once asked: its new nodes' allocatable.
    allocatables: Vec<Option<Allocatable>>,
    /// Per pod, once asked: its requests as NodeResourcesFit counts them
    /// (`None` when one is not a quantity).
    requests: HashMap<usize, Option<Allocatable>>,
}

/// Plans scale-ups for every pending gang of `objects`.
#[must_use]
pub fn plan(objects: ClusterObjects, gates: FeatureGates, options: &PlanOptions) -> PlanReport {
    prepare_for(objects, gates, options).run(options)
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
    /// ProvisioningRequests and CapacityBuffers, and their pods.
    stand_ins: stand_ins::StandIns,
}

/// Reads and indexes `objects` for [`Prepared::run`] with default options.
#[must_use]
pub fn prepare(objects: ClusterObjects, gates: FeatureGates) -> Prepared {
    prepare_for(objects, gates, &PlanOptions::default())
}

/// Reads and indexes `objects` for [`Prepared::run`] with `options` (which
/// ProvisioningRequests are served is decided here).
#[must_use]
pub fn prepare_for(
    objects: ClusterObjects,
    gates: FeatureGates,
    options: &PlanOptions,
) -> Prepared {
    prepare_with(objects, None, gates, options)
}

/// [`prepare_for`] with the filter state of `objects`' nodes and bound pods made before
/// (see [`Snapshot::with_filters`]), which [`Planned::into_parts`] hands back.
#[must_use]
pub fn prepare_with(
    mut objects: ClusterObjects,
    filters: Option<FilterState>,
    gates: FeatureGates,
    options: &PlanOptions,
) -> Prepared {
    let (groups, node_group_errors) = read_groups(&objects.extra, &objects.nodes);
    add_missing_template_slices(&mut objects, &groups);
    let mut stand_ins = stand_ins::StandIns::add_pods(&mut objects, options);
    let extra = std::mem::take(&mut objects.extra);
    let daemon_pods = daemonsets::daemon_pods(&extra);
    let dra_label_keys = pack::dra_label_keys(&objects);
    let workload_refs = std::mem::take(&mut objects.pod_workload_refs);
    let snapshot = match filters {
        Some(filters) => Snapshot::with_filters(objects, gates, filters),
        None => Snapshot::new(objects, gates),
    };
    let pending = snapshot.pending_pods();
    // Stand-in pods follow the input's pods; their gangs are the requests'
    // and buffers', never a gang their template's labels name.
    let first_stand_in = stand_ins.first_pod(snapshot.pods().len());
    // Pending pods consuming a ProvisioningRequest never trigger a scale-up
    // (cluster-autoscaler filters them out): the request booked their room.
    let (input_pending, consumers): (Vec<usize>, Vec<usize>) = pending
        .iter()
        .copied()
        .filter(|&i| i < first_stand_in)
        .partition(|&i| crate::provreq::consumed_request(&snapshot.pods()[i]).is_none());
    stand_ins.consumers = consumers;
    let mut gangs = detect_gangs(
        &snapshot.pods()[..first_stand_in],
        &input_pending,
        &extra,
        &workload_refs,
        &gates,
    );
    gangs = split_satisfied_gangs(gangs);
    gangs.extend(stand_ins.gangs(&snapshot));
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
        stand_ins,
    }
}

impl Prepared {
    /// Plans scale-ups for every pending gang. Which ProvisioningRequests
    /// are served and tried was decided by [`prepare_for`]'s options (see
    /// [`PlanOptions::check_capacity_processor_instance`] and
    /// [`PlanOptions::provisioning_request_backoff`]), not `options`.
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
            stand_ins,
        } = self;
        let (report, snapshot, names) = run(
            &groups,
            (node_group_errors, daemon_pods, dra_label_keys, stand_ins),
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
    _scratch: (BTreeMap<usize, ObjectRef>, Vec<Gang>),
}

impl Planned {
    /// The snapshot with the planned nodes added and the placed pods bound.
    #[must_use]
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The snapshot's nodes and pods, the rest dropped (see
    /// [`Snapshot::into_nodes_and_pods`]).
    #[must_use]
    pub fn into_nodes_and_pods(self) -> (Vec<Node>, Vec<Pod>) {
        self.snapshot.into_nodes_and_pods()
    }

    /// What the snapshot leaves (see [`Snapshot::into_parts`]): its nodes, pods,
    /// ResourceSlices, and its filter state as planning started with it.
    #[must_use]
    pub fn into_parts(self) -> dra_sim::snapshot::Parts {
        self.snapshot.into_parts()
    }
}

fn run(
    groups: &[Group],
    (node_group_errors, daemon_pods, dra_label_keys, stand_ins): (
        Vec<crate::groups::GroupError>,
        Vec<Pod>,
        BTreeSet<String>,
        stand_ins::StandIns,
    ),
    snapshot: Snapshot,
    pending: &[usize],
    gangs: &[Gang],
    options: &PlanOptions,
) -> (PlanReport, Snapshot, BTreeMap<usize, ObjectRef>) {
    let names = pending
        .iter()
        .map(|&i| (i, object_key(&snapshot.pods()[i].metadata)))
        .collect();
    let mut planner = Planner {
        allocatables: vec![None; groups.len()],
        requests: HashMap::new(),
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
        cluster_nodes: 0,
        upcoming_end: 0,
    };
    planner.cluster_nodes = planner.snapshot.nodes().len();
    // Nodes already requested count as capacity (with their DaemonSet pods),
    // so the same pods never trigger a second scale-up while those nodes boot.
    for group in groups {
        for i in 0..group.upcoming {
            let (node, slices) = template_node(group, &format!("{}-upcoming-{i}", group.name));
            let node_index = planner.snapshot.add_node(node, slices);
            planner.add_daemon_pods(node_index);
        }
    }
    planner.upcoming_end = planner.snapshot.nodes().len();
    // Booked capacity is taken before any pending pod is planned, from what
    // the pods the scheduler will place now leave free.
    let booked = stand_ins.book(&mut planner, gangs, options.now);
    planner.snapshot.seal();
    let mut report = PlanReport {
        node_group_errors,
        ..PlanReport::default()
    };
    let mut scale_ups = ScaleUps::new();
    // Single pods of one priority are planned together, as one batch with no
    // minimum: each lands on its own, but new nodes are chosen for what the
    // batch fills, not for one pod (which would buy the smallest node that
    // fits each pod).
    let mut i = 0;
    while i < gangs.len() {
        let is_single = |g: &Gang| !g.api.is_gang() && g.blocked.is_none();
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
                capacity_type: group.spec.capacity_type,
                price_per_hour: group.spec.price_per_hour * count as f64,
                min_count: min_count.max(1),
                why: Vec::new(),
            }
        })
        .collect();
    planner.explain_limits(&mut report.scale_ups);
    planner.report_consumers(&stand_ins, &mut report);
    let upcoming: BTreeMap<String, String> = planner.snapshot.nodes()
        [planner.cluster_nodes..planner.upcoming_end]
        .iter()
        .filter_map(|n| {
            let group = n.metadata.labels.as_ref()?.get(dra_api::NODE_GROUP_LABEL)?;
            Some((n.metadata.name.clone()?, group.clone()))
        })
        .collect();
    stand_ins.report(&mut report, &booked, &upcoming, options.now);
    (report, planner.snapshot, planner.names)
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
        if gang.needed() == 0 && gang.blocked.is_none() && gang.api.is_gang() {
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
                    existing_only: false,
                });
            }
        } else {
            out.push(gang);
        }
    }
    out
}

impl Planner<'_> {
    fn name(&self, pod_index: usize) -> ObjectRef {
        self.names.get(&pod_index).cloned().unwrap_or_default()
    }

    fn pod_report(
        &self,
        pod_index: usize,
        outcome: Outcome,
        node: Option<String>,
        reasons: Vec<String>,
    ) -> PodReport {
        PodReport {
            pod: self.name(pod_index).to_string(),
            outcome,
            node,
            node_group: None,
            allocations: None,
            reasons,
            reason_codes: Vec::new(),
        }
    }

    /// The report of a pod the plan placed: `fits` on a node that exists or
    /// is upcoming, `fits-new-node` with its group on a node the plan opens.
    fn placed(&self, p: &Placement) -> PodReport {
        let node = self.snapshot.nodes()[p.node_index].metadata.name.clone();
        let outcome = if p.new_group.is_some() {
            Outcome::FitsNewNode
        } else {
            Outcome::Fits
        };
        let mut r = self.pod_report(p.pod_index, outcome, node, Vec::new());
        r.node_group = p.new_group.map(|g| self.groups[g].name.clone());
        r.allocations = Some(p.reported.clone());
        r
    }

    fn unschedulable(&self, pod_index: usize, reasons: Vec<String>) -> PodReport {
        self.pod_report(pod_index, Outcome::Unschedulable, None, reasons)
    }

    /// An unschedulable pod refused on every node for `reason` (PreFilter),
    /// reported with its code.
    fn refused_by(&self, pod_index: usize, reason: &Reason) -> PodReport {
        let mut report = self.unschedulable(pod_index, Vec::new());
        report.set_reasons(std::slice::from_ref(reason));
        report
    }

    /// What a user calls node `node_index`: `None` for the cluster's own
    /// nodes (their names mean something), "a new node of group X" for a
    /// node the plan made — a probe, a node planned new — and "an upcoming
    /// node of group X" for one already requested.
    fn node_words(&self, node_index: usize) -> Option<String> {
        if node_index < self.cluster_nodes {
            return None;
        }
        let metadata = &self.snapshot.nodes()[node_index].metadata;
        metadata.name.as_deref().filter(|n| !n.is_empty())?;
        let group = metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(dra_api::NODE_GROUP_LABEL))
            .map_or("?", String::as_str);
        Some(if node_index < self.upcoming_end {
            format!("an upcoming node of group {group}")
        } else {
            format!("a new node of group {group}")
        })
    }

    /// `reason` (from a check on `node_index`) in a user's words: the node
    /// it mentions is named by [`Planner::node_words`].
    fn in_user_words(&self, node_index: usize, reason: &Reason) -> String {
        match self.node_words(node_index) {
            Some(words) => reason.naming(&words).to_string(),
            None => reason.to_string(),
        }
    }

    /// Node `node_index` as a user calls it: `node <name>` or
    /// [`Planner::node_words`].
    fn node_called(&self, node_index: usize) -> String {
        self.node_words(node_index).unwrap_or_else(|| {
            let name = self.snapshot.nodes()[node_index].metadata.name.as_deref();
            format!("node {}", name.unwrap_or_default())
        })
    }

    /// Pod `pod_index`'s requests as NodeResourcesFit counts them (init
    /// containers, sidecars, overhead), parsed once per plan.
    fn requests(&mut self, pod_index: usize) -> Option<&Allocatable> {
        if !self.requests.contains_key(&pod_index) {
            let parsed = self.snapshot.requests_of(pod_index);
            self.requests.insert(pod_index, parsed);
        }
        self.requests.get(&pod_index).and_then(Option::as_ref)
    }

    /// Whether NodeResourcesFit surely refuses the pod on new node
    /// `node_index` of `group`: what the node holds plus the pod exceeds its
    /// CPU, memory or pod slots. A cheap answer, asked before the full check
    /// (which prepares the pod anew after every placement) on nodes that
    /// fill up; `false` means only that the full check must decide.
    fn surely_too_full(&mut self, pod_index: usize, node_index: usize, group: usize) -> bool {
        if self.allocatables[group].is_none() {
            let parsed = self
                .snapshot
                .allocatable_from(self.groups[group].spec.template.effective_allocatable());
            self.allocatables[group] = Some(parsed);
        }
        self.requests(pod_index);
        match (
            self.requests.get(&pod_index).and_then(Option::as_ref),
            self.allocatables[group].as_ref(),
        ) {
            (Some(requests), Some(target)) => {
                !self.snapshot.usage_fits(node_index, Some(requests), target)
            }
            _ => false,
        }
    }

    /// Resolves the claims of `pods` once, before any is tried: those whose
    /// claims PreFilter refuses (on every node) are in the second map with
    /// why, and are never tried.
    fn resolve_claims(
        &mut self,
        pods: &[usize],
    ) -> (BTreeMap<usize, PodClaims>, BTreeMap<usize, Reason>) {
        let mut claims = BTreeMap::new();
        let mut errors = BTreeMap::new();
        for &pod_index in pods {
            match self.snapshot.resolve_claims(pod_index) {
                Ok(c) => {
                    claims.insert(pod_index, c);
                }
                Err(e) => {
                    errors.insert(pod_index, e);
                }
            }
        }
        (claims, errors)
    }

    /// Binds a pod on a node and records the placement in `attempt`.
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
}
