//! The planner's part of one controller loop at the controller benchmark's shape
//! (`benches/benches/controller/cluster.rs`: 10,000 full CPU nodes, 100,000 running pods,
//! one GPU NodeGroup, 250 pending gangs of 8), in process, without the API server and the
//! provider around it (issue #28):
//!
//! - `index`: `Snapshot::new` (the scheduler filters' and the DRA allocator's indexes of
//!   every node and pod), which every loop builds afresh;
//! - `prepare`: the planner's whole preparation (groups, stand-ins, the snapshot, gangs);
//! - `plan`: preparation and plan, the controller's `plan_ms`.
//!
//! `cargo bench -p dra-benches --bench loop_plan` (`DRA_LOOP_NODES`, `DRA_LOOP_PODS` and
//! `DRA_LOOP_GANGS` resize it).

#[path = "controller/cluster.rs"]
#[allow(dead_code)]
mod cluster;

use std::sync::OnceLock;

use dra_plan::{PlanOptions, planner};
use dra_sim::snapshot::Snapshot;
use dra_sim::{ClusterObjects, FeatureGates};

fn main() {
    dra_benches::on_planner_stack(divan::main);
}

fn size(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The cluster as the controller hands it to the planner, loaded once.
fn objects() -> &'static ClusterObjects {
    static OBJECTS: OnceLock<ClusterObjects> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        let (nodes, pods, gangs) = (
            size("DRA_LOOP_NODES", 10_000),
            size("DRA_LOOP_PODS", 100_000),
            size("DRA_LOOP_GANGS", 250),
        );
        let mut items = vec![
            cluster::device_class(),
            cluster::claim_template(),
            cluster::gpu_node_group(gangs.max(1) * 2),
        ];
        items.extend((0..nodes).map(cluster::node));
        items.extend((0..pods).map(|i| {
            let mut pod = cluster::running_pod(i, nodes);
            pod["status"] = serde_json::json!({"phase": "Running"});
            pod
        }));
        for gang in 0..gangs {
            for member in 0..8 {
                let mut pod = cluster::gang_pod(gang, member, 8);
                pod["status"] = cluster::unschedulable_status()["status"].clone();
                items.push(pod);
            }
        }
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        let mut loader = dra_plan::simulate::loader();
        if let Err(e) = loader.add_json("controller-shape", &list.to_string()) {
            panic!("the benchmark's cluster does not load: {e}");
        }
        loader.finish().objects
    })
}

#[divan::bench(sample_count = 10)]
fn index(bencher: divan::Bencher) {
    let objects = objects();
    bencher
        .counter(divan::counter::ItemsCount::new(objects.pods.len()))
        .with_inputs(|| objects.clone())
        .bench_values(|objects| Snapshot::new(objects, FeatureGates::default()));
}

#[divan::bench(sample_count = 10)]
fn prepare(bencher: divan::Bencher) {
    let objects = objects();
    bencher
        .with_inputs(|| objects.clone())
        .bench_values(|objects| planner::prepare(objects, FeatureGates::default()));
}

#[divan::bench(sample_count = 10)]
fn plan(bencher: divan::Bencher) {
    let objects = objects();
    bencher
        .with_inputs(|| objects.clone())
        .bench_values(|objects| {
            planner::prepare(objects, FeatureGates::default())
                .run_keeping_state(&PlanOptions::default())
        });
}
