//! Planner scenarios: every directory under `testdata/scenarios/` holds a
//! `cluster.yaml` (snapshot, NodeGroups, gang objects), the `expected.json`
//! plan that the planner's rules imply, and optionally `args`.
//!
//! Comparison rules: `scaleUps` exactly and in order (every key written in
//! the expectation, prices to 1e-9); `podGroups` in order by podGroup,
//! outcome, minCount and members, with each expected reason a substring of
//! some actual reason; `pods` in order by pod, outcome, node and nodeGroup
//! (allocations only when the expectation lists them); `nodeGroupErrors` by
//! nodeGroup when expected; `scaleDowns` and `scaleDownBlocked`, when the
//! expectation has the key, in order by node and nodeGroup, each expected
//! reason a substring of the actual one.

use std::path::{Path, PathBuf};

use clap::Parser;
use dra_autoscaler::{Cli, Command};
use serde_json::Value;

fn run(dir: &Path) -> Result<Value, String> {
    let mut argv = vec![
        "dra-autoscaler".to_string(),
        "simulate".into(),
        "-o".into(),
        "json".into(),
    ];
    if let Ok(extra) = std::fs::read_to_string(dir.join("args")) {
        argv.extend(extra.split_whitespace().map(str::to_string));
    }
    argv.push(dir.join("cluster.yaml").display().to_string());
    let cli = Cli::try_parse_from(&argv).map_err(|e| format!("bad args {argv:?}: {e}"))?;
    let Command::Simulate(args) = cli.command else {
        return Err("not a simulate command".into());
    };
    let (output, _) = args.simulate().map_err(|e| format!("{e:#}"))?;
    output.to_json().map_err(|e| e.to_string())
}

fn same(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Number(e), Value::Number(a)) => match (e.as_f64(), a.as_f64()) {
            (Some(e), Some(a)) => (e - a).abs() < 1e-9,
            _ => e == a,
        },
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .all(|(k, ev)| a.get(k).is_some_and(|av| same(ev, av))),
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(x, y)| same(x, y))
        }
        _ => expected == actual,
    }
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn compare(expected: &Value, actual: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let (es, as_) = (list(expected, "scaleUps"), list(actual, "scaleUps"));
    if es.len() != as_.len() || !es.iter().zip(as_).all(|(e, a)| same(e, a)) {
        problems.push(format!(
            "scaleUps differ\n    expected {}\n    actual   {}",
            Value::Array(es.to_vec()),
            Value::Array(as_.to_vec())
        ));
    }
    let (eg, ag) = (list(expected, "podGroups"), list(actual, "podGroups"));
    if eg.len() != ag.len() {
        problems.push(format!("expected {} podGroups, got {}", eg.len(), ag.len()));
    }
    for (e, a) in eg.iter().zip(ag) {
        let name = e["podGroup"].as_str().unwrap_or("?");
        for field in ["podGroup", "outcome", "minCount", "members"] {
            if let Some(ev) = e.get(field)
                && !a.get(field).is_some_and(|av| same(ev, av))
            {
                problems.push(format!(
                    "podGroup {name}: {field} expected {ev} got {}",
                    a.get(field).unwrap_or(&Value::Null)
                ));
            }
        }
        let reasons: Vec<&str> = list(a, "reasons")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for r in list(e, "reasons").iter().filter_map(Value::as_str) {
            if !reasons.iter().any(|x| x.contains(r)) {
                problems.push(format!(
                    "podGroup {name}: no reason contains {r:?}; reasons: {reasons:?}"
                ));
            }
        }
    }
    let (ep, ap) = (list(expected, "pods"), list(actual, "pods"));
    if ep.len() != ap.len() {
        problems.push(format!("expected {} pods, got {}", ep.len(), ap.len()));
    }
    for (e, a) in ep.iter().zip(ap) {
        let name = e["pod"].as_str().unwrap_or("?");
        for field in ["pod", "outcome", "node", "nodeGroup"] {
            if e.get(field) != a.get(field) {
                problems.push(format!(
                    "pod {name}: {field} expected {} got {}",
                    e.get(field).unwrap_or(&Value::Null),
                    a.get(field).unwrap_or(&Value::Null)
                ));
            }
        }
        if let Some(ev) = e.get("allocations")
            && !a.get("allocations").is_some_and(|av| same(ev, av))
        {
            problems.push(format!(
                "pod {name}: allocations differ: {}",
                a.get("allocations").unwrap_or(&Value::Null)
            ));
        }
    }
    for key in ["scaleDowns", "scaleDownBlocked"] {
        if expected.get(key).is_none() {
            continue;
        }
        let (es, as_) = (list(expected, key), list(actual, key));
        let matches = es.len() == as_.len()
            && es.iter().zip(as_).all(|(e, a)| {
                e["node"] == a["node"]
                    && e["nodeGroup"] == a["nodeGroup"]
                    && a["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains(e["reason"].as_str().unwrap_or_default()))
            });
        if !matches {
            problems.push(format!(
                "{key} differ\n    expected {}\n    actual   {}",
                Value::Array(es.to_vec()),
                Value::Array(as_.to_vec())
            ));
        }
    }
    for e in list(expected, "nodeGroupErrors") {
        let group = &e["nodeGroup"];
        if !list(actual, "nodeGroupErrors")
            .iter()
            .any(|a| &a["nodeGroup"] == group)
        {
            problems.push(format!("no nodeGroupErrors entry for {group}"));
        }
    }
    problems
}

#[test]
fn plans_match_the_planner_rules_on_every_scenario() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/scenarios");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.retain(|p| p.join("cluster.yaml").exists());
    dirs.sort();
    assert!(!dirs.is_empty(), "no scenarios under {}", root.display());
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
        match run(dir) {
            Ok(actual) => {
                let problems = compare(&expected, &actual);
                if !problems.is_empty() {
                    failures.push(format!("{case}:\n  {}", problems.join("\n  ")));
                }
            }
            Err(e) => failures.push(format!("{case}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}

#[test]
fn comparison_catches_differences() {
    let expected = serde_json::json!({"scaleUps": [{"nodeGroup": "a", "count": 2}], "podGroups": [], "pods": []});
    let same_plan = serde_json::json!({"scaleUps": [{"nodeGroup": "a", "count": 2, "pricePerHour": 0.0}], "podGroups": [], "pods": []});
    let other = serde_json::json!({"scaleUps": [{"nodeGroup": "a", "count": 3}], "podGroups": [], "pods": []});
    assert!(compare(&expected, &same_plan).is_empty());
    assert!(!compare(&expected, &other).is_empty());
    let removal =
        serde_json::json!({"scaleDowns": [{"node": "n1", "nodeGroup": "g", "reason": "empty"}]});
    let other_node =
        serde_json::json!({"scaleDowns": [{"node": "n2", "nodeGroup": "g", "reason": "empty"}]});
    let longer_reason = serde_json::json!({"scaleDowns": [{"node": "n1", "nodeGroup": "g", "reason": "empty node"}]});
    assert!(compare(&removal, &longer_reason).is_empty());
    assert!(!compare(&removal, &other_node).is_empty());
    assert!(!compare(&removal, &serde_json::json!({"scaleDowns": []})).is_empty());
}
