//! Inputs that once ran away (issue 18), and loading a snapshot the size of a
//! real cluster's `kubectl get -o yaml`. Figures in docs/benchmarks.md.

use std::path::Path;

use dra_sim::{FeatureGates, Loader};

fn main() {
    dra_benches::on_planner_stack(divan::main);
}

fn case(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/robustness")
        .join(name)
        .join("cluster.yaml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn simulate_text(text: &str) -> usize {
    let mut loader = Loader::new();
    loader.add_yaml("case.yaml", text).expect("the case loads");
    let report = dra_sim::simulate::simulate(loader.finish().objects, FeatureGates::default());
    report.pods.len()
}

/// The slowest robustness inputs, loaded and simulated whole.
#[divan::bench(args = [
    "slow-cel-map4-20dev",
    "timeout-claims-k12-declared",
    "timeout-min-count32-31devices",
    "comb-32-15-16",
    "backtracking-within-filter-timeout",
    "stackoverflow-cel-member-20000",
    "hugeoutput-cel-brackets-5000",
], sample_count = 5)]
fn robustness_case(bencher: divan::Bencher, name: &str) {
    let text = case(name);
    bencher.bench(|| simulate_text(divan::black_box(&text)));
}

/// The 4-deep map() selector made device-dependent, so that no verdict is
/// shared between the 20 devices: the worst per-device CEL cost under the
/// cost limit (see docs/benchmarks.md).
#[divan::bench(sample_count = 3)]
fn slow_cel_map4_per_device(bencher: divan::Bencher) {
    let text = case("slow-cel-map4-20dev").replace(
        "expression: \"[1,2,3",
        "expression: \"device.driver != \\\"\\\" && [1,2,3",
    );
    assert!(text.contains("device.driver != "));
    bencher.bench(|| simulate_text(divan::black_box(&text)));
}

/// `kubectl get pods -A -o yaml` of 10,000 pods (a `kind: List`, ~2,000
/// bytes a pod as kubectl prints them), parsed and typed.
#[divan::bench(sample_count = 5)]
fn load_10000_pod_yaml(bencher: divan::Bencher) {
    let text = dra_benches::kubectl_pods_yaml(10_000);
    bencher
        .counter(divan::counter::BytesCount::new(text.len()))
        .bench(|| {
            let mut loader = Loader::new();
            loader
                .add_yaml("pods.yaml", divan::black_box(&text))
                .expect("loads");
            loader.finish().objects.pods.len()
        });
}
