//! Planner benchmarks. Timed: one full plan over all pending pods (placement,
//! group choice, the report) with `Prepared::run`; not timed: building the
//! objects and `prepare` (node groups read, snapshot indexed, gangs found),
//! as in Karpenter's benchmark, which builds its scheduler before the timer. Each benchmark prints what the plan decided (nodes, price) once,
//! outside the timed region, so the speed can be read beside the quality.
//!
//! - `karpenter_shape_plain`: 400 node groups of the Karpenter benchmark's
//!   instance shapes (one offering each) and 10,000 pending plain pods.
//!   Target ≥ 150,000 pods/s.
//! - `gpu_gangs`: 10,000 pending pods in 1,250 gangs of 8, each pod one GPU
//!   partition through DRA, over 5,000 existing nodes and 50 node groups.
//!   Target ≤ 1 s. `gpu_gangs_scaling` doubles pods, nodes and groups in turn.
//! - `colocated_gang_domain_search`: one gang of 64 members that require
//!   pod affinity to each other on a placement-group key, over 50 node
//!   groups of one placement group each, all but the dearest one node short:
//!   every domain is tried. Target ≤ 100 ms.
//! - `karpenter`: Karpenter's whole scheduling benchmark workload (2,000
//!   offerings, five-part pod mix) at its sizes; pods/s beside Karpenter's
//!   figures in docs/benchmarks.md.

use dra_benches::{colocated, gangs, karpenter};
use dra_plan::{PlanOptions, PlanReport, plan, prepare};
use dra_sim::{ClusterObjects, FeatureGates};

fn main() {
    dra_benches::on_planner_stack(divan::main);
}

fn summary(label: &str, report: &PlanReport) {
    let nodes: usize = report.scale_ups.iter().map(|s| s.count).sum();
    let price: f64 = report.scale_ups.iter().map(|s| s.price_per_hour).sum();
    let landed = report
        .pod_groups
        .iter()
        .filter(|g| g.outcome == dra_plan::report::GangOutcome::Lands)
        .count();
    eprintln!(
        "[{label}] {} pods, {} gangs ({landed} land), {nodes} new nodes in {} groups, {price:.2}/h",
        report.pods.len(),
        report.pod_groups.len(),
        report.scale_ups.len()
    );
}

fn bench_plan(bencher: divan::Bencher, label: &str, objects: &ClusterObjects, pods: usize) {
    summary(
        label,
        &plan(
            objects.clone(),
            FeatureGates::default(),
            &PlanOptions::default(),
        ),
    );
    bencher
        .counter(divan::counter::ItemsCount::new(pods))
        .with_inputs(|| prepare(objects.clone(), FeatureGates::default()))
        // The planning state is returned, so divan drops it after timing,
        // as the input is built before.
        .bench_values(|prepared| prepared.run_keeping_state(&PlanOptions::default()));
}

#[divan::bench(sample_count = 5)]
fn karpenter_shape_plain(bencher: divan::Bencher) {
    let mut objects = karpenter::workload(0);
    // One offering per shape: on-demand in test-zone-1.
    objects.extra.retain(|g| {
        g.value
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|n| n.ends_with("-test-zone-1-on-demand"))
    });
    // pods(50_000) starts with its 10,000 generic pods.
    objects.pods = karpenter::pods(50_000).into_iter().take(10_000).collect();
    bench_plan(bencher, "karpenter-shape-plain", &objects, 10_000);
}

#[divan::bench(sample_count = 5)]
fn gpu_gangs(bencher: divan::Bencher) {
    let objects = gangs::workload(1_250, 8, 5_000, 50);
    bench_plan(bencher, "gpu-gangs", &objects, 10_000);
}

#[divan::bench(sample_count = 5)]
fn colocated_gang_domain_search(bencher: divan::Bencher) {
    let objects = colocated::workload(64, 50);
    bench_plan(bencher, "colocated-gang", &objects, 64);
}

#[divan::bench(sample_count = 3, args = ["pods×2", "nodes×2", "groups×2"])]
fn gpu_gangs_scaling(bencher: divan::Bencher, which: &str) {
    let (gangs_n, nodes, groups) = match which {
        "pods×2" => (2_500, 5_000, 50),
        "nodes×2" => (1_250, 10_000, 50),
        _ => (1_250, 5_000, 100),
    };
    let objects = gangs::workload(gangs_n, 8, nodes, groups);
    bench_plan(bencher, which, &objects, gangs_n * 8);
}

#[divan::bench(sample_count = 3, args = [1, 50, 100, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000])]
fn karpenter(bencher: divan::Bencher, pods: usize) {
    let objects = karpenter::workload(pods);
    let (model_nodes, model_price) = karpenter::karpenter_model(&objects.pods);
    eprintln!(
        "[karpenter-{pods}] no plan can cost less than {:.2}/h; Karpenter launches {} nodes; \
         a model of its packing: {model_nodes} nodes, {model_price:.2}/h",
        karpenter::price_lower_bound(&objects.pods),
        (pods / 5).max(1)
    );
    bench_plan(bencher, &format!("karpenter-{pods}"), &objects, pods);
}
