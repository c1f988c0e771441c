//! The loop closed, in-process: a pending GPU gang makes dra-autoscaler buy nodes through the
//! fake provider (which serves the cluster's NodeGroups), the scheduler stand-in binds the
//! gang there with its devices, and every pod ends Running — once, with no extra node.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use dra_local_stack::{Backend, Stack, StackOptions, manifests};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_gpu_gang_gets_nodes_and_runs_on_them() {
    // The stand-ins by default; the real control plane under e2e/cluster/test.sh.
    let mut stack = Stack::start(StackOptions {
        backend: Backend::from_env(),
        ..StackOptions::default()
    })
    .await
    .unwrap();
    stack.apply_node_group_examples().await.unwrap();
    let deviceclass = std::fs::read_to_string(manifests().join("deviceclass.yaml")).unwrap();
    stack.apply_yaml(&deviceclass).await.unwrap();
    stack
        .start_controller(&["--scan-interval", "1s"])
        .await
        .unwrap();
    let gang = std::fs::read_to_string(manifests().join("training-gang.yaml")).unwrap();
    stack.apply_yaml(&gang).await.unwrap();

    let running = stack
        .wait_for_running_pods("default", 4, Duration::from_secs(120))
        .await
        .unwrap();
    let nodes: BTreeSet<String> = running
        .iter()
        .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect();
    assert_eq!(
        nodes.len(),
        2,
        "4 workers x 4 GPUs on two 8-GPU nodes: {nodes:?}"
    );

    // A few more loops change nothing: no node bought twice.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let all = Api::<Node>::all(stack.client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        // The real backend registers one node of its own for the control plane.
        .filter(|n| n.metadata.name.as_deref() != Some(dra_local_stack::real::CONTROL_PLANE_NODE))
        .collect::<Vec<_>>();
    let names: Vec<String> = all.iter().filter_map(|n| n.metadata.name.clone()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    for node in &all {
        assert!(
            common::group_of(node).is_some_and(|g| g.starts_with("h200")),
            "{:?}",
            node.metadata
        );
        assert!(
            node.metadata
                .labels
                .as_ref()
                .is_none_or(|l| !l.contains_key("dra-autoscaler.io/node-group")),
            "registered as a kubelet does: {:?}",
            node.metadata.labels
        );
    }
    stack.shutdown().await;
}
