//! The ProvisioningRequests and CapacityBuffers of the scenarios are shaped
//! as upstream defines them: each validates against the OpenAPI schema of
//! cluster-autoscaler's own CRD (`testdata/crds/`, unchanged from upstream)
//! for its version, as the API server would check it on apply (types,
//! required fields, minimums, and no field the schema does not know, which
//! the API server would prune).

use std::path::Path;

use dra_sim::Loader;
use dra_sim::objects::ExtraObject;
use serde_json::Value;

fn load(paths: &[std::path::PathBuf], kinds: &[(&str, &str)]) -> Vec<ExtraObject> {
    let mut loader = Loader::new();
    for (group, kind) in kinds {
        loader.keep_kind(group, kind);
    }
    for path in paths {
        let text = std::fs::read_to_string(path).expect("read fixture");
        loader
            .add_yaml(&path.display().to_string(), &text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    loader.finish().objects.extra
}

fn testdata() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// `(kind, version)` → schema, from every CRD under `testdata/crds/`.
fn schemas() -> Vec<(String, String, Value)> {
    let crds: Vec<_> = std::fs::read_dir(testdata().join("crds"))
        .expect("testdata/crds")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    let mut out = Vec::new();
    for crd in load(
        &crds,
        &[("apiextensions.k8s.io", "CustomResourceDefinition")],
    ) {
        let kind = crd.value["spec"]["names"]["kind"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for version in crd.value["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            out.push((
                kind.clone(),
                version["name"].as_str().unwrap_or_default().to_string(),
                version["schema"]["openAPIV3Schema"].clone(),
            ));
        }
    }
    out
}

/// Problems of `value` against a structural schema, by path.
fn validate(schema: &Value, value: &Value, path: &str, problems: &mut Vec<String>) {
    let int_or_string = schema["x-kubernetes-int-or-string"].as_bool() == Some(true);
    match schema["type"].as_str() {
        Some("object") => {
            let Some(map) = value.as_object() else {
                problems.push(format!("{path}: expected an object, got {value}"));
                return;
            };
            for required in schema["required"].as_array().into_iter().flatten() {
                let field = required.as_str().unwrap_or_default();
                if !map.contains_key(field) {
                    problems.push(format!("{path}.{field}: required"));
                }
            }
            let properties = schema["properties"].as_object();
            let preserve = schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true);
            for (field, v) in map {
                let at = format!("{path}.{field}");
                match properties.and_then(|p| p.get(field)) {
                    Some(s) => validate(s, v, &at, problems),
                    None if schema.get("additionalProperties").is_some() => {
                        validate(&schema["additionalProperties"], v, &at, problems);
                    }
                    // metadata is `type: object` with no properties: the API
                    // server checks it itself.
                    None if preserve || properties.is_none() => {}
                    None => problems.push(format!("{at}: unknown field")),
                }
            }
        }
        Some("array") => match value.as_array() {
            Some(items) => {
                if let Some(min) = schema["minItems"].as_u64()
                    && (items.len() as u64) < min
                {
                    problems.push(format!("{path}: fewer than {min} items"));
                }
                for (i, item) in items.iter().enumerate() {
                    validate(&schema["items"], item, &format!("{path}[{i}]"), problems);
                }
            }
            None => problems.push(format!("{path}: expected an array, got {value}")),
        },
        Some("integer") => match value.as_i64() {
            Some(n) => {
                if let Some(min) = schema["minimum"].as_i64()
                    && n < min
                {
                    problems.push(format!("{path}: {n} is below the minimum {min}"));
                }
            }
            None => problems.push(format!("{path}: expected an integer, got {value}")),
        },
        Some("string") if !value.is_string() => {
            problems.push(format!("{path}: expected a string, got {value}"));
        }
        Some("boolean") if !value.is_boolean() => {
            problems.push(format!("{path}: expected a boolean, got {value}"));
        }
        None if int_or_string && !(value.is_string() || value.is_i64() || value.is_u64()) => {
            problems.push(format!(
                "{path}: expected an integer or a string, got {value}"
            ));
        }
        _ => {}
    }
}

fn problems_of(obj: &ExtraObject, schemas: &[(String, String, Value)]) -> Vec<String> {
    let version = obj.api_version.rsplit('/').next().unwrap_or_default();
    let Some((_, _, schema)) = schemas
        .iter()
        .find(|(k, v, _)| k == &obj.kind && v == version)
    else {
        return vec![format!("no CRD serves {} {}", obj.api_version, obj.kind)];
    };
    let mut problems = Vec::new();
    validate(schema, &obj.value, &obj.kind, &mut problems);
    problems
}

const KINDS: &[(&str, &str)] = &[
    ("autoscaling.x-k8s.io", "ProvisioningRequest"),
    ("autoscaling.x-k8s.io", "CapacityBuffer"),
];

#[test]
fn scenario_requests_and_buffers_validate_against_the_upstream_crds() {
    let schemas = schemas();
    assert!(
        schemas
            .iter()
            .any(|(k, v, _)| k == "ProvisioningRequest" && v == "v1")
            && schemas
                .iter()
                .any(|(k, v, _)| k == "CapacityBuffer" && v == "v1beta1"),
        "testdata/crds must hold ProvisioningRequest v1 and CapacityBuffer v1beta1"
    );
    let clusters: Vec<_> = std::fs::read_dir(testdata().join("scenarios"))
        .expect("scenarios")
        .filter_map(Result::ok)
        .map(|e| e.path().join("cluster.yaml"))
        .filter(|p| p.exists())
        .collect();
    // One loader per case: cases reuse names, and one loader keeps one
    // object per name.
    let objects: Vec<ExtraObject> = clusters
        .iter()
        .flat_map(|c| load(std::slice::from_ref(c), KINDS))
        .collect();
    assert!(
        objects.len() >= 9,
        "expected the scenarios' requests and buffers, found {}",
        objects.len()
    );
    let problems: Vec<String> = objects
        .iter()
        .flat_map(|o| {
            problems_of(o, &schemas)
                .into_iter()
                .map(move |p| format!("{}: {p}", o.origin))
        })
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_validator_rejects_what_the_api_server_would() {
    let schemas = schemas();
    let bad = r"
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: bad, namespace: ml}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets:
  - podTemplateRef: {name: t}
    count: 0
    replicas: 2
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: bad, namespace: ml}
spec:
  replicas: -1
";
    let mut loader = Loader::new();
    for (group, kind) in KINDS {
        loader.keep_kind(group, kind);
    }
    loader.add_yaml("inline", bad).expect("parses");
    let objects = loader.finish().objects.extra;
    let all: Vec<String> = objects
        .iter()
        .flat_map(|o| problems_of(o, &schemas))
        .collect();
    for expected in [
        "ProvisioningRequest.spec.podSets[0].count: 0 is below the minimum 1",
        "ProvisioningRequest.spec.podSets[0].replicas: unknown field",
        "CapacityBuffer.spec.replicas: -1 is below the minimum 0",
    ] {
        assert!(
            all.iter().any(|p| p == expected),
            "{expected} not in {all:#?}"
        );
    }
}

#[test]
fn the_chart_ships_the_same_crds() {
    for name in ["provisioningrequests", "capacitybuffers"] {
        let file = format!("autoscaling.x-k8s.io_{name}.yaml");
        let tested =
            std::fs::read_to_string(testdata().join("crds").join(&file)).expect("testdata CRD");
        let shipped = std::fs::read_to_string(
            testdata()
                .join("../charts/dra-autoscaler/files/crds")
                .join(&file),
        )
        .expect("chart CRD");
        assert!(
            tested == shipped,
            "charts/dra-autoscaler/files/crds/{file} differs from testdata/crds/{file}"
        );
    }
}
