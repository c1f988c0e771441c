//! Extended resources backed by DRA (KEP-5004): the claim the scheduler makes
//! up for a pod on a node that does not advertise the resource. The request
//! tables are ported from upstream's `extendeddynamicresources_test.go`
//! (Test_createRequestsAndMappings_requests); case names are upstream's.

mod filters_support;

use dra_sim::FeatureGates;
use dra_sim::filters::{EXTENDED_RESOURCE_CLAIM_ANNOTATION, extended_resource_claim};
use filters_support::{node, obj, pod};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use serde_json::{Value, json};

const GPU: &str = "example.com/gpu";
const GPU1: &str = "example.com/gpu1";
const INIT: &str = "example.com/gpuinit";

fn class(name: &str, resource: Option<&str>, created: &str) -> DeviceClass {
    let mut spec = json!({"selectors": []});
    if let Some(resource) = resource {
        spec["extendedResourceName"] = json!(resource);
    }
    obj(json!({"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}))
}

fn container(name: &str, requests: Value) -> Value {
    json!({"name": name, "resources": {"requests": requests}})
}

fn sidecar(name: &str, requests: Value) -> Value {
    json!({"name": name, "restartPolicy": "Always", "resources": {"requests": requests}})
}

fn test_pod(init: Vec<Value>, containers: Vec<Value>) -> Pod {
    let mut p = pod(
        "pod",
        json!({}),
        json!({"initContainers": init, "containers": containers}),
    );
    p.metadata.uid = Some("uid-1".into());
    p
}

/// A node without any of the extended resources.
fn bare_node() -> Node {
    node("node", json!({}), json!({"cpu": "8", "pods": "110"}))
}

/// (name, class, count) of each request, in order.
fn requests(claim: &ResourceClaim) -> Vec<(String, String, i64)> {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.as_ref())
        .into_iter()
        .flatten()
        .map(|r| {
            let exactly = r.exactly.as_ref().expect("test data is valid");
            assert_eq!(
                exactly.allocation_mode.as_deref(),
                Some("ExactCount"),
                "{}",
                r.name
            );
            (
                r.name.clone(),
                exactly.device_class_name.clone(),
                exactly.count.expect("test data is valid"),
            )
        })
        .collect()
}

/// (name, pod, classes, node, wanted requests).
type RequestCase<'a> = (
    &'static str,
    Pod,
    &'a Vec<DeviceClass>,
    Node,
    Vec<(String, String, i64)>,
);

fn req(name: &str, class: &str, count: i64) -> (String, String, i64) {
    (name.to_string(), class.to_string(), count)
}

#[test]
fn create_requests_and_mappings_requests() {
    let t0 = "2026-01-01T00:00:00Z";
    let dev_map = vec![class("class", Some(GPU), t0)];
    let dev_map2 = vec![
        class("class", Some(GPU), t0),
        class("class1", Some(GPU1), t0),
    ];
    let dev_map_init = vec![
        class("class", Some(GPU), t0),
        class("classInit", Some(INIT), t0),
    ];
    let pod1 = || {
        test_pod(
            vec![],
            vec![container("con0", json!({GPU: "1", GPU1: "2"}))],
        )
    };
    let pod2 = || {
        test_pod(
            vec![],
            vec![
                container("con0", json!({GPU: "1"})),
                container("con1", json!({GPU1: "2"})),
            ],
        )
    };
    let pod_init = || {
        test_pod(
            vec![container("init-con0", json!({INIT: "2"}))],
            vec![container("con0", json!({GPU: "1"}))],
        )
    };
    let pod_init2 = || {
        test_pod(
            vec![
                container("init-con0", json!({INIT: "1"})),
                container("init-con1", json!({INIT: "2"})),
            ],
            vec![container("con0", json!({GPU: "1"}))],
        )
    };
    let pod_init3 = || {
        test_pod(
            vec![
                container("init-con0", json!({INIT: "1"})),
                sidecar("sidecar-con1", json!({INIT: "1"})),
                container("init-con2", json!({INIT: "2"})),
            ],
            vec![container("con0", json!({GPU: "1"}))],
        )
    };
    // The unmapped resource must come from a device plugin, or the pod would
    // not fit the node at all.
    let gpu1_node = node("node", json!({}), json!({GPU1: "4", "pods": "110"}));
    let cases: Vec<RequestCase> = vec![
        (
            "one resource match",
            test_pod(vec![], vec![container("con0", json!({GPU: "1"}))]),
            &dev_map,
            bare_node(),
            vec![req("container-0-request-0", "class", 1)],
        ),
        (
            "one resource match, one resource not match",
            pod1(),
            &dev_map,
            gpu1_node,
            vec![req("container-0-request-0", "class", 1)],
        ),
        (
            "two resources match",
            pod1(),
            &dev_map2,
            bare_node(),
            vec![
                req("container-0-request-0", "class", 1),
                req("container-0-request-1", "class1", 2),
            ],
        ),
        (
            "two containers match",
            pod2(),
            &dev_map2,
            bare_node(),
            vec![
                req("container-0-request-0", "class", 1),
                req("container-1-request-0", "class1", 2),
            ],
        ),
        (
            "one init container, one regular container",
            pod_init(),
            &dev_map_init,
            bare_node(),
            vec![
                req("container-0-request-0", "classInit", 2),
                req("container-1-request-0", "class", 1),
            ],
        ),
        (
            "two init containers, one regular container",
            pod_init2(),
            &dev_map_init,
            bare_node(),
            vec![
                req("container-1-request-0", "classInit", 2),
                req("container-2-request-0", "class", 1),
            ],
        ),
        (
            "three init containers, one sidecar, one regular container",
            pod_init3(),
            &dev_map_init,
            bare_node(),
            vec![
                req("container-1-request-0", "classInit", 1),
                req("container-2-request-0", "classInit", 2),
                req("container-3-request-0", "class", 1),
            ],
        ),
    ];
    let gates = FeatureGates::default();
    for (name, p, classes, n, want) in cases {
        let claim = extended_resource_claim(&p, &n, classes, &gates)
            .unwrap_or_else(|| panic!("{name}: no claim"));
        assert_eq!(requests(&claim), want, "{name}");
    }
}

#[test]
fn an_init_container_reuses_the_devices_of_the_containers_after_it() {
    // The init container needs 3; the regular container holds 2 of the same
    // resource for the pod's life, so only 1 more is asked for.
    let t0 = "2026-01-01T00:00:00Z";
    let p = test_pod(
        vec![container("init", json!({GPU: "3"}))],
        vec![container("main", json!({GPU: "2"}))],
    );
    let claim = extended_resource_claim(
        &p,
        &bare_node(),
        &[class("class", Some(GPU), t0)],
        &FeatureGates::default(),
    )
    .expect("test data is valid");
    assert_eq!(
        requests(&claim),
        vec![
            req("container-0-request-0", "class", 1),
            req("container-1-request-0", "class", 2)
        ]
    );
}

#[test]
fn the_request_index_is_the_position_among_the_containers_sorted_request_names() {
    let t0 = "2026-01-01T00:00:00Z";
    let p = test_pod(
        vec![],
        vec![container(
            "main",
            json!({"cpu": "1", GPU: "1", "memory": "1Gi"}),
        )],
    );
    let claim = extended_resource_claim(
        &p,
        &bare_node(),
        &[class("class", Some(GPU), t0)],
        &FeatureGates::default(),
    )
    .expect("test data is valid");
    // cpu < example.com/gpu < memory
    assert_eq!(
        requests(&claim),
        vec![req("container-0-request-1", "class", 1)]
    );
}

#[test]
fn the_implicit_device_class_name_works_for_every_class() {
    let t0 = "2026-01-01T00:00:00Z";
    let implicit = "deviceclass.resource.kubernetes.io/gpu.example.com";
    let p = test_pod(vec![], vec![container("main", json!({implicit: "2"}))]);
    let claim = extended_resource_claim(
        &p,
        &bare_node(),
        &[class("gpu.example.com", None, t0)],
        &FeatureGates::default(),
    )
    .expect("test data is valid");
    assert_eq!(
        requests(&claim),
        vec![req("container-0-request-0", "gpu.example.com", 2)]
    );
}

#[test]
fn a_node_whose_device_plugin_advertises_the_resource_needs_no_claim() {
    let t0 = "2026-01-01T00:00:00Z";
    let p = test_pod(vec![], vec![container("main", json!({GPU: "1"}))]);
    let plugin_node = node("node", json!({}), json!({GPU: "8", "pods": "110"}));
    assert!(
        extended_resource_claim(
            &p,
            &plugin_node,
            &[class("class", Some(GPU), t0)],
            &FeatureGates::default()
        )
        .is_none()
    );
    // Allocatable 0 means the device plugin has nothing: DRA serves it.
    let zero_node = node("node", json!({}), json!({GPU: "0", "pods": "110"}));
    assert!(
        extended_resource_claim(
            &p,
            &zero_node,
            &[class("class", Some(GPU), t0)],
            &FeatureGates::default()
        )
        .is_some()
    );
}

#[test]
fn no_claim_with_the_gate_off_or_without_a_class() {
    let t0 = "2026-01-01T00:00:00Z";
    let p = test_pod(vec![], vec![container("main", json!({GPU: "1"}))]);
    let off = FeatureGates {
        extended_resource: false,
        ..FeatureGates::default()
    };
    assert!(
        extended_resource_claim(&p, &bare_node(), &[class("class", Some(GPU), t0)], &off).is_none()
    );
    assert!(extended_resource_claim(&p, &bare_node(), &[], &FeatureGates::default()).is_none());
}

#[test]
fn when_classes_clash_the_newest_wins_then_the_lower_name() {
    let p = test_pod(vec![], vec![container("main", json!({GPU: "1"}))]);
    let gates = FeatureGates::default();
    let classes = [
        class("b-old", Some(GPU), "2026-01-01T00:00:00Z"),
        class("a-new", Some(GPU), "2026-02-01T00:00:00Z"),
        class("c-new", Some(GPU), "2026-02-01T00:00:00Z"),
    ];
    let claim =
        extended_resource_claim(&p, &bare_node(), &classes, &gates).expect("test data is valid");
    assert_eq!(
        requests(&claim),
        vec![req("container-0-request-0", "a-new", 1)]
    );
}

#[test]
fn the_claim_is_owned_and_annotated_like_upstreams() {
    let p = test_pod(vec![], vec![container("main", json!({GPU: "1"}))]);
    let claim = extended_resource_claim(
        &p,
        &bare_node(),
        &[class("class", Some(GPU), "2026-01-01T00:00:00Z")],
        &FeatureGates::default(),
    )
    .expect("test data is valid");
    assert_eq!(
        claim.metadata.name.as_deref(),
        Some("pod-extended-resources")
    );
    assert_eq!(
        claim.metadata.generate_name.as_deref(),
        Some("pod-extended-resources-")
    );
    assert_eq!(claim.metadata.namespace.as_deref(), Some("default"));
    let annotations = claim.metadata.annotations.expect("test data is valid");
    assert_eq!(
        annotations
            .get(EXTENDED_RESOURCE_CLAIM_ANNOTATION)
            .map(String::as_str),
        Some("true")
    );
    let owner = &claim.metadata.owner_references.expect("test data is valid")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("Pod", "pod", "uid-1")
    );
    assert_eq!(owner.controller, Some(true));
}
