//! The depth-first search (upstream `allocateOne` / `allocateDevice`,
//! incubating variant): one device slot at a time, claims then requests in
//! order, devices in pool/slice/device order, combinations (never
//! permutations) within one request, first solution wins.
//!
//! Upstream's in-flight bookkeeping is reproduced as of the 1.37 cycle: a
//! candidate rejected after its counters were charged (taint, constraint,
//! capacity) is rolled back completely, the same way a backtrack undoes an
//! accepted one (kubernetes#140431, also in 1.36); only the first share of a
//! multi-allocatable device pays its counters, and an in-flight capacity entry
//! that predates a share survives that share's rollback.

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::capacity::{self, CapacityError};
use super::compat_groups::GroupState;
use super::constraints::Constraint;
use super::device_taints::taint_prevents;
use super::inventory::DeviceEntry;
use super::model::{Checker, DevRef, MAX_RESULTS, Mode, RequestData, Slot};
use super::pool_state::PoolState;
use super::pools::Pool;
use super::quantity::{Amount, Value};
use super::requests::selectable;
use super::state::FixedMap;
use super::{ShareIdGenerator, claim_ref};

/// Why the search stopped without an answer.
#[derive(Debug)]
pub(crate) enum Stop {
    /// Upstream's internal "allocation max size exceeded" signal.
    MaxSize,
    /// A fatal error for the pod.
    Fatal(String),
    /// The work budget ran out (upstream: the Filter's `filterTimeout`).
    Timeout,
    /// The checkpoint's counting proved that no allocation exists.
    Infeasible,
}

/// A check run once, when the search reaches a number of steps: counting
/// that may prove the rest of the search futile (see `feasibility`). It
/// reads only what the search does not change (requests, candidates,
/// existing allocations), so the search's progress does not affect it.
pub(crate) type Checkpoint = fn(&mut Search<'_, '_>) -> bool;

/// Identifies a (sub)request: claim, request, and subrequest (0 for exact).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RKey {
    pub claim: usize,
    pub request: usize,
    pub sub: usize,
}

/// One chosen device.
#[derive(Debug, Clone)]
pub(crate) struct Chosen {
    pub key: RKey,
    pub dev: DevRef,
    pub share_id: Option<String>,
    /// Only for multi-allocatable devices with capacities.
    pub consumed: Option<Vec<Value>>,
    pub admin: bool,
}

/// What one successful [`Search::allocate_device`] changed (upstream
/// `deviceRollbackState`).
struct Undo {
    key: RKey,
    dev: DevRef,
    counters_reserved: bool,
    constraints_added: usize,
    marked: bool,
    capacity: Option<CapacityUndo>,
    /// Compatibility-group states replaced, by counter set, in order.
    groups: Vec<(usize, GroupState)>,
    result_added: bool,
    prev_len: usize,
}

/// The in-flight capacity one share added.
struct CapacityUndo {
    amounts: Vec<Amount>,
    /// An entry for the device existed before this share.
    existed: bool,
}

/// The search's state for one `allocate` call.
pub(crate) struct Search<'a, 'c> {
    pub chk: Checker<'a>,
    pub claims: &'c [&'c ResourceClaim],
    pub states: &'a [PoolState],
    pub slots: Vec<Vec<Slot<'c>>>,
    /// The chosen subrequest per `firstAvailable` slot.
    pub selected: Vec<Vec<usize>>,
    pub constraints: Vec<Vec<Constraint>>,
    /// Devices held in this attempt, with the claims holding them.
    allocating: FixedMap<u64, Vec<usize>>,
    /// In-flight consumed capacity per shared device, aligned with its capacities.
    allocating_capacity: FixedMap<u64, Vec<Amount>>,
    /// In-flight counter consumption per pool, by flat counter index.
    consumed_counters: Vec<Option<Vec<Amount>>>,
    /// Compatibility groups per pool and counter set, existing allocations
    /// included (seeded when the pool is first touched).
    running_groups: Vec<Option<Vec<GroupState>>>,
    pub results: Vec<Vec<Chosen>>,
    pub share_ids: &'a mut ShareIdGenerator,
    pub invocations: u64,
    /// Most `allocate_one` invocations allowed (see `FeatureGates::search_budget`).
    pub budget: Option<u64>,
    /// After how many invocations to run which [`Checkpoint`].
    pub checkpoint: Option<(u64, Checkpoint)>,
}

fn pool_of(pools: &[Pool], dev: DevRef) -> (&Pool, &DeviceEntry) {
    let pool = &pools[dev.pool];
    (pool, &pool.slices[dev.slice].devices[dev.device])
}

impl<'a, 'c> Search<'a, 'c> {
    pub fn new(
        chk: Checker<'a>,
        claims: &'c [&'c ResourceClaim],
        slots: Vec<Vec<Slot<'c>>>,
        constraints: Vec<Vec<Constraint>>,
        share_ids: &'a mut ShareIdGenerator,
    ) -> Self {
        let n_pools = chk.pools.len();
        Search {
            selected: slots.iter().map(|s| vec![0; s.len()]).collect(),
            results: vec![Vec::new(); claims.len()],
            states: chk.states,
            chk,
            claims,
            slots,
            constraints,
            allocating: FixedMap::default(),
            allocating_capacity: FixedMap::default(),
            consumed_counters: vec![None; n_pools],
            running_groups: vec![None; n_pools],
            share_ids,
            invocations: 0,
            budget: None,
            checkpoint: None,
        }
    }

    fn data<'s>(slots: &'s [Vec<Slot<'c>>], key: RKey) -> &'s RequestData<'c> {
        match &slots[key.claim][key.request] {
            Slot::Exact(d) => d,
            Slot::FirstAvailable(subs) => &subs[key.sub],
        }
    }

    /// The (sub)request that a result came from.
    pub fn request_of(&self, key: RKey) -> &RequestData<'c> {
        Self::data(&self.slots, key)
    }

    fn in_use(&self, dev: DevRef) -> bool {
        self.states[dev.pool].exclusive[dev.flat]
            || self
                .allocating
                .get(&dev.key())
                .is_some_and(|c| !c.is_empty())
    }

    fn held_by_claim(&self, dev: DevRef, claim: usize) -> bool {
        self.allocating
            .get(&dev.key())
            .is_some_and(|c| c.contains(&claim))
    }

    /// Upstream `deviceCapacityInUse`: an existing share (with or without
    /// recorded capacity, kubernetes#140437) or one made in this call.
    fn capacity_in_use(&self, dev: DevRef) -> bool {
        self.states[dev.pool].shared[dev.flat] || self.allocating_capacity.contains_key(&dev.key())
    }

    /// Upstream `CmpRequestOverCapacity` against existing and in-flight
    /// consumption: `Ok(true)` when the request fits. A capacity the device
    /// lacks is a soft mismatch, like too little.
    fn capacity_fits(&self, key: RKey, dev: DevRef) -> Result<bool, CapacityError> {
        let data = Self::data(&self.slots, key);
        let (_, device) = pool_of(self.chk.pools, dev);
        capacity::fits(
            data.capacity.as_deref(),
            device,
            self.states[dev.pool].consumed[dev.flat].as_deref(),
            self.allocating_capacity.get(&dev.key()).map(Vec::as_slice),
            self.chk.f.fractional_capacity_range,
        )
        .map(|fit| fit == Some(true))
    }

    /// `driver/pool/device`, as upstream prints a device ID.
    fn device_id(&self, dev: DevRef) -> String {
        let (pool, device) = pool_of(self.chk.pools, dev);
        format!("{}/{}/{}", pool.driver, pool.name, device.name)
    }

    /// Upstream `allocateOne`.
    pub fn allocate_one(
        &mut self,
        r: RKey,
        device_index: i64,
        inside_sub: bool,
        start: (usize, usize, usize),
    ) -> Result<bool, Stop> {
        self.invocations += 1;
        if self.budget.is_some_and(|b| self.invocations > b) {
            return Err(Stop::Timeout);
        }
        if let Some((at, check)) = self.checkpoint
            && at == self.invocations
            && check(self)
        {
            return Err(Stop::Infeasible);
        }
        if r.claim >= self.claims.len() {
            return Ok(true);
        }
        if r.request >= self.slots[r.claim].len() {
            let next = RKey {
                claim: r.claim + 1,
                request: 0,
                sub: 0,
            };
            return match self.allocate_one(next, 0, false, (0, 0, 0)) {
                // A later claim that cannot stay within the limit says nothing
                // about this one; plain failure lets earlier choices change.
                Err(Stop::MaxSize) => Ok(false),
                other => other,
            };
        }

        if !inside_sub && let Slot::FirstAvailable(subs) = &self.slots[r.claim][r.request] {
            let n = subs.len();
            let mut all_exceeded = true;
            for sub in 0..n {
                let key = RKey { sub, ..r };
                match self.allocate_one(key, device_index, true, (0, 0, 0)) {
                    Err(Stop::MaxSize) => {}
                    Err(e) => return Err(e),
                    Ok(true) => {
                        self.selected[r.claim][r.request] = sub;
                        return Ok(true);
                    }
                    Ok(false) => all_exceeded = false,
                }
            }
            return if all_exceeded {
                Err(Stop::MaxSize)
            } else {
                Ok(false)
            };
        }

        let data = Self::data(&self.slots, r);
        let all = data.mode == Mode::All;
        if all && data.all_devices.is_empty() {
            // An All request needs at least one device.
            return Ok(false);
        }
        let num_devices = data.num_devices;
        if device_index >= num_devices {
            let next = RKey {
                claim: r.claim,
                request: r.request + 1,
                sub: 0,
            };
            return self.allocate_one(next, 0, false, (0, 0, 0));
        }
        let held = i64::try_from(self.results[r.claim].len()).unwrap_or(i64::MAX);
        if held
            .saturating_add(num_devices)
            .saturating_sub(device_index)
            > MAX_RESULTS
        {
            return Err(Stop::MaxSize);
        }
        let admin = data.admin;

        if all {
            let index = usize::try_from(device_index).unwrap_or(usize::MAX);
            let dev = data.all_devices[index];
            let Some(undo) = self.allocate_device(r, dev, true)? else {
                // The set is fixed: no alternative device exists.
                return Ok(false);
            };
            let result = self.allocate_one(r, device_index + 1, inside_sub, (0, 0, 0));
            if !matches!(result, Ok(true)) {
                self.rollback(undo);
            }
            return result;
        }

        let pools = self.chk.pools;
        for (pool_idx, pool) in pools.iter().enumerate().skip(start.0) {
            if !pool.usable() {
                continue;
            }
            let slice_start = if pool_idx == start.0 { start.1 } else { 0 };
            for (slice_idx, slice) in pool.slices.iter().enumerate().skip(slice_start) {
                let device_start = if pool_idx == start.0 && slice_idx == start.1 {
                    start.2
                } else {
                    0
                };
                for device_idx in device_start..slice.devices.len() {
                    let dev = DevRef {
                        pool: pool_idx,
                        slice: slice_idx,
                        device: device_idx,
                        flat: pool.offsets[slice_idx] + device_idx,
                    };
                    if admin && self.held_by_claim(dev, r.claim) {
                        continue;
                    }
                    if !admin && self.in_use(dev) {
                        continue;
                    }
                    let claim = self.claims[r.claim];
                    let data = Self::data(&self.slots, r);
                    if !selectable(&mut self.chk, claim, data, dev)
                        .map_err(|e| Stop::Fatal(e.to_string()))?
                    {
                        continue;
                    }
                    if self.chk.f.consumable_capacity {
                        let fits = self.capacity_fits(r, dev).map_err(|e| {
                            Stop::Fatal(format!(
                                "claim {}, request {}: checking capacity for device {}: {e}",
                                claim_ref(claim),
                                Self::data(&self.slots, r).name,
                                self.device_id(dev)
                            ))
                        })?;
                        if !fits {
                            continue;
                        }
                    }
                    let Some(undo) = self.allocate_device(r, dev, false)? else {
                        continue;
                    };
                    let result = self.allocate_one(
                        r,
                        device_index + 1,
                        inside_sub,
                        (pool_idx, slice_idx, device_idx + 1),
                    );
                    if matches!(result, Ok(true)) {
                        return result;
                    }
                    self.rollback(undo);
                    result?;
                }
            }
        }
        Ok(false)
    }

    /// Upstream `allocateDevice`: `None` when the device cannot be taken.
    /// Every rejection after the counters were charged rolls back what this
    /// call changed (kubernetes#140431), exactly as a later backtrack would.
    fn allocate_device(&mut self, r: RKey, dev: DevRef, must: bool) -> Result<Option<Undo>, Stop> {
        let f = self.chk.f;
        let pools = self.chk.pools;
        let (pool, device) = pool_of(pools, dev);
        let admin = Self::data(&self.slots, r).admin;
        let allow_multi = f.consumable_capacity && device.allow_multi;
        if !allow_multi && admin && self.held_by_claim(dev, r.claim) {
            return Ok(None);
        }
        if !admin && self.in_use(dev) {
            return Ok(None);
        }
        if !f.partitionable_devices && !device.consumes.is_empty() {
            return Ok(None);
        }
        // The first share of a multi-allocatable device pays its counters.
        let skip_counters = allow_multi && self.capacity_in_use(dev);
        if !skip_counters && !device.consumes.is_empty() && self.skip_for_compatibility_groups(dev)
        {
            return Ok(None);
        }
        let mut undo = Undo {
            key: r,
            dev,
            counters_reserved: false,
            constraints_added: 0,
            marked: false,
            capacity: None,
            groups: Vec::new(),
            result_added: false,
            prev_len: self.results[r.claim].len(),
        };
        if !skip_counters && !device.consumes.is_empty() {
            if !self.charge_counters(dev) {
                return Ok(None);
            }
            undo.counters_reserved = true;
            if self.chk.f.compatibility_groups {
                match self.consume_groups(dev) {
                    Some(saved) => undo.groups = saved,
                    None => {
                        self.rollback(undo);
                        return Ok(None);
                    }
                }
            }
        }
        let data = Self::data(&self.slots, r);
        if f.device_taints && taint_prevents(&device.taints, data.tolerations) {
            self.rollback(undo);
            return Ok(None);
        }
        let base = data.base_name();
        let sub = data.sub_name();
        let attributes = device.raw.attributes.as_ref();
        for i in 0..self.constraints[r.claim].len() {
            if !self.constraints[r.claim][i].add(base, sub, attributes, &pool.driver) {
                self.rollback(undo);
                if must {
                    let data = Self::data(&self.slots, r);
                    return Err(Stop::Fatal(format!(
                        "claim {}, request {}: cannot add device {}/{}/{} because a claim constraint would not be satisfied",
                        claim_ref(self.claims[r.claim]),
                        data.name,
                        pool.driver,
                        pool.name,
                        device.name
                    )));
                }
                return Ok(None);
            }
            undo.constraints_added += 1;
        }
        if !allow_multi {
            let holders = self.allocating.entry(dev.key()).or_default();
            if !holders.contains(&r.claim) {
                holders.push(r.claim);
            }
            undo.marked = true;
        }
        let mut consumed = None;
        let mut share_id = None;
        if f.consumable_capacity {
            match self.capacity_fits(r, dev) {
                Ok(true) => {}
                Ok(false) => {
                    self.rollback(undo);
                    return Ok(None);
                }
                Err(e) => {
                    self.rollback(undo);
                    return Err(self.capacity_error("rechecking capacity", r, dev, &e));
                }
            }
            if allow_multi {
                let data = Self::data(&self.slots, r);
                let values = match capacity::consumed_by(
                    data.capacity.as_deref(),
                    device,
                    f.fractional_capacity_range,
                ) {
                    Ok(values) => values,
                    Err(e) => {
                        self.rollback(undo);
                        return Err(self.capacity_error("computing consumed capacity", r, dev, &e));
                    }
                };
                let amounts: Vec<Amount> = values.iter().map(|v| v.amount).collect();
                // The entry doubles as the "already shared" marker that lets
                // later shares skip the counters; a rollback must not drop it
                // while an earlier share still relies on it.
                let existed = match self.allocating_capacity.get_mut(&dev.key()) {
                    Some(existing) => {
                        for (slot, amount) in existing.iter_mut().zip(&amounts) {
                            *slot = slot.plus(*amount);
                        }
                        true
                    }
                    None => {
                        self.allocating_capacity.insert(dev.key(), amounts.clone());
                        false
                    }
                };
                undo.capacity = Some(CapacityUndo { amounts, existed });
                share_id = Some(self.share_ids.next_id());
                if !values.is_empty() {
                    consumed = Some(values);
                }
            }
        }
        self.results[r.claim].push(Chosen {
            key: r,
            dev,
            share_id,
            consumed,
            admin,
        });
        undo.result_added = true;
        Ok(Some(undo))
    }

    fn capacity_error(&self, what: &str, r: RKey, dev: DevRef, e: &CapacityError) -> Stop {
        Stop::Fatal(format!(
            "claim {}, request {}: {what} for device {}: {e}",
            claim_ref(self.claims[r.claim]),
            Self::data(&self.slots, r).name,
            self.device_id(dev)
        ))
    }

    /// Upstream `rollbackDevice`: reverses what [`Search::allocate_device`]
    /// recorded in `undo`, in the opposite order.
    fn rollback(&mut self, undo: Undo) {
        if undo.result_added {
            self.results[undo.key.claim].truncate(undo.prev_len);
        }
        if let Some(cap) = undo.capacity {
            let key = undo.dev.key();
            if let Some(entry) = self.allocating_capacity.get_mut(&key) {
                for (slot, amount) in entry.iter_mut().zip(&cap.amounts) {
                    *slot = slot.minus(*amount);
                }
                if entry.iter().all(|a| a.is_zero()) {
                    self.allocating_capacity.remove(&key);
                }
            }
            if cap.existed {
                self.allocating_capacity
                    .entry(key)
                    .or_insert_with(|| vec![Amount::ZERO; cap.amounts.len()]);
            }
        }
        if undo.marked
            && let Some(holders) = self.allocating.get_mut(&undo.dev.key())
        {
            holders.retain(|c| *c != undo.key.claim);
        }
        let data = Self::data(&self.slots, undo.key);
        let (base, sub) = (data.base_name(), data.sub_name());
        for c in self.constraints[undo.key.claim][..undo.constraints_added]
            .iter_mut()
            .rev()
        {
            c.remove(base, sub);
        }
        if !undo.groups.is_empty()
            && let Some(running) = self.running_groups[undo.dev.pool].as_mut()
        {
            for (set, state) in undo.groups.into_iter().rev() {
                running[set] = state;
            }
        }
        if undo.counters_reserved {
            self.release_counters(undo.dev);
        }
    }

    /// The experimental allocator's `checkAndConsumeCompatibilityGroups`:
    /// the device joins each counter set it draws from if its groups are
    /// compatible with every device already there. Returns the replaced
    /// states, or `None` (state unchanged) when some set refuses it.
    fn consume_groups(&mut self, dev: DevRef) -> Option<Vec<(usize, GroupState)>> {
        let pools = self.chk.pools;
        let (pool, device) = pool_of(pools, dev);
        let baseline = &self.states[dev.pool].group_baseline;
        let running = self.running_groups[dev.pool].get_or_insert_with(|| baseline.clone());
        let mut saved: Vec<(usize, GroupState)> = Vec::with_capacity(device.consumes.len());
        for c in &device.consumes {
            let Some(set) = pool
                .counter_sets
                .iter()
                .position(|s| s.name == c.counter_set)
            else {
                continue;
            };
            if !running[set].admits(&c.groups) {
                for (set, state) in saved.into_iter().rev() {
                    running[set] = state;
                }
                return None;
            }
            saved.push((set, running[set].clone()));
            running[set].add(&c.groups);
        }
        Some(saved)
    }

    /// Upstream `skipForDisabledCompatibilityGroups`: without
    /// DRADeviceCompatibilityGroups the allocator cannot validate groups, so
    /// it skips a device that declares any, or that draws from a counter set
    /// on which an allocated device declared some.
    pub(crate) fn skip_for_compatibility_groups(&self, dev: DevRef) -> bool {
        if self.chk.f.compatibility_groups {
            return false;
        }
        let (pool, device) = pool_of(self.chk.pools, dev);
        let grouped = &self.states[dev.pool].grouped_sets;
        device.consumes.iter().any(|c| {
            !c.groups.is_empty()
                || pool
                    .counter_sets
                    .iter()
                    .position(|s| s.name == c.counter_set)
                    .is_some_and(|i| grouped[i])
        })
    }

    /// Upstream `checkAvailableCounters`: adds the device's consumption to the
    /// pool's in-flight total and checks every counter of the pool.
    fn charge_counters(&mut self, dev: DevRef) -> bool {
        let pools = self.chk.pools;
        let pool = &pools[dev.pool];
        let available = &self.states[dev.pool].available;
        let consumed = self.consumed_counters[dev.pool]
            .get_or_insert_with(|| vec![Amount::ZERO; pool.n_counters]);
        for (counter, amount) in &pool.consumption[dev.flat] {
            let slot = &mut consumed[*counter];
            *slot = slot.plus(*amount);
        }
        // Every counter of the pool is checked, as upstream does: a counter
        // already over-consumed by existing allocations blocks the whole pool.
        let fits = available.iter().zip(consumed.iter()).all(|(a, u)| a >= u);
        if !fits {
            self.release_counters(dev);
        }
        fits
    }

    fn release_counters(&mut self, dev: DevRef) {
        let pools = self.chk.pools;
        let pool = &pools[dev.pool];
        if let Some(consumed) = self.consumed_counters[dev.pool].as_mut() {
            for (counter, amount) in &pool.consumption[dev.flat] {
                let slot = &mut consumed[*counter];
                *slot = slot.minus(*amount);
            }
        }
    }
}
