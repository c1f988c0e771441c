//! A controller that stops between recording a scale-up and hearing back from
//! the provider leaves placeholders in the NodeGroup status; the next one (a
//! restart or a new leader) does not scale again, and gives the nodes up only
//! after the max provision time, backing the group off.

mod common;

use std::sync::Arc;

use common::{Controller, cluster, create_gang, create_node_group, events, node_group};
use dra_api::{NodeGroup, NodeGroupStatus, UpcomingNode};
use dra_controller::executor::ErrorCategory;
use dra_controller::executor::memory::{Call, InMemoryProvider};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};

#[tokio::test]
async fn crash_after_the_intent_is_recorded_causes_no_second_scale_up() {
    let server = cluster().await;
    let client = server.client();
    let mut group = create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;

    // What a controller that died right after recording its intent leaves.
    // metav1.Time has whole seconds on the wire.
    let requested = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    group.status = Some(NodeGroupStatus {
        target_size: 2,
        upcoming_size: 2,
        upcoming_nodes: (0..2)
            .map(|i| UpcomingNode {
                name: format!("gpu-1700000000000-{i}"),
                requested_at: Time(requested),
            })
            .collect(),
        ..Default::default()
    });
    Api::<NodeGroup>::all(client.clone())
        .replace_status("gpu", &PostParams::default(), &group)
        .await
        .expect("status seeded");

    let provider = Arc::new(InMemoryProvider::new());
    let controller = Controller::start(&client, provider.clone()).await;
    let summary = controller.run_once().await;
    assert!(summary.scaled_up.is_empty(), "{summary:?}");
    assert!(provider.calls().is_empty(), "{:?}", provider.calls());
    assert!(events(&client, "TriggeredScaleUp").await.is_empty());

    // The nodes never come: after the max provision time they are given up,
    // the provider is asked to delete them and the group backs off.
    let later = requested + SignedDuration::from_mins(16);
    let summary = controller.run_once_at(later).await;
    assert_eq!(summary.timed_out.get("gpu"), Some(&2), "{summary:?}");
    assert!(
        summary.scaled_up.is_empty(),
        "a group in backoff is not scaled: {summary:?}"
    );
    assert_eq!(
        provider.calls(),
        vec![Call::DeleteUnregistered {
            group: dra_controller::executor::GroupRef {
                name: "gpu".into(),
                provider: "fake".into(),
                provider_id: "gpu-pool".into(),
            },
            names: vec!["gpu-1700000000000-0".into(), "gpu-1700000000000-1".into()],
        }]
    );
    let status = node_group(&client, "gpu").await.status.unwrap();
    assert_eq!((status.upcoming_size, status.target_size), (0, 0));
    assert_eq!(
        status.backoff_until.map(|t| t.0),
        Some(later + SignedDuration::from_mins(5))
    );
    let timed_out = events(&client, "ScaleUpTimedOut").await;
    assert_eq!(timed_out.len(), 1);
    assert_eq!(timed_out[0].2, "Warning");
    assert!(
        timed_out[0]
            .3
            .starts_with("2 node(s) did not register within 15m"),
        "{}",
        timed_out[0].3
    );
    assert_eq!(events(&client, "BackOff").await.len(), 1);
    let waiting = events(&client, "NotTriggerScaleUp").await;
    assert_eq!(
        waiting.len(),
        3,
        "both pods and their PodGroup: {waiting:?}"
    );
    assert!(
        waiting[0].3.contains("gpu: backing off until"),
        "{}",
        waiting[0].3
    );
}

#[tokio::test]
async fn provider_timeout_keeps_the_request_upcoming_across_a_restart() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    // The answer is lost: the request may have been applied.
    provider.fail_next(ErrorCategory::Transient, "deadline exceeded");
    let controller = Controller::start(&client, provider.clone()).await;
    let summary = controller.run_once().await;
    assert!(summary.failed.contains_key("gpu"), "{summary:?}");
    let status = node_group(&client, "gpu").await.status.unwrap();
    assert_eq!(status.upcoming_size, 2, "the placeholders stay");
    assert_eq!(status.backoff_until, None, "a lost answer is not a refusal");

    drop(controller);
    let restarted = Controller::start(&client, provider.clone()).await;
    let summary = restarted.run_once().await;
    assert!(summary.scaled_up.is_empty(), "{summary:?}");
    assert_eq!(
        provider.increases().len(),
        1,
        "no second request for the same pods"
    );
}
