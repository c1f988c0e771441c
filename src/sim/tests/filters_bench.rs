//! Scale check of the filter framework: 10,000 pending pods (plain,
//! zone-spread, hostname anti-affinity, and extended resources served by
//! DRA) placed first-fit in node order on 5,000 nodes, with the time spent
//! in each plugin. Not the whole `simulate` (the DRA allocator is not run:
//! pods asking for DRA-backed extended resources only go through the
//! filters), so it bounds the filters' share of the 2 s budget.
//!
//! Run it in release, it is ignored otherwise:
//! `cargo test -p dra-sim --release --test filters_bench -- --ignored --nocapture`
//! (wrap in `/usr/bin/time -v` for the peak memory).

mod filters_support;

use std::time::{Duration, Instant};

use dra_sim::filters::{FilterState, Plugin};
use dra_sim::{ClusterObjects, FeatureGates};
use filters_support::obj;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice};
use serde_json::json;

const ZONES: usize = 10;

/// 5,000 nodes and 10,000 pods, divided by `FILTERS_BENCH_DIVISOR` (for a
/// quick look in a debug build).
fn scale() -> (usize, usize) {
    let divisor = std::env::var("FILTERS_BENCH_DIVISOR")
        .ok()
        .and_then(|d| d.parse::<usize>().ok())
        .filter(|d| *d > 0)
        .unwrap_or(1);
    (5_000 / divisor, 10_000 / divisor)
}

fn nodes(count: usize) -> Vec<Node> {
    (0..count)
        .map(|i| {
            let name = format!("node-{i:05}");
            obj(json!({
                "metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name,
                    "topology.kubernetes.io/zone": format!("zone-{}", i % ZONES),
                    "node.kubernetes.io/instance-type": if i % 5 == 0 { "gpu" } else { "cpu" }}},
                "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi", "pods": "110"}}
            }))
        })
        .collect()
}

/// Four kinds in turn: plain, zone-spread (groups of 50), hostname
/// anti-affinity (groups of 20), extended resource backed by DRA.
fn pods(count: usize) -> Vec<Pod> {
    (0..count)
        .map(|i| {
            let name = format!("pod-{i:05}");
            let container = |cpu: &str, extra: serde_json::Value| {
                let mut requests = json!({"cpu": cpu, "memory": "2Gi"});
                if let (Some(r), Some(e)) = (requests.as_object_mut(), extra.as_object()) {
                    r.extend(e.clone());
                }
                json!([{"name": "c", "resources": {"requests": requests}}])
            };
            let (labels, spec) = match i % 4 {
                0 => (json!({"app": "plain"}), json!({"containers": container("2", json!({}))})),
                1 => {
                    let group = format!("spread-{}", i / 200);
                    (
                        json!({"app": group}),
                        json!({"containers": container("3", json!({})),
                               "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": group}}}]}),
                    )
                }
                2 => {
                    let group = format!("anti-{}", i / 80);
                    (
                        json!({"app": group}),
                        json!({"containers": container("4", json!({})),
                               "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                                   {"labelSelector": {"matchLabels": {"app": group}}, "topologyKey": "kubernetes.io/hostname"}]}}}),
                    )
                }
                _ => (
                    json!({"app": "dra"}),
                    json!({"containers": container("1", json!({"example.com/gpu": "1"})),
                           "nodeSelector": {"node.kubernetes.io/instance-type": "gpu"}}),
                ),
            };
            obj(json!({"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": spec}))
        })
        .collect()
}

#[test]
#[ignore = "scale benchmark; run in release with --ignored"]
fn ten_thousand_pods_on_five_thousand_nodes() {
    let (node_count, pod_count) = scale();
    let nodes = nodes(node_count);
    let pods = pods(pod_count);
    let class: DeviceClass = obj(
        json!({"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}),
    );

    let start = Instant::now();
    let mut state = FilterState::new(&nodes, &[], &[]);
    state.set_device_classes(&[class], &FeatureGates::default());
    let setup = start.elapsed();

    let mut prepare_time = Duration::ZERO;
    let mut prepare_by_kind = [Duration::ZERO; 4];
    let mut filter_time = Duration::ZERO;
    let mut per_plugin = [Duration::ZERO; 8];
    let mut visited = 0u64;
    let mut placed = 0usize;
    for (index, pod) in pods.iter().enumerate() {
        let t = Instant::now();
        let prepared = state
            .prepare(pod, &nodes)
            .expect("benchmark pods are valid");
        prepare_time += t.elapsed();
        prepare_by_kind[index % 4] += t.elapsed();
        let t = Instant::now();
        let fit = (0..nodes.len()).find(|i| state.check(&prepared, *i, &nodes[*i]).is_ok());
        filter_time += t.elapsed();
        let scanned = fit.map_or(nodes.len(), |i| i + 1);
        visited += scanned as u64;
        // Per-plugin cost over the same nodes, each plugin run on all of them.
        for (slot, plugin) in per_plugin.iter_mut().zip(Plugin::ORDER) {
            let t = Instant::now();
            for (i, node) in nodes.iter().enumerate().take(scanned) {
                let _ = std::hint::black_box(state.check_plugin(plugin, &prepared, i, node));
            }
            *slot += t.elapsed();
        }
        if let Some(i) = fit {
            state.add_pod(pod, i);
            placed += 1;
        }
    }
    let total = setup + prepare_time + filter_time;
    println!(
        "nodes {node_count}, pending pods {pod_count}, placed {placed}, (pod, node) checks {visited}"
    );
    println!("setup {setup:?}, prepare {prepare_time:?}, filter {filter_time:?}, total {total:?}");
    println!(
        "per check: {:.1} ns",
        filter_time.as_nanos() as f64 / visited.max(1) as f64
    );
    for (kind, time) in [
        "plain",
        "zone-spread",
        "hostname anti-affinity",
        "DRA extended resource",
    ]
    .iter()
    .zip(prepare_by_kind)
    {
        println!("  prepare {kind:<24} {:>8.1} ms", time.as_secs_f64() * 1e3);
    }
    for (plugin, time) in Plugin::ORDER.iter().zip(per_plugin) {
        println!(
            "  {:<18} {:>10.1} ms  {:>6.1} ns/check (run on every visited node)",
            plugin.name(),
            time.as_secs_f64() * 1e3,
            time.as_nanos() as f64 / visited.max(1) as f64
        );
    }
    assert!(
        placed > pod_count / 2,
        "the scenario should place most pods, placed {placed}"
    );
}

/// The same cluster for the whole `simulate` (filters and the DRA allocator):
/// every fifth node carries 8 node-local GPUs, and the DRA pods ask for one
/// through a claim template instead of an extended resource.
fn simulate_objects(node_count: usize, pod_count: usize) -> ClusterObjects {
    let nodes = nodes(node_count);
    let resource_slices: Vec<ResourceSlice> = (0..node_count)
        .filter(|i| i % 5 == 0)
        .map(|i| {
            let name = format!("node-{i:05}");
            obj(json!({
                "metadata": {"name": format!("{name}-gpus")},
                "spec": {"driver": "gpu.example.com", "nodeName": name,
                         "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                         "devices": (0..8).map(|d| json!({"name": format!("gpu-{d}")})).collect::<Vec<_>>()}
            }))
        })
        .collect();
    let template: ResourceClaimTemplate = obj(json!({
        "metadata": {"name": "one-gpu", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}]}}}
    }));
    let class: DeviceClass = obj(json!({
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}
    }));
    let mut pods = pods(pod_count);
    for (i, pod) in pods.iter_mut().enumerate() {
        pod.metadata.creation_timestamp = Some(obj(json!(format!(
            "2026-11-01T{:02}:{:02}:{:02}Z",
            i / 3600 % 24,
            i / 60 % 60,
            i % 60
        ))));
        if i % 4 == 3
            && let Some(spec) = pod.spec.as_mut()
        {
            for container in &mut spec.containers {
                if let Some(requests) = container
                    .resources
                    .as_mut()
                    .and_then(|r| r.requests.as_mut())
                {
                    requests.remove("example.com/gpu");
                }
            }
            spec.resource_claims = Some(vec![obj(
                json!({"name": "gpu", "resourceClaimTemplateName": "one-gpu"}),
            )]);
        }
    }
    ClusterObjects {
        nodes,
        pods,
        device_classes: vec![class],
        resource_slices,
        resource_claim_templates: vec![template],
        ..ClusterObjects::default()
    }
}

#[test]
#[ignore = "scale benchmark; run in release with --ignored"]
fn simulate_ten_thousand_pods_on_five_thousand_nodes() {
    let (node_count, pod_count) = scale();
    let objects = simulate_objects(node_count, pod_count);
    let start = Instant::now();
    let report = dra_sim::simulate::simulate(objects, FeatureGates::default());
    let elapsed = start.elapsed();
    let fits = report
        .pods
        .iter()
        .filter(|p| matches!(p.outcome, dra_sim::report::Outcome::Fits))
        .count();
    println!("simulate: nodes {node_count}, pending pods {pod_count}, placed {fits}, {elapsed:?}");
    assert_eq!(report.pods.len(), pod_count);
    assert!(
        fits > pod_count / 2,
        "the scenario should place most pods, placed {fits}"
    );
}
