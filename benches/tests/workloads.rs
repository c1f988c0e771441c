//! The benchmark workloads are what they claim to be.

// Test helpers may unwrap: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use dra_benches::{gpu_cluster, karpenter};
use dra_sim::FeatureGates;
use dra_sim::report::Outcome;

#[test]
fn gpu_cluster_fills_exactly_its_gpus() {
    // 10 nodes × 8 GPUs = 80 devices: 80 pods fit, the 81st does not.
    let report = dra_sim::simulate::simulate(gpu_cluster(10, 8, 81), FeatureGates::default());
    let fits = report
        .pods
        .iter()
        .filter(|p| p.outcome == Outcome::Fits)
        .count();
    assert_eq!(fits, 80);
    assert_eq!(report.pods[80].outcome, Outcome::Unschedulable);
    // First fit in node name order: the first 8 pods land on the first node.
    assert_eq!(report.pods[7].node.as_deref(), Some("node-00000"));
    assert_eq!(report.pods[8].node.as_deref(), Some("node-00001"));
}

#[test]
fn karpenter_workload_matches_the_upstream_benchmark_facts() {
    let groups = karpenter::node_groups();
    assert_eq!(groups.len(), 2_000, "400 shapes × 5 offerings");
    let (read, errors) = dra_plan::groups::read_groups(&groups, &[]);
    assert!(errors.is_empty(), "{errors:?}");
    let smallest = read
        .iter()
        .find(|g| g.name == "fake-it-0-test-zone-1-spot")
        .unwrap();
    assert_eq!(smallest.spec.template.capacity["cpu"].0, "1");
    assert_eq!(smallest.spec.template.capacity["memory"].0, "2Gi");
    assert_eq!(smallest.spec.template.capacity["pods"].0, "10");
    assert!((karpenter::price(0) - (0.1 + 0.1 * 2.147_483_648)).abs() < 1e-12);
    let pods = karpenter::pods(100);
    assert_eq!(pods.len(), 100);
    let spread = pods
        .iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .unwrap()
                .topology_spread_constraints
                .is_some()
        })
        .count();
    let affinity = pods
        .iter()
        .filter(|p| p.spec.as_ref().unwrap().affinity.is_some())
        .count();
    assert_eq!(
        (spread, affinity),
        (40, 40),
        "two spread fifths, two affinity fifths"
    );
    // Fixed seed: the same pods every time.
    assert_eq!(karpenter::pods(100), pods);
}
