//! Scheduler filter benchmarks (issue: filters beyond DRA), on the
//! [`dra_benches::mixed`] cluster: 10,000 pending pods (plain, zone-spread,
//! hostname anti-affinity, DRA) over 5,000 nodes.
//!
//! - `simulate_mixed`: the whole `simulate` (filters and DRA allocator, first
//!   fit in node order). Target ≤ 2 s and ≤ 2 GiB (peak memory measured with
//!   `/usr/bin/time -v`, see docs/benchmarks.md).
//! - `plugin_check`: the cost of one plugin's Filter per (pod, node) check,
//!   for 100 pods (25 of each kind) against all 5,000 nodes of a cluster
//!   where 5,000 pods are already placed: the per-filter breakdown.

use dra_benches::mixed;
use dra_sim::FeatureGates;
use dra_sim::filters::{FilterState, Plugin};

fn main() {
    dra_benches::on_planner_stack(divan::main);
}

#[divan::bench(sample_count = 5)]
fn simulate_mixed(bencher: divan::Bencher) {
    let objects = mixed::cluster(5_000, 10_000);
    bencher
        .counter(divan::counter::ItemsCount::new(10_000usize))
        .with_inputs(|| objects.clone())
        .bench_values(|objects| dra_sim::simulate::simulate(objects, FeatureGates::default()));
}

const PLUGINS: [&str; 8] = [
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "PodTopologySpread",
    "InterPodAffinity",
];

#[divan::bench(args = PLUGINS, sample_count = 10)]
fn plugin_check(bencher: divan::Bencher, name: &str) {
    let objects = mixed::cluster(5_000, 10_100);
    let plugin = Plugin::ORDER
        .into_iter()
        .find(|p| p.name() == name)
        .expect("known plugin");
    // Place the first 5,000 pods with the whole simulator, then measure the
    // plugin on the next 100 against every node.
    let mut placed = objects.clone();
    placed.pods.truncate(5_000);
    let report = dra_sim::simulate::simulate(placed.clone(), FeatureGates::default());
    for (pod, decision) in placed.pods.iter_mut().zip(&report.pods) {
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = decision.node.clone();
        }
    }
    let mut state = FilterState::new(&objects.nodes, &placed.pods, &[]);
    state.set_device_classes(&objects.device_classes, &FeatureGates::default());
    let prepared: Vec<_> = objects.pods[10_000..]
        .iter()
        .map(|p| state.prepare(p, &objects.nodes).expect("valid pod"))
        .collect();
    let nodes = &objects.nodes;
    bencher
        .counter(divan::counter::ItemsCount::new(
            prepared.len() * nodes.len(),
        ))
        .bench_local(|| {
            let mut passed = 0usize;
            for pod in &prepared {
                for (i, node) in nodes.iter().enumerate() {
                    passed += usize::from(state.check_plugin(plugin, pod, i, node).is_ok());
                }
            }
            passed
        });
}
