//! What is already allocated in the cluster (upstream's `AllocatedState`).
//!
//! Built from every allocated claim, including those this simulation placed.
//! Per result entry: admin-access results are skipped (they never make a
//! device unavailable); with consumable capacity on, results that carry a
//! `shareID` are shares of a multi-allocatable device and add their
//! `consumedCapacity` to the device's aggregate; everything else marks the
//! device as exclusively allocated.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};

use super::quantity::{Amount, Value};
use crate::gates::FeatureGates;

/// A hasher with fixed keys: lookups only, but nothing random anywhere.
pub(crate) type FixedState = BuildHasherDefault<std::collections::hash_map::DefaultHasher>;
/// A `HashMap` with [`FixedState`].
pub(crate) type FixedMap<K, V> = HashMap<K, V, FixedState>;

/// Identifies one device: the driver, its pool and the device name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId {
    /// The DRA driver name.
    pub driver: String,
    /// The resource pool name.
    pub pool: String,
    /// The device name, unique within the pool.
    pub device: String,
}

impl DeviceId {
    /// Builds an ID from its three parts.
    #[must_use]
    pub fn new(
        driver: impl Into<String>,
        pool: impl Into<String>,
        device: impl Into<String>,
    ) -> Self {
        DeviceId {
            driver: driver.into(),
            pool: pool.into(),
            device: device.into(),
        }
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// Allocations of one pool, by device name.
#[derive(Debug, Clone, Default)]
pub(crate) struct PoolAllocations {
    /// Devices held exclusively (upstream `AllocatedDevices`).
    pub exclusive: BTreeSet<String>,
    /// Share IDs per multi-allocatable device (`AllocatedSharedDeviceIDs`).
    pub shared: BTreeMap<String, BTreeSet<String>>,
    /// Summed `consumedCapacity` per device and capacity name
    /// (`AggregatedCapacity`); an entry exists once any share recorded one.
    pub capacity: BTreeMap<String, BTreeMap<String, Amount>>,
}

/// Stamps identify a state's contents for the catalog's caches: a fresh
/// stamp on every change, kept by clones (same contents, same stamp).
static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);

fn fresh_stamp() -> u64 {
    NEXT_STAMP.fetch_add(1, Ordering::Relaxed)
}

/// Everything already allocated in the cluster (spec §3).
#[derive(Debug, Clone)]
pub struct AllocatedState {
    /// driver → pool → allocations.
    pools: FixedMap<String, FixedMap<String, PoolAllocations>>,
    stamp: u64,
}

impl Default for AllocatedState {
    fn default() -> Self {
        AllocatedState {
            pools: FixedMap::default(),
            stamp: fresh_stamp(),
        }
    }
}

impl AllocatedState {
    /// Builds the state from all claims; unallocated claims contribute nothing.
    pub fn from_claims<'a>(
        claims: impl IntoIterator<Item = &'a ResourceClaim>,
        gates: &FeatureGates,
    ) -> Self {
        let mut state = AllocatedState::default();
        for claim in claims {
            if let Some(allocation) = claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
                state.add_allocation(allocation, gates);
            }
        }
        state
    }

    /// Records one claim's allocation result.
    pub fn add_allocation(&mut self, allocation: &AllocationResult, gates: &FeatureGates) {
        let results = allocation
            .devices
            .as_ref()
            .and_then(|d| d.results.as_ref())
            .map(Vec::as_slice)
            .unwrap_or_default();
        for result in results {
            if result.admin_access == Some(true) {
                continue;
            }
            let pool = self
                .pools
                .entry(result.driver.clone())
                .or_default()
                .entry(result.pool.clone())
                .or_default();
            match (&result.share_id, gates.consumable_capacity) {
                (Some(share), true) => {
                    pool.shared
                        .entry(result.device.clone())
                        .or_default()
                        .insert(share.clone());
                    if let Some(consumed) = &result.consumed_capacity {
                        let entry = pool.capacity.entry(result.device.clone()).or_default();
                        for (name, quantity) in consumed {
                            // An unparsable amount cannot come from an API server;
                            // count it as zero rather than refuse the whole state.
                            let amount = Value::from_quantity(quantity)
                                .map(|v| v.amount)
                                .unwrap_or_default();
                            let slot = entry.entry(name.clone()).or_default();
                            *slot = slot.plus(amount);
                        }
                    }
                }
                _ => {
                    pool.exclusive.insert(result.device.clone());
                }
            }
        }
        self.stamp = fresh_stamp();
    }

    /// Forgets one claim's allocation result, the inverse of
    /// [`AllocatedState::add_allocation`]: the simulation rolls back placements
    /// that a gang could not complete.
    pub fn remove_allocation(&mut self, allocation: &AllocationResult, gates: &FeatureGates) {
        let results = allocation
            .devices
            .as_ref()
            .and_then(|d| d.results.as_ref())
            .map(Vec::as_slice)
            .unwrap_or_default();
        for result in results {
            if result.admin_access == Some(true) {
                continue;
            }
            let Some(pool) = self
                .pools
                .get_mut(&result.driver)
                .and_then(|p| p.get_mut(&result.pool))
            else {
                continue;
            };
            match (&result.share_id, gates.consumable_capacity) {
                (Some(share), true) => {
                    if let Some(shares) = pool.shared.get_mut(&result.device) {
                        shares.remove(share);
                        if shares.is_empty() {
                            pool.shared.remove(&result.device);
                        }
                    }
                    if let (Some(consumed), Some(entry)) = (
                        &result.consumed_capacity,
                        pool.capacity.get_mut(&result.device),
                    ) {
                        for (name, quantity) in consumed {
                            let amount = Value::from_quantity(quantity)
                                .map(|v| v.amount)
                                .unwrap_or_default();
                            if let Some(slot) = entry.get_mut(name) {
                                *slot = slot.minus(amount);
                            }
                        }
                        // The entry itself marks the device as allocated; drop it
                        // with the last share.
                        if !pool.shared.contains_key(&result.device) {
                            pool.capacity.remove(&result.device);
                        }
                    }
                }
                _ => {
                    pool.exclusive.remove(&result.device);
                }
            }
        }
        self.stamp = fresh_stamp();
    }

    /// Marks one device as exclusively allocated (as a result without a share ID would).
    pub fn mark_allocated(&mut self, id: &DeviceId) {
        self.pools
            .entry(id.driver.clone())
            .or_default()
            .entry(id.pool.clone())
            .or_default()
            .exclusive
            .insert(id.device.clone());
        self.stamp = fresh_stamp();
    }

    /// Upstream `IsDeviceAllocated`: held exclusively, or by any share, or
    /// with recorded consumed capacity.
    #[must_use]
    pub fn is_allocated(&self, id: &DeviceId) -> bool {
        self.pool(&id.driver, &id.pool)
            .is_some_and(|p| p.is_allocated(&id.device))
    }

    /// Whether the device is held exclusively (upstream `AllocatedDevices`).
    #[must_use]
    pub fn is_exclusively_allocated(&self, id: &DeviceId) -> bool {
        self.pool(&id.driver, &id.pool)
            .is_some_and(|p| p.exclusive.contains(&id.device))
    }

    /// The summed consumed capacity of a multi-allocatable device, by
    /// capacity name, as canonical quantity strings; `None` when no share
    /// recorded any.
    #[must_use]
    pub fn consumed_capacity(&self, id: &DeviceId) -> Option<BTreeMap<String, String>> {
        let pool = self.pool(&id.driver, &id.pool)?;
        let capacity = pool.capacity.get(&id.device)?;
        Some(
            capacity
                .iter()
                .map(|(name, amount)| {
                    let value = Value {
                        amount: *amount,
                        format: super::quantity::Format::DecimalSi,
                    };
                    (name.clone(), value.canonical())
                })
                .collect(),
        )
    }

    pub(crate) fn pool(&self, driver: &str, pool: &str) -> Option<&PoolAllocations> {
        self.pools.get(driver)?.get(pool)
    }

    pub(crate) fn stamp(&self) -> u64 {
        self.stamp
    }
}

impl PoolAllocations {
    pub(crate) fn is_allocated(&self, device: &str) -> bool {
        self.exclusive.contains(device)
            || self.shared.contains_key(device)
            || self.capacity.contains_key(device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{
        DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaimStatus,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn result(
        device: &str,
        admin: bool,
        share: Option<&str>,
        consumed: &[(&str, &str)],
    ) -> DeviceRequestAllocationResult {
        DeviceRequestAllocationResult {
            request: "r".into(),
            driver: "d".into(),
            pool: "p".into(),
            device: device.into(),
            admin_access: admin.then_some(true),
            share_id: share.map(Into::into),
            consumed_capacity: (!consumed.is_empty()).then(|| {
                consumed
                    .iter()
                    .map(|(k, v)| ((*k).into(), Quantity((*v).into())))
                    .collect()
            }),
            ..Default::default()
        }
    }

    fn allocation(results: Vec<DeviceRequestAllocationResult>) -> AllocationResult {
        AllocationResult {
            devices: Some(DeviceAllocationResult {
                results: Some(results),
                config: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn admin_results_never_count() {
        let mut state = AllocatedState::default();
        state.add_allocation(
            &allocation(vec![result("a", true, None, &[])]),
            &FeatureGates::default(),
        );
        assert!(!state.is_allocated(&DeviceId::new("d", "p", "a")));
    }

    #[test]
    fn shares_and_capacity_with_the_gate_on() {
        let gates = FeatureGates::default();
        let mut state = AllocatedState::default();
        state.add_allocation(
            &allocation(vec![
                result("a", false, Some("s1"), &[("mem", "1Gi")]),
                result("a", false, Some("s2"), &[("mem", "512Mi")]),
                result("b", false, None, &[]),
            ]),
            &gates,
        );
        let a = DeviceId::new("d", "p", "a");
        assert!(state.is_allocated(&a));
        assert!(!state.is_exclusively_allocated(&a));
        assert_eq!(state.consumed_capacity(&a).unwrap()["mem"], "1610612736");
        assert!(state.is_exclusively_allocated(&DeviceId::new("d", "p", "b")));
    }

    #[test]
    fn shares_are_exclusive_with_the_gate_off() {
        let gates = FeatureGates {
            consumable_capacity: false,
            ..FeatureGates::default()
        };
        let mut state = AllocatedState::default();
        state.add_allocation(
            &allocation(vec![result("a", false, Some("s1"), &[("mem", "1")])]),
            &gates,
        );
        let a = DeviceId::new("d", "p", "a");
        assert!(state.is_exclusively_allocated(&a));
        assert!(state.consumed_capacity(&a).is_none());
    }

    #[test]
    fn stamps_change_on_mutation_and_survive_clones() {
        let mut state = AllocatedState::default();
        let before = state.stamp();
        assert_eq!(state.clone().stamp(), before);
        state.mark_allocated(&DeviceId::new("d", "p", "x"));
        assert_ne!(state.stamp(), before);
    }

    #[test]
    fn from_claims_reads_status_allocation() {
        let claim = ResourceClaim {
            status: Some(ResourceClaimStatus {
                allocation: Some(allocation(vec![result("a", false, None, &[])])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let state = AllocatedState::from_claims(
            [&claim, &ResourceClaim::default()],
            &FeatureGates::default(),
        );
        assert!(state.is_allocated(&DeviceId::new("d", "p", "a")));
        assert_eq!(DeviceId::new("d", "p", "a").to_string(), "d/p/a");
    }

    #[test]
    fn remove_allocation_undoes_add_allocation() {
        let gates = FeatureGates::default();
        let mut state = AllocatedState::default();
        let shared = allocation(vec![
            result("a", false, Some("s1"), &[("mem", "1Gi")]),
            result("b", false, None, &[]),
        ]);
        let other = allocation(vec![result("a", false, Some("s2"), &[("mem", "1Gi")])]);
        state.add_allocation(&shared, &gates);
        state.add_allocation(&other, &gates);
        let stamp = state.stamp();
        state.remove_allocation(&shared, &gates);
        assert_ne!(state.stamp(), stamp);
        let a = DeviceId::new("d", "p", "a");
        assert!(state.is_allocated(&a), "the second share still holds it");
        assert_eq!(state.consumed_capacity(&a).unwrap()["mem"], "1073741824");
        assert!(!state.is_allocated(&DeviceId::new("d", "p", "b")));
        state.remove_allocation(&other, &gates);
        assert!(!state.is_allocated(&a));
    }
}
