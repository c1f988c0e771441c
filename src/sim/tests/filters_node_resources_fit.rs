//! NodeResourcesFit, ported from upstream's `fit_test.go` (TestEnoughRequests,
//! TestNotEnoughRequests, TestStorageRequests, TestRestartableInitContainers).
//! Case names are upstream's; quantities are upstream's (cpu in milli-units).

mod filters_support;

use dra_sim::FeatureGates;
use dra_sim::filters::{FilterState, Plugin};
use filters_support::{bound, node, obj, plugin_reason, pod};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::DeviceClass;
use serde_json::{Value, json};

const AAA: &str = "example.com/aaa";
const BBB: &str = "example.com/bbb";
const HUGE: &str = "hugepages-2Mi";
const DRA_RESOURCE: &str = "extended.resource.dra.io/something";

/// `makeAllocatableResources(10, 20, 32, 5, 20, 5)`.
fn upstream_node() -> Node {
    node(
        "node",
        json!({}),
        json!({"cpu": "10m", "memory": "20", "pods": "32", AAA: "5", "ephemeral-storage": "20", HUGE: "5"}),
    )
}

/// `newResourcePod(framework.Resource{MilliCPU, Memory, ScalarResources})`, one
/// container per entry.
fn containers(list: &[Value]) -> Value {
    Value::Array(
        list.iter()
            .enumerate()
            .map(|(i, r)| json!({"name": format!("c{i}"), "resources": {"requests": r}}))
            .collect(),
    )
}

fn r(cpu_milli: i64, memory: i64) -> Value {
    json!({"cpu": format!("{cpu_milli}m"), "memory": memory.to_string()})
}

fn rx(cpu_milli: i64, memory: i64, name: &str, quantity: i64) -> Value {
    json!({"cpu": format!("{cpu_milli}m"), "memory": memory.to_string(), name: quantity.to_string()})
}

fn scalar(name: &str, quantity: i64) -> Value {
    json!({name: quantity.to_string()})
}

fn test_pod(regular: &[Value], init: &[Value]) -> Pod {
    pod(
        "p",
        json!({}),
        json!({"containers": containers(regular), "initContainers": containers(init)}),
    )
}

fn with_spec(mut pod: Pod, extra: Value) -> Pod {
    let mut spec = serde_json::to_value(pod.spec.take()).expect("test data is valid");
    if let (Value::Object(spec), Value::Object(extra)) = (&mut spec, extra) {
        spec.extend(extra);
    }
    pod.spec = Some(obj(spec));
    pod
}

/// The pod already on the node (upstream's `NewNodeInfo(newResourcePod(...))`).
fn existing(requests: Value) -> Pod {
    bound(
        pod(
            "existing",
            json!({}),
            json!({"containers": containers(&[requests])}),
        ),
        "node",
    )
}

fn dra_class() -> DeviceClass {
    obj(json!({
        "metadata": {"name": "device-class-name"},
        "spec": {"extendedResourceName": DRA_RESOURCE}
    }))
}

struct Case {
    name: &'static str,
    pod: Pod,
    existing: Value,
    dra_gate: bool,
    want: Option<&'static str>,
}

fn run(node: &Node, cases: Vec<Case>) {
    for case in cases {
        let mut state =
            FilterState::new(std::slice::from_ref(node), &[existing(case.existing)], &[]);
        let gates = FeatureGates {
            extended_resource: case.dra_gate,
            ..FeatureGates::default()
        };
        state.set_device_classes(&[dra_class()], &gates);
        let prepared = state
            .prepare(&case.pod, std::slice::from_ref(node))
            .expect("test data is valid");
        let got = plugin_reason(&state, Plugin::NodeResourcesFit, &prepared, 0, node);
        assert_eq!(got.as_deref(), case.want, "{}", case.name);
    }
}

fn case(name: &'static str, pod: Pod, existing: Value, want: Option<&'static str>) -> Case {
    Case {
        name,
        pod,
        existing,
        dra_gate: false,
        want,
    }
}

#[test]
fn enough_requests() {
    let cpu = Some("Insufficient cpu");
    let memory = Some("Insufficient memory");
    let aaa = Some("Insufficient example.com/aaa");
    let huge = Some("Insufficient hugepages-2Mi");
    let cases = vec![
        case(
            "no resources requested always fits",
            pod("p", json!({}), json!({"containers": []})),
            r(10, 20),
            None,
        ),
        case(
            "too many resources fails",
            test_pod(&[r(1, 1)], &[]),
            r(10, 20),
            Some("Insufficient cpu, Insufficient memory"),
        ),
        case(
            "too many resources fails due to init container cpu",
            test_pod(&[r(1, 1)], &[r(3, 1)]),
            r(8, 19),
            cpu,
        ),
        case(
            "too many resources fails due to highest init container cpu",
            test_pod(&[r(1, 1)], &[r(3, 1), r(2, 1)]),
            r(8, 19),
            cpu,
        ),
        case(
            "too many resources fails due to init container memory",
            test_pod(&[r(1, 1)], &[r(1, 3)]),
            r(9, 19),
            memory,
        ),
        case(
            "too many resources fails due to highest init container memory",
            test_pod(&[r(1, 1)], &[r(1, 3), r(1, 2)]),
            r(9, 19),
            memory,
        ),
        case(
            "init container fits because it's the max, not sum, of containers and init containers",
            test_pod(&[r(1, 1)], &[r(1, 1)]),
            r(9, 19),
            None,
        ),
        case(
            "multiple init containers fit because it's the max, not sum, of containers and init containers",
            test_pod(&[r(1, 1)], &[r(1, 1), r(1, 1)]),
            r(9, 19),
            None,
        ),
        case(
            "both resources fit",
            test_pod(&[r(1, 1)], &[]),
            r(5, 5),
            None,
        ),
        case(
            "one resource memory fits",
            test_pod(&[r(2, 1)], &[]),
            r(9, 5),
            cpu,
        ),
        case(
            "one resource cpu fits",
            test_pod(&[r(1, 2)], &[]),
            r(5, 19),
            memory,
        ),
        case("equal edge case", test_pod(&[r(5, 1)], &[]), r(5, 19), None),
        case(
            "equal edge case for init container",
            test_pod(&[r(4, 1)], &[r(5, 1)]),
            r(5, 19),
            None,
        ),
        case(
            "extended resource fits",
            test_pod(&[scalar(AAA, 1)], &[]),
            json!({}),
            None,
        ),
        case(
            "extended resource fits for init container",
            test_pod(&[], &[scalar(AAA, 1)]),
            json!({}),
            None,
        ),
        case(
            "extended resource capacity enforced",
            test_pod(&[rx(1, 1, AAA, 10)], &[]),
            rx(0, 0, AAA, 0),
            aaa,
        ),
        case(
            "extended resource capacity enforced for init container",
            test_pod(&[], &[rx(1, 1, AAA, 10)]),
            rx(0, 0, AAA, 0),
            aaa,
        ),
        case(
            "extended resource allocatable enforced",
            test_pod(&[rx(1, 1, AAA, 1)], &[]),
            rx(0, 0, AAA, 5),
            aaa,
        ),
        case(
            "extended resource allocatable enforced for init container",
            test_pod(&[], &[rx(1, 1, AAA, 1)]),
            rx(0, 0, AAA, 5),
            aaa,
        ),
        case(
            "extended resource allocatable enforced for multiple containers",
            test_pod(&[rx(1, 1, AAA, 3), rx(1, 1, AAA, 3)], &[]),
            rx(0, 0, AAA, 2),
            aaa,
        ),
        case(
            "extended resource allocatable admits multiple init containers",
            test_pod(&[], &[rx(1, 1, AAA, 3), rx(1, 1, AAA, 3)]),
            rx(0, 0, AAA, 2),
            None,
        ),
        case(
            "extended resource allocatable enforced for multiple init containers",
            test_pod(&[], &[rx(1, 1, AAA, 6), rx(1, 1, AAA, 3)]),
            rx(0, 0, AAA, 2),
            aaa,
        ),
        case(
            "extended resource allocatable enforced for unknown resource",
            test_pod(&[rx(1, 1, BBB, 1)], &[]),
            r(0, 0),
            Some("Insufficient example.com/bbb"),
        ),
        case(
            "extended resource allocatable enforced for unknown resource for init container",
            test_pod(&[], &[rx(1, 1, BBB, 1)]),
            r(0, 0),
            Some("Insufficient example.com/bbb"),
        ),
        case(
            "kubernetes.io resource capacity enforced",
            test_pod(&[rx(1, 1, "kubernetes.io/something", 10)], &[]),
            r(0, 0),
            Some("Insufficient kubernetes.io/something"),
        ),
        case(
            "kubernetes.io resource capacity enforced for init container",
            test_pod(&[], &[rx(1, 1, "subdomain.kubernetes.io/something", 10)]),
            r(0, 0),
            Some("Insufficient subdomain.kubernetes.io/something"),
        ),
        case(
            "hugepages resource capacity enforced",
            test_pod(&[rx(1, 1, HUGE, 10)], &[]),
            rx(0, 0, HUGE, 0),
            huge,
        ),
        case(
            "hugepages resource capacity enforced for init container",
            test_pod(&[], &[rx(1, 1, HUGE, 10)]),
            rx(0, 0, HUGE, 0),
            huge,
        ),
        case(
            "hugepages resource allocatable enforced for multiple containers",
            test_pod(&[rx(1, 1, HUGE, 3), rx(1, 1, HUGE, 3)], &[]),
            rx(0, 0, HUGE, 2),
            huge,
        ),
        case(
            "resources + pod overhead fits",
            with_spec(
                test_pod(&[r(1, 1)], &[]),
                json!({"overhead": {"cpu": "3m", "memory": "13"}}),
            ),
            r(5, 5),
            None,
        ),
        case(
            "requests + overhead does not fit for memory",
            with_spec(
                test_pod(&[r(1, 1)], &[]),
                json!({"overhead": {"cpu": "1m", "memory": "15"}}),
            ),
            r(5, 5),
            memory,
        ),
        case(
            "skip checking extended resource request with quantity zero via resource groups",
            test_pod(&[rx(1, 1, AAA, 0)], &[]),
            rx(0, 0, AAA, 6),
            None,
        ),
        case(
            "skip checking resource request with quantity zero",
            test_pod(&[scalar(AAA, 1)], &[]),
            rx(20, 30, AAA, 1),
            None,
        ),
        case(
            "both pod-level and container-level resources fit",
            with_spec(
                test_pod(&[r(1, 1)], &[]),
                json!({"resources": {"requests": {"cpu": "1m", "memory": "2"}}}),
            ),
            r(5, 5),
            None,
        ),
        case(
            "pod-level cpu resource not fit",
            with_spec(
                test_pod(&[r(1, 1)], &[]),
                json!({"resources": {"requests": {"cpu": "7m", "memory": "2"}}}),
            ),
            r(5, 5),
            cpu,
        ),
        case(
            "pod-level memory resource not fit",
            with_spec(
                test_pod(&[r(1, 1)], &[]),
                json!({"resources": {"requests": {"cpu": "3m", "memory": "2"}}}),
            ),
            r(5, 19),
            memory,
        ),
        case(
            "pod-level hugepages resource fit",
            with_spec(
                test_pod(&[], &[]),
                json!({"resources": {"requests": {"cpu": "3m", "memory": "2", HUGE: "5"}}}),
            ),
            json!({}),
            None,
        ),
        case(
            "both pod-level and container-level hugepages resource fit",
            with_spec(
                test_pod(&[rx(1, 1, HUGE, 3)], &[]),
                json!({"resources": {"requests": {"cpu": "3m", "memory": "2", HUGE: "5"}}}),
            ),
            json!({}),
            None,
        ),
        case(
            "pod-level hugepages resource not fit",
            with_spec(
                test_pod(&[], &[]),
                json!({"resources": {"requests": {"cpu": "3m", "memory": "2", HUGE: "10"}}}),
            ),
            json!({}),
            huge,
        ),
        case(
            "one pod-level cpu resource fits and all init and non-init containers resources fit",
            with_spec(
                test_pod(&[r(1, 1)], &[r(1, 1)]),
                json!({"resources": {"requests": {"cpu": "3m", "memory": "2"}}}),
            ),
            r(5, 19),
            memory,
        ),
    ];
    run(&upstream_node(), cases);
}

#[test]
fn enough_requests_with_extended_resources_backed_by_dra() {
    let dra = |name, pod, existing, gate, want| Case {
        name,
        pod,
        existing,
        dra_gate: gate,
        want,
    };
    let cases = vec![
        dra(
            "extended resource backed by device plugin",
            test_pod(&[scalar(AAA, 1)], &[]),
            json!({}),
            true,
            None,
        ),
        dra(
            "extended resource backed by DRA",
            test_pod(&[rx(1, 1, DRA_RESOURCE, 1)], &[]),
            r(0, 0),
            true,
            None,
        ),
        dra(
            "extended resource backed by DRA not enabled",
            test_pod(&[rx(1, 1, DRA_RESOURCE, 1)], &[]),
            r(0, 0),
            false,
            Some("Insufficient extended.resource.dra.io/something"),
        ),
        dra(
            "extended resource NOT backed by DRA",
            test_pod(&[rx(1, 1, BBB, 1)], &[]),
            r(0, 0),
            true,
            Some("Insufficient example.com/bbb"),
        ),
        dra(
            "extended resource was backed by Device Plugin (Allocatable: 0)",
            test_pod(&[scalar(DRA_RESOURCE, 1)], &[]),
            scalar(DRA_RESOURCE, 0),
            true,
            None,
        ),
        dra(
            "extended resource was backed by Device Plugin (Allocatable: 0), global cache",
            test_pod(&[scalar(AAA, 1)], &[]),
            scalar(AAA, 0),
            true,
            None,
        ),
    ];
    run(&upstream_node(), cases);
}

#[test]
fn prepared_pod_lists_the_extended_resources_dra_can_serve() {
    let node = upstream_node();
    let mut state = FilterState::new(std::slice::from_ref(&node), &[], &[]);
    state.set_device_classes(&[dra_class()], &FeatureGates::default());
    let p = test_pod(&[scalar(DRA_RESOURCE, 2), scalar(AAA, 1)], &[]);
    let prepared = state
        .prepare(&p, std::slice::from_ref(&node))
        .expect("test data is valid");
    assert_eq!(
        prepared.extended_via_dra,
        vec![(DRA_RESOURCE.to_string(), 2)]
    );
}

#[test]
fn not_enough_requests() {
    // `makeAllocatableResources(10, 20, 1, 0, 0, 0)`: room for one pod only.
    let node = node(
        "node",
        json!({}),
        json!({"cpu": "10m", "memory": "20", "pods": "1", AAA: "0", "ephemeral-storage": "0", HUGE: "0"}),
    );
    let too_many = Some("Too many pods");
    let cases = vec![
        case(
            "even without specified resources, predicate fails when there's no space for additional pod",
            pod("p", json!({}), json!({"containers": []})),
            r(10, 20),
            too_many,
        ),
        case(
            "even if both resources fit, predicate fails when there's no space for additional pod",
            test_pod(&[r(1, 1)], &[]),
            r(5, 5),
            too_many,
        ),
        case(
            "even for equal edge case, predicate fails when there's no space for additional pod",
            test_pod(&[r(5, 1)], &[]),
            r(5, 19),
            too_many,
        ),
        case(
            "even for equal edge case, predicate fails when there's no space for additional pod due to init container",
            test_pod(&[r(5, 1)], &[r(5, 1)]),
            r(5, 19),
            too_many,
        ),
    ];
    run(&node, cases);
}

#[test]
fn storage_requests() {
    let eph = |n: i64| json!({"ephemeral-storage": n.to_string()});
    let cases = vec![
        case(
            "empty storage requested, and pod fits",
            test_pod(&[r(1, 1)], &[]),
            r(2, 10),
            None,
        ),
        case(
            "storage ephemeral local storage request exceeds allocatable",
            test_pod(&[eph(25)], &[]),
            r(2, 2),
            Some("Insufficient ephemeral-storage"),
        ),
        case(
            "ephemeral local storage is sufficient",
            test_pod(&[eph(5)], &[]),
            json!({"cpu": "2m", "memory": "2", "ephemeral-storage": "10"}),
            None,
        ),
        case("pod fits", test_pod(&[eph(10)], &[]), r(2, 2), None),
    ];
    run(&upstream_node(), cases);
}

#[test]
fn restartable_init_containers() {
    // `makeAllocatableResources(2, 0, 1, 0, 0, 0)` and no pod on the node.
    let node = node(
        "node",
        json!({}),
        json!({"cpu": "2m", "memory": "0", "pods": "1"}),
    );
    let sidecar_pod = |regular: &str, sidecar: &str| {
        pod(
            "p",
            json!({}),
            json!({
                "containers": [{"name": "regular", "resources": {"requests": {"cpu": regular}}}],
                "initContainers": [{"name": "restartable-init", "restartPolicy": "Always",
                                    "resources": {"requests": {"cpu": sidecar}}}]
            }),
        )
    };
    for (name, p, want) in [
        (
            "allow pod if the total requested resources do not exceed the node's allocatable resources",
            sidecar_pod("1m", "1m"),
            None,
        ),
        (
            "not allow pod if the total requested resources do exceed the node's allocatable resources",
            sidecar_pod("1m", "2m"),
            Some("Insufficient cpu"),
        ),
    ] {
        let state = FilterState::new(std::slice::from_ref(&node), &[], &[]);
        let prepared = state
            .prepare(&p, std::slice::from_ref(&node))
            .expect("test data is valid");
        let got = plugin_reason(&state, Plugin::NodeResourcesFit, &prepared, 0, &node);
        assert_eq!(got.as_deref(), want, "{name}");
    }
}

#[test]
fn pods_placed_in_the_simulation_use_up_the_node() {
    let node = node(
        "node",
        json!({}),
        json!({"cpu": "1", "memory": "1Gi", "pods": "110"}),
    );
    let mut state = FilterState::new(std::slice::from_ref(&node), &[], &[]);
    let half = test_pod(&[json!({"cpu": "500m", "memory": "256Mi"})], &[]);
    let prepared = state
        .prepare(&half, std::slice::from_ref(&node))
        .expect("test data is valid");
    assert!(state.filter(&prepared, 0, &node).is_ok());
    state.add_pod(&half, 0);
    state.add_pod(&half, 0);
    let prepared = state
        .prepare(&half, std::slice::from_ref(&node))
        .expect("test data is valid");
    let rejection = state.filter(&prepared, 0, &node).unwrap_err();
    assert_eq!(rejection.plugin, "NodeResourcesFit");
    assert_eq!(rejection.reason, "Insufficient cpu");
}

#[test]
fn a_request_that_is_not_a_quantity_makes_the_pod_unschedulable_everywhere() {
    let node = upstream_node();
    let state = FilterState::new(std::slice::from_ref(&node), &[], &[]);
    let bad = test_pod(&[json!({"cpu": "lots"})], &[]);
    let error = state
        .prepare(&bad, std::slice::from_ref(&node))
        .unwrap_err();
    assert_eq!(
        (error.plugin, error.code),
        (
            "NodeResourcesFit",
            dra_sim::reason::Code::InvalidResourceRequest
        )
    );
    let error = error.to_string();
    assert!(
        error.contains("default/p") && error.contains("lots"),
        "{error}"
    );
}

#[test]
fn finished_pods_do_not_hold_resources() {
    let node = node(
        "node",
        json!({}),
        json!({"cpu": "1", "memory": "1Gi", "pods": "110"}),
    );
    let mut done = existing(json!({"cpu": "1"}));
    done.status = Some(obj(json!({"phase": "Succeeded"})));
    let state = FilterState::new(std::slice::from_ref(&node), &[done], &[]);
    let p = test_pod(&[json!({"cpu": "1"})], &[]);
    let prepared = state
        .prepare(&p, std::slice::from_ref(&node))
        .expect("test data is valid");
    assert!(state.filter(&prepared, 0, &node).is_ok());
}
