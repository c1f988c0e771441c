//! The device inventory and the `allocate` entry point.
//!
//! The catalog owns every converted ResourceSlice and DeviceClass and the
//! caches that make repeated `allocate` calls cheap:
//! - slices indexed by node name, by pool and in arrival order;
//! - per node, the gathered pools, valid until a slice that node can see
//!   changes (tracked by generation counters per node, for node-less slices
//!   and per pool);
//! - per node view, what the allocated state means for each pool, valid for
//!   one state stamp;
//! - per device, its CEL value and selector verdicts (see `cel_cache`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};

use crate::reason::{Code, Reason};

use super::cel_cache::{DeviceCaches, SelectorTable};
use super::constraints::Constraint;
use super::diagnose::diagnose;
use super::feasibility::provably_infeasible;
use super::inventory::{SliceEntry, convert_slice};
use super::model::{Checker, ClassEntry, MAX_RESULTS};
use super::pool_state::PoolState;
use super::pools::{Pool, counters_everywhere, gather};
use super::requests::validate_claim;
use super::results::assemble;
use super::search::{RKey, Search, Stop};
use super::select_error::GatherError;
use super::state::{AllocatedState, FixedMap};
use super::{
    AllocError, AllocateOutcome, AllocatorStats, Features, ShareIdGenerator, Variant, claim_ref,
};
use crate::gates::FeatureGates;

type PoolKey = (String, String);

/// The pools one node sees, with what they depended on.
struct NodeView {
    labels: Option<BTreeMap<String, String>>,
    node_generation: u64,
    shared_generation: u64,
    pool_generations: Vec<(PoolKey, u64)>,
    pools: Result<Vec<Pool>, GatherError>,
    state_stamp: Option<u64>,
    states: Vec<PoolState>,
}

/// The cluster's device inventory and the allocator over it.
pub struct DraCatalog {
    gates: FeatureGates,
    features: Features,
    classes: FixedMap<String, ClassEntry>,
    taint_rules: Vec<DeviceTaintRule>,
    /// Slices by id (arrival order); removed ones leave `None`.
    slices: Vec<Option<Arc<SliceEntry>>>,
    /// How many slices the catalog was built with (the first ids).
    initial: usize,
    /// Those of the first `initial` slices removed since, by id, for
    /// [`DraCatalog::into_initial_slices`].
    removed_initial: Vec<(usize, Arc<SliceEntry>)>,
    by_node: FixedMap<String, Vec<usize>>,
    shared: Vec<usize>,
    /// Slices with a node name that define counter sets: the stable
    /// allocator uses them from every node (see [`counters_everywhere`]).
    /// They are in `by_node` too; their changes bump `shared_generation`.
    node_counter_slices: Vec<usize>,
    by_pool: FixedMap<PoolKey, Vec<usize>>,
    next_generation: u64,
    node_generations: FixedMap<String, u64>,
    shared_generation: u64,
    pool_generations: FixedMap<PoolKey, u64>,
    views: FixedMap<String, NodeView>,
    table: SelectorTable,
    caches: DeviceCaches,
    stats: AllocatorStats,
    /// Try to prove infeasibility by counting once a search has run
    /// [`COUNT_AT_STEP`] steps (off only in tests that pin upstream's search
    /// work).
    count_first: bool,
}

impl std::fmt::Debug for DraCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DraCatalog")
            .field("classes", &self.classes.len())
            .field("slices", &self.slices.iter().flatten().count())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl DraCatalog {
    /// Turns the counting that proves infeasibility before a search off or
    /// on, so that tests can pin upstream's search work.
    #[cfg(test)]
    pub(crate) fn set_count_first(&mut self, on: bool) {
        self.count_first = on;
    }
}

/// Search steps after which counting checks whether any allocation exists
/// (`feasibility`). Most searches that succeed finish well before (a step
/// per request and device tried), so they never pay for the counting; a
/// search that would run away is stopped here when counting proves it futile.
const COUNT_AT_STEP: u64 = 100;

/// Upstream's Filter status when the allocation ran past `filterTimeout`.
pub const TIMED_OUT: &str = "timed out trying to allocate devices";

impl DraCatalog {
    /// Builds the catalog. DeviceTaintRules are applied to the slices' devices
    /// when both `DRADeviceTaints` and `DRADeviceTaintRules` are on.
    #[must_use]
    pub fn new(
        gates: FeatureGates,
        classes: &[DeviceClass],
        slices: &[ResourceSlice],
        taint_rules: &[DeviceTaintRule],
    ) -> Self {
        Self::from_slices(
            gates,
            classes,
            slices.iter().cloned(),
            slices.len(),
            taint_rules,
        )
    }

    /// [`DraCatalog::new`] of slices the caller gives away: their devices move into
    /// the catalog instead of being copied (a snapshot's slices are used for nothing
    /// else).
    #[must_use]
    pub fn new_owning(
        gates: FeatureGates,
        classes: &[DeviceClass],
        slices: Vec<ResourceSlice>,
        taint_rules: &[DeviceTaintRule],
    ) -> Self {
        let count = slices.len();
        Self::from_slices(gates, classes, slices, count, taint_rules)
    }

    fn from_slices(
        gates: FeatureGates,
        classes: &[DeviceClass],
        slices: impl IntoIterator<Item = ResourceSlice>,
        count: usize,
        taint_rules: &[DeviceTaintRule],
    ) -> Self {
        let mut catalog = DraCatalog {
            gates,
            features: Features::from_gates(&gates),
            classes: FixedMap::default(),
            taint_rules: taint_rules.to_vec(),
            slices: Vec::with_capacity(count),
            initial: 0,
            removed_initial: Vec::new(),
            by_node: FixedMap::default(),
            shared: Vec::new(),
            node_counter_slices: Vec::new(),
            by_pool: FixedMap::default(),
            next_generation: 1,
            node_generations: FixedMap::default(),
            shared_generation: 0,
            pool_generations: FixedMap::default(),
            views: FixedMap::default(),
            table: SelectorTable::new(&gates),
            caches: DeviceCaches::default(),
            stats: AllocatorStats::default(),
            count_first: true,
        };
        for class in classes {
            catalog.add_class(class.clone());
        }
        for slice in slices {
            catalog.add_slice(slice);
        }
        catalog.initial = catalog.slices.len();
        catalog
    }

    /// Gives up the catalog, handing back the slices it was built with, in their order
    /// and as they were given (devices and all, without the taints DeviceTaintRules
    /// added): for a caller that needs them after the catalog, instead of a copy of every
    /// device made before it (issue #28). Slices added later are dropped.
    #[must_use]
    pub fn into_initial_slices(self) -> Vec<ResourceSlice> {
        let DraCatalog {
            mut slices,
            initial,
            removed_initial,
            views,
            ..
        } = self;
        // The node views' pools share the entries; without them each entry is the
        // catalog's alone and its devices move out instead of being copied.
        drop(views);
        slices.truncate(initial);
        for (id, entry) in removed_initial {
            if let Some(slot) = slices.get_mut(id) {
                *slot = Some(entry);
            }
        }
        slices
            .into_iter()
            .flatten()
            .map(|entry| match Arc::try_unwrap(entry) {
                Ok(entry) => entry.into_given(),
                Err(shared) => shared.given_copy(),
            })
            .collect()
    }

    /// Adds (or replaces, by name) a DeviceClass.
    pub fn add_class(&mut self, class: DeviceClass) {
        let name = class.metadata.name.clone().unwrap_or_default();
        let selectors = class
            .spec
            .as_ref()
            .and_then(|s| s.selectors.as_deref())
            .unwrap_or_default()
            .iter()
            .map(|s| s.cel.as_ref().map(|c| self.table.id(&c.expression)))
            .collect();
        self.classes.insert(
            name.clone(),
            ClassEntry {
                name,
                class,
                selectors,
            },
        );
    }

    /// Adds a slice, e.g. one of a simulated (template) node.
    pub fn add_slice(&mut self, slice: ResourceSlice) {
        let apply_rules = self.features.device_taints && self.features.device_taint_rules;
        let caches = &mut self.caches;
        let entry = convert_slice(slice, &self.taint_rules, apply_rules, || {
            caches.allocate_slot()
        });
        let id = self.slices.len();
        let pool_key = (entry.driver.clone(), entry.pool.clone());
        match entry.index_node_name() {
            Some(node) => {
                let node = node.to_string();
                if !entry.shared_counters.is_empty() {
                    self.node_counter_slices.push(id);
                    self.shared_generation = self.fresh_generation();
                }
                self.by_node.entry(node.clone()).or_default().push(id);
                self.bump_node(&node);
            }
            None => {
                self.shared.push(id);
                self.shared_generation = self.fresh_generation();
            }
        }
        self.by_pool.entry(pool_key.clone()).or_default().push(id);
        self.bump_pool(pool_key);
        self.slices.push(Some(Arc::new(entry)));
    }

    /// Removes every slice whose `spec.nodeName` is `node_name`.
    pub fn remove_slices_for_node(&mut self, node_name: &str) {
        let Some(ids) = self.by_node.remove(node_name) else {
            return;
        };
        for id in ids {
            let Some(entry) = self.slices.get_mut(id).and_then(Option::take) else {
                continue;
            };
            for device in &entry.devices {
                self.caches.release_slot(device.slot);
            }
            let key = (entry.driver.clone(), entry.pool.clone());
            if let Some(list) = self.by_pool.get_mut(&key) {
                list.retain(|i| *i != id);
            }
            self.bump_pool(key);
            if !entry.shared_counters.is_empty() {
                self.node_counter_slices.retain(|i| *i != id);
                self.shared_generation = self.fresh_generation();
            }
            if id < self.initial {
                self.removed_initial.push((id, entry));
            }
        }
        self.bump_node(node_name);
        self.views.remove(node_name);
    }

    /// Counters of the work done so far.
    #[must_use]
    pub fn stats(&self) -> AllocatorStats {
        self.stats
    }

    fn fresh_generation(&mut self) -> u64 {
        self.next_generation += 1;
        self.next_generation
    }

    fn bump_node(&mut self, node: &str) {
        let g = self.fresh_generation();
        self.node_generations.insert(node.to_string(), g);
    }

    fn bump_pool(&mut self, key: PoolKey) {
        let g = self.fresh_generation();
        self.pool_generations.insert(key, g);
    }

    fn view_is_current(&self, name: &str, node: &Node, view: &NodeView) -> bool {
        view.node_generation == self.node_generations.get(name).copied().unwrap_or(0)
            && view.shared_generation == self.shared_generation
            && view.labels == node.metadata.labels
            && view
                .pool_generations
                .iter()
                .all(|(key, g)| self.pool_generations.get(key).copied().unwrap_or(0) == *g)
    }

    fn build_view(&self, name: &str, node: &Node) -> NodeView {
        let node_ids = self
            .by_node
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or_default();
        // Other nodes' counter slices, for the stable allocator only; this
        // node's own are in `node_ids` already.
        let elsewhere = counters_everywhere(&self.features)
            .then_some(&self.node_counter_slices)
            .into_iter()
            .flatten()
            .filter(|id| !node_ids.contains(id));
        let slices = node_ids
            .iter()
            .chain(&self.shared)
            .chain(elsewhere)
            .filter_map(|id| self.slices.get(*id).and_then(Option::as_ref));
        let all_of_pool = |driver: &str, pool: &str| -> Vec<&Arc<SliceEntry>> {
            self.by_pool
                .get(&(driver.to_string(), pool.to_string()))
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(|id| self.slices.get(*id).and_then(Option::as_ref))
                .collect()
        };
        let gathered = gather(&self.features, node, slices, all_of_pool);
        let (pools, deps) = match gathered {
            Ok(g) => (Ok(g.pools), g.deps),
            Err(e) => (Err(e), Default::default()),
        };
        NodeView {
            labels: node.metadata.labels.clone(),
            node_generation: self.node_generations.get(name).copied().unwrap_or(0),
            shared_generation: self.shared_generation,
            pool_generations: deps
                .into_iter()
                .map(|k| {
                    let g = self.pool_generations.get(&k).copied().unwrap_or(0);
                    (k, g)
                })
                .collect(),
            pools,
            state_stamp: None,
            states: Vec::new(),
        }
    }

    /// One upstream `Allocate(node, claims)`: all-or-nothing over `claims`
    /// (the pod's unallocated claims, in pod order).
    ///
    /// # Errors
    /// [`AllocError::FailedOnNode`] when no fit exists and some pool is
    /// invalid; [`AllocError::Fatal`] for problems that fail the pod on every
    /// node (CEL errors, unknown classes, unsupported or disabled fields,
    /// more than 32 devices per claim, unparsable node selectors).
    pub fn allocate(
        &mut self,
        node: &Node,
        claims: &[&ResourceClaim],
        allocated: &AllocatedState,
        share_ids: &mut ShareIdGenerator,
    ) -> Result<AllocateOutcome, AllocError> {
        self.stats.allocate_calls += 1;
        let name = node.metadata.name.as_deref().unwrap_or("");
        let current = self
            .views
            .get(name)
            .is_some_and(|v| self.view_is_current(name, node, v));
        if !current {
            let view = self.build_view(name, node);
            self.views.insert(name.to_string(), view);
        }
        let DraCatalog {
            gates,
            features,
            classes,
            views,
            table,
            caches,
            stats,
            count_first,
            ..
        } = self;
        let Some(view) = views.get_mut(name) else {
            return Err(AllocError::Fatal(format!(
                "internal error: no pool view for node {name}"
            )));
        };
        let pools = match &view.pools {
            Ok(pools) => pools.as_slice(),
            Err(e) => return Err(AllocError::Fatal(format!("gather pool information: {e}"))),
        };
        if view.state_stamp != Some(allocated.stamp()) {
            view.states = pools
                .iter()
                .map(|p| PoolState::compute(p, allocated))
                .collect();
            view.state_stamp = Some(allocated.stamp());
        }
        let mut chk = Checker {
            f: *features,
            gates,
            node,
            pools,
            states: &view.states,
            table,
            caches,
        };
        let mut slots = Vec::with_capacity(claims.len());
        let mut constraints = Vec::with_capacity(claims.len());
        for claim in claims {
            let (claim_slots, min_devices) = validate_claim(&mut chk, classes, claim)
                .map_err(|e| AllocError::Fatal(e.to_string()))?;
            if min_devices > MAX_RESULTS {
                return Err(AllocError::Fatal(format!(
                    "claim {}: number of requested devices {min_devices} exceeds the claim limit of {MAX_RESULTS}",
                    claim_ref(claim)
                )));
            }
            slots.push(claim_slots);
            constraints.push(claim_constraints(claim, features)?);
        }
        let mut search = Search::new(chk, claims, slots, constraints, share_ids);
        search.budget = gates.search_budget();
        if *count_first {
            search.checkpoint = Some((COUNT_AT_STEP, provably_infeasible));
        }
        let start = RKey {
            claim: 0,
            request: 0,
            sub: 0,
        };
        let mut outcome = search.allocate_one(start, 0, false, (0, 0, 0));
        stats.allocate_one_invocations += search.invocations;
        if matches!(outcome, Err(Stop::Infeasible)) {
            stats.proven_infeasible += 1;
            // The search stopped midway; the reasons are read from a search
            // that has not started, as after one that ran to its end.
            let Search {
                chk,
                slots,
                share_ids,
                ..
            } = search;
            let constraints = claims
                .iter()
                .map(|claim| claim_constraints(claim, features))
                .collect::<Result<Vec<_>, _>>()?;
            search = Search::new(chk, claims, slots, constraints, share_ids);
            outcome = Ok(false);
        }
        match outcome {
            Err(Stop::Fatal(message)) => Err(AllocError::Fatal(message)),
            // Upstream's Filter: UnschedulableAndUnresolvable for this node.
            Err(Stop::Timeout) => Ok(AllocateOutcome::Unschedulable {
                reasons: vec![Reason::new(Code::AllocationTimedOut, TIMED_OUT)],
            }),
            Err(Stop::MaxSize) => Err(AllocError::Fatal("allocation max size exceeded".into())),
            Ok(true) => assemble(&search, name)
                .map(AllocateOutcome::Allocated)
                .map_err(|e| AllocError::Fatal(e.to_string())),
            Err(Stop::Infeasible) | Ok(false) => {
                let invalid: Vec<String> = pools
                    .iter()
                    .filter_map(|p| {
                        p.invalid
                            .as_ref()
                            .map(|why| format!("pool {}: {why}", p.id()))
                    })
                    .collect();
                if !invalid.is_empty() {
                    return Err(AllocError::FailedOnNode(format!(
                        "invalid resource pools were encountered: {}",
                        invalid.join("; ")
                    )));
                }
                Ok(AllocateOutcome::Unschedulable {
                    reasons: diagnose(&mut search)
                        .into_iter()
                        .map(|words| Reason::with_words(Code::CannotAllocateAllClaims, words))
                        .collect(),
                })
            }
        }
    }
}

/// The claim's constraints. The stable allocator knows `matchAttribute`
/// only: anything else is its "empty constraint" error.
fn claim_constraints(
    claim: &ResourceClaim,
    features: &Features,
) -> Result<Vec<Constraint>, AllocError> {
    let list_mode = features.list_type_attributes;
    let stable = features.variant() == Variant::Stable;
    let specs = claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.constraints.as_deref())
        .unwrap_or_default();
    let mut out = Vec::with_capacity(specs.len());
    for (i, c) in specs.iter().enumerate() {
        let requests = c.requests.as_deref().unwrap_or_default();
        if let Some(attribute) = &c.match_attribute {
            out.push(Constraint::matching(requests, attribute, list_mode));
        } else if let Some(attribute) = c.distinct_attribute.as_ref().filter(|_| !stable) {
            out.push(Constraint::distinct(requests, attribute, list_mode));
        } else {
            return Err(AllocError::Fatal(format!(
                "claim {}, constraint #{i}: empty constraint (unsupported constraint type?)",
                claim_ref(claim)
            )));
        }
    }
    Ok(out)
}
