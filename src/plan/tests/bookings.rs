//! Capacity booked for a provisioned ProvisioningRequest never causes a
//! purchase (issue 31, item 1).
//!
//! cluster-autoscaler runs its pod-list processors in order: `FilterOutSchedulable`
//! first packs the pending pods onto free existing and upcoming capacity (the
//! scheduler ignores bookings, so those pods will get that room), and only then
//! does the ProvisioningRequest processor's `bookCapacity` schedule the booked
//! pods, best effort, into what is left; a booked pod that finds no room is
//! simply not booked, and booked pods are never handed to the scale-up. So a
//! booking holds only capacity that exists and is free, the nodes bought for a
//! pending gang stay that gang's, and a booking short of room buys nothing.
//!
//! The fixtures (`testdata/bookings/`, README there) are the on-call day's
//! repro: check-capacity request `ml/cc-hold-1` booked two H200 nodes, gang
//! `od6` took them, gang `od7`'s two nodes were then bought; the cases are the
//! three states those nodes pass through (upcoming, registered without slices,
//! ready but not yet bound).

// Test helpers may unwrap: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use dra_plan::gang::GANG_KINDS;
use dra_plan::provreq::RequestOutcome;
use dra_plan::report::GangOutcome;
use dra_plan::{PlanOptions, PlanReport, plan};
use dra_sim::report::Outcome;
use dra_sim::{FeatureGates, Loader};

fn testdata(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/bookings")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Plans `files` (under `testdata/bookings/`) at 10:05, inside cc-hold-1's
/// ten-minute booking.
fn plan_files(files: &[&str]) -> PlanReport {
    let mut loader = Loader::new();
    loader.keep_kind("dra-autoscaler.io", "NodeGroup");
    for (group, kind) in dra_plan::templates::STAND_IN_KINDS.iter().chain(GANG_KINDS) {
        loader.keep_kind(group, kind);
    }
    for file in files {
        loader.add_yaml(file, &testdata(file)).unwrap();
    }
    let options = PlanOptions {
        now: Some("2026-12-01T10:05:00Z".parse().unwrap()),
        ..PlanOptions::default()
    };
    plan(loader.finish().objects, FeatureGates::default(), &options)
}

/// od7 lands on the nodes bought for it, `on` (two pods, one a node), nothing is
/// bought, and cc-hold-1 stays booked with none of its pods placed: the only
/// free H200 capacity is od7's.
fn assert_od7_keeps_its_nodes(report: &PlanReport, on: [&str; 2]) {
    assert!(
        report.scale_ups.is_empty(),
        "a booking bought nodes: {:#?}",
        report.scale_ups
    );
    let od7 = report
        .pod_groups
        .iter()
        .find(|g| g.pod_group.to_string() == "ml/od7")
        .unwrap();
    assert_eq!(od7.outcome, GangOutcome::Lands, "{od7:#?}");
    let mut nodes: Vec<&str> = report
        .pods
        .iter()
        .filter(|p| p.pod.starts_with("ml/od7-"))
        .map(|p| {
            assert_eq!(p.outcome, Outcome::Fits, "{p:#?}");
            p.node.as_deref().unwrap_or_default()
        })
        .collect();
    nodes.sort_unstable();
    assert_eq!(nodes, on);
    let request = &report.provisioning_requests[0];
    assert_eq!(request.provisioning_request.to_string(), "ml/cc-hold-1");
    assert_eq!(request.outcome, RequestOutcome::Booked);
    assert_eq!(
        (request.booked, request.booked_nodes.len()),
        (0, 0),
        "{request:#?}"
    );
    assert!(
        request
            .reasons
            .iter()
            .any(|r| r.contains("2 of the 2 booked pods found no room")),
        "{:?}",
        request.reasons
    );
}

#[test]
fn a_booking_never_takes_the_upcoming_nodes_bought_for_a_pending_gang() {
    let report = plan_files(&["common.yaml", "gang-nodes-upcoming.yaml"]);
    assert_od7_keeps_its_nodes(
        &report,
        ["h200-on-demand-upcoming-0", "h200-on-demand-upcoming-1"],
    );
}

#[test]
fn a_booking_never_takes_registered_nodes_a_pending_gang_waits_for() {
    // Registered, no slices yet: the planner stands the template's slices in.
    let report = plan_files(&["common.yaml", "gang-nodes-registered-without-slices.yaml"]);
    assert_od7_keeps_its_nodes(&report, ["h200-on-demand-3", "h200-on-demand-4"]);
    // Slices published, pods not bound yet: the scheduler will bind them there.
    let report = plan_files(&["common.yaml", "gang-nodes-ready-not-yet-bound.yaml"]);
    assert_od7_keeps_its_nodes(&report, ["h200-on-demand-3", "h200-on-demand-4"]);
}

#[test]
fn a_booking_holds_free_registered_capacity_and_never_upcoming_nodes() {
    // Without od7, the two nodes that registered are free: the booking holds
    // them (scale-down keeps them). Upcoming nodes are not capacity that
    // exists: with od7 gone and its nodes still booting, nothing is booked.
    let without_od7 = |file: &str| {
        testdata(file)
            .split("\n---\n")
            .filter(|doc| !doc.contains("name: od7"))
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    for (file, booked_nodes) in [
        (
            "gang-nodes-ready-not-yet-bound.yaml",
            vec!["h200-on-demand-3", "h200-on-demand-4"],
        ),
        ("gang-nodes-upcoming.yaml", vec![]),
    ] {
        let mut loader = Loader::new();
        loader.keep_kind("dra-autoscaler.io", "NodeGroup");
        for (group, kind) in dra_plan::templates::STAND_IN_KINDS.iter().chain(GANG_KINDS) {
            loader.keep_kind(group, kind);
        }
        loader
            .add_yaml("common.yaml", &without_od7("common.yaml"))
            .unwrap();
        loader.add_yaml(file, &testdata(file)).unwrap();
        let options = PlanOptions {
            now: Some("2026-12-01T10:05:00Z".parse().unwrap()),
            ..PlanOptions::default()
        };
        let report = plan(loader.finish().objects, FeatureGates::default(), &options);
        assert!(
            report.scale_ups.is_empty(),
            "{file}: {:#?}",
            report.scale_ups
        );
        let request = &report.provisioning_requests[0];
        assert_eq!(request.outcome, RequestOutcome::Booked, "{file}");
        assert_eq!(request.booked, booked_nodes.len(), "{file}: {request:#?}");
        assert_eq!(request.booked_nodes, booked_nodes, "{file}");
    }
}
