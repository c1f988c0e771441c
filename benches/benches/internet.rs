//! Internet-scale benchmarks (issue #28) over `dra_benches::internet`: 10,000, 30,000 and
//! 100,000 full nodes (a tenth with 8 GPUs each) and half as many pending pods (four in
//! five single pods of five sizes, the rest coscheduling gangs of 8 one-GPU pods), 18 node
//! groups over 6 zones.
//!
//! - `simulate`: what `dra-autoscaler simulate -o json` does after reading the file: the
//!   `kind: List` JSON text loaded (parsed, typed, defaulted), the plan, the scale-down
//!   analysis after it, and the JSON report. Not timed: generating the text.
//! - `plan`: the planner alone (`Prepared::run_keeping_state`), as `benches/plan.rs` times
//!   it; not timed: loading, `prepare`, dropping the planning state.
//! - `scale_down`: `dra_plan::scaledown::analyse` after the plan; not timed: loading, the
//!   plan, copying the objects.
//!
//! `cargo bench -p dra-benches --bench internet` runs 10,000 and 30,000 nodes;
//! `DRA_BENCH_100K=1` adds 100,000.
//!
//! Targets at 100,000 nodes (on the project's 2-core machine): `simulate` under 10 s, with
//! growth from 10,000 nodes no worse than linear.

use dra_benches::internet;
use dra_plan::gang_apis::GangApisFound;
use dra_plan::scaledown::{ScaleDownOptions, analyse};
use dra_plan::{PlanOptions, PlanReport, prepare_for};
use dra_sim::{ClusterObjects, FeatureGates};

fn main() {
    dra_benches::on_planner_stack(divan::main);
}

/// 10,000 and 30,000 nodes; 100,000 too when `DRA_BENCH_100K` is set (its three
/// benchmarks take minutes and need about 6 GiB).
fn sizes() -> Vec<usize> {
    let mut sizes = vec![10_000, 30_000];
    if std::env::var_os("DRA_BENCH_100K").is_some() {
        sizes.push(100_000);
    }
    sizes
}

/// Offline planning options: no clock, as `simulate --now none`.
fn options() -> PlanOptions {
    PlanOptions {
        now: None,
        ..PlanOptions::default()
    }
}

/// The gates `simulate` plans with for these objects (the gang APIs they show).
fn gates(objects: &ClusterObjects) -> FeatureGates {
    GangApisFound::in_objects(&objects.extra, &objects.pods, &objects.pod_workload_refs)
        .resolve_gates(FeatureGates::default(), "")
        .map(|r| r.gates)
        .unwrap_or_default()
}

/// Loaded as `simulate` loads (items typed on as many threads as it uses).
fn load(text: &str) -> ClusterObjects {
    let mut loader = dra_plan::simulate::loader();
    loader.type_on_threads(std::thread::available_parallelism().map_or(1, |n| n.get().min(8)));
    loader
        .add_json("internet.json", text)
        .unwrap_or_else(|e| panic!("generated workload: {e}"));
    loader.finish().objects
}

/// `simulate -o json` from the text: load, plan, scale-down analysis, report.
fn simulate(text: &str) -> (String, usize) {
    let objects = load(text);
    let gates = gates(&objects);
    let (plan, scale_down) = dra_plan::simulate::plan_and_scale_down(objects, gates, &options());
    let json = serde_json::to_string_pretty(&(&plan, &scale_down)).unwrap_or_default();
    let nodes = plan.scale_ups.iter().map(|s| s.count).sum();
    (json, nodes)
}

fn summary(label: &str, report: &PlanReport) {
    let nodes: usize = report.scale_ups.iter().map(|s| s.count).sum();
    let landed = report
        .pod_groups
        .iter()
        .filter(|g| g.outcome == dra_plan::report::GangOutcome::Lands)
        .count();
    eprintln!(
        "[{label}] {} pods, {} gangs ({landed} land), {nodes} new nodes in {} groups",
        report.pods.len(),
        report.pod_groups.len(),
        report.scale_ups.len()
    );
}

#[divan::bench(sample_count = 3, sample_size = 1, args = sizes())]
fn simulate_json(bencher: divan::Bencher, nodes: usize) {
    let text = internet::json_text(nodes);
    bencher
        .counter(divan::counter::ItemsCount::new(
            internet::Counts::of(nodes).pending(),
        ))
        .bench(|| simulate(&text));
}

#[divan::bench(sample_count = 3, sample_size = 1, args = sizes())]
fn plan(bencher: divan::Bencher, nodes: usize) {
    let objects = load(&internet::json_text(nodes));
    let gates = gates(&objects);
    summary(
        &format!("internet-{nodes}"),
        &dra_plan::plan(objects.clone(), gates, &options()),
    );
    bencher
        .counter(divan::counter::ItemsCount::new(
            internet::Counts::of(nodes).pending(),
        ))
        .with_inputs(|| prepare_for(objects.clone(), gates, &options()))
        .bench_values(|prepared| prepared.run_keeping_state(&options()));
}

#[divan::bench(sample_count = 3, sample_size = 1, args = sizes())]
fn scale_down(bencher: divan::Bencher, nodes: usize) {
    let objects = load(&internet::json_text(nodes));
    let gates = gates(&objects);
    let plan = dra_plan::plan(objects.clone(), gates, &options());
    let scale_down_options = ScaleDownOptions::default();
    bencher
        .counter(divan::counter::ItemsCount::new(nodes))
        .with_inputs(|| objects.clone())
        .bench_values(|objects| analyse(objects, gates, &plan, &scale_down_options));
}
