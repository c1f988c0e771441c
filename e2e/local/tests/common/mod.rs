//! What the fault tests share: small CPU NodeGroups and pods as YAML, reads of the cluster,
//! and waiting on a condition with a deadline (never a fixed sleep as an assertion).

#![allow(dead_code)] // each test file uses a different part
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

pub mod cluster;
pub mod predict;

use dra_local_stack::Stack;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use serde_json::Value;

/// The label the fake provider puts on a group's Nodes.
pub const GROUP_LABEL: &str = "dra-autoscaler.io/node-group";

/// A NodeGroup of the fake provider: `cpu` cores per machine, at most `max` machines.
pub fn cpu_group(name: &str, max: i32, cpu: u32) -> String {
    format!(
        r#"apiVersion: dra-autoscaler.io/v1alpha1
kind: NodeGroup
metadata:
  name: {name}
spec:
  provider: fake
  providerID: {name}
  minSize: 0
  maxSize: {max}
  capacityType: on-demand
  pricePerHour: 0.2
  template:
    labels:
      node.kubernetes.io/instance-type: test-{cpu}cpu
    capacity:
      cpu: "{cpu}"
      memory: 16Gi
      pods: "110"
"#
    )
}

/// A single pod asking for `cpu` cores.
pub fn pod(name: &str, cpu: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
spec:
  containers:
    - name: main
      image: registry.example.com/app:1
      resources:
        requests:
          cpu: "{cpu}"
          memory: 1Gi
"#
    )
}

/// The pods of one gang (a Kueue plain-pod group, no CRD needed), each asking for `cpu`.
pub fn gang(name: &str, size: usize, cpu: &str) -> String {
    (0..size)
        .map(|i| {
            format!(
                r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}-{i}
  namespace: default
  labels:
    kueue.x-k8s.io/pod-group-name: {name}
  annotations:
    kueue.x-k8s.io/pod-group-total-count: "{size}"
spec:
  containers:
    - name: worker
      image: registry.example.com/trainer:1
      resources:
        requests:
          cpu: "{cpu}"
          memory: 1Gi
"#
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// Polls `probe` every 100 ms until it gives a value; panics with `what` and the last
/// state it reported when `timeout` passes.
pub async fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match probe().await {
            Ok(value) => return value,
            Err(state) if tokio::time::Instant::now() > deadline => {
                panic!("{what}: not after {timeout:?}; last seen: {state}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The Nodes of `group`, by name.
pub async fn nodes_of(stack: &Stack, group: &str) -> Vec<String> {
    let nodes: Api<Node> = Api::all(stack.client());
    nodes
        .list(&ListParams::default().labels(&format!("{GROUP_LABEL}={group}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect()
}

/// Every Node of the cluster, by name.
pub async fn all_nodes(stack: &Stack) -> Vec<String> {
    let nodes: Api<Node> = Api::all(stack.client());
    nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect()
}

/// NodeGroups, untyped (so that one this binary cannot decode can be read too).
pub fn node_groups(stack: &Stack) -> Api<DynamicObject> {
    Api::all_with(
        stack.client(),
        &ApiResource::erase::<dra_api::NodeGroup>(&()),
    )
}

/// `(status, reason, message)` of condition `type_` of NodeGroup `name`.
pub async fn condition(stack: &Stack, name: &str, type_: &str) -> Option<(String, String, String)> {
    let object = node_groups(stack).get(name).await.ok()?;
    let conditions = object.data.pointer("/status/conditions")?.as_array()?;
    let found = conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?;
    let field = |key: &str| {
        found
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some((field("status"), field("reason"), field("message")))
}

/// Whether pod `default/name` is Running on a node.
pub async fn running_on(stack: &Stack, name: &str) -> Result<String, String> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(stack.client(), "default");
    let pod = pods.get(name).await.map_err(|e| e.to_string())?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
    match (
        phase.as_deref(),
        pod.spec.as_ref().and_then(|s| s.node_name.clone()),
    ) {
        (Some("Running"), Some(node)) => Ok(node),
        (phase, node) => Err(format!("{name}: phase {phase:?}, node {node:?}")),
    }
}
