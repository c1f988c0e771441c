//! What the NodeGroup status says right after a loop: `reservedLeft` counts
//! the nodes that loop asked for, and a group below its `minSize` says why
//! nothing is added.

mod common;

use std::sync::Arc;

use common::{Controller, cluster, create_gang, create_node_group_json, node_group};
use dra_controller::executor::memory::InMemoryProvider;

fn group(name: &str, min: i32, reservation_total: Option<i32>) -> serde_json::Value {
    let mut spec = serde_json::json!({
        "provider": "fake", "providerID": format!("{name}-pool"),
        "minSize": min, "maxSize": 8, "capacityType": "on-demand", "pricePerHour": 1.0,
        "template": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    });
    if let Some(total) = reservation_total {
        spec["capacityType"] = "reserved".into();
        spec["reservation"] = serde_json::json!({"id": "cr-1", "total": total});
        spec["pricePerHour"] = 0.5.into();
    }
    serde_json::json!({
        "apiVersion": "dra-autoscaler.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn condition(status: &dra_api::NodeGroupStatus, type_: &str) -> (String, String, String) {
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {status:?}"));
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[tokio::test]
async fn reserved_left_counts_this_loops_scale_up_and_below_min_size_is_explained() {
    let server = cluster().await;
    let client = server.client();
    create_node_group_json(&client, group("reserved", 0, Some(4))).await;
    create_node_group_json(&client, group("spare", 1, None)).await;
    create_gang(&client, "train", 2, "3").await;

    let provider = Arc::new(InMemoryProvider::new());
    let controller = Controller::start(&client, provider.clone()).await;
    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("reserved"), Some(&2), "{summary:?}");

    let status = node_group(&client, "reserved")
        .await
        .status
        .expect("status");
    assert_eq!(status.upcoming_size, 2);
    assert_eq!(
        status.reserved_left,
        Some(2),
        "4 slots, 2 asked for in this loop"
    );
    assert_eq!(condition(&status, "AtMinSize").1, "AboveMinSize");

    let status = node_group(&client, "spare").await.status.expect("status");
    let (value, reason, message) = condition(&status, "AtMinSize");
    assert_eq!((value.as_str(), reason.as_str()), ("False", "BelowMinSize"));
    assert!(message.contains("below spec.minSize 1"), "{message}");
    assert!(message.contains("only for pending pods"), "{message}");
}

#[tokio::test]
async fn a_deleted_group_leaves_no_metric_series_behind() {
    let server = cluster().await;
    let client = server.client();
    create_node_group_json(&client, group("reserved", 0, Some(4))).await;
    create_node_group_json(&client, group("spare", 0, None)).await;
    let controller = Controller::start(&client, Arc::new(InMemoryProvider::new())).await;
    controller.run_once().await;
    let text = controller.metrics.encode();
    assert!(text.contains("node_group=\"reserved\""), "{text}");
    assert!(text.contains("node_group=\"spare\""), "{text}");

    kube::Api::<dra_api::NodeGroup>::all(client.clone())
        .delete("reserved", &Default::default())
        .await
        .expect("deleted");
    controller
        .wait_for("the deletion", |i| i.node_groups.len() == 1)
        .await;
    controller.run_once().await;
    let text = controller.metrics.encode();
    assert!(!text.contains("node_group=\"reserved\""), "{text}");
    assert!(text.contains("node_group=\"spare\""), "{text}");
}
