//! A small generated cluster — devices with attributes and capacity, claims
//! with counts, `All`, selectors, `firstAvailable` and constraints — is loaded
//! and simulated: nothing panics, every pass ends within the work budget (a
//! 5 ms Filter bound, see `SEARCH_BUDGET_MS`), and
//! no device is handed out twice.
//!
//! The cluster is handed to the loader as parsed documents (what `add_yaml`
//! gives `add_value` after parsing), so every input still goes through the
//! loader's checks and typed decoding, but not through the YAML parser: that
//! is the `loader` target's job, and here it cost three quarters of each
//! run's time and coverage bookkeeping without depending on the input.
#![no_main]

use std::collections::BTreeSet;

use arbitrary::{Result, Unstructured};
use dra_sim::objects::Origin;
use dra_sim::report::Outcome;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// The Filter's time bound for each node, as `--dra-filter-timeout` sets it:
/// 5 ms, i.e. 5,000 search steps (`dra_sim::gates::SEARCH_STEPS_PER_MS`).
///
/// Why not upstream's 10 s default: with it, an input whose claims cannot be
/// met but are not provably so (the counting checkpoint after 100 steps only
/// catches the plain cases) searches 10 million steps, seconds in this
/// instrumented build, and a handful of such inputs took most of every long
/// run's time. A bug in how a search runs shows within the first thousand
/// steps on clusters this small (at most 24 devices); how a search ends at its
/// bound is still exercised, more often; and runaway searches at the default
/// bound are `testdata/robustness/`'s job.
const SEARCH_BUDGET_MS: u64 = 5;

const SELECTORS: [&str; 6] = [
    r#"device.attributes["gpu.example.com"].g == 1"#,
    r#"device.attributes["gpu.example.com"].model == "A""#,
    r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0"#,
    r#"device.attributes["gpu.example.com"].g > 0 && device.attributes["gpu.example.com"].g < 3"#,
    "true",
    r#"device.attributes["gpu.example.com"].missing"#,
];

/// One device request (`exactly`, or one `firstAvailable` alternative).
fn request_body(u: &mut Unstructured<'_>) -> Result<serde_json::Map<String, Value>> {
    let mut body = serde_json::Map::new();
    body.insert("deviceClassName".into(), json!("gpu"));
    if u.ratio(1, 6)? {
        body.insert("allocationMode".into(), json!("All"));
    } else {
        body.insert("count".into(), json!(u.int_in_range(1..=8)?));
    }
    if u.ratio(1, 2)? {
        let selector = u.choose(&SELECTORS)?;
        body.insert(
            "selectors".into(),
            json!([{"cel": {"expression": selector}}]),
        );
    }
    Ok(body)
}

/// The cluster's objects, as a YAML or JSON file would hold them.
fn cluster(u: &mut Unstructured<'_>) -> Result<Vec<Value>> {
    let mut objects = Vec::new();
    let nodes = u.int_in_range(1..=2)?;
    for n in 0..nodes {
        objects.push(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{n}"), "labels": {"kubernetes.io/hostname": format!("node-{n}")}},
            "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}},
        }));
        let mut devices = Vec::new();
        for d in 0..u.int_in_range(1..=12)? {
            let g = u.int_in_range(0..=3)?;
            let model = if u.arbitrary()? { "A" } else { "B" };
            let memory = *u.choose(&["10Gi", "20Gi", "40Gi"])?;
            devices.push(json!({
                "name": format!("gpu-{d}"),
                "attributes": {"g": {"int": g}, "model": {"string": model}},
                "capacity": {"memory": {"value": memory}},
            }));
        }
        objects.push(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("slice-{n}")},
            "spec": {
                "driver": "gpu.example.com", "nodeName": format!("node-{n}"),
                "pool": {"name": format!("node-{n}"), "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }));
    }
    objects.push(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]},
    }));
    let claims = u.int_in_range(1..=3)?;
    for c in 0..claims {
        let mut requests = Vec::new();
        for r in 0..u.int_in_range(1..=3)? {
            let alternatives = if u.ratio(1, 4)? {
                u.int_in_range(1..=3)?
            } else {
                0
            };
            let request = if alternatives > 0 {
                let mut subrequests = Vec::new();
                for a in 0..alternatives {
                    let mut body = request_body(u)?;
                    body.insert("name".into(), json!(format!("s{a}")));
                    subrequests.push(Value::Object(body));
                }
                json!({"name": format!("r{r}"), "firstAvailable": subrequests})
            } else {
                json!({"name": format!("r{r}"), "exactly": request_body(u)?})
            };
            requests.push(request);
        }
        let mut devices = json!({"requests": requests});
        if u.ratio(1, 2)? {
            let kind = if u.arbitrary()? {
                "matchAttribute"
            } else {
                "distinctAttribute"
            };
            let attribute = if u.arbitrary()? { "g" } else { "model" };
            let mut constraint = serde_json::Map::new();
            constraint.insert(kind.into(), json!(format!("gpu.example.com/{attribute}")));
            devices["constraints"] = json!([constraint]);
        }
        objects.push(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": format!("claim-{c}"), "namespace": "default"},
            "spec": {"devices": devices},
        }));
    }
    let pod_claims: Vec<Value> = (0..claims)
        .map(|c| json!({"name": format!("c{c}"), "resourceClaimName": format!("claim-{c}")}))
        .collect();
    objects.push(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "c", "image": "i"}], "resourceClaims": pod_claims},
    }));
    Ok(objects)
}

fuzz_target!(init: dra_fuzz::simulator_stack(), |data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(objects) = cluster(&mut u) else {
        return;
    };
    let mut loader = dra_sim::Loader::new();
    for (document, object) in objects.iter().enumerate() {
        let origin = Origin {
            source: "fuzz.yaml".into(),
            document,
            item: None,
        };
        if loader.add_value(origin, object.clone()).is_err() {
            return;
        }
    }
    let loaded = loader.finish().objects;
    let mut gates = dra_sim::FeatureGates::default();
    gates.dra_filter_timeout_ms = SEARCH_BUDGET_MS;
    let report = dra_sim::simulate::simulate(loaded, gates);
    for pod in &report.pods {
        if pod.outcome != Outcome::Fits {
            continue;
        }
        let mut seen = BTreeSet::new();
        for allocation in pod.allocations.iter().flatten() {
            for result in &allocation.results {
                assert!(
                    seen.insert((result.pool.clone(), result.device.clone())),
                    "device {}/{} allocated twice:\n{}",
                    result.pool,
                    result.device,
                    serde_json::to_string_pretty(&objects).unwrap_or_default()
                );
            }
        }
    }
});
