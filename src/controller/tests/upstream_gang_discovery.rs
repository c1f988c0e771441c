//! `run` finds the upstream gang API by discovery: on a cluster serving
//! `scheduling.k8s.io` PodGroups, a PodGroup's pods are planned as one gang
//! (an all-or-nothing scale-up) with no `--feature-gates` flag, and an explicit
//! `GenericWorkload=false` still plans them one by one.

mod common;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use common::{create_node_group, eventually};
use dra_controller::RunArgs;
use dra_controller::executor::memory::InMemoryProvider;
use dra_fake_apiserver::FakeApiServer;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use tokio::sync::watch;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn args(extra: &[&str]) -> RunArgs {
    let mut argv = vec![
        "run",
        "--kubernetes-version",
        "1.37",
        "--listen-address",
        "127.0.0.1:0",
        "--scan-interval",
        "100ms",
        "--leader-elect",
        "false",
        "--dry-run",
    ];
    argv.extend(extra);
    Cli::try_parse_from(argv).expect("flags parse").run
}

async fn cluster() -> FakeApiServer {
    FakeApiServer::builder()
        .resource(
            "dra-autoscaler.io",
            "v1alpha1",
            "nodegroups",
            "NodeGroup",
            false,
            true,
        )
        .resource(
            "scheduling.k8s.io",
            "v1beta1",
            "podgroups",
            "PodGroup",
            true,
            true,
        )
        .start()
        .await
        .expect("fake API server starts")
}

/// A `scheduling.k8s.io/v1beta1` PodGroup `name` with gang minCount `count`
/// and its `count` members of 3 CPU, linked by `spec.schedulingGroup`.
async fn create_upstream_gang(client: &Client, name: &str, count: usize) {
    let resource = ApiResource {
        group: "scheduling.k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "scheduling.k8s.io/v1beta1".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    };
    let groups: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let group: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": count}}}
    }))
    .expect("PodGroup JSON");
    groups
        .create(&PostParams::default(), &group)
        .await
        .expect("PodGroup created");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..count {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{name}-{i}"), "namespace": "default"},
            "spec": {
                "containers": [{"name": "main", "image": "trainer",
                                "resources": {"requests": {"cpu": "3"}}}],
                "schedulingGroup": {"podGroupName": name}
            }
        }))
        .expect("Pod JSON");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("pod created");
        let status = serde_json::json!({"status": {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable"
        }]}});
        pods.patch_status(
            &format!("{name}-{i}"),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .expect("pod marked unschedulable");
    }
}

/// Runs the controller until its provider was asked once; returns the
/// request's size and all-or-nothing minimum.
async fn first_increase(extra: &[&str]) -> (usize, Option<usize>) {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "cpu", 8).await;
    create_upstream_gang(&client, "train", 3).await;
    let provider = Arc::new(InMemoryProvider::new());
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(dra_controller::run_until(
        client.clone(),
        args(extra),
        provider.clone(),
        stop_rx,
    ));
    eventually("a scale-up", || async { !provider.increases().is_empty() }).await;
    stop.send_replace(true);
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("stops")
        .expect("task")
        .expect("runs cleanly");
    let increase = provider.increases()[0].clone();
    (increase.count, increase.atomic_min)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_podgroup_api_plans_its_pods_as_one_gang_without_flags() {
    // 3 members of 3 CPU on 4-CPU machines: 3 machines, all or nothing.
    assert_eq!(first_increase(&[]).await, (3, Some(3)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_workload_false_plans_the_pods_one_by_one() {
    assert_eq!(
        first_increase(&["--feature-gates", "GenericWorkload=false"]).await,
        (3, None)
    );
}
