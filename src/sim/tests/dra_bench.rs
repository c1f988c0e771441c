//! Timing check of one `DraCatalog::allocate` call in the benchmark scenario
//! (one pod, one claim for 1 device with a CEL memory selector, on a node
//! with 8 GPUs each partitioned into 7 devices through shared counters).
//! Target: ≤ 5 µs per call after warm-up, in release. The divan benchmark in
//! `benches/benches/dra.rs` is the reference; this is a quick look that
//! needs no bench harness.
//!
//! Ignored by default; run it in release:
//! `cargo test -p dra-sim --release --test dra_bench -- --ignored --nocapture`

use std::time::Instant;

use dra_sim::FeatureGates;
use dra_sim::dra::{AllocateOutcome, AllocatedState, DeviceId, DraCatalog, ShareIdGenerator};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

const DRIVER: &str = "gpu.example.com";

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid test object")
}

fn slices(node: &str, gpus: usize, partitions: usize) -> Vec<ResourceSlice> {
    let pool = json!({"name": node, "generation": 1, "resourceSliceCount": 2});
    let mut devices = Vec::new();
    let mut sets = Vec::new();
    for g in 0..gpus {
        sets.push(json!({"name": format!("gpu-{g}"), "counters": {
            "memory": {"value": "70Gi"}, "slices": {"value": partitions.to_string()}}}));
        for p in 0..partitions {
            devices.push(json!({
                "name": format!("gpu-{g}-part-{p}"),
                "attributes": {"model": {"string": "H100"}},
                "capacity": {"memory": {"value": "10Gi"}},
                "consumesCounters": [{"counterSet": format!("gpu-{g}"), "counters": {
                    "memory": {"value": "10Gi"}, "slices": {"value": "1"}}}],
            }));
        }
    }
    vec![
        from_json(json!({"metadata": {"name": format!("{node}-counters")},
            "spec": {"driver": DRIVER, "pool": pool, "nodeName": node, "sharedCounters": sets}})),
        from_json(json!({"metadata": {"name": format!("{node}-devices")},
            "spec": {"driver": DRIVER, "pool": pool, "nodeName": node, "devices": devices}})),
    ]
}

#[test]
#[ignore = "timing; run in release with --ignored --nocapture"]
fn allocate_on_a_partitioned_node() {
    let class: DeviceClass = from_json(json!({"metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}));
    let claim: ResourceClaim = from_json(json!({"metadata": {"name": "gpu", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1,
            "selectors": [{"cel": {"expression":
                format!("device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"5Gi\")) >= 0")}}]}}]}}}));
    let node: Node = from_json(
        json!({"metadata": {"name": "node-0", "labels": {"kubernetes.io/hostname": "node-0"}}}),
    );
    let gates = FeatureGates::default();
    let mut catalog = DraCatalog::new(gates, &[class], &slices("node-0", 8, 7), &[]);
    let state = AllocatedState::default();
    let mut ids = ShareIdGenerator::default();
    let claims = [&claim];
    let first = catalog.allocate(&node, &claims, &state, &mut ids);
    assert!(
        matches!(first, Ok(AllocateOutcome::Allocated(_))),
        "{first:?}"
    );
    let rounds = 20_000u32;
    let start = Instant::now();
    for _ in 0..rounds {
        let out = catalog.allocate(&node, &claims, &state, &mut ids);
        assert!(matches!(out, Ok(AllocateOutcome::Allocated(_))));
    }
    let per_call = start.elapsed() / rounds;
    println!("allocate on an 8x7 partitioned node: {per_call:?} per call");

    // A full node: every partition allocated, so the search fails and the
    // reasons are computed.
    let mut full = AllocatedState::default();
    for g in 0..8 {
        for p in 0..7 {
            full.mark_allocated(&DeviceId::new(
                DRIVER,
                "node-0",
                format!("gpu-{g}-part-{p}"),
            ));
        }
    }
    let out = catalog.allocate(&node, &claims, &full, &mut ids);
    assert!(
        matches!(out, Ok(AllocateOutcome::Unschedulable { .. })),
        "{out:?}"
    );
    let start = Instant::now();
    for _ in 0..rounds {
        let out = catalog.allocate(&node, &claims, &full, &mut ids);
        assert!(matches!(out, Ok(AllocateOutcome::Unschedulable { .. })));
    }
    let per_call = start.elapsed() / rounds;
    println!("allocate on a full 8x7 partitioned node (with reasons): {per_call:?} per call");
}
