//! Cross-checks the filter half of the whole-snapshot cases in
//! `testdata/filters/` before `simulate` runs them: pending pods are placed
//! first-fit in node-name order through `FilterState`, and a stand-in for the
//! DRA allocator hands out node-local devices in slice order. The stand-in is
//! only valid for these cases (one driver, node-local slices, every claim
//! request asks for one device); the cases' full check is the `simulate`
//! conformance harness, which runs the real allocator.

mod filters_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dra_sim::filters::{FilterState, extended_resource_claim};
use dra_sim::{FeatureGates, Loader};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/filters")
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn pinned(node: &str) -> Value {
    json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]})
}

/// Runs one case and returns the report in `simulate -o json` form.
fn run(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("cluster.yaml")).expect("case has a cluster.yaml");
    let mut loader = Loader::new();
    loader
        .add_yaml("cluster.yaml", &text)
        .expect("cluster.yaml loads");
    let objects = loader.finish().objects;
    let mut nodes = objects.nodes.clone();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut devices: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut slices = objects.resource_slices.clone();
    slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for slice in &slices {
        if let Some(node) = slice.spec.node_name.as_deref() {
            let names = slice.spec.devices.iter().flatten().map(|d| d.name.clone());
            devices.entry(node.to_string()).or_default().extend(names);
        }
    }
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    let gates = FeatureGates::default();
    let mut state = FilterState::new(&nodes, &objects.pods, &objects.namespaces);
    state.set_device_classes(&objects.device_classes, &gates);
    let mut pending: Vec<&Pod> = objects
        .pods
        .iter()
        .filter(|p| dra_sim::pods::is_pending(p))
        .collect();
    pending.sort_by(|a, b| {
        dra_sim::pods::priority(b)
            .cmp(&dra_sim::pods::priority(a))
            .then(
                a.metadata
                    .creation_timestamp
                    .cmp(&b.metadata.creation_timestamp),
            )
            .then(key(a).cmp(&key(b)))
    });
    let mut report = Vec::new();
    for pod in pending {
        let prepared = match state.prepare(pod, &nodes) {
            Ok(p) => p,
            Err(e) => {
                report.push(json!({"pod": key(pod), "outcome": "unschedulable", "reasons": [e.to_string()]}));
                continue;
            }
        };
        let mut reasons = Vec::new();
        let mut placed = None;
        for (index, node) in nodes.iter().enumerate() {
            let name = node.metadata.name.clone().unwrap_or_default();
            if let Err(rejection) = state.filter(&prepared, index, node) {
                reasons.push(format!("{name}: {}", rejection.reason));
                continue;
            }
            // One device per template entry, and per request of the claim
            // for extended resources served through DRA.
            let mut wanted: Vec<(String, String)> = pod
                .spec
                .iter()
                .flat_map(|s| s.resource_claims.iter().flatten())
                .map(|c| (format!("{}-{}", key(pod), c.name), c.name.clone()))
                .collect();
            if let Some(claim) = extended_resource_claim(pod, node, &objects.device_classes, &gates)
            {
                let claim_key = format!(
                    "{}/{}",
                    pod.metadata.namespace.as_deref().unwrap_or("default"),
                    claim.metadata.name.unwrap_or_default()
                );
                for request in claim
                    .spec
                    .iter()
                    .flat_map(|s| s.devices.iter())
                    .flat_map(|d| d.requests.iter().flatten())
                {
                    wanted.push((claim_key.clone(), request.name.clone()));
                }
            }
            let free =
                devices.get(&name).map_or(0, Vec::len) - used.get(&name).copied().unwrap_or(0);
            if wanted.len() > free {
                reasons.push(format!("{name}: cannot allocate all claims"));
                continue;
            }
            let mut allocations = Vec::new();
            for (claim, request) in wanted {
                let slot = used.entry(name.clone()).or_insert(0);
                let device = devices[&name][*slot].clone();
                *slot += 1;
                allocations.push(json!({"claim": claim, "nodeSelector": pinned(&name),
                    "results": [{"request": request, "driver": "gpu.example.com", "pool": name, "device": device}]}));
            }
            placed = Some((index, name, allocations));
            break;
        }
        match placed {
            Some((index, name, allocations)) => {
                state.add_pod(pod, index);
                report.push(json!({"pod": key(pod), "outcome": "fits", "node": name, "allocations": allocations, "reasons": []}));
            }
            None => report
                .push(json!({"pod": key(pod), "outcome": "unschedulable", "reasons": reasons})),
        }
    }
    json!({"pods": report})
}

/// The conformance rules: exact pods, outcomes, nodes and allocations;
/// each expected reason a substring of some actual reason.
fn compare(expected: &Value, actual: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let empty = Vec::new();
    let e_pods = expected["pods"].as_array().unwrap_or(&empty);
    let a_pods = actual["pods"].as_array().unwrap_or(&empty);
    if e_pods.len() != a_pods.len() {
        problems.push(format!(
            "expected {} pods, got {}",
            e_pods.len(),
            a_pods.len()
        ));
    }
    for (e, a) in e_pods.iter().zip(a_pods) {
        for field in ["pod", "outcome", "node", "allocations"] {
            if e.get(field) != a.get(field) {
                problems.push(format!(
                    "{}: {field} expected {:?} got {:?}",
                    e["pod"],
                    e.get(field),
                    a.get(field)
                ));
            }
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
                    "{}: no reason contains {reason:?}: {actual_reasons:?}",
                    e["pod"]
                ));
            }
        }
    }
    problems
}

#[test]
fn filter_cases_agree_with_their_expected_reports() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("testdata/filters exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("cluster.yaml").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 25, "at least 25 cases, found {}", dirs.len());
    let mut failures = Vec::new();
    for dir in &dirs {
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("expected.json")).expect("expected.json"),
        )
        .expect("valid JSON");
        let actual = run(dir);
        let problems = compare(&expected, &actual);
        if !problems.is_empty() {
            failures.push(format!(
                "{}:\n  {}\n  actual: {actual}",
                dir.display(),
                problems.join("\n  ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}
