//! The DRA conformance suite: every directory under `testdata/simulate/` holds a
//! `cluster.yaml`, the `expected.json` that upstream kube-scheduler's behaviour
//! implies, and optionally `args` (extra `simulate` flags on one line).
//!
//! Comparison rules: pods, outcomes, nodes and allocations must match exactly,
//! except that an expected `shareID` of `"*"` accepts any non-empty value
//! (share IDs are generated); every expected reason must occur as a substring
//! of some actual reason (our wording adds detail upstream does not have);
//! `reasonCodes` (the code, plugin and node beside each reason) must match
//! exactly, absent on both sides or equal.

mod golden;

use golden::{list, missing_reasons, pod_fields};
use serde_json::Value;

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
    let mut problems = pod_fields(expected, actual);
    for (e, a) in list(expected, "pods").iter().zip(list(actual, "pods")) {
        let name = e["pod"].as_str().unwrap_or("?");
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
        problems.extend(missing_reasons(name, e, a));
        let (ec, ac) = (e.get("reasonCodes"), a.get("reasonCodes"));
        if ec != ac {
            problems.push(format!(
                "{name}: reasonCodes differ\n    expected {}\n    actual   {}",
                ec.unwrap_or(&Value::Null),
                ac.unwrap_or(&Value::Null)
            ));
        }
    }
    problems
}

#[test]
fn simulate_matches_upstream_dra_behaviour_on_every_case() {
    golden::run_suite("simulate", 60, compare);
}

/// Whole snapshots mixing DRA with the other scheduler filters.
#[test]
fn simulate_matches_upstream_filter_behaviour_on_every_case() {
    golden::run_suite("filters", 25, compare);
}

/// Inputs that once crashed, stalled or misled the simulator
/// (`testdata/robustness/README.md`): each gives upstream's answer, or the
/// load error the API server's validation implies, with a report of at most
/// 100 KB in either format.
#[test]
fn robustness_inputs_give_upstream_answers_in_bounded_output() {
    golden::run_suite("robustness", 18, compare);
    let mut failures = Vec::new();
    for dir in golden::case_dirs("robustness") {
        for format in ["json", "text"] {
            if let Ok(text) = golden::simulate_as(&dir, format)
                && text.len() > 100_000
            {
                failures.push(format!(
                    "{}: {format} report is {} bytes",
                    dir.display(),
                    text.len()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
