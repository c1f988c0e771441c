//! Karpenter's benchmark workload (issue: side-by-side benchmark): the plan is
//! valid at every size up to 2,000 pods — replaying it in a fresh snapshot
//! places every pod where the plan put it with all filters satisfied — and
//! every pod lands on no more nodes than Karpenter launches (n/5).

// Test helpers may unwrap: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use dra_benches::{gangs, karpenter};
use dra_plan::testing::replay;
use dra_plan::{PlanOptions, plan};
use dra_sim::FeatureGates;
use dra_sim::report::Outcome;

fn check(n: usize) {
    let objects = karpenter::workload(n);
    let report = plan(
        objects.clone(),
        FeatureGates::default(),
        &PlanOptions::default(),
    );
    let placed = report
        .pods
        .iter()
        .filter(|p| matches!(p.outcome, Outcome::Fits | Outcome::FitsNewNode))
        .count();
    let unplaced: Vec<_> = report
        .pods
        .iter()
        .filter(|p| !matches!(p.outcome, Outcome::Fits | Outcome::FitsNewNode))
        .take(3)
        .collect();
    assert_eq!(placed, n, "every pod lands; e.g. {unplaced:?}");
    let nodes = replay(&objects, FeatureGates::default(), &report)
        .unwrap_or_else(|e| panic!("plan for {n} pods is invalid: {e}"));
    let price: f64 = report.scale_ups.iter().map(|s| s.price_per_hour).sum();
    let karpenter_nodes = (n / 5).max(1);
    eprintln!(
        "karpenter workload, {n} pods: {nodes} nodes (Karpenter: {karpenter_nodes}), {price:.2}/h"
    );
    // The hostname anti-affinity fifth needs n/5 nodes of its own; every
    // other pod fits beside them, as in Karpenter's plan.
    assert!(
        nodes <= karpenter_nodes,
        "{n} pods: {nodes} nodes, Karpenter {karpenter_nodes}"
    );
    // No plan can cost less than the bound (below it the plan would not
    // hold its pods); ours should not cost more than the model of
    // Karpenter's packing.
    let bound = karpenter::price_lower_bound(&objects.pods);
    let (_, model) = karpenter::karpenter_model(&objects.pods);
    assert!(
        price >= bound - 1e-6,
        "{n} pods: {price} below the bound {bound}"
    );
    assert!(
        price <= model + 1e-6,
        "{n} pods: {price} above the Karpenter model {model}"
    );
}

#[test]
fn plans_for_small_sizes_are_valid() {
    for n in [1, 50, 100, 500] {
        check(n);
    }
}

#[test]
fn plans_up_to_2000_pods_are_valid() {
    for n in [1_000, 2_000] {
        check(n);
    }
}

#[test]
fn gpu_gang_workload_lands_whole_and_replays() {
    let objects = gangs::workload(20, 8, 100, 6);
    let report = plan(
        objects.clone(),
        FeatureGates::default(),
        &PlanOptions::default(),
    );
    assert!(
        report
            .pod_groups
            .iter()
            .all(|g| g.outcome == dra_plan::report::GangOutcome::Lands)
    );
    let nodes = replay(&objects, FeatureGates::default(), &report).unwrap();
    // 10 existing nodes hold 70 partitions; 160 pods need 90 more.
    assert!(nodes > 0);
}
