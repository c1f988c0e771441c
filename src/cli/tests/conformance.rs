//! The DRA conformance suite: every directory under `testdata/simulate/` holds a
//! `cluster.yaml`, the `expected.json` that upstream kube-scheduler's behaviour
//! implies, and optionally `args` (extra `simulate` flags on one line).
//!
//! Comparison rules: pods, outcomes, nodes and allocations must match exactly,
//! except that an expected `shareID` of `"*"` accepts any non-empty value
//! (share IDs are generated); every expected reason must occur as a substring
//! of some actual reason (our wording adds detail upstream does not have).

use std::path::{Path, PathBuf};

use clap::Parser;
use dra_autoscaler::{Cli, Command};
use serde_json::Value;

fn cases_dir(suite: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(suite)
}

fn run_case(dir: &Path) -> Result<Value, String> {
    run_case_as(dir, "json").and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
}

/// Runs a case and returns the report as `simulate -o FORMAT` prints it.
fn run_case_as(dir: &Path, format: &str) -> Result<String, String> {
    let mut argv = vec![
        "dra-autoscaler".to_string(),
        "simulate".into(),
        "-o".into(),
        format.into(),
    ];
    if let Ok(extra) = std::fs::read_to_string(dir.join("args")) {
        argv.extend(extra.split_whitespace().map(str::to_string));
    }
    argv.push(dir.join("cluster.yaml").display().to_string());
    let cli = Cli::try_parse_from(&argv).map_err(|e| format!("bad args {argv:?}: {e}"))?;
    let Command::Simulate(args) = cli.command else {
        return Err("not a simulate command".into());
    };
    let (report, _) = args
        .simulate()
        .map_err(|e| format!("simulate failed: {e:#}"))?;
    match format {
        "json" => report
            .to_json()
            .map(|v| v.to_string())
            .map_err(|e| e.to_string()),
        _ => Ok(report.to_text()),
    }
}

/// Compares `actual` against `expected` with the wildcard rule for shareID.
fn matches(expected: &Value, actual: &Value, key: Option<&str>) -> bool {
    match (expected, actual) {
        (Value::String(e), Value::String(a)) if e == "*" && key == Some("shareID") => !a.is_empty(),
        (Value::Object(e), Value::Object(a)) => {
            e.len() == a.len()
                && e.iter()
                    .all(|(k, ev)| a.get(k).is_some_and(|av| matches(ev, av, Some(k))))
        }
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(ev, av)| matches(ev, av, None))
        }
        _ => expected == actual,
    }
}

fn compare(expected: &Value, actual: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let empty = Vec::new();
    let expected_pods = expected["pods"].as_array().unwrap_or(&empty);
    let actual_pods = actual["pods"].as_array().unwrap_or(&empty);
    if expected_pods.len() != actual_pods.len() {
        problems.push(format!(
            "expected {} pods, got {}",
            expected_pods.len(),
            actual_pods.len()
        ));
    }
    for (e, a) in expected_pods.iter().zip(actual_pods) {
        let name = e["pod"].as_str().unwrap_or("?");
        for field in ["pod", "outcome", "node", "nodeGroup"] {
            if e.get(field) != a.get(field) {
                problems.push(format!(
                    "{name}: {field} expected {} got {}",
                    e.get(field).unwrap_or(&Value::Null),
                    a.get(field).unwrap_or(&Value::Null)
                ));
            }
        }
        let (ea, aa) = (e.get("allocations"), a.get("allocations"));
        let allocations_match = match (ea, aa) {
            (None, None) => true,
            (Some(ev), Some(av)) => matches(ev, av, None),
            _ => false,
        };
        if !allocations_match {
            problems.push(format!(
                "{name}: allocations differ\n    expected {}\n    actual   {}",
                ea.unwrap_or(&Value::Null),
                aa.unwrap_or(&Value::Null)
            ));
        }
        let actual_reasons: Vec<&str> = a["reasons"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for reason in e["reasons"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter_map(Value::as_str)
        {
            if !actual_reasons.iter().any(|r| r.contains(reason)) {
                problems.push(format!(
                    "{name}: no reason contains {reason:?}; reasons: {actual_reasons:?}"
                ));
            }
        }
    }
    problems
}

#[test]
fn simulate_matches_upstream_dra_behaviour_on_every_case() {
    run_suite("simulate", 60);
}

/// Whole snapshots mixing DRA with the other scheduler filters.
#[test]
fn simulate_matches_upstream_filter_behaviour_on_every_case() {
    run_suite("filters", 25);
}

/// Inputs that once crashed, stalled or misled the simulator
/// (`testdata/robustness/README.md`): each gives upstream's answer, or the
/// load error the API server's validation implies, with a report of at most
/// 100 KB in either format.
#[test]
fn robustness_inputs_give_upstream_answers_in_bounded_output() {
    run_suite("robustness", 11);
    let mut failures = Vec::new();
    for dir in case_dirs("robustness") {
        for format in ["json", "text"] {
            match run_case_as(&dir, format) {
                Ok(text) if text.len() > 100_000 => failures.push(format!(
                    "{}: {format} report is {} bytes",
                    dir.display(),
                    text.len()
                )),
                Ok(_) | Err(_) => {}
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn case_dirs(suite: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cases_dir(suite))
        .expect("the suite directory exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("cluster.yaml").exists())
        .collect();
    dirs.sort();
    dirs
}

fn run_suite(suite: &str, at_least: usize) {
    let dirs = case_dirs(suite);
    assert!(
        dirs.len() >= at_least,
        "testdata/{suite} has {} cases, the suite promises at least {at_least}",
        dirs.len()
    );
    let mut failures = Vec::new();
    for dir in &dirs {
        let case = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        let expected: Value = match std::fs::read_to_string(dir.join("expected.json"))
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{case}: expected.json: {e}"));
                continue;
            }
        };
        if let Some(want) = expected.get("loadError").and_then(Value::as_str) {
            match run_case(dir) {
                Err(e) if e.contains(want) => {}
                Err(e) => failures.push(format!("{case}: error {e:?} lacks {want:?}")),
                Ok(_) => failures.push(format!("{case}: loaded, expected error {want:?}")),
            }
            continue;
        }
        match run_case(dir) {
            Ok(actual) => {
                let problems = compare(&expected, &actual);
                if !problems.is_empty() {
                    failures.push(format!(
                        "{case}:\n  {}\n  actual: {}",
                        problems.join("\n  "),
                        serde_json::to_string(&actual).unwrap_or_default()
                    ));
                }
            }
            Err(e) => failures.push(format!("{case}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} conformance cases failed:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}

#[test]
fn wildcard_share_ids_and_reason_substrings() {
    let expected = serde_json::json!({"pods": [{"pod": "a/b", "outcome": "unschedulable", "reasons": ["cannot allocate"]}]});
    let actual = serde_json::json!({"pods": [{"pod": "a/b", "outcome": "unschedulable", "reasons": ["n1: cannot allocate all claims"]}]});
    assert!(compare(&expected, &actual).is_empty());
    let actual_wrong = serde_json::json!({"pods": [{"pod": "a/b", "outcome": "fits", "node": "n1", "allocations": [], "reasons": []}]});
    assert!(!compare(&expected, &actual_wrong).is_empty());
    assert!(matches(
        &serde_json::json!({"shareID": "*"}),
        &serde_json::json!({"shareID": "abc"}),
        None
    ));
    assert!(!matches(
        &serde_json::json!({"shareID": "*"}),
        &serde_json::json!({"shareID": ""}),
        None
    ));
    assert!(!matches(
        &serde_json::json!({"device": "*"}),
        &serde_json::json!({"device": "gpu-0"}),
        None
    ));
}
