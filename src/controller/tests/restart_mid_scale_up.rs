//! A controller that stops between recording a scale-up and hearing back from
//! the provider leaves placeholders in the NodeGroup status; the next one (a
//! restart or a new leader) does not scale again for the same pods. An
//! all-or-nothing request is sent again with its request id (the provider
//! answers with what it started, so nothing starts twice); a plain one waits
//! for its nodes and gives them up after the max provision time. A request
//! that never reached the provider is released at once, without backoff.

mod common;

use std::sync::Arc;

use common::{
    Controller, cluster, create_gang, create_node_group, create_node_group_with_id, events,
    node_group,
};
use dra_api::{NodeGroup, NodeGroupStatus, UnconfirmedRequest, UpcomingNode};
use dra_controller::executor::memory::{Call, InMemoryProvider};
use dra_controller::executor::{ErrorCategory, GroupRef, IncreaseRequest, ScaleExecutor};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};

/// A plain increase carries no request id, so placeholders without an
/// unconfirmed request are never sent again: they wait for their nodes.
#[tokio::test]
async fn crash_after_a_plain_intent_is_recorded_causes_no_second_scale_up() {
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

/// What a controller that died between recording an all-or-nothing request
/// and hearing the provider's answer leaves: its placeholders and the request.
async fn seed_unconfirmed(client: &kube::Client, group: &mut NodeGroup, request_id: &str) {
    let requested = Timestamp::from_second(Timestamp::now().as_second()).expect("whole seconds");
    group.status = Some(NodeGroupStatus {
        target_size: 2,
        upcoming_size: 2,
        upcoming_nodes: (0..2)
            .map(|i| UpcomingNode {
                name: format!("{request_id}-{i}"),
                requested_at: Time(requested),
            })
            .collect(),
        unconfirmed_requests: vec![UnconfirmedRequest {
            request_id: request_id.into(),
            count: 2,
            min_count: 2,
        }],
        ..Default::default()
    });
    Api::<NodeGroup>::all(client.clone())
        .replace_status("gpu", &PostParams::default(), group)
        .await
        .expect("status seeded");
}

fn gang_request(request_id: &str) -> IncreaseRequest {
    IncreaseRequest {
        group: GroupRef {
            name: "gpu".into(),
            provider: "fake".into(),
            provider_id: "gpu-pool".into(),
        },
        count: 2,
        atomic_min: Some(2),
        request_id: request_id.into(),
    }
}

#[tokio::test]
async fn crash_before_the_provider_heard_of_the_request_sends_it_after_the_restart() {
    let server = cluster().await;
    let client = server.client();
    let mut group = create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;
    seed_unconfirmed(&client, &mut group, "gpu-1700000000000").await;

    let provider = Arc::new(InMemoryProvider::new());
    let controller = Controller::start(&client, provider.clone()).await;
    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("gpu"), Some(&2), "{summary:?}");
    assert_eq!(
        provider.increases(),
        vec![gang_request("gpu-1700000000000")],
        "the recorded request, nothing new for the same pods"
    );
    let status = node_group(&client, "gpu").await.status.unwrap();
    assert!(status.unconfirmed_requests.is_empty(), "{status:?}");
    let names: Vec<_> = status
        .upcoming_nodes
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["gpu-pool-0", "gpu-pool-1"]);
    assert_eq!((status.upcoming_size, status.target_size), (2, 2));
}

#[tokio::test]
async fn crash_after_the_provider_started_the_machines_starts_nothing_twice() {
    let server = cluster().await;
    let client = server.client();
    let mut group = create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    // The provider started the gang's machines; the controller died before
    // recording the answer.
    let first = provider
        .increase(&gang_request("gpu-1700000000000"))
        .await
        .unwrap();
    seed_unconfirmed(&client, &mut group, "gpu-1700000000000").await;

    let controller = Controller::start(&client, provider.clone()).await;
    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("gpu"), Some(&2), "{summary:?}");
    let increases = provider.increases();
    assert_eq!(increases.len(), 2, "{increases:?}");
    assert!(
        increases
            .iter()
            .all(|r| r == &gang_request("gpu-1700000000000"))
    );
    let status = node_group(&client, "gpu").await.status.unwrap();
    let names: Vec<_> = status
        .upcoming_nodes
        .iter()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(
        names, first.instance_ids,
        "the machines started the first time"
    );
    assert!(status.unconfirmed_requests.is_empty());

    // A later loop has nothing more to send or start.
    let summary = controller.run_once().await;
    assert!(summary.scaled_up.is_empty(), "{summary:?}");
    assert_eq!(provider.increases().len(), 2);
}

#[tokio::test]
async fn a_lost_answer_is_sent_again_with_its_request_id_on_the_next_loop() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    provider.lose_next_answer();
    let controller = Controller::start(&client, provider.clone()).await;
    let summary = controller.run_once().await;
    assert!(summary.failed.contains_key("gpu"), "{summary:?}");
    let status = node_group(&client, "gpu").await.status.unwrap();
    assert_eq!(status.upcoming_size, 2, "the placeholders stay");
    assert_eq!(status.backoff_until, None, "a lost answer is not a refusal");
    assert_eq!(status.unconfirmed_requests.len(), 1, "{status:?}");
    let request_id = status.unconfirmed_requests[0].request_id.clone();

    // After a restart, well before the provision time runs out.
    drop(controller);
    let restarted = Controller::start(&client, provider.clone()).await;
    let summary = restarted.run_once().await;
    assert_eq!(summary.scaled_up.get("gpu"), Some(&2), "{summary:?}");
    let increases = provider.increases();
    assert_eq!(increases.len(), 2, "{increases:?}");
    assert!(
        increases.iter().all(|r| r.request_id == request_id),
        "the same request id both times: {increases:?}"
    );
    let status = node_group(&client, "gpu").await.status.unwrap();
    let names: Vec<_> = status
        .upcoming_nodes
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["gpu-pool-0", "gpu-pool-1"], "started once");
    assert!(status.unconfirmed_requests.is_empty());
}

#[tokio::test]
async fn a_request_that_never_reached_the_provider_is_released_at_once() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    provider.fail_next(ErrorCategory::NotSent, "connection refused");
    let controller = Controller::start(&client, provider.clone()).await;
    let now = Timestamp::now();
    let summary = controller.run_once_at(now).await;
    assert!(summary.failed.contains_key("gpu"), "{summary:?}");
    assert!(summary.retry_soon, "{summary:?}");
    let status = node_group(&client, "gpu").await.status.unwrap();
    assert_eq!((status.upcoming_size, status.target_size), (0, 0));
    assert!(status.upcoming_nodes.is_empty() && status.unconfirmed_requests.is_empty());
    assert_eq!(
        status.backoff_until, None,
        "no backoff for a call never made"
    );
    assert!(events(&client, "BackOff").await.is_empty());

    // The retry a couple of seconds later starts the gang.
    let summary = controller
        .run_once_at(now + SignedDuration::from_secs(2))
        .await;
    assert_eq!(summary.scaled_up.get("gpu"), Some(&2), "{summary:?}");
    assert!(!summary.retry_soon);
    assert_eq!(provider.increases().len(), 2);
}

/// A Node of group `group` registered by the provider, as kubectl prints one.
async fn registered_node(client: &kube::Client, name: &str, group: &str) {
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"dra-autoscaler.io/node-group": group}},
        "spec": {"providerID": format!("fake://{group}/{name}")},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .expect("node");
    Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("node registered");
}

#[tokio::test]
async fn a_takeover_adopts_and_reports_the_dead_leaders_purchase() {
    // A gang split over two groups: the dead leader recorded group a's answer, then asked for
    // group b's nodes and died before recording that answer. Every node registered before the
    // new leader's first loop: only the status and Events say what was bought.
    let server = cluster().await;
    let client = server.client();
    let requested = Timestamp::from_second(Timestamp::now().as_second() - 30).unwrap();
    let placeholders = |id: &str, count: usize| -> Vec<UpcomingNode> {
        (0..count)
            .map(|i| UpcomingNode {
                name: format!("{id}-{i}"),
                requested_at: Time(requested),
            })
            .collect()
    };
    let mut a = create_node_group_with_id(&client, "a", "a-pool", 8).await;
    a.status = Some(NodeGroupStatus {
        target_size: 1,
        upcoming_size: 1,
        upcoming_nodes: placeholders("a-1700000000000", 1),
        last_scale_up: Some(dra_api::LastScaleUp {
            time: Time(requested),
            count: 1,
            outcome: dra_api::ScaleUpOutcome::Succeeded,
            message: "started 1 node(s) for default/split".into(),
        }),
        ..Default::default()
    });
    let mut b = create_node_group_with_id(&client, "b", "b-pool", 8).await;
    b.status = Some(NodeGroupStatus {
        target_size: 2,
        upcoming_size: 2,
        upcoming_nodes: placeholders("b-1700000000000", 2),
        ..Default::default()
    });
    for group in [&a, &b] {
        Api::<NodeGroup>::all(client.clone())
            .replace_status(
                group.metadata.name.as_deref().unwrap(),
                &PostParams::default(),
                group,
            )
            .await
            .expect("status seeded");
    }
    registered_node(&client, "a-i-1", "a").await;
    registered_node(&client, "b-i-1", "b").await;
    registered_node(&client, "b-i-2", "b").await;

    let provider = Arc::new(InMemoryProvider::new());
    let controller = Controller::start(&client, provider.clone()).await;
    controller.run_once().await;
    assert!(
        provider.calls().is_empty(),
        "nothing asked again: {:?}",
        provider.calls()
    );

    let b_status = node_group(&client, "b").await.status.unwrap();
    assert_eq!((b_status.current_size, b_status.upcoming_size), (2, 0));
    let last = b_status.last_scale_up.expect("the purchase is recorded");
    assert_eq!(
        (last.time.0, last.count, last.outcome),
        (requested, 2, dra_api::ScaleUpOutcome::Succeeded)
    );
    assert!(
        last.message.contains("request b-1700000000000"),
        "{}",
        last.message
    );
    // Group a's answer was recorded: nothing to adopt there.
    let a_status = node_group(&client, "a").await.status.unwrap();
    assert_eq!(
        a_status.last_scale_up.unwrap().message,
        "started 1 node(s) for default/split"
    );

    let scaled = events(&client, "ScaledUpGroup").await;
    let about: Vec<(&str, &str)> = scaled
        .iter()
        .map(|(kind, name, _, _)| (kind.as_str(), name.as_str()))
        .collect();
    assert_eq!(about, [("NodeGroup", "b")], "{scaled:?}");
    assert!(
        scaled[0]
            .3
            .contains("2 node(s) registered for request b-1700000000000"),
        "{scaled:?}"
    );
    assert!(
        controller.metrics.encode().contains(
            "dra_autoscaler_nodes_added_total{node_group=\"b\",capacity_type=\"on-demand\"} 2"
        ),
        "{}",
        controller.metrics.encode()
    );

    // Reported once: the next loop finds nothing new.
    controller.run_once().await;
    assert_eq!(events(&client, "ScaledUpGroup").await.len(), 1);
}
