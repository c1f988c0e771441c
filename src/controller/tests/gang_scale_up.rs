//! A pending gang gets one atomic scale-up and the right Events; the nodes it
//! asked for count as upcoming, so neither a second loop nor a restarted
//! controller asks again.

mod common;

use std::sync::Arc;

use common::{Controller, cluster, create_gang, create_node_group, events, node_group};
use dra_api::{NODE_GROUP_LABEL, ScaleUpOutcome};
use dra_controller::executor::memory::InMemoryProvider;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};

#[tokio::test]
async fn pending_gang_gets_one_atomic_scale_up_and_events() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    // Three 3-CPU members on 4-CPU machines: one machine each, all or nothing.
    let members = create_gang(&client, "train", 3, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    let controller = Controller::start(&client, provider.clone()).await;

    let summary = controller.run_once().await;
    assert_eq!(summary.planned_for, 3);
    assert_eq!(summary.scaled_up.get("gpu"), Some(&3), "{summary:?}");
    let increases = provider.increases();
    assert_eq!(increases.len(), 1);
    assert_eq!(increases[0].group.provider_id, "gpu-pool");
    assert_eq!(increases[0].count, 3);
    assert_eq!(
        increases[0].atomic_min,
        Some(3),
        "a gang is asked for all or nothing"
    );

    let status = node_group(&client, "gpu")
        .await
        .status
        .expect("status written");
    assert_eq!(
        (
            status.current_size,
            status.upcoming_size,
            status.target_size
        ),
        (0, 3, 3)
    );
    let last = status.last_scale_up.expect("last scale-up recorded");
    assert_eq!((last.count, last.outcome), (3, ScaleUpOutcome::Succeeded));
    let names: Vec<_> = status
        .upcoming_nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, ["gpu-pool-0", "gpu-pool-1", "gpu-pool-2"]);

    let triggered = events(&client, "TriggeredScaleUp").await;
    let regarding: Vec<_> = triggered
        .iter()
        .map(|(k, n, t, _)| (k.as_str(), n.as_str(), t.as_str()))
        .collect();
    let mut expected: Vec<_> = members
        .iter()
        .map(|m| ("Pod", m.as_str(), "Normal"))
        .collect();
    expected.push(("PodGroup", "train", "Normal"));
    expected.sort_unstable();
    assert_eq!(regarding, expected);
    assert!(
        triggered
            .iter()
            .all(|(_, _, _, note)| note
                == "pod triggered scale-up: [{gpu 0->3 (max: 8), on-demand}]"),
        "{triggered:?}"
    );
    let scaled = events(&client, "ScaledUpGroup").await;
    assert_eq!(scaled.len(), 1);
    assert_eq!(
        (scaled[0].0.as_str(), scaled[0].1.as_str()),
        ("NodeGroup", "gpu")
    );
    assert!(events(&client, "NotTriggerScaleUp").await.is_empty());

    // A second loop right away (the watch may not have delivered our status
    // write yet) and one after it has: the upcoming nodes hold the gang.
    let again = controller.run_once().await;
    assert!(again.scaled_up.is_empty(), "{again:?}");
    controller
        .wait_for("the status write to reach the store", |i| {
            i.node_groups
                .iter()
                .any(|g| g.status.as_ref().is_some_and(|s| s.upcoming_size == 3))
        })
        .await;
    let third = controller.run_once().await;
    assert!(third.scaled_up.is_empty(), "{third:?}");
    let report = third.report.expect("planned");
    assert!(report.scale_ups.is_empty(), "{report:?}");
    assert_eq!(provider.increases().len(), 1);

    // A restarted controller reads the same status and does not ask again.
    drop(controller);
    let restarted = Controller::start(&client, provider.clone()).await;
    let after_restart = restarted.run_once().await;
    assert!(after_restart.scaled_up.is_empty(), "{after_restart:?}");
    assert_eq!(
        provider.increases().len(),
        1,
        "no duplicate scale-up across restarts"
    );
    // Events were not repeated either: the restarted process has nothing new to say.
    assert_eq!(events(&client, "TriggeredScaleUp").await.len(), 4);
}

fn registered_node(name: &str, group: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([(NODE_GROUP_LABEL.to_string(), group.to_string())].into()),
            ..Default::default()
        },
        spec: None,
        status: Some(NodeStatus {
            capacity: Some(
                [
                    ("cpu".to_string(), Quantity("4".into())),
                    ("pods".to_string(), Quantity("110".into())),
                ]
                .into(),
            ),
            allocatable: Some(
                [
                    ("cpu".to_string(), Quantity("4".into())),
                    ("pods".to_string(), Quantity("110".into())),
                ]
                .into(),
            ),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

#[tokio::test]
async fn registered_nodes_end_the_upcoming_count_and_booting_ones_still_hold_the_gang() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    let controller = Controller::start(&client, provider.clone()).await;
    assert_eq!(controller.run_once().await.scaled_up.get("gpu"), Some(&2));

    // One machine registers Ready; the other registers but is not Ready yet
    // (kubelet up, drivers still starting).
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &registered_node("gpu-pool-0", "gpu"),
        )
        .await
        .unwrap();
    let mut booting = registered_node("gpu-pool-1", "gpu");
    if let Some(c) = booting.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        c[0].status = "False".into();
    }
    // What the node lifecycle controller puts on a node that is not Ready:
    // the scheduler keeps pods off it, so only its template counts.
    booting.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
        taints: Some(vec![k8s_openapi::api::core::v1::Taint {
            key: "node.kubernetes.io/not-ready".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    nodes
        .create(&PostParams::default(), &booting)
        .await
        .unwrap();
    // The server keeps status on create for Nodes; make sure it says NotReady.
    let not_ready =
        serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    nodes
        .patch_status(
            "gpu-pool-1",
            &PatchParams::default(),
            &Patch::Merge(&not_ready),
        )
        .await
        .unwrap();
    controller
        .wait_for("both nodes in the store", |i| i.nodes.len() == 2)
        .await;

    let summary = controller.run_once().await;
    assert!(summary.scaled_up.is_empty(), "{summary:?}");
    let status = node_group(&client, "gpu").await.status.unwrap();
    assert_eq!(
        (
            status.current_size,
            status.upcoming_size,
            status.target_size
        ),
        (2, 0, 2)
    );
    assert_eq!(provider.increases().len(), 1);
}
