//! Reads of a cluster that every backend answers the same way (typed Kubernetes objects through
//! the admin client), for the tests that run on the real control plane.

#![allow(dead_code)] // each test file uses a different part
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use dra_local_stack::{Backend, Stack, StackOptions};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::ListParams;

use super::wait_for;

/// A stack on the real control plane, with `gates` added to every component. The
/// controller's and the provider's logs go to the test's output (`RUST_LOG`, default info),
/// shown for a failed test.
pub async fn real_stack(gates: &str) -> Stack {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_test_writer()
        .try_init();
    Stack::start(StackOptions {
        backend: Backend::Real,
        feature_gates: gates.to_owned(),
        ..StackOptions::default()
    })
    .await
    .expect("the real control plane starts (e2e/cluster/up.sh)")
}

/// The suite's manifests (`e2e/local/manifests/cluster/`).
pub fn manifest(name: &str) -> String {
    let path = dra_local_stack::manifests().join("cluster").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every Node.
pub async fn nodes(stack: &Stack) -> Vec<Node> {
    Api::<Node>::all(stack.client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// Every Pod of `namespace`.
pub async fn pods(stack: &Stack, namespace: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(stack.client(), namespace)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// Every ResourceClaim of `namespace`, by name.
pub async fn claims(stack: &Stack, namespace: &str) -> BTreeMap<String, ResourceClaim> {
    Api::<ResourceClaim>::namespaced(stack.client(), namespace)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| Some((c.metadata.name.clone()?, c)))
        .collect()
}

/// Every events.k8s.io Event of every namespace.
pub async fn events(stack: &Stack) -> Vec<Event> {
    Api::<Event>::all(stack.client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// The pod's node, once bound.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// The pod's phase.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Pod names with their node and phase, for failure messages.
pub fn describe_pods(pods: &[Pod]) -> String {
    pods.iter()
        .map(|p| {
            let waiting = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
                .and_then(|c| c.message.clone())
                .unwrap_or_default();
            format!(
                "{} {} on {:?} {waiting}",
                p.metadata.name.as_deref().unwrap_or_default(),
                phase(p),
                node_of(p)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Waits until the pods of `namespace` whose name starts with `prefix` are `count` and all
/// Running on a node; returns them.
pub async fn wait_running(
    stack: &Stack,
    namespace: &str,
    prefix: &str,
    count: usize,
    timeout: Duration,
) -> Vec<Pod> {
    wait_for(
        &format!("{count} pods {prefix}* Running"),
        timeout,
        async || {
            let all: Vec<Pod> = pods(stack, namespace)
                .await
                .into_iter()
                .filter(|p| {
                    p.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with(prefix))
                })
                .collect();
            let running = all
                .iter()
                .filter(|p| phase(p) == "Running" && node_of(p).is_some())
                .count();
            if running == count && all.len() == count {
                Ok(all)
            } else {
                Err(describe_pods(&all))
            }
        },
    )
    .await
}

/// The names of the Nodes bought: every Node but the control plane's.
pub fn node_names(nodes: &[Node]) -> BTreeSet<String> {
    nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .filter(|n| n != "control-plane")
        .collect()
}

/// How many of `nodes` are machines of fake group `group` (the fake provider names them
/// `<group>-<index>`).
pub fn count_of_group(nodes: &BTreeSet<String>, group: &str) -> usize {
    nodes
        .iter()
        .filter(|n| {
            n.strip_prefix(group)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
        })
        .count()
}
