//! Planner scenarios: every directory under `testdata/scenarios/` holds a
//! `cluster.yaml` (snapshot, NodeGroups, gang objects), the `expected.json`
//! plan that the planner's rules imply, and optionally `args`.
//!
//! Comparison rules: `scaleUps` exactly and in order (every key written in
//! the expectation, prices to 1e-9); `podGroups` in order by podGroup, api
//! (when expected), outcome, minCount and members, with each expected reason a substring of
//! some actual reason; `pods` in order by pod, outcome, node and nodeGroup
//! (allocations only when the expectation lists them); `nodeGroupErrors` by
//! nodeGroup when expected; `scaleDowns` and `scaleDownBlocked`, when the
//! expectation has the key, in order by node, nodeGroup and code (exactly:
//! every entry's `code` is written in the expectation), each expected
//! reason a substring of the actual one; `provisioningRequests` and
//! `capacityBuffers`, when expected, in order, every key written in the
//! expectation (a `condition`'s keys likewise) and each expected reason a
//! substring of some actual reason.

mod golden;

use golden::{list, missing_reasons, pod_fields};
use serde_json::Value;

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
        for field in ["podGroup", "api", "outcome", "minCount", "members"] {
            if let Some(ev) = e.get(field)
                && !a.get(field).is_some_and(|av| same(ev, av))
            {
                problems.push(format!(
                    "podGroup {name}: {field} expected {ev} got {}",
                    a.get(field).unwrap_or(&Value::Null)
                ));
            }
        }
        problems.extend(missing_reasons(&format!("podGroup {name}"), e, a));
    }
    problems.extend(pod_fields(expected, actual));
    for (e, a) in list(expected, "pods").iter().zip(list(actual, "pods")) {
        let name = e["pod"].as_str().unwrap_or("?");
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
                    && e.get("code").is_some()
                    && e["code"] == a["code"]
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
    for (key, name_key) in [
        ("provisioningRequests", "provisioningRequest"),
        ("capacityBuffers", "capacityBuffer"),
    ] {
        if expected.get(key).is_none() {
            continue;
        }
        let (el, al) = (list(expected, key), list(actual, key));
        if el.len() != al.len() {
            problems.push(format!("expected {} {key}, got {}", el.len(), al.len()));
        }
        for (e, a) in el.iter().zip(al) {
            let name = e[name_key].as_str().unwrap_or("?");
            for (field, ev) in e.as_object().into_iter().flatten() {
                if field != "reasons" && !a.get(field).is_some_and(|av| same(ev, av)) {
                    problems.push(format!(
                        "{key} {name}: {field} expected {ev} got {}",
                        a.get(field).unwrap_or(&Value::Null)
                    ));
                }
            }
            problems.extend(missing_reasons(&format!("{key} {name}"), e, a));
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
    golden::run_suite("scenarios", 103, compare);
}

/// The plan `simulate -o json` prints reads back into the typed reports (the
/// plan, and the scale-down analysis for `scaleDowns` and `scaleDownBlocked`)
/// and writes out unchanged: the typed fields (gang API, gang and pod names,
/// capacity type) keep the JSON contract's strings.
fn reads_back_unchanged(_expected: &Value, actual: &Value) -> Vec<String> {
    let typed: dra_plan::PlanReport = match serde_json::from_value(actual.clone()) {
        Ok(r) => r,
        Err(e) => return vec![format!("does not read back: {e}")],
    };
    let scale_down: dra_plan::scaledown::ScaleDownReport =
        match serde_json::from_value(actual.clone()) {
            Ok(r) => r,
            Err(e) => return vec![format!("scale-down keys do not read back: {e}")],
        };
    let again = serde_json::to_value(&typed).and_then(|mut plan| {
        if let (Some(map), Value::Object(more)) =
            (plan.as_object_mut(), serde_json::to_value(&scale_down)?)
        {
            map.extend(more);
        }
        Ok(plan)
    });
    match again {
        Ok(again) if &again == actual => Vec::new(),
        Ok(again) => vec![format!("writes back differently: {again}")],
        Err(e) => vec![format!("does not write back: {e}")],
    }
}

#[test]
fn plans_read_back_into_the_typed_report_unchanged() {
    golden::run_suite("scenarios", 103, reads_back_unchanged);
}

#[test]
fn comparison_catches_differences() {
    let expected = serde_json::json!({"scaleUps": [{"nodeGroup": "a", "count": 2}], "podGroups": [], "pods": []});
    let same_plan = serde_json::json!({"scaleUps": [{"nodeGroup": "a", "count": 2, "pricePerHour": 0.0}], "podGroups": [], "pods": []});
    let other = serde_json::json!({"scaleUps": [{"nodeGroup": "a", "count": 3}], "podGroups": [], "pods": []});
    assert!(compare(&expected, &same_plan).is_empty());
    assert!(!compare(&expected, &other).is_empty());
    let removal = serde_json::json!({"scaleDowns": [{"node": "n1", "nodeGroup": "g", "reason": "empty", "code": "Empty"}]});
    let other_node = serde_json::json!({"scaleDowns": [{"node": "n2", "nodeGroup": "g", "reason": "empty", "code": "Empty"}]});
    let longer_reason = serde_json::json!({"scaleDowns": [{"node": "n1", "nodeGroup": "g", "reason": "empty node", "code": "Empty"}]});
    let other_code = serde_json::json!({"scaleDowns": [{"node": "n1", "nodeGroup": "g", "reason": "empty", "code": "Underutilized"}]});
    let no_code =
        serde_json::json!({"scaleDowns": [{"node": "n1", "nodeGroup": "g", "reason": "empty"}]});
    assert!(compare(&removal, &longer_reason).is_empty());
    assert!(!compare(&removal, &other_code).is_empty());
    assert!(
        !compare(&no_code, &removal).is_empty(),
        "an expectation must write the code"
    );
    assert!(!compare(&removal, &other_node).is_empty());
    assert!(!compare(&removal, &serde_json::json!({"scaleDowns": []})).is_empty());
}
