//! A gang whose plan spans two node groups starts whole or not at all: when the second
//! group's all-or-nothing request fails (out of capacity), the machines the first group
//! started for the gang are given back in the same loop, nothing of the gang counts as
//! upcoming, and the next loop plans it again from scratch. Against the in-memory provider
//! (which records the calls) and the fake provider over gRPC (whose machines are real Nodes).

mod common;

use std::sync::Arc;

use common::{
    Controller, cluster, create_gang, create_node_group, create_node_group_with_id, events,
    node_group, serve_and_connect,
};
use dra_api::ScaleUpOutcome;
use dra_controller::executor::ErrorCategory;
use dra_controller::executor::memory::{Call, InMemoryProvider};
use dra_provider_fake::{Config, FakeProvider};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ListParams};

#[tokio::test]
async fn a_gang_split_over_two_groups_gives_back_the_first_when_the_second_is_out_of_capacity() {
    let server = cluster().await;
    let client = server.client();
    // Two groups of one machine each: the gang of two needs one of each.
    create_node_group(&client, "a", 1).await;
    create_node_group(&client, "b", 1).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    provider.set_capacity("b-pool", 0);
    let controller = Controller::start(&client, provider.clone()).await;

    let now = Timestamp::now();
    let summary = controller.run_once_at(now).await;
    let report = summary.report.as_ref().expect("planned");
    let groups: Vec<&str> = report
        .scale_ups
        .iter()
        .map(|s| s.node_group.as_str())
        .collect();
    assert_eq!(groups, ["a", "b"], "the plan splits the gang");
    assert!(summary.scaled_up.is_empty(), "{summary:?}");
    assert!(summary.failed.contains_key("a") && summary.failed.contains_key("b"));

    // The first group's machine is deleted by its instance id, in the same loop.
    let calls = provider.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(matches!(&calls[0], Call::Increase(r) if r.group.name == "a"));
    assert!(matches!(&calls[1], Call::Increase(r) if r.group.name == "b"));
    match &calls[2] {
        Call::DeleteNodes { group, .. } => assert_eq!(group.name, "a"),
        other => panic!("expected the give-back, got {other:?}"),
    }
    assert_eq!(provider.deleted_ids(), ["a-pool-0"]);

    // Nothing of the gang counts: no upcoming node in either group.
    let a = node_group(&client, "a").await.status.expect("status");
    assert_eq!((a.upcoming_size, a.target_size), (0, 0));
    let last = a.last_scale_up.expect("recorded");
    assert_eq!(last.outcome, ScaleUpOutcome::Failed);
    assert!(
        last.message.contains("given back") && last.message.contains("node group b"),
        "{}",
        last.message
    );
    let b = node_group(&client, "b").await.status.expect("status");
    assert_eq!((b.upcoming_size, b.target_size), (0, 0));
    assert!(b.backoff_until.is_some(), "the failed group backs off");
    let not_triggered = events(&client, "NotTriggerScaleUp").await;
    assert!(
        not_triggered
            .iter()
            .any(|(kind, name, _, _)| kind == "PodGroup" && name == "train"),
        "{not_triggered:?}"
    );

    // Planned again from scratch once b's backoff ends; with capacity, it starts whole.
    provider.set_capacity("b-pool", 1);
    let later = controller
        .run_once_at(now + SignedDuration::from_mins(6))
        .await;
    assert_eq!(later.scaled_up.get("a"), Some(&1), "{later:?}");
    assert_eq!(later.scaled_up.get("b"), Some(&1), "{later:?}");
}

#[tokio::test]
async fn a_gang_split_over_two_groups_is_not_asked_further_after_a_refusal() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "a", 1).await;
    create_node_group(&client, "b", 1).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    // The first group's request is refused: the second is never sent, nothing to give back.
    provider.fail_next(ErrorCategory::Quota, "vCPU quota");
    let controller = Controller::start(&client, provider.clone()).await;
    let summary = controller.run_once().await;
    assert!(summary.scaled_up.is_empty(), "{summary:?}");
    assert_eq!(provider.increases().len(), 1);
    assert!(provider.deleted_ids().is_empty());
    assert!(
        summary.failed["b"].contains("not asked"),
        "{:?}",
        summary.failed
    );
}

const FAKE_CONFIG: &str = r#"
sliceDelayMs: 0
nodeGroups:
  - name: b
    faults: {outOfCapacityAfter: 0}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_fake_provider_no_machine_of_a_gang_that_did_not_start_whole_is_left() {
    let server = cluster().await;
    let client = server.client();
    create_node_group_with_id(&client, "a", "a", 1).await;
    create_node_group_with_id(&client, "b", "b", 1).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = FakeProvider::new(
        Config::parse(FAKE_CONFIG, "test").expect("config"),
        client.clone(),
        None,
    )
    .await
    .expect("fake provider starts");
    let (executor, served) = serve_and_connect("fake", provider).await;
    let controller = Controller::start(&client, executor).await;

    let summary = controller.run_once().await;
    assert!(summary.scaled_up.is_empty(), "{summary:?}");
    assert!(
        summary.failed["b"].contains("out of capacity"),
        "{summary:?}"
    );
    // The fake registered a's machine as a Node when it started; giving it back removed it.
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items;
    assert!(
        nodes.is_empty(),
        "{:?}",
        nodes.iter().map(|n| &n.metadata.name).collect::<Vec<_>>()
    );
    let a = node_group(&client, "a").await.status.expect("status");
    assert_eq!((a.current_size, a.upcoming_size, a.target_size), (0, 0, 0));
    let _ = served.stop.send(());
}
