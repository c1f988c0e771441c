//! Pool gathering for one node (upstream `GatherPools` and `buildPool`,
//! incubating variant; the stable one differs in [`counters_everywhere`] and
//! [`binding_pools_last`]): which slices a node can use, grouped into pools at
//! their newest generation, checked for completeness and validity, and put in
//! the deterministic order the first-fit search depends on.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use super::Features;
use super::inventory::{CounterSetEntry, SliceEntry};
use super::quantity::Amount;
use super::select_error::GatherError;
use crate::selectors::node_matches;

/// A pool as seen from one node.
#[derive(Debug)]
pub(crate) struct Pool {
    pub driver: String,
    pub name: String,
    /// Not all slices of the newest generation exist; nothing is allocated
    /// from it and `All` requests fail.
    pub incomplete: bool,
    /// Why the pool is unusable (duplicate names, unknown counters).
    pub invalid: Option<String>,
    /// Device slices relevant to the node, sorted by name.
    pub slices: Vec<Arc<SliceEntry>>,
    /// Index of each slice's first device in the pool's flat device numbering.
    pub offsets: Vec<usize>,
    /// Devices in `slices`.
    pub n_devices: usize,
    /// Device slices of the pool that do not target the node: only their
    /// counter consumption matters.
    pub not_targeting: Vec<Arc<SliceEntry>>,
    /// The pool's counter sets (names unique).
    pub counter_sets: Vec<CounterSetEntry>,
    /// Index of each counter set's first counter in the pool's flat counter
    /// numbering (counters of a set in name order).
    pub counter_offsets: Vec<usize>,
    /// Counters in all sets.
    pub n_counters: usize,
    /// Per flat device: (flat counter index, amount) consumed.
    pub consumption: Vec<Vec<(usize, Amount)>>,
    /// Per flat device: the counter set index of each `consumesCounters`
    /// entry, in the device's order.
    pub consumed_sets: Vec<Vec<usize>>,
}

impl Pool {
    fn empty(driver: &str, name: &str) -> Self {
        Pool {
            driver: driver.to_string(),
            name: name.to_string(),
            incomplete: false,
            invalid: None,
            slices: Vec::new(),
            offsets: Vec::new(),
            n_devices: 0,
            not_targeting: Vec::new(),
            counter_sets: Vec::new(),
            counter_offsets: Vec::new(),
            n_counters: 0,
            consumption: Vec::new(),
            consumed_sets: Vec::new(),
        }
    }

    /// `driver/pool`, as upstream prints a pool ID.
    pub fn id(&self) -> String {
        format!("{}/{}", self.driver, self.name)
    }

    /// The flat index of counter `counter` of set `set`.
    pub fn counter_index(&self, set: usize, counter: usize) -> usize {
        self.counter_offsets[set] + counter
    }

    /// Whether devices can be allocated from it.
    pub fn usable(&self) -> bool {
        !self.incomplete && self.invalid.is_none()
    }
}

/// Whether every slice with counter sets belongs to every node's pools,
/// whatever its node selection: the stable allocator's `GatherPools` adds
/// them first ("needed to use a pool regardless of their node selector",
/// structured/internal/stable/pools_stable.go), while the incubating and
/// experimental ones select them by node like device slices (and look
/// further only when a pool seems incomplete).
pub(crate) fn counters_everywhere(f: &Features) -> bool {
    f.partitionable_devices && f.variant() == super::Variant::Stable
}

/// Whether pools with a binding-condition device are searched after the
/// others. The incubating and experimental `GatherPools` move them last
/// (`poolHasBindingConditions`) and sort both parts by pool ID, whatever
/// DRADeviceBindingConditions says. The stable `GatherPools` does neither:
/// its pools come in Go map order, which for a handful of pools is mostly the
/// order their first slices were listed in. Plain (driver, pool) order is one
/// of its possible orders and, with slices listed in name order (as the
/// upstream oracle does, and as slice names usually follow pool names), the
/// one it gives most often; moving binding-condition pools last would make
/// ours an order it seldom gives (seed 3 cluster 4782 of the oracle, case
/// 142).
fn binding_pools_last(f: &Features) -> bool {
    f.variant() != super::Variant::Stable
}

/// The result of gathering: pools in search order and the pools whose
/// slices (anywhere in the cluster) the answer depended on.
pub(crate) struct Gathered {
    pub pools: Vec<Pool>,
    pub deps: BTreeSet<(String, String)>,
}

/// Collects the pools accessible from `node`.
///
/// `slices_for_node` are the slices with this node's name followed by the
/// slices without a node name, in catalog order; `all_of_pool` lists every
/// slice of a pool in catalog order.
///
/// # Errors
/// A node selector that does not parse (fatal for the pod upstream).
pub(crate) fn gather<'a>(
    f: &Features,
    node: &Node,
    slices_for_node: impl Iterator<Item = &'a Arc<SliceEntry>>,
    all_of_pool: impl Fn(&str, &str) -> Vec<&'a Arc<SliceEntry>>,
) -> Result<Gathered, GatherError> {
    let mut by_pool: BTreeMap<(String, String), Vec<&'a Arc<SliceEntry>>> = BTreeMap::new();
    for slice in slices_for_node {
        if !f.partitionable_devices
            && (slice.per_device_node_selection.is_some() || !slice.shared_counters.is_empty())
        {
            continue;
        }
        let node_name = slice.node_name.as_deref().filter(|n| !n.is_empty());
        let relevant = if counters_everywhere(f) && !slice.shared_counters.is_empty() {
            true
        } else if node_name.is_some() || slice.all_nodes || slice.node_selector.is_some() {
            node_matches(
                node,
                node_name,
                slice.all_nodes,
                slice.node_selector.as_ref().map(|s| &s.parsed),
            )
            .map_err(|source| GatherError::Slice {
                slice: slice.name.clone(),
                source,
            })?
        } else if slice.per_device() {
            let mut any = false;
            for device in &slice.devices {
                let hit = node_matches(
                    node,
                    device.node_name.as_deref(),
                    device.all_nodes,
                    device.node_selector.as_ref().map(|s| &s.parsed),
                )
                .map_err(|source| GatherError::Device {
                    device: device.name.clone(),
                    slice: slice.name.clone(),
                    source,
                })?;
                if hit {
                    any = true;
                    break;
                }
            }
            any
        } else {
            // Some unknown future node-selection mode: skip the slice.
            continue;
        };
        if relevant {
            add_slice(&mut by_pool, slice);
        }
    }

    let deps: BTreeSet<(String, String)> = by_pool.keys().cloned().collect();
    let mut plain = Vec::new();
    let mut with_binding = Vec::new();
    for ((driver, pool_name), slices) in by_pool {
        let count = slices[0].slice_count;
        let pool = if i64::try_from(slices.len()).is_ok_and(|n| n == count) {
            build_pool(f, &driver, &pool_name, slices, None)
        } else {
            let generation = slices[0].generation;
            let all = all_of_pool(&driver, &pool_name);
            if all.iter().any(|s| s.generation > generation) {
                // A newer generation exists elsewhere: this one is obsolete.
                continue;
            }
            let at_generation: Vec<&Arc<SliceEntry>> = all
                .into_iter()
                .filter(|s| s.generation == generation)
                .collect();
            if i64::try_from(at_generation.len()).is_ok_and(|n| n == count) {
                build_pool(f, &driver, &pool_name, slices, Some(&at_generation))
            } else {
                let mut pool = Pool::empty(&driver, &pool_name);
                pool.incomplete = true;
                pool
            }
        };
        if binding_pools_last(f) && has_binding_conditions(&pool) {
            with_binding.push(pool);
        } else {
            plain.push(pool);
        }
    }
    // The BTreeMap already yields (driver, pool) order; binding-condition
    // pools go last so that devices without them are preferred (not in the
    // stable allocator, see `binding_pools_last`).
    plain.append(&mut with_binding);
    Ok(Gathered { pools: plain, deps })
}

fn add_slice<'a>(
    by_pool: &mut BTreeMap<(String, String), Vec<&'a Arc<SliceEntry>>>,
    slice: &'a Arc<SliceEntry>,
) {
    let key = (slice.driver.clone(), slice.pool.clone());
    let entry = by_pool.entry(key).or_default();
    match entry.first().map(|s| s.generation) {
        None => entry.push(slice),
        Some(g) if slice.generation < g => {}
        Some(g) if slice.generation > g => {
            entry.clear();
            entry.push(slice);
        }
        Some(_) => entry.push(slice),
    }
}

fn has_binding_conditions(pool: &Pool) -> bool {
    pool.slices
        .iter()
        .any(|s| s.devices.iter().any(|d| d.binding_conditions_set))
}

fn build_pool(
    f: &Features,
    driver: &str,
    name: &str,
    mut slices: Vec<&Arc<SliceEntry>>,
    all_at_generation: Option<&[&Arc<SliceEntry>]>,
) -> Pool {
    slices.sort_by(|a, b| a.name.cmp(&b.name));
    let mut pool = Pool::empty(driver, name);
    let mut counter_slices: Vec<&Arc<SliceEntry>> = Vec::new();
    let mut device_slices: Vec<&Arc<SliceEntry>> = Vec::new();
    for slice in &slices {
        if f.partitionable_devices && !slice.shared_counters.is_empty() {
            counter_slices.push(slice);
        } else {
            device_slices.push(slice);
        }
    }
    let mut not_targeting: Vec<&Arc<SliceEntry>> = Vec::new();
    if let Some(all) = all_at_generation
        && slices.len() < all.len()
    {
        let names: BTreeSet<&str> = slices.iter().map(|s| s.name.as_str()).collect();
        for slice in all {
            if names.contains(slice.name.as_str()) {
                continue;
            }
            if f.partitionable_devices && !slice.shared_counters.is_empty() {
                counter_slices.push(slice);
            } else {
                not_targeting.push(slice);
            }
        }
    }

    let invalid = |mut pool: Pool, reason: String| {
        pool.invalid = Some(reason);
        pool
    };
    // Our addition: a quantity that does not parse makes the pool unusable.
    for slice in device_slices
        .iter()
        .chain(&counter_slices)
        .chain(&not_targeting)
    {
        if let Some(defect) = &slice.defect {
            return invalid(pool, format!("slice {}: {defect}", slice.name));
        }
    }
    let mut names = BTreeSet::new();
    for slice in &device_slices {
        for device in &slice.devices {
            if !names.insert(device.name.as_str()) {
                return invalid(pool, format!("duplicate device name {}", device.name));
            }
        }
    }

    if f.partitionable_devices {
        let mut sets: Vec<CounterSetEntry> = Vec::new();
        for slice in &counter_slices {
            for set in &slice.shared_counters {
                if sets.iter().any(|s| s.name == set.name) {
                    return invalid(pool, format!("duplicate counter set name {}", set.name));
                }
                sets.push(set.clone());
            }
        }
        for slice in device_slices.iter().chain(&not_targeting) {
            for device in &slice.devices {
                for consumption in &device.consumes {
                    let Some(set) = sets.iter().find(|s| s.name == consumption.counter_set) else {
                        return invalid(
                            pool,
                            format!("counter set {} not found", consumption.counter_set),
                        );
                    };
                    for (counter, _) in &consumption.counters {
                        if !set.counters.iter().any(|(n, _)| n == counter) {
                            return invalid(
                                pool,
                                format!("counter {counter} not found in counter set {}", set.name),
                            );
                        }
                    }
                }
            }
        }
        let mut offsets = Vec::with_capacity(sets.len());
        let mut n_counters = 0;
        for set in &sets {
            offsets.push(n_counters);
            n_counters += set.counters.len();
        }
        // Every reference was validated above, so the lookups succeed.
        pool.consumption = device_slices
            .iter()
            .flat_map(|s| s.devices.iter())
            .map(|device| {
                device
                    .consumes
                    .iter()
                    .flat_map(|c| {
                        let set_idx = sets
                            .iter()
                            .position(|s| s.name == c.counter_set)
                            .unwrap_or(0);
                        let set = &sets[set_idx];
                        let base = offsets[set_idx];
                        c.counters.iter().map(move |(counter, amount)| {
                            let idx = set
                                .counters
                                .iter()
                                .position(|(n, _)| n == counter)
                                .unwrap_or(0);
                            (base + idx, *amount)
                        })
                    })
                    .collect()
            })
            .collect();
        pool.consumed_sets = device_slices
            .iter()
            .flat_map(|s| s.devices.iter())
            .map(|device| {
                device
                    .consumes
                    .iter()
                    .map(|c| {
                        sets.iter()
                            .position(|s| s.name == c.counter_set)
                            .unwrap_or(0)
                    })
                    .collect()
            })
            .collect();
        pool.counter_sets = sets;
        pool.counter_offsets = offsets;
        pool.n_counters = n_counters;
        pool.not_targeting = not_targeting.into_iter().cloned().collect();
    }

    let mut offset = 0;
    for slice in &device_slices {
        pool.offsets.push(offset);
        offset += slice.devices.len();
    }
    pool.n_devices = offset;
    pool.slices = device_slices.into_iter().cloned().collect();
    if pool.consumption.is_empty() {
        pool.consumption = vec![Vec::new(); pool.n_devices];
        pool.consumed_sets = vec![Vec::new(); pool.n_devices];
    }
    pool
}
