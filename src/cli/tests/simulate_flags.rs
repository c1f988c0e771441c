//! `simulate` flags whose effect is not in the report: the time planned at
//! (`--now`) and the line naming the gang APIs found and used.

// Test helpers may unwrap: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use clap::Parser;
use dra_autoscaler::{Cli, Command, SimulateArgs};
use k8s_openapi::jiff::Timestamp;

fn args(extra: &[&str]) -> SimulateArgs {
    let mut argv = vec!["dra-autoscaler", "simulate"];
    argv.extend(extra);
    match Cli::try_parse_from(argv).unwrap().command {
        Command::Simulate(args) => args,
        _ => unreachable!("parsed simulate"),
    }
}

fn scenario(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/scenarios")
        .join(name)
        .join("cluster.yaml")
        .display()
        .to_string()
}

#[test]
fn now_defaults_to_the_clock_and_none_ignores_end_times() {
    let clock: Timestamp = "2031-05-06T07:08:09Z".parse().unwrap();
    assert_eq!(
        args(&["x.yaml"]).plan_options(clock).unwrap().now,
        Some(clock),
        "no --now: the time the CLI read"
    );
    assert_eq!(
        args(&["--now", "none", "x.yaml"])
            .plan_options(clock)
            .unwrap()
            .now,
        None
    );
    assert_eq!(
        args(&["--now", "2026-12-01T00:00:00Z", "x.yaml"])
            .plan_options(clock)
            .unwrap()
            .now,
        Some("2026-12-01T00:00:00Z".parse().unwrap())
    );
    let error = args(&["--now", "yesterday", "x.yaml"])
        .plan_options(clock)
        .unwrap_err();
    let message = format!("{error:#}");
    assert!(
        message.contains("--now") && message.contains("none"),
        "{message}"
    );
}

#[test]
fn the_gang_apis_found_and_used_are_named_on_one_line() {
    let path = scenario("072-podgroup-v1beta1-1-37-is-a-gang-without-flags");
    let (_, notes) = args(&[&path]).simulate().unwrap();
    let lines: Vec<&String> = notes
        .iter()
        .filter(|n| n.starts_with("gang APIs"))
        .collect();
    assert_eq!(lines.len(), 1, "{notes:?}");
    let line = lines[0];
    assert!(
        line.contains(
            "used: scheduling.k8s.io/v1beta1 PodGroup, scheduling.k8s.io/v1beta1 Workload"
        ),
        "{line}"
    );
    assert!(line.contains("4 pod(s) linked"), "{line}");
    assert!(line.contains("GenericWorkload"), "{line}");
}

#[test]
fn an_explicit_generic_workload_false_is_reported_as_not_used() {
    let path = scenario("069-generic-workload-false-plans-pods-one-by-one");
    let (_, notes) = args(&["--feature-gates", "GenericWorkload=false", &path])
        .simulate()
        .unwrap();
    let line = notes.iter().find(|n| n.starts_with("gang APIs")).unwrap();
    assert!(line.contains("used: none"), "{line}");
    assert!(line.contains("planned one by one"), "{line}");
}

#[test]
fn no_gang_api_no_line() {
    let path = scenario("057-nodeselector-os-linux-scales-up");
    let (_, notes) = args(&[&path]).simulate().unwrap();
    assert!(
        notes.iter().all(|n| !n.starts_with("gang APIs")),
        "{notes:?}"
    );
}

#[test]
fn the_provisioning_request_backoff_flags_default_as_upstream_and_reach_the_planner() {
    use k8s_openapi::jiff::SignedDuration;
    let clock: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
    // cluster-autoscaler's defaults: 1m, 10m, 1000.
    let defaults = args(&["x.yaml"])
        .plan_options(clock)
        .unwrap()
        .provisioning_request_backoff;
    assert_eq!(
        (defaults.initial(), defaults.max(), defaults.capacity()),
        (
            SignedDuration::from_mins(1),
            SignedDuration::from_mins(10),
            1000
        )
    );
    let set = args(&[
        "--provisioning-request-initial-backoff-time",
        "30s",
        "--provisioning-request-max-backoff-time",
        "5m",
        "--provisioning-request-max-backoff-cache-size",
        "10",
        "x.yaml",
    ])
    .plan_options(clock)
    .unwrap()
    .provisioning_request_backoff;
    assert_eq!(
        (set.initial(), set.max(), set.capacity()),
        (
            SignedDuration::from_secs(30),
            SignedDuration::from_mins(5),
            10
        )
    );
    let refused = Cli::try_parse_from([
        "dra-autoscaler",
        "simulate",
        "--provisioning-request-max-backoff-time",
        "-1m",
        "x.yaml",
    ])
    .map(drop)
    .unwrap_err()
    .to_string();
    assert!(refused.contains("must not be negative"), "{refused}");
}
