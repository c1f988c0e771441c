//! DRA fit benchmarks (issue: DRA fit engine).
//!
//! - `allocate_partitioned_node`: one pod, one claim for 1 device with a CEL
//!   memory selector, checked against a node with 8 GPUs partitioned into 7
//!   devices each (sharedCounters). Target ≤ 5 µs per pod–node check after
//!   warm-up. The snapshot is built outside the timed region; every iteration
//!   is a full upstream `Allocate(node, claims)` (pool gathering, selectors,
//!   counters, result assembly), nothing is committed.
//! - `simulate_gpu_cluster`: `simulate` of 2,000 pending pods over 1,000 nodes
//!   with 8 GPUs each (8,000 GPUs). Target ≤ 1 s. Timed: building the snapshot
//!   indexes and placing every pod; not timed: generating the objects.

use dra_benches::{gpu_class, gpu_cluster, gpu_pod, gpu_slices, gpu_template, node};
use dra_sim::snapshot::Snapshot;
use dra_sim::{ClusterObjects, FeatureGates};

fn main() {
    dra_benches::on_planner_stack(divan::main);
}

#[divan::bench]
fn allocate_partitioned_node(bencher: divan::Bencher) {
    let mut objects = ClusterObjects::default();
    objects.device_classes.push(gpu_class());
    objects.nodes.push(node("node-0"));
    objects.resource_slices.extend(gpu_slices("node-0", 8, 7));
    objects
        .resource_claim_templates
        .push(gpu_template("ml", "gpu", "5Gi"));
    objects.pods.push(gpu_pod("ml", "p", "gpu"));
    let mut snapshot = Snapshot::new(objects, FeatureGates::default());
    let claims = snapshot.resolve_claims(0).expect("template exists");
    // Warm-up: compiles the selector and fills the per-device caches.
    let first = snapshot
        .allocate(0, &claims.to_allocate)
        .expect("allocates");
    assert!(matches!(first, dra_sim::dra::AllocateOutcome::Allocated(_)));
    bencher.bench_local(|| snapshot.allocate(0, divan::black_box(&claims.to_allocate)));
}

#[divan::bench(sample_count = 10)]
fn simulate_gpu_cluster(bencher: divan::Bencher) {
    let objects = gpu_cluster(1_000, 8, 2_000);
    bencher
        .with_inputs(|| objects.clone())
        .bench_values(|objects| {
            let report = dra_sim::simulate::simulate(objects, FeatureGates::default());
            assert_eq!(report.pods.len(), 2_000);
            report
        });
}
