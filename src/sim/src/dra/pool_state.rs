//! What the cluster's existing allocations mean for one pool: which devices
//! are exclusively held, how much of each shared device's capacity is
//! consumed, and how much of each shared counter is left (upstream's
//! per-pool `availableCounters`, which may go negative).
//!
//! Computed once per (node view, allocated-state stamp) so that repeated
//! `allocate` calls against an unchanged state only do index lookups.

use super::compat_groups::GroupState;
use super::pools::Pool;
use super::quantity::Amount;
use super::state::AllocatedState;

/// Allocation facts for one pool, indexed by the pool's flat device numbers.
#[derive(Debug, Default)]
pub(crate) struct PoolState {
    /// In upstream's `AllocatedDevices`.
    pub exclusive: Vec<bool>,
    /// Upstream's `AggregatedCapacity` entry, aligned with the device's
    /// capacities (names the device lacks are dropped, missing ones are 0).
    pub consumed: Vec<Option<Vec<Amount>>>,
    /// Upstream `deviceCapacityInUse` for existing allocations: a share of the
    /// device exists, with or without recorded capacity. Later shares of such
    /// a device do not pay its counters again.
    pub shared: Vec<bool>,
    /// Counters left before this call, by the pool's flat counter index.
    pub available: Vec<Amount>,
    /// Per counter set of the pool: an allocated device declares
    /// compatibility groups on it (upstream `groupedCounterSets`).
    pub grouped_sets: Vec<bool>,
    /// Per counter set: the compatibility groups of the allocated devices
    /// drawing from it, folded (the feature-on baseline).
    pub group_baseline: Vec<GroupState>,
}

impl PoolState {
    pub fn compute(pool: &Pool, state: &AllocatedState) -> PoolState {
        let mut out = PoolState {
            exclusive: vec![false; pool.n_devices],
            consumed: vec![None; pool.n_devices],
            shared: vec![false; pool.n_devices],
            available: pool
                .counter_sets
                .iter()
                .flat_map(|set| set.counters.iter().map(|(_, v)| *v))
                .collect(),
            grouped_sets: vec![false; pool.counter_sets.len()],
            group_baseline: vec![GroupState::default(); pool.counter_sets.len()],
        };
        let Some(allocations) = state.pool(&pool.driver, &pool.name) else {
            return out;
        };
        for (slice_idx, slice) in pool.slices.iter().enumerate() {
            let offset = pool.offsets[slice_idx];
            for (i, device) in slice.devices.iter().enumerate() {
                let flat = offset + i;
                out.exclusive[flat] = allocations.exclusive.contains(&device.name);
                out.shared[flat] = allocations.shared.contains_key(&device.name)
                    || allocations.capacity.contains_key(&device.name);
                if let Some(consumed) = allocations.capacity.get(&device.name) {
                    out.consumed[flat] = Some(
                        device
                            .capacities
                            .iter()
                            .map(|c| consumed.get(&c.name).copied().unwrap_or_default())
                            .collect(),
                    );
                }
            }
        }
        if !pool.counter_sets.is_empty() {
            for slice in pool.slices.iter().chain(&pool.not_targeting) {
                for device in &slice.devices {
                    if !allocations.is_allocated(&device.name) {
                        continue;
                    }
                    for consumption in &device.consumes {
                        let Some(set_idx) = pool
                            .counter_sets
                            .iter()
                            .position(|s| s.name == consumption.counter_set)
                        else {
                            continue;
                        };
                        if !consumption.groups.is_empty() {
                            out.grouped_sets[set_idx] = true;
                        }
                        out.group_baseline[set_idx].add(&consumption.groups);
                        let set = &pool.counter_sets[set_idx];
                        for (counter, amount) in &consumption.counters {
                            if let Some(idx) = set.counters.iter().position(|(n, _)| n == counter) {
                                let slot = &mut out.available[pool.counter_index(set_idx, idx)];
                                *slot = slot.minus(*amount);
                            }
                        }
                    }
                }
            }
        }
        out
    }
}
