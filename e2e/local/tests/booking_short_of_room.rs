//! The on-call day's double purchase (issue 31, item 1), on the local stack: a check-capacity
//! ProvisioningRequest books two empty nodes (`Provisioned=True`); gang od6 takes them (the
//! scheduler ignores bookings); gang od7 is bought two nodes. The booking, short of room,
//! must buy nothing and never move onto od7's nodes while they start: od7 runs on the two
//! nodes bought for it and the group ends with four nodes, not six.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{cpu_group, gang, nodes_of, running_on, wait_for};
use dra_local_stack::{Stack, StackOptions};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject};
use serde_json::Value;

/// New machines take this long to start, so od7's nodes are upcoming for a few loops.
const START_LATENCY_MS: u64 = 3000;

const HOLD: &str = r#"apiVersion: v1
kind: PodTemplate
metadata:
  name: hold
  namespace: default
template:
  spec:
    containers:
    - name: main
      image: registry.example.com/trainer:1
      resources:
        requests:
          cpu: "6"
          memory: 1Gi
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata:
  name: hold
  namespace: default
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets:
  - podTemplateRef:
      name: hold
    count: 2
"#;

async fn provisioned(stack: &Stack) -> Result<String, String> {
    let ar = ApiResource {
        group: "autoscaling.x-k8s.io".into(),
        version: "v1".into(),
        api_version: "autoscaling.x-k8s.io/v1".into(),
        kind: "ProvisioningRequest".into(),
        plural: "provisioningrequests".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(stack.client(), "default", &ar);
    let request = api.get("hold").await.map_err(|e| e.to_string())?;
    let conditions = request
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    conditions
        .iter()
        .find(|c| {
            c.get("type").and_then(Value::as_str) == Some("Provisioned")
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
        .and_then(|c| c.get("reason").and_then(Value::as_str).map(str::to_owned))
        .ok_or_else(|| format!("{conditions:?}"))
}

async fn both_running(stack: &Stack, gang: &str) -> Result<Vec<String>, String> {
    let mut nodes = Vec::new();
    for i in 0..2 {
        nodes.push(running_on(stack, &format!("{gang}-{i}")).await?);
    }
    Ok(nodes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booking_short_of_room_buys_nothing_and_keeps_off_a_gangs_new_nodes() {
    let provider_config =
        format!("nodeGroups:\n  - name: cpu\n    faults: {{startLatencyMs: {START_LATENCY_MS}}}\n");
    let mut stack = Stack::start(StackOptions {
        provider_config,
        ..StackOptions::default()
    })
    .await
    .unwrap();
    stack.apply_yaml(&cpu_group("cpu", 8, 8)).await.unwrap();
    let crd = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/crds/autoscaling.x-k8s.io_provisioningrequests.yaml"),
    )
    .unwrap();
    stack.apply_yaml(&crd).await.unwrap();
    let flags = [
        "--scan-interval",
        "1s",
        "--leader-elect=false",
        "--scale-down-enabled=false",
    ];
    stack.start_controller(&flags).await.unwrap();

    // Two nodes, then empty: a gang that ran and was deleted.
    stack.apply_yaml(&gang("seed", 2, "6")).await.unwrap();
    wait_for("seed running", Duration::from_secs(60), async || {
        both_running(&stack, "seed").await
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(stack.client(), "default");
    for i in 0..2 {
        pods.delete(&format!("seed-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    assert_eq!(nodes_of(&stack, "cpu").await.len(), 2);

    // The request finds them: booked.
    stack.apply_yaml(HOLD).await.unwrap();
    let reason = wait_for("hold provisioned", Duration::from_secs(30), async || {
        provisioned(&stack).await
    })
    .await;
    assert_eq!(reason, "CapacityIsFound");

    // od6 takes the booked nodes: the scheduler ignores bookings; nothing is bought.
    stack.apply_yaml(&gang("od6", 2, "6")).await.unwrap();
    wait_for("od6 running", Duration::from_secs(30), async || {
        both_running(&stack, "od6").await
    })
    .await;
    assert_eq!(nodes_of(&stack, "cpu").await.len(), 2, "od6 fits");

    // od7 is bought two nodes, and runs on them.
    stack.apply_yaml(&gang("od7", 2, "6")).await.unwrap();
    let od7_nodes = wait_for("od7 running", Duration::from_secs(60), async || {
        both_running(&stack, "od7").await
    })
    .await;
    // A few more loops: the booking still has no room and buys nothing.
    tokio::time::sleep(Duration::from_millis(START_LATENCY_MS + 3000)).await;
    let mut nodes = nodes_of(&stack, "cpu").await;
    nodes.sort();
    assert_eq!(
        nodes.len(),
        4,
        "two for od6 (found), two bought for od7, none for the booking: {nodes:?} (od7 on {od7_nodes:?})"
    );
    assert_eq!(provisioned(&stack).await.unwrap(), "CapacityIsFound");
    stack.shutdown().await;
}
