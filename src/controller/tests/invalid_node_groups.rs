//! One NodeGroup this binary cannot use (it does not decode, or breaks a rule
//! of the spec) is left out and reported on the object itself; every other
//! group keeps scaling, whether the bad one was there before the controller
//! started or appeared later.

mod common;

use std::sync::Arc;

use common::{
    Controller, cluster, create_gang, create_node_group, create_node_group_json, events, node_group,
};
use dra_api::NodeGroup;
use dra_controller::executor::memory::InMemoryProvider;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;

fn node_groups(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<NodeGroup>(&()))
}

async fn create_raw(client: &Client, name: &str, capacity_type: &str, cpu: &str) {
    create_node_group_json(
        client,
        serde_json::json!({
            "apiVersion": "dra-autoscaler.io/v1alpha1",
            "kind": "NodeGroup",
            "metadata": {"name": name},
            "spec": {
                "provider": "fake", "providerID": format!("{name}-pool"),
                "minSize": 0, "maxSize": 4, "capacityType": capacity_type, "pricePerHour": 1.0,
                "template": {"capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
            },
        }),
    )
    .await;
}

/// The `Valid` condition as (status, reason, message).
async fn valid_condition(client: &Client, name: &str) -> Option<(String, String, String)> {
    let object = node_groups(client).get(name).await.expect("NodeGroup read");
    dra_controller::validity::conditions_of(&object)
        .into_iter()
        .find(|c| c.type_ == "Valid")
        .map(|c| (c.status, c.reason, c.message))
}

#[tokio::test]
async fn bad_node_groups_are_left_out_and_reported_while_the_others_scale() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    // A capacity type a newer CRD added: this binary cannot decode it.
    create_raw(&client, "newer", "preemptible-v2", "4").await;
    // Decodes, but "lots" is no Kubernetes quantity.
    create_raw(&client, "lots", "on-demand", "lots").await;
    create_gang(&client, "train", 2, "3").await;

    let provider = Arc::new(InMemoryProvider::new());
    let controller = Controller::start(&client, provider.clone()).await;
    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("gpu"), Some(&2), "{summary:?}");
    assert!(
        provider.increases().iter().all(|r| r.group.name == "gpu"),
        "{:?}",
        provider.increases()
    );

    let (status, reason, message) = valid_condition(&client, "newer").await.expect("condition");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "DecodeFailed")
    );
    assert!(
        message.starts_with("field spec.capacityType: "),
        "{message}"
    );
    assert!(message.contains("preemptible-v2"), "{message}");
    let (status, reason, message) = valid_condition(&client, "lots").await.expect("condition");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "InvalidSpec"));
    assert!(
        message.starts_with("spec.template.capacity.cpu: invalid quantity \"lots\""),
        "{message}"
    );
    let (status, ..) = valid_condition(&client, "gpu").await.expect("condition");
    assert_eq!(status, "True");
    assert_eq!(controller.metrics.invalid_node_groups.get(), 2);

    let invalid = events(&client, "InvalidNodeGroup").await;
    let regarding: Vec<_> = invalid
        .iter()
        .map(|e| (e.0.as_str(), e.1.as_str(), e.2.as_str()))
        .collect();
    assert_eq!(
        regarding,
        [
            ("NodeGroup", "lots", "Warning"),
            ("NodeGroup", "newer", "Warning")
        ]
    );
    assert!(
        invalid[0].3.contains("spec.template.capacity.cpu"),
        "{}",
        invalid[0].3
    );

    // A bad group added while running does not stop the others either, and
    // the old problems are not reported again.
    create_raw(&client, "later", "on-demand", "many").await;
    controller
        .wait_for("the new NodeGroup", |i| i.unusable_node_groups.len() == 3)
        .await;
    create_gang(&client, "eval", 2, "3").await;
    controller
        .wait_for("the new gang", |i| i.pods.len() == 4)
        .await;
    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("gpu"), Some(&2), "{summary:?}");
    let (status, reason, _) = valid_condition(&client, "later").await.expect("condition");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "InvalidSpec"));
    assert_eq!(events(&client, "InvalidNodeGroup").await.len(), 3);
    let gpu = node_group(&client, "gpu").await;
    assert_eq!(gpu.status.expect("status").upcoming_size, 4);
}
