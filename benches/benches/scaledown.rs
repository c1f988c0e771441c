//! Scale-down analysis benchmark: the whole pass — snapshot built from the objects, utilisation
//! of every node, pod rules, budgets, gangs, and a drain simulation of every candidate — over
//! the workload of `dra_benches::scaledown` (5,000 nodes, 1,000 of them with GPUs, 30,000
//! pods, 500 candidates; target ≤ 2 s) and at twice the size (nodes and pods doubled) to show
//! how the pass grows. Cloning the objects is not timed.

use dra_benches::scaledown::workload;
use dra_plan::PlanReport;
use dra_plan::scaledown::{ScaleDownOptions, analyse};
use dra_sim::{ClusterObjects, FeatureGates};

fn main() {
    dra_benches::on_planner_stack(divan::main);
}

fn bench(bencher: divan::Bencher, label: &str, objects: &ClusterObjects) {
    let report = analyse(
        objects.clone(),
        FeatureGates::default(),
        &PlanReport::default(),
        &ScaleDownOptions::default(),
    );
    eprintln!(
        "[{label}] {} nodes, {} pods: {} removals ({} empty), {} kept",
        objects.nodes.len(),
        objects.pods.len(),
        report.scale_downs.len(),
        report.scale_downs.iter().filter(|s| s.is_empty()).count(),
        report.scale_down_blocked.len()
    );
    bencher
        .counter(divan::counter::ItemsCount::new(objects.nodes.len()))
        .with_inputs(|| objects.clone())
        .bench_values(|objects| {
            analyse(
                objects,
                FeatureGates::default(),
                &PlanReport::default(),
                &ScaleDownOptions::default(),
            )
        });
}

#[divan::bench(sample_count = 5, args = [5_000, 10_000])]
fn analysis(bencher: divan::Bencher, nodes: usize) {
    bench(bencher, &format!("scale-down-{nodes}"), &workload(nodes));
}
