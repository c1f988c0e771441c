//! The fake kubelet against the in-process API stand-in: it starts the pods bound to the
//! nodes it owns and readies their devices, leaves every other pod alone, and reads pods as
//! a real kubelet does, through a watch of its own node's pods
//! (`fieldSelector=spec.nodeName=<node>`), never a list of the whole cluster's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use dra_fake_apiserver::{FakeApiServer, Verb};
use dra_provider_fake::kubelet::{DEVICE_READY_REASON, Kubelet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

fn node(name: &str, ip: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]},
    }))
    .unwrap()
}

fn pod(name: &str, node: Option<&str>) -> Pod {
    let mut spec = json!({"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .unwrap()
}

async fn phase(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get(name).await.unwrap().status.and_then(|s| s.phase)
}

fn owned(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

/// Passes until `done` holds (the kubelet's watches list in the background), at most 10 s.
async fn sync_until<F, Fut>(kubelet: &mut Kubelet, owned: &BTreeSet<String>, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        let pass = kubelet.sync(owned).await;
        assert_eq!((pass.failed, pass.watches_failing), (0, 0), "{pass:?}");
        if done().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the kubelet did not get there in 10 s");
}

#[tokio::test]
async fn starts_only_its_own_nodes_pods_and_watches_only_them() {
    let api = FakeApiServer::builder().start().await.unwrap();
    let client = api.client();
    let nodes: Api<Node> = Api::all(client.clone());
    for (name, ip) in [("node-a", "192.168.0.10"), ("node-b", "192.168.0.11")] {
        nodes
            .create(&PostParams::default(), &node(name, ip))
            .await
            .unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, on) in [
        ("mine", Some("node-a")),
        ("theirs", Some("node-b")),
        ("pending", None),
    ] {
        pods.create(&PostParams::default(), &pod(name, on))
            .await
            .unwrap();
    }
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    for (name, on) in [("claim-mine", "node-a"), ("claim-theirs", "node-b")] {
        let claim: ResourceClaim = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        }))
        .unwrap();
        claims.create(&PostParams::default(), &claim).await.unwrap();
        let allocation = json!({"status": {"allocation": {
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [on]}]}]},
            "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": on,
                "device": "gpu-0", "bindingConditions": ["Attached"]}]},
        }}});
        claims
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&allocation))
            .await
            .unwrap();
    }
    api.clear_request_log();

    let mut kubelet = Kubelet::new(client.clone());
    let mine = owned(&["node-a"]);
    let ready = |name: &'static str| {
        let claims = claims.clone();
        async move {
            let claim = claims.get(name).await.unwrap();
            claim
                .status
                .and_then(|s| s.devices)
                .unwrap_or_default()
                .iter()
                .flat_map(|d| d.conditions.iter().flatten())
                .any(|c| c.type_ == "Attached" && c.status == "True")
        }
    };
    sync_until(&mut kubelet, &mine, || {
        let pods = pods.clone();
        let ready = ready("claim-mine");
        async move { phase(&pods, "mine").await.as_deref() == Some("Running") && ready.await }
    })
    .await;

    let started = pods.get("mine").await.unwrap().status.unwrap();
    assert_eq!(
        started.host_ip.as_deref(),
        Some("192.168.0.10"),
        "the node's InternalIP"
    );
    assert!(started.pod_ip.is_some_and(|ip| ip.starts_with("10.")));
    let claim = claims.get("claim-mine").await.unwrap();
    let condition = &claim.status.unwrap().devices.unwrap()[0]
        .conditions
        .clone()
        .unwrap()[0];
    assert_eq!(condition.reason, DEVICE_READY_REASON);
    // A few more passes: what is not its own stays as it was.
    for _ in 0..5 {
        kubelet.sync(&mine).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        phase(&pods, "theirs").await.as_deref(),
        Some("Pending"),
        "a pod on another node"
    );
    assert_eq!(
        phase(&pods, "pending").await.as_deref(),
        Some("Pending"),
        "an unbound pod"
    );
    assert!(
        !ready("claim-theirs").await,
        "a claim allocated on another node"
    );

    let pod_reads: Vec<_> = api
        .request_log()
        .into_iter()
        .filter(|r| matches!(r.verb, Some(Verb::List | Verb::Watch)))
        .filter(|r| r.resource.as_deref() == Some("pods"))
        .collect();
    assert!(!pod_reads.is_empty(), "the kubelet watches its pods");
    for read in &pod_reads {
        assert!(
            read.query.contains("fieldSelector=spec.nodeName%3Dnode-a"),
            "every pod list or watch is for its own node's pods: {:?} {}",
            read.verb,
            read.query
        );
    }
    let node_lists = api
        .request_log()
        .into_iter()
        .filter(|r| r.resource.as_deref() == Some("nodes") && r.verb == Some(Verb::List))
        .count();
    assert_eq!(node_lists, 0, "nodes are read one by one, not listed");

    // A node it no longer owns: its pods are left alone from then on.
    pods.create(&PostParams::default(), &pod("later", Some("node-a")))
        .await
        .unwrap();
    for _ in 0..10 {
        let pass = kubelet.sync(&owned(&[])).await;
        assert!(pass.started.is_empty(), "{pass:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(phase(&pods, "later").await.as_deref(), Some("Pending"));
}

#[tokio::test]
async fn a_pass_reports_a_failing_watch_until_it_recovers() {
    let api = FakeApiServer::builder().start().await.unwrap();
    // The first two lists of pods are refused, as a role without the grant would be.
    api.fail_next(Verb::List, "pods", 2, 403);
    let mut kubelet = Kubelet::new(api.client());
    let mine = owned(&["node-a"]);
    let mut seen_failing = false;
    for _ in 0..300 {
        let pass = kubelet.sync(&mine).await;
        seen_failing |= pass.watches_failing == 1;
        if seen_failing && pass.watches_failing == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "failing seen: {seen_failing}; the watch never reported its failure and recovery in 15 s"
    );
}
