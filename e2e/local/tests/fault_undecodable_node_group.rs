//! Fault: NodeGroups this controller cannot decode, as after a CRD upgrade that added a
//! `capacityType` value this binary does not know (the API server accepts them: its schema
//! is the newer one). One exists before the controller starts, another appears after a
//! restart; each is left out with `Valid=False` and `ScalingActive=False`, and the other
//! group keeps scaling every time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{condition, cpu_group, nodes_of, pod, running_on, wait_for};
use dra_local_stack::{Stack, StackOptions};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const NEWER_VALUE: &str = "preemptible-v2";

/// The NodeGroup CRD of a newer release: one more `capacityType` value.
async fn upgrade_the_crd(stack: &Stack) {
    let crds: Api<CustomResourceDefinition> = Api::all(stack.client());
    let crd = crds.get("nodegroups.dra-autoscaler.io").await.unwrap();
    let mut value = serde_json::to_value(&crd).unwrap();
    let values = value
        .pointer_mut(
            "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/capacityType/enum",
        )
        .and_then(Value::as_array_mut)
        .expect("capacityType is an enum in the CRD");
    values.push(json!(NEWER_VALUE));
    let newer: CustomResourceDefinition = serde_json::from_value(value).unwrap();
    crds.replace(
        "nodegroups.dra-autoscaler.io",
        &PostParams::default(),
        &newer,
    )
    .await
    .unwrap();
}

fn newer_group(name: &str) -> String {
    cpu_group(name, 4, 4).replace(
        "capacityType: on-demand",
        &format!("capacityType: {NEWER_VALUE}"),
    )
}

async fn left_out(stack: &Stack, name: &str) {
    let valid = wait_for(
        &format!("{name} Valid=False"),
        Duration::from_secs(30),
        async || match condition(stack, name, "Valid").await {
            Some(c) if c.0 == "False" => Ok(c),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    assert_eq!(valid.1, "DecodeFailed", "{valid:?}");
    assert!(
        valid.2.contains("spec.capacityType") && valid.2.contains(NEWER_VALUE),
        "the field and the value are named: {valid:?}"
    );
    let active = condition(stack, name, "ScalingActive").await;
    assert_eq!(
        active.as_ref().map(|c| (c.0.as_str(), c.1.as_str())),
        Some(("False", "InvalidNodeGroup")),
        "{active:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_groups_before_and_after_a_restart_leave_the_others_scaling() {
    let mut stack = Stack::start(StackOptions::default()).await.unwrap();
    upgrade_the_crd(&stack).await;
    stack.apply_yaml(&cpu_group("cpu", 4, 4)).await.unwrap();
    stack.apply_yaml(&newer_group("newer-a")).await.unwrap();
    let flags = ["--scan-interval", "1s", "--leader-elect=false"];
    stack.start_controller(&flags).await.unwrap();

    stack.apply_yaml(&pod("web-0", "3")).await.unwrap();
    let first = wait_for("web-0 Running", Duration::from_secs(60), async || {
        running_on(&stack, "web-0").await
    })
    .await;
    left_out(&stack, "newer-a").await;
    assert_eq!(
        condition(&stack, "cpu", "ScalingActive").await.map(|c| c.0),
        Some("True".to_owned())
    );

    // A restart, then a second undecodable group and another pod.
    stack.stop_controller().await.unwrap();
    stack.start_controller(&flags).await.unwrap();
    stack.apply_yaml(&newer_group("newer-b")).await.unwrap();
    stack.apply_yaml(&pod("web-1", "3")).await.unwrap();
    let second = wait_for("web-1 Running", Duration::from_secs(60), async || {
        running_on(&stack, "web-1").await
    })
    .await;
    left_out(&stack, "newer-b").await;
    left_out(&stack, "newer-a").await;

    assert_ne!(first, second, "3 of 4 cores each: one node per pod");
    let mut nodes = nodes_of(&stack, "cpu").await;
    nodes.sort();
    let mut expected = vec![first, second];
    expected.sort();
    assert_eq!(nodes, expected, "nodes only in the decodable group");
    for name in ["newer-a", "newer-b"] {
        assert!(
            nodes_of(&stack, name).await.is_empty(),
            "{name} got no node"
        );
    }
    stack.shutdown().await;
}
