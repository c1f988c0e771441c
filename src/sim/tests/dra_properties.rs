//! Property tests of the DRA allocator through its public API.
//!
//! Random small inventories (devices with shared counters and capacities,
//! some multi-allocatable, some tainted) and random pods (claims with counts,
//! attribute selectors, capacity requests, tolerations and constraints) are
//! allocated one pod after another, committing each result into the
//! `AllocatedState`. After every step the cumulative allocation must respect
//! what upstream's allocator guarantees:
//! - an exclusive device is never handed out twice;
//! - shared counters are never over-consumed (each device counted once);
//! - a multi-allocatable device's capacity is never over-consumed;
//! - every device satisfies its request's selectors, taints and its claim's
//!   constraints;
//! - results are all-or-nothing and name the requests they serve.
//!
//! Every call is also repeated on a freshly built catalog: the caches that
//! survive across calls must never change an answer.

use std::collections::{BTreeMap, BTreeSet};

use dra_sim::FeatureGates;
use dra_sim::dra::{AllocateOutcome, AllocatedState, DraCatalog, ShareIdGenerator};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use proptest::prelude::*;
use serde_json::{Value, json};

const DRIVER: &str = "gpu.example.com";
const NODE: &str = "node-1";

#[derive(Debug, Clone)]
struct DevSpec {
    a: i64,
    s: u8,
    mem: u32,
    multi: bool,
    /// Request policy default for multi-allocatable devices.
    default: Option<u32>,
    /// (counter set, counter, amount).
    consumes: Vec<(usize, usize, u32)>,
    tainted: bool,
}

#[derive(Debug, Clone)]
struct PoolSpec {
    /// Counter sets, each with counter values.
    sets: Vec<Vec<u32>>,
    devices: Vec<DevSpec>,
}

#[derive(Debug, Clone)]
struct ReqSpec {
    /// `None` for allocationMode All.
    count: Option<u8>,
    min_a: Option<i64>,
    mem: Option<u32>,
    tolerate: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Constraint {
    None,
    MatchA,
    DistinctS,
}

#[derive(Debug, Clone)]
struct ClaimSpec {
    requests: Vec<ReqSpec>,
    constraint: Constraint,
}

fn dev_spec(sets: usize) -> impl Strategy<Value = DevSpec> {
    (
        0i64..3,
        0u8..3,
        1u32..9,
        prop::bool::weighted(0.3),
        prop::option::of(0u32..4),
        prop::collection::vec(
            (0..sets.max(1), 0usize..2, 0u32..5),
            0..=usize::from(sets > 0) * 2,
        ),
        prop::bool::weighted(0.15),
    )
        .prop_map(
            move |(a, s, mem, multi, default, consumes, tainted)| DevSpec {
                a,
                s,
                mem,
                multi,
                default: if multi { default } else { None },
                // One amount per (counter set, counter), as the API's maps hold it.
                consumes: if sets == 0 {
                    vec![]
                } else {
                    consumes
                        .into_iter()
                        .map(|(set, counter, amount)| ((set, counter), amount))
                        .collect::<BTreeMap<_, _>>()
                        .into_iter()
                        .map(|((set, counter), amount)| (set, counter, amount))
                        .collect()
                },
                tainted,
            },
        )
}

fn pool_spec() -> impl Strategy<Value = PoolSpec> {
    (0usize..3).prop_flat_map(|n_sets| {
        (
            prop::collection::vec(prop::collection::vec(0u32..10, 2), n_sets),
            prop::collection::vec(dev_spec(n_sets), 1..8),
        )
            .prop_map(|(sets, devices)| PoolSpec { sets, devices })
    })
}

fn req_spec() -> impl Strategy<Value = ReqSpec> {
    (
        prop::option::weighted(
            0.9,
            prop_oneof![4 => Just(1u8), 2 => Just(2u8), 1 => Just(3u8)],
        ),
        prop::option::weighted(0.4, 0i64..3),
        prop::option::weighted(0.4, 1u32..5),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(count, min_a, mem, tolerate)| ReqSpec {
            count,
            min_a,
            mem,
            tolerate,
        })
}

fn claim_spec() -> impl Strategy<Value = ClaimSpec> {
    (
        prop::collection::vec(req_spec(), 1..3),
        prop_oneof![
            3 => Just(Constraint::None),
            1 => Just(Constraint::MatchA),
            1 => Just(Constraint::DistinctS),
        ],
    )
        .prop_map(|(requests, constraint)| ClaimSpec {
            requests,
            constraint,
        })
}

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("test objects are valid")
}

fn node() -> Node {
    from_json(json!({"metadata": {"name": NODE, "labels": {"zone": "z1"}}}))
}

fn class() -> DeviceClass {
    from_json(json!({
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}
    }))
}

fn device_name(pool: usize, device: usize) -> String {
    format!("p{pool}-d{device}")
}

fn slices(pools: &[PoolSpec]) -> Vec<ResourceSlice> {
    let mut out = Vec::new();
    for (p, pool) in pools.iter().enumerate() {
        let count = if pool.sets.is_empty() { 1 } else { 2 };
        let pool_ref =
            json!({"name": format!("pool-{p}"), "generation": 1, "resourceSliceCount": count});
        let devices: Vec<Value> = pool
            .devices
            .iter()
            .enumerate()
            .map(|(d, dev)| {
                let mut capacity = json!({"mem": {"value": dev.mem.to_string()}});
                if let Some(default) = dev.default {
                    capacity["mem"]["requestPolicy"] = json!({"default": default.to_string()});
                }
                let mut v = json!({
                    "name": device_name(p, d),
                    "attributes": {"a": {"int": dev.a}, "s": {"string": format!("v{}", dev.s)}},
                    "capacity": capacity,
                });
                if dev.multi {
                    v["allowMultipleAllocations"] = json!(true);
                }
                if dev.tainted {
                    v["taints"] = json!([{"key": "bad", "value": "yes", "effect": "NoSchedule"}]);
                }
                if !dev.consumes.is_empty() {
                    let mut by_set: BTreeMap<usize, BTreeMap<String, Value>> = BTreeMap::new();
                    for (set, counter, amount) in &dev.consumes {
                        by_set
                            .entry(*set)
                            .or_default()
                            .insert(format!("c{counter}"), json!({"value": amount.to_string()}));
                    }
                    v["consumesCounters"] = Value::Array(
                        by_set
                            .into_iter()
                            .map(|(set, counters)| json!({"counterSet": format!("set-{set}"), "counters": counters}))
                            .collect(),
                    );
                }
                v
            })
            .collect();
        out.push(from_json(json!({
            "metadata": {"name": format!("pool-{p}-devices")},
            "spec": {"driver": DRIVER, "pool": pool_ref, "nodeName": NODE, "devices": devices}
        })));
        if !pool.sets.is_empty() {
            let sets: Vec<Value> = pool
                .sets
                .iter()
                .enumerate()
                .map(|(s, counters)| {
                    let counters: BTreeMap<String, Value> = counters
                        .iter()
                        .enumerate()
                        .map(|(c, v)| (format!("c{c}"), json!({"value": v.to_string()})))
                        .collect();
                    json!({"name": format!("set-{s}"), "counters": counters})
                })
                .collect();
            out.push(from_json(json!({
                "metadata": {"name": format!("pool-{p}-counters")},
                "spec": {"driver": DRIVER, "pool": pool_ref, "nodeName": NODE, "sharedCounters": sets}
            })));
        }
    }
    out
}

fn claim(name: &str, spec: &ClaimSpec) -> ResourceClaim {
    let requests: Vec<Value> = spec
        .requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut exactly = json!({"deviceClassName": "gpu"});
            match r.count {
                Some(n) => {
                    exactly["allocationMode"] = json!("ExactCount");
                    exactly["count"] = json!(n);
                }
                None => exactly["allocationMode"] = json!("All"),
            }
            if let Some(min) = r.min_a {
                exactly["selectors"] =
                    json!([{"cel": {"expression": format!("device.attributes[\"{DRIVER}\"].a >= {min}")}}]);
            }
            if let Some(mem) = r.mem {
                exactly["capacity"] = json!({"requests": {"mem": mem.to_string()}});
            }
            if r.tolerate {
                exactly["tolerations"] = json!([{"key": "bad", "operator": "Exists"}]);
            }
            json!({"name": format!("r{i}"), "exactly": exactly})
        })
        .collect();
    let constraints = match spec.constraint {
        Constraint::None => json!([]),
        Constraint::MatchA => json!([{"matchAttribute": format!("{DRIVER}/a")}]),
        Constraint::DistinctS => json!([{"distinctAttribute": format!("{DRIVER}/s")}]),
    };
    from_json(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"devices": {"requests": requests, "constraints": constraints}}
    }))
}

/// Looks a device up by its result's pool and name.
fn find<'p>(pools: &'p [PoolSpec], pool: &str, device: &str) -> &'p DevSpec {
    let p: usize = pool.trim_start_matches("pool-").parse().expect("pool-N");
    let d: usize = device
        .rsplit_once("-d")
        .and_then(|(_, d)| d.parse().ok())
        .expect("pN-dM");
    assert_eq!(device, device_name(p, d));
    &pools[p].devices[d]
}

/// Everything committed so far: (claim spec, result).
type History = Vec<(ClaimSpec, AllocationResult)>;

fn check(pools: &[PoolSpec], history: &History) {
    let mut exclusive = BTreeSet::new();
    let mut counted: BTreeSet<(String, String)> = BTreeSet::new();
    let mut shared_mem: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut counters: BTreeMap<(usize, usize, usize), u64> = BTreeMap::new();
    for (spec, allocation) in history {
        let results = allocation
            .devices
            .as_ref()
            .and_then(|d| d.results.as_ref())
            .expect("allocations carry results");
        let wanted: Option<usize> = spec.requests.iter().map(|r| r.count.map(usize::from)).sum();
        if let Some(wanted) = wanted {
            assert_eq!(results.len(), wanted, "exact counts are met");
        }
        assert!(
            allocation
                .node_selector
                .as_ref()
                .is_some_and(|s| format!("{s:?}").contains(NODE)),
            "node-local devices pin the node"
        );
        let mut claim_devices = Vec::new();
        for r in results {
            assert_eq!(r.driver, DRIVER);
            let index: usize = r.request.trim_start_matches('r').parse().expect("rN");
            let req = &spec.requests[index];
            let dev = find(pools, &r.pool, &r.device);
            if let Some(min) = req.min_a {
                assert!(dev.a >= min, "selector a >= {min} violated by {}", r.device);
            }
            if dev.tainted {
                assert!(req.tolerate, "untolerated taint on {}", r.device);
            }
            let key = (r.pool.clone(), r.device.clone());
            if dev.multi {
                assert!(r.share_id.is_some(), "shares carry a share ID");
                let consumed = r
                    .consumed_capacity
                    .as_ref()
                    .and_then(|c| c.get("mem"))
                    .expect("every capacity is listed")
                    .0
                    .parse::<u64>()
                    .expect("whole units");
                *shared_mem.entry(key.clone()).or_default() += consumed;
            } else {
                assert!(r.share_id.is_none() && r.consumed_capacity.is_none());
                assert!(
                    exclusive.insert(key.clone()),
                    "{} allocated twice",
                    r.device
                );
                if let Some(mem) = req.mem {
                    assert!(mem <= dev.mem, "capacity filter on exclusive {}", r.device);
                }
            }
            if counted.insert(key) {
                let p: usize = r.pool.trim_start_matches("pool-").parse().expect("pool-N");
                for (set, counter, amount) in &dev.consumes {
                    *counters.entry((p, *set, *counter)).or_default() += u64::from(*amount);
                }
            }
            claim_devices.push(dev.clone());
        }
        match spec.constraint {
            Constraint::MatchA => {
                assert!(
                    claim_devices.windows(2).all(|w| w[0].a == w[1].a),
                    "matchAttribute"
                );
            }
            Constraint::DistinctS => {
                // Pairwise distinct across every device of the claim, also
                // within one request (kubernetes#140600).
                let values: BTreeSet<u8> = claim_devices.iter().map(|d| d.s).collect();
                assert_eq!(values.len(), claim_devices.len(), "distinctAttribute");
            }
            _ => {}
        }
    }
    for ((pool, device), used) in &shared_mem {
        let dev = find(pools, pool, device);
        assert!(
            *used <= u64::from(dev.mem),
            "capacity of {device} over-consumed"
        );
    }
    for ((p, set, counter), used) in &counters {
        let total = u64::from(pools[*p].sets[*set][*counter]);
        assert!(
            *used <= total,
            "counter set-{set}/c{counter} of pool-{p} over-consumed"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn successive_allocations_respect_devices_counters_and_constraints(
        pools in prop::collection::vec(pool_spec(), 1..3),
        pods in prop::collection::vec(prop::collection::vec(claim_spec(), 1..3), 1..6),
    ) {
        let gates = FeatureGates::default();
        let slices = slices(&pools);
        let classes = [class()];
        let node = node();
        let mut catalog = DraCatalog::new(gates, &classes, &slices, &[]);
        let mut state = AllocatedState::default();
        let mut share_ids = ShareIdGenerator::default();
        let mut history: History = Vec::new();
        for (p, pod) in pods.iter().enumerate() {
            let claims: Vec<ResourceClaim> = pod
                .iter()
                .enumerate()
                .map(|(c, spec)| claim(&format!("pod{p}-claim{c}"), spec))
                .collect();
            let refs: Vec<&ResourceClaim> = claims.iter().collect();
            let mut fresh_ids = share_ids.clone();
            let outcome = catalog.allocate(&node, &refs, &state, &mut share_ids);
            let mut fresh = DraCatalog::new(gates, &classes, &slices, &[]);
            let again = fresh.allocate(&node, &refs, &state, &mut fresh_ids);
            prop_assert_eq!(&outcome, &again, "caches changed the answer");
            if let Ok(AllocateOutcome::Allocated(results)) = outcome {
                prop_assert_eq!(results.len(), pod.len());
                for (spec, result) in pod.iter().zip(results) {
                    state.add_allocation(&result, &gates);
                    history.push((spec.clone(), result));
                }
                check(&pools, &history);
            }
        }
    }

    #[test]
    fn allocation_is_deterministic(
        pools in prop::collection::vec(pool_spec(), 1..3),
        pod in prop::collection::vec(claim_spec(), 1..3),
    ) {
        let gates = FeatureGates::default();
        let slices = slices(&pools);
        let claims: Vec<ResourceClaim> = pod.iter().enumerate().map(|(c, s)| claim(&format!("c{c}"), s)).collect();
        let refs: Vec<&ResourceClaim> = claims.iter().collect();
        let run = || {
            let mut catalog = DraCatalog::new(gates, &[class()], &slices, &[]);
            catalog.allocate(&node(), &refs, &AllocatedState::default(), &mut ShareIdGenerator::default())
        };
        prop_assert_eq!(run(), run());
    }
}
