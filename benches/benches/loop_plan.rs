//! The planner's part of one controller loop at the controller benchmark's shape
//! (`benches/benches/controller/cluster.rs`: 10,000 full CPU nodes, 100,000 running pods,
//! one GPU NodeGroup, 250 pending gangs of 8), in process, without the API server and the
//! provider around it (issue #28):
//!
//! - `index`: `Snapshot::new` (the scheduler filters' and the DRA allocator's indexes of
//!   every node and pod), as a loop builds it without a kept index;
//! - `index_kept`: `Snapshot::with_filters`, as the controller builds it each loop with the
//!   filter state its view keeps (the DRA catalog and claims still built afresh);
//! - `pod_event`: bringing that kept state up to date for one pod event (the old version
//!   taken off, the new one counted);
//! - `prepare`: the planner's whole preparation (groups, stand-ins, the snapshot, gangs);
//! - `plan`: preparation and plan, the controller's `plan_ms` without a kept index;
//! - `plan_kept`: the controller's plan with its kept index: preparation, plan, and the
//!   hand-back of the objects and of the index with the plan rolled back.
//!
//! `cargo bench -p dra-benches --bench loop_plan` (`DRA_LOOP_NODES`, `DRA_LOOP_PODS` and
//! `DRA_LOOP_GANGS` resize it).

#[path = "controller/cluster.rs"]
#[allow(dead_code)]
mod cluster;

use std::sync::OnceLock;

use dra_plan::{PlanOptions, planner};
use dra_sim::filters::FilterState;
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

/// The filter state of `objects`' nodes (in name order) and bound pods, as the view keeps it.
fn kept_filters(objects: &ClusterObjects) -> FilterState {
    let mut nodes: Vec<_> = objects.nodes.iter().collect();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    FilterState::of_nodes(nodes.into_iter(), &objects.pods, &objects.namespaces)
}

#[divan::bench(sample_count = 10)]
fn index_kept(bencher: divan::Bencher) {
    let objects = objects();
    bencher
        .counter(divan::counter::ItemsCount::new(objects.pods.len()))
        .with_inputs(|| (objects.clone(), kept_filters(objects)))
        .bench_values(|(objects, filters)| {
            // Handed back whole, as the controller's planner does, and dropped untimed.
            let parts =
                Snapshot::with_filters(objects, FeatureGates::default(), filters).into_parts();
            assert!(parts.filters_reused);
            parts
        });
}

#[divan::bench(sample_count = 10)]
fn pod_event(bencher: divan::Bencher) {
    let objects = objects();
    let old = &objects.pods[objects.pods.len() / 2];
    let mut new = old.clone();
    new.metadata.resource_version = Some("changed".into());
    bencher
        .with_inputs(|| kept_filters(objects))
        .bench_refs(|filters| {
            assert_eq!(filters.forget_bound([old]), 0);
            assert!(filters.count_bound(&new));
        });
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

#[divan::bench(sample_count = 10)]
fn plan_kept(bencher: divan::Bencher) {
    let objects = objects();
    bencher
        .with_inputs(|| (objects.clone(), kept_filters(objects)))
        .bench_values(|(objects, filters)| {
            let handed = dra_plan::handback::plan_keeping_filters(
                objects,
                Some(filters),
                FeatureGates::default(),
                &PlanOptions::default(),
            );
            assert!(handed.filters_reused && handed.filters.is_some());
            handed
        });
}
