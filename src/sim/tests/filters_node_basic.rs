//! NodeUnschedulable, NodeName, TaintToleration and NodePorts, ported from
//! upstream's `node_unschedulable_test.go`, `node_name_test.go`,
//! `taint_toleration_test.go` (TestTaintTolerationFilter) and
//! `node_ports_test.go` (TestNodePorts). Case names are upstream's.

mod filters_support;

use dra_sim::filters::{FilterState, Plugin};
use filters_support::{bound, obj, plugin_reason, pod};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

fn run_one(plugin: Plugin, node: &Node, existing: &[Pod], pod: &Pod) -> Option<String> {
    let state = FilterState::new(std::slice::from_ref(node), existing, &[]);
    let prepared = state
        .prepare(pod, std::slice::from_ref(node))
        .expect("test data is valid");
    plugin_reason(&state, plugin, &prepared, 0, node)
}

#[test]
fn node_unschedulable() {
    let node = |unschedulable: bool| -> Node {
        obj(json!({"metadata": {"name": "n"}, "spec": {"unschedulable": unschedulable}}))
    };
    let tolerating = pod(
        "p",
        json!({}),
        json!({"containers": [], "tolerations": [
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}),
    );
    let plain = pod("p", json!({}), json!({"containers": []}));
    let cases = [
        (
            "Does not schedule pod to unschedulable node (node.Spec.Unschedulable==true)",
            &plain,
            node(true),
            Some("node(s) were unschedulable"),
        ),
        ("Schedule pod to normal node", &plain, node(false), None),
        (
            "Schedule pod with toleration to unschedulable node (node.Spec.Unschedulable==true)",
            &tolerating,
            node(true),
            None,
        ),
    ];
    for (name, p, n, want) in cases {
        assert_eq!(
            run_one(Plugin::NodeUnschedulable, &n, &[], p).as_deref(),
            want,
            "{name}"
        );
    }
}

#[test]
fn node_name() {
    let node: Node = obj(json!({"metadata": {"name": "foo"}}));
    let cases = [
        ("no host specified", json!({"containers": []}), None),
        (
            "host matches",
            json!({"containers": [], "nodeName": "foo"}),
            None,
        ),
        (
            "host doesn't match",
            json!({"containers": [], "nodeName": "bar"}),
            Some("node(s) didn't match the requested node name"),
        ),
    ];
    for (name, spec, want) in cases {
        let p = pod("p", json!({}), spec);
        assert_eq!(
            run_one(Plugin::NodeName, &node, &[], &p).as_deref(),
            want,
            "{name}"
        );
    }
}

fn tainted(taints: Value) -> Node {
    obj(
        json!({"metadata": {"name": "nodeA"}, "spec": {"taints": taints}, "status": {"allocatable": {"pods": "10"}}}),
    )
}

fn tolerating(tolerations: Value) -> Pod {
    pod(
        "pod1",
        json!({}),
        json!({"containers": [], "tolerations": tolerations}),
    )
}

#[test]
fn taint_toleration_filter() {
    let cases = [
        (
            "A pod having no tolerations can't be scheduled onto a node with nonempty taints",
            json!([]),
            json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]),
            Some("node(s) had untolerated taint {dedicated: user1}"),
        ),
        (
            "A pod which can be scheduled on a dedicated node assigned to user1 with effect NoSchedule",
            json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]),
            json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]),
            None,
        ),
        (
            "A pod which can't be scheduled on a dedicated node assigned to user2 with effect NoSchedule",
            json!([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}]),
            json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]),
            Some("node(s) had untolerated taint {dedicated: user1}"),
        ),
        (
            "A pod can be scheduled onto the node, with a toleration uses operator Exists that tolerates the taints on the node",
            json!([{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}]),
            json!([{"key": "foo", "value": "bar", "effect": "NoSchedule"}]),
            None,
        ),
        (
            "A pod has multiple tolerations, node has multiple taints, all the taints are tolerated, pod can be scheduled onto the node",
            json!([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"},
                   {"key": "foo", "operator": "Exists", "effect": "NoSchedule"}]),
            json!([{"key": "dedicated", "value": "user2", "effect": "NoSchedule"},
                   {"key": "foo", "value": "bar", "effect": "NoSchedule"}]),
            None,
        ),
        (
            "A pod has a toleration that keys and values match the taint on the node, but (non-empty) effect doesn't match, can't be scheduled onto the node",
            json!([{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}]),
            json!([{"key": "foo", "value": "bar", "effect": "NoSchedule"}]),
            Some("node(s) had untolerated taint {foo: bar}"),
        ),
        (
            "The pod has a toleration that keys and values match the taint on the node, the effect of toleration is empty, and the effect of taint is NoSchedule. Pod can be scheduled onto the node",
            json!([{"key": "foo", "operator": "Equal", "value": "bar"}]),
            json!([{"key": "foo", "value": "bar", "effect": "NoSchedule"}]),
            None,
        ),
        (
            "The pod has a toleration that key and value don't match the taint on the node, but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
            json!([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}]),
            json!([{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}]),
            None,
        ),
        (
            "The pod has no toleration, but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
            json!([]),
            json!([{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}]),
            None,
        ),
        // DoNotScheduleTaintsFilterFunc keeps NoExecute as well as NoSchedule.
        (
            "a NoExecute taint keeps an untolerating pod off",
            json!([]),
            json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoExecute"}]),
            Some("node(s) had untolerated taint {nvidia.com/gpu: present}"),
        ),
        (
            "the first untolerated taint is the one reported",
            json!([{"key": "a", "operator": "Exists"}]),
            json!([{"key": "a", "value": "1", "effect": "NoSchedule"},
                   {"key": "b", "value": "2", "effect": "NoSchedule"},
                   {"key": "c", "value": "3", "effect": "NoExecute"}]),
            Some("node(s) had untolerated taint {b: 2}"),
        ),
        (
            "an empty key with operator Exists tolerates every taint",
            json!([{"operator": "Exists"}]),
            json!([{"key": "a", "value": "1", "effect": "NoSchedule"},
                   {"key": "c", "value": "3", "effect": "NoExecute"}]),
            None,
        ),
    ];
    for (name, tolerations, taints, want) in cases {
        let got = run_one(
            Plugin::TaintToleration,
            &tainted(taints),
            &[],
            &tolerating(tolerations),
        );
        assert_eq!(got.as_deref(), want, "{name}");
    }
}

/// Upstream's `newPod(host, "PROTO/IP/PORT"...)`.
fn port_pod(name: &str, ports: &[&str]) -> Pod {
    let ports: Vec<Value> = ports
        .iter()
        .map(|p| {
            let parts: Vec<&str> = p.split('/').collect();
            json!({"containerPort": 1, "protocol": parts[0], "hostIP": parts[1],
                   "hostPort": parts[2].parse::<i32>().expect("test data is valid")})
        })
        .collect();
    pod(
        name,
        json!({}),
        json!({"containers": [{"name": "c", "ports": ports}]}),
    )
}

#[test]
fn node_ports() {
    let node: Node =
        obj(json!({"metadata": {"name": "m1"}, "status": {"allocatable": {"pods": "10"}}}));
    let conflict = Some("node(s) didn't have free ports for the requested pod ports");
    let cases: Vec<(&str, Pod, Vec<&str>, Option<&str>)> = vec![
        (
            "skip filter",
            pod("p", json!({}), json!({"containers": []})),
            vec![],
            None,
        ),
        (
            "other port",
            port_pod("p", &["UDP/127.0.0.1/8080"]),
            vec!["UDP/127.0.0.1/9090"],
            None,
        ),
        (
            "same udp port",
            port_pod("p", &["UDP/127.0.0.1/8080"]),
            vec!["UDP/127.0.0.1/8080"],
            conflict,
        ),
        (
            "same tcp port",
            port_pod("p", &["TCP/127.0.0.1/8080"]),
            vec!["TCP/127.0.0.1/8080"],
            conflict,
        ),
        (
            "different host ip",
            port_pod("p", &["TCP/127.0.0.1/8080"]),
            vec!["TCP/127.0.0.2/8080"],
            None,
        ),
        (
            "different protocol",
            port_pod("p", &["UDP/127.0.0.1/8080"]),
            vec!["TCP/127.0.0.1/8080"],
            None,
        ),
        (
            "second udp port conflict",
            port_pod("p", &["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"]),
            vec!["UDP/127.0.0.1/8080"],
            conflict,
        ),
        (
            "first tcp port conflict",
            port_pod("p", &["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"]),
            vec!["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
            conflict,
        ),
        (
            "first tcp port conflict due to 0.0.0.0 hostIP",
            port_pod("p", &["TCP/0.0.0.0/8001"]),
            vec!["TCP/127.0.0.1/8001"],
            conflict,
        ),
        (
            "TCP hostPort conflict due to 0.0.0.0 hostIP",
            port_pod("p", &["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"]),
            vec!["TCP/127.0.0.1/8001"],
            conflict,
        ),
        (
            "second tcp port conflict to 0.0.0.0 hostIP",
            port_pod("p", &["TCP/127.0.0.1/8001"]),
            vec!["TCP/0.0.0.0/8001"],
            conflict,
        ),
        (
            "second different protocol",
            port_pod("p", &["UDP/127.0.0.1/8001"]),
            vec!["TCP/0.0.0.0/8001"],
            None,
        ),
        (
            "UDP hostPort conflict due to 0.0.0.0 hostIP",
            port_pod("p", &["UDP/127.0.0.1/8001"]),
            vec!["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
            conflict,
        ),
        (
            "non-sidecar initContainer using hostPort",
            pod(
                "p",
                json!({}),
                json!({"containers": [], "initContainers": [{"name": "i",
                    "ports": [{"containerPort": 8001, "hostPort": 8001, "protocol": "TCP"}]}]}),
            ),
            vec!["TCP/0.0.0.0/8001"],
            None,
        ),
        (
            "TCP hostPort conflict from sidecar initContainer",
            pod(
                "p",
                json!({}),
                json!({"containers": [], "initContainers": [{"name": "i", "restartPolicy": "Always",
                    "ports": [{"containerPort": 8001, "hostPort": 8001, "protocol": "TCP"}]}]}),
            ),
            vec!["TCP/0.0.0.0/8001"],
            conflict,
        ),
    ];
    for (name, p, used, want) in cases {
        let existing = bound(port_pod("existing", &used), "m1");
        assert_eq!(
            run_one(Plugin::NodePorts, &node, &[existing], &p).as_deref(),
            want,
            "{name}"
        );
    }
}

#[test]
fn ports_taken_by_pods_placed_in_the_simulation_conflict() {
    let node: Node =
        obj(json!({"metadata": {"name": "m1"}, "status": {"allocatable": {"pods": "10"}}}));
    let mut state = FilterState::new(std::slice::from_ref(&node), &[], &[]);
    let p = port_pod("p", &["TCP//8080"]);
    let prepared = state
        .prepare(&p, std::slice::from_ref(&node))
        .expect("test data is valid");
    assert!(state.filter(&prepared, 0, &node).is_ok());
    state.add_pod(&p, 0);
    let rejection = state.filter(&prepared, 0, &node).unwrap_err();
    assert_eq!(rejection.plugin, "NodePorts");
}
