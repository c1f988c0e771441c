//! How much of a node is in use: CPU and memory by the requests of its pods (over
//! allocatable), and for each DRA pool of the node, the share of its devices that are
//! allocated, with partitionable devices counted by the shared counters their allocated
//! partitions consume. The node's utilisation is the highest of these.
//!
//! Pools follow cluster-autoscaler's `simulator/dynamicresources/utils/utilization.go`: only the
//! node's own slices (`spec.nodeName`) of the newest pool generation, and only when every slice
//! of that generation is there; devices allocated with admin access reserve nothing; atomic
//! devices count as allocated or not; a partitionable device (one that consumes counters)
//! counts by the most used counter of its counter set, averaged over the pool's counter sets;
//! a pool holding both kinds weighs them by how many of each it has. cluster-autoscaler uses
//! the pools alone on a node that has any; the highest of pools, CPU and memory is stricter (a
//! node whose GPUs are idle but whose CPUs are busy is not underused).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{CounterSet, Device, ResourceClaim, ResourceSlice};

/// A node's utilisation and the resource that sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Utilization {
    /// The highest share in use, 0 to 1 (more when requests exceed allocatable).
    pub value: f64,
    /// `cpu`, `memory` or `<driver>/<pool>`.
    pub resource: String,
}

impl Utilization {
    /// The value as a whole percentage, for reasons (`12%`).
    #[must_use]
    pub fn percent(&self) -> String {
        format!("{}%", self.whole_percent())
    }

    /// The value as a whole number of percent, rounded (0 for a value below 0 or not a
    /// number).
    #[must_use]
    pub fn whole_percent(&self) -> u64 {
        // `as` saturates: a share far above 1 (requests over allocatable) stays a large number.
        (self.value * 100.0).round().max(0.0) as u64
    }

    /// The highest of `candidates`; on a tie the first wins, so list pools before CPU and
    /// memory to name the device pool of an idle accelerator node.
    #[must_use]
    pub fn highest(candidates: impl IntoIterator<Item = (String, f64)>) -> Self {
        let mut best = Utilization {
            value: 0.0,
            resource: String::new(),
        };
        for (resource, value) in candidates {
            if best.resource.is_empty() || value > best.value {
                best = Utilization { value, resource };
            }
        }
        best
    }
}

/// Devices allocated (without admin access) by `claims`, per (driver, pool).
#[must_use]
pub fn allocated_devices<'a>(
    claims: impl IntoIterator<Item = &'a ResourceClaim>,
) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for claim in claims {
        let results = claim
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_deref())
            .unwrap_or_default();
        for result in results {
            if result.admin_access == Some(true) {
                continue;
            }
            out.entry((result.driver.clone(), result.pool.clone()))
                .or_default()
                .insert(result.device.clone());
        }
    }
    out
}

/// The utilisation of every DRA pool published for a node, per node name, as
/// `(<driver>/<pool>, share)` in name order. Pools whose newest generation is incomplete are
/// left out: their devices are not known.
#[must_use]
pub fn pools_by_node(
    slices: &[ResourceSlice],
    allocated: &BTreeMap<(String, String), BTreeSet<String>>,
) -> BTreeMap<String, Vec<(String, f64)>> {
    // node -> (driver, pool) -> slices
    let mut grouped: BTreeMap<&str, BTreeMap<(&str, &str), Vec<&ResourceSlice>>> = BTreeMap::new();
    for slice in slices {
        if let Some(node) = slice.spec.node_name.as_deref() {
            grouped
                .entry(node)
                .or_default()
                .entry((slice.spec.driver.as_str(), slice.spec.pool.name.as_str()))
                .or_default()
                .push(slice);
        }
    }
    let empty = BTreeSet::new();
    grouped
        .into_iter()
        .map(|(node, pools)| {
            let shares = pools
                .into_iter()
                .filter_map(|((driver, pool), slices)| {
                    let current = newest_generation(&slices)?;
                    let devices = allocated
                        .get(&(driver.to_string(), pool.to_string()))
                        .unwrap_or(&empty);
                    Some((format!("{driver}/{pool}"), pool_share(&current, devices)))
                })
                .collect();
            (node.to_string(), shares)
        })
        .collect()
}

/// The slices of the newest generation, if all of them are there.
fn newest_generation<'a>(slices: &[&'a ResourceSlice]) -> Option<Vec<&'a ResourceSlice>> {
    let newest = slices.iter().map(|s| s.spec.pool.generation).max()?;
    let current: Vec<&ResourceSlice> = slices
        .iter()
        .filter(|s| s.spec.pool.generation == newest)
        .copied()
        .collect();
    let wanted = current.first()?.spec.pool.resource_slice_count;
    (i64::try_from(current.len()).ok() == Some(wanted)).then_some(current)
}

fn is_partitionable(device: &Device) -> bool {
    device
        .consumes_counters
        .as_ref()
        .is_some_and(|c| !c.is_empty())
}

/// The share of one pool in use (cluster-autoscaler's `calculatePoolUtil`).
fn pool_share(slices: &[&ResourceSlice], allocated: &BTreeSet<String>) -> f64 {
    let devices: Vec<&Device> = slices
        .iter()
        .flat_map(|s| s.spec.devices.as_deref().unwrap_or_default())
        .collect();
    let counter_sets: Vec<&CounterSet> = slices
        .iter()
        .flat_map(|s| s.spec.shared_counters.as_deref().unwrap_or_default())
        .collect();
    let (partitionable, atomic): (Vec<&Device>, Vec<&Device>) =
        devices.into_iter().partition(|d| is_partitionable(d));
    let atomic_allocated = atomic
        .iter()
        .filter(|d| allocated.contains(&d.name))
        .count();
    let partitions_allocated: Vec<&Device> = partitionable
        .iter()
        .filter(|d| allocated.contains(&d.name))
        .copied()
        .collect();
    let atomic_share = if atomic.is_empty() {
        0.0
    } else {
        atomic_allocated as f64 / atomic.len() as f64
    };
    // As upstream: when no partition is allocated the atomic share is the answer, and when
    // only partitions are, the counter share is.
    if partitions_allocated.is_empty() {
        return atomic_share;
    }
    let counter_share = counter_sets_share(&partitionable, &partitions_allocated, &counter_sets);
    if atomic_allocated == 0 {
        return counter_share;
    }
    let physical = distinct_counter_sets(&partitionable) as f64;
    let total = physical + atomic.len() as f64;
    counter_share * physical / total + atomic_share * atomic.len() as f64 / total
}

/// How many distinct counter sets the partitionable devices consume from: one per physical
/// device.
fn distinct_counter_sets(devices: &[&Device]) -> usize {
    devices
        .iter()
        .flat_map(|d| d.consumes_counters.as_deref().unwrap_or_default())
        .map(|c| c.counter_set.as_str())
        .collect::<BTreeSet<_>>()
        .len()
}

fn quantity(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i64 {
    dra_sim::quantity::value(&q.0).unwrap_or(0)
}

/// Per counter set, the most consumed counter's share; summed over sets and divided by the
/// number of physical (partitionable) devices.
fn counter_sets_share(all: &[&Device], allocated: &[&Device], sets: &[&CounterSet]) -> f64 {
    let physical = distinct_counter_sets(all);
    if physical == 0 {
        return 0.0;
    }
    let mut totals: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for set in sets {
        for (name, counter) in &set.counters {
            *totals
                .entry((set.name.as_str(), name.as_str()))
                .or_default() += quantity(&counter.value);
        }
    }
    let mut consumed: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for device in allocated {
        for consumption in device.consumes_counters.as_deref().unwrap_or_default() {
            for (name, counter) in &consumption.counters {
                *consumed
                    .entry((consumption.counter_set.as_str(), name.as_str()))
                    .or_default() += quantity(&counter.value);
            }
        }
    }
    let mut per_set: BTreeMap<&str, f64> = BTreeMap::new();
    for ((set, name), total) in &totals {
        let highest = per_set.entry(set).or_insert(0.0);
        if *total == 0 {
            continue;
        }
        let used = consumed.get(&(*set, *name)).copied().unwrap_or(0);
        *highest = highest.max(used as f64 / *total as f64);
    }
    per_set.values().map(|share| share / physical as f64).sum()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn slice(node: &str, body: serde_json::Value) -> ResourceSlice {
        let mut spec = serde_json::json!({
            "driver": "gpu.example.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        });
        if let (Some(s), Some(b)) = (spec.as_object_mut(), body.as_object()) {
            s.extend(b.clone());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-gpus")}, "spec": spec
        }))
        .unwrap()
    }

    fn claim(devices: &[(&str, &str)], admin: bool) -> ResourceClaim {
        let results: Vec<_> = devices
            .iter()
            .map(|(pool, device)| {
                serde_json::json!({
                    "request": "gpu", "driver": "gpu.example.com", "pool": pool,
                    "device": device, "adminAccess": admin
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ml"},
            "spec": {},
            "status": {"allocation": {"devices": {"results": results}}}
        }))
        .unwrap()
    }

    fn atomic(n: usize) -> serde_json::Value {
        let devices: Vec<_> = (0..n)
            .map(|i| serde_json::json!({"name": format!("gpu-{i}")}))
            .collect();
        serde_json::json!({ "devices": devices })
    }

    #[test]
    fn atomic_devices_count_by_share_allocated_and_admin_access_reserves_nothing() {
        let slices = vec![slice("node-a", atomic(8))];
        let claims = [
            claim(&[("node-a", "gpu-0"), ("node-a", "gpu-1")], false),
            claim(&[("node-a", "gpu-2")], true),
        ];
        let pools = pools_by_node(&slices, &allocated_devices(&claims));
        assert_eq!(
            pools["node-a"],
            vec![("gpu.example.com/node-a".to_string(), 0.25)]
        );
    }

    /// One GPU split into MIG-like partitions: counters `memory` 80 and `slices` 7.
    fn partitioned() -> Vec<ResourceSlice> {
        let counters = slice(
            "node-p",
            serde_json::json!({
                "pool": {"name": "node-p", "generation": 1, "resourceSliceCount": 2},
                "sharedCounters": [{"name": "gpu-0", "counters": {
                    "memory": {"value": "80Gi"}, "slices": {"value": "7"}}}]
            }),
        );
        let partition = |name: &str, memory: &str, slices: &str| {
            serde_json::json!({"name": name, "consumesCounters": [{"counterSet": "gpu-0",
                "counters": {"memory": {"value": memory}, "slices": {"value": slices}}}]})
        };
        let devices = slice(
            "node-p",
            serde_json::json!({
                "pool": {"name": "node-p", "generation": 1, "resourceSliceCount": 2},
                "devices": [partition("gpu-0-1g", "10Gi", "1"), partition("gpu-0-7g", "80Gi", "7")]
            }),
        );
        vec![counters, devices]
    }

    #[test]
    fn partitions_count_by_the_most_consumed_counter_of_their_set() {
        // One 1g slice: 1 of 7 slices and 10Gi of 80Gi memory -> 1/7 (the higher).
        let pools = pools_by_node(
            &partitioned(),
            &allocated_devices(&[claim(&[("node-p", "gpu-0-1g")], false)]),
        );
        let share = pools["node-p"][0].1;
        assert!((share - 1.0 / 7.0).abs() < 1e-9, "{share}");
        let whole = pools_by_node(
            &partitioned(),
            &allocated_devices(&[claim(&[("node-p", "gpu-0-7g")], false)]),
        );
        assert!((whole["node-p"][0].1 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn incomplete_or_old_generations_are_left_out() {
        let mut old = slice("node-b", atomic(2));
        old.spec.pool.generation = 1;
        let mut new = slice("node-b", atomic(4));
        new.spec.pool.generation = 2;
        new.spec.pool.resource_slice_count = 2;
        let pools = pools_by_node(&[old, new], &BTreeMap::new());
        assert!(pools["node-b"].is_empty(), "{pools:?}");
    }

    #[test]
    fn the_highest_resource_wins_and_pools_name_ties() {
        let u = Utilization::highest([
            ("gpu.example.com/node-a".to_string(), 0.0),
            ("cpu".to_string(), 0.0),
            ("memory".to_string(), 0.0),
        ]);
        assert_eq!(u.resource, "gpu.example.com/node-a");
        let u = Utilization::highest([
            ("gpu.example.com/node-a".to_string(), 0.125),
            ("cpu".to_string(), 0.4),
            ("memory".to_string(), 0.2),
        ]);
        assert_eq!((u.resource.as_str(), u.percent()), ("cpu", "40%".into()));
    }
}
