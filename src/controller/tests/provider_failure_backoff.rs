//! A provider that refuses a scale-up backs the group off (doubling on every
//! further failure) and says so in Events and in the NodeGroup status.

mod common;

use std::sync::Arc;

use common::{Controller, cluster, create_gang, create_node_group, events, node_group};
use dra_api::ScaleUpOutcome;
use dra_controller::executor::memory::InMemoryProvider;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

#[tokio::test]
async fn out_of_capacity_backs_the_group_off_with_events() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    let members = create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    provider.set_capacity("gpu-pool", 1);
    let controller = Controller::start(&client, provider.clone()).await;

    // metav1.Time has whole seconds on the wire.
    let t0 = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    let summary = controller.run_once_at(t0).await;
    assert!(summary.failed.contains_key("gpu"), "{summary:?}");
    assert_eq!(provider.increases().len(), 1);

    let status = node_group(&client, "gpu").await.status.unwrap();
    let last = status.last_scale_up.clone().unwrap();
    assert_eq!(last.outcome, ScaleUpOutcome::OutOfCapacity);
    assert_eq!(
        (status.upcoming_size, status.target_size),
        (0, 0),
        "nothing started, nothing upcoming"
    );
    assert_eq!(
        status.backoff_until.as_ref().map(|t| t.0),
        Some(t0 + SignedDuration::from_mins(5))
    );
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Backoff")
        .unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("True", "OutOfCapacity")
    );

    let failed = events(&client, "FailedToScaleUpGroup").await;
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (
            failed[0].0.as_str(),
            failed[0].1.as_str(),
            failed[0].2.as_str()
        ),
        ("NodeGroup", "gpu", "Warning")
    );
    assert!(
        failed[0].3.contains("only 1 machine(s) available"),
        "{}",
        failed[0].3
    );
    assert_eq!(events(&client, "BackOff").await.len(), 1);
    let pods: Vec<_> = events(&client, "NotTriggerScaleUp")
        .await
        .into_iter()
        .filter(|(kind, ..)| kind == "Pod")
        .map(|(_, name, ..)| name)
        .collect();
    assert_eq!(pods, members);

    // Within the window the group is left out of planning.
    let during = controller
        .run_once_at(t0 + SignedDuration::from_mins(4))
        .await;
    assert_eq!(during.backing_off, vec!["gpu".to_string()]);
    assert_eq!(provider.increases().len(), 1);

    // After it, the group is tried again; a second refusal doubles the window.
    let after = t0 + SignedDuration::from_mins(6);
    controller
        .wait_for("the backoff to reach the store", |i| {
            i.node_groups
                .iter()
                .any(|g| g.status.as_ref().is_some_and(|s| s.backoff_until.is_some()))
        })
        .await;
    let retry = controller.run_once_at(after).await;
    assert!(retry.failed.contains_key("gpu"), "{retry:?}");
    assert_eq!(provider.increases().len(), 2);
    let status = node_group(&client, "gpu").await.status.unwrap();
    assert_eq!(
        status.backoff_until.map(|t| t.0),
        Some(after + SignedDuration::from_mins(10))
    );

    // Capacity comes back: the next attempt after the window succeeds and
    // clears the backoff.
    provider.set_capacity("gpu-pool", 8);
    let later = after + SignedDuration::from_mins(11);
    let ok = controller.run_once_at(later).await;
    assert_eq!(ok.scaled_up.get("gpu"), Some(&2), "{ok:?}");
    let status = node_group(&client, "gpu").await.status.unwrap();
    assert_eq!(status.backoff_until, None);
    assert_eq!(
        status.last_scale_up.unwrap().outcome,
        ScaleUpOutcome::Succeeded
    );
}

#[tokio::test]
async fn provider_without_atomic_increase_gets_a_plain_one() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    provider.disable_atomic();
    let controller = Controller::start(&client, provider.clone()).await;
    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("gpu"), Some(&2), "{summary:?}");
    let increases = provider.increases();
    assert_eq!(increases.len(), 2);
    assert_eq!(increases[0].atomic_min, Some(2));
    assert_eq!(increases[1].atomic_min, None);
    assert_eq!(increases[1].count, 2);
}
