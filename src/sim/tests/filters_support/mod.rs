//! Builders shared by the filter tests: objects are written as JSON, the way
//! they would appear in a snapshot, so each case reads like upstream's table.

#![allow(dead_code)] // each test file uses a different subset

use dra_sim::filters::{FilterState, Plugin, PreparedPod, Rejection};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use serde_json::{Value, json};

/// Deserialises a JSON object into a Kubernetes type.
pub fn obj<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("test object must deserialise")
}

/// A node with labels and allocatable resources.
pub fn node(name: &str, labels: Value, allocatable: Value) -> Node {
    obj(json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": allocatable}
    }))
}

/// A node with only a name and labels, with room for 110 pods.
pub fn labelled_node(name: &str, labels: Value) -> Node {
    node(name, labels, json!({"pods": "110"}))
}

/// A pod from the JSON of its spec, named `name` in `default`.
pub fn pod(name: &str, labels: Value, spec: Value) -> Pod {
    obj(json!({
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": spec
    }))
}

/// A pod in a namespace.
pub fn pod_in(namespace: &str, name: &str, labels: Value, spec: Value) -> Pod {
    obj(json!({
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec
    }))
}

/// The same pod, bound to a node.
pub fn bound(mut pod: Pod, node: &str) -> Pod {
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(node.to_string());
    }
    pod
}

/// A namespace with labels.
pub fn namespace(name: &str, labels: Value) -> Namespace {
    obj(json!({"metadata": {"name": name, "labels": labels}}))
}

/// One container with the given requests.
pub fn requests(requests: Value) -> Value {
    json!({"name": "c", "resources": {"requests": requests}})
}

/// Prepares `pod` against `nodes` with the bound `pods` and runs all filters
/// on node `index`.
pub fn filter_on(nodes: &[Node], pods: &[Pod], pod: &Pod, index: usize) -> Result<(), Rejection> {
    let state = FilterState::new(nodes, pods, &[]);
    let prepared = state.prepare(pod, nodes).expect("prepare must succeed");
    state.filter(&prepared, index, &nodes[index])
}

/// Runs a single plugin and returns its reason, if any.
pub fn plugin_reason(
    state: &FilterState,
    plugin: Plugin,
    prepared: &PreparedPod,
    index: usize,
    node: &Node,
) -> Option<String> {
    state
        .check_plugin(plugin, prepared, index, node)
        .err()
        .map(|r| r.reason(prepared, node).to_string())
}

/// Names of the nodes on which the pod passes every filter.
pub fn fitting_nodes(state: &FilterState, nodes: &[Node], pod: &Pod) -> Vec<String> {
    let prepared = state.prepare(pod, nodes).expect("prepare must succeed");
    nodes
        .iter()
        .enumerate()
        .filter(|(i, n)| state.filter(&prepared, *i, n).is_ok())
        .map(|(_, n)| n.metadata.name.clone().unwrap_or_default())
        .collect()
}
