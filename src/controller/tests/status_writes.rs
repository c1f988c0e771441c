//! How NodeGroup status is written (kube-rs controller idioms, upstream semantics): by
//! server-side apply under the field manager `dra-autoscaler`, conditional on the
//! resourceVersion the decision was made from. Only a 409 is a lost race; any other failed
//! write is an error. Either way the group sits the loop out and its provider is not called,
//! since its intent could not be recorded.

mod common;

use std::sync::Arc;

use common::{Controller, cluster, create_gang, create_node_group, node_group};
use dra_controller::executor::memory::InMemoryProvider;
use dra_fake_apiserver::Verb;

#[tokio::test]
async fn status_is_applied_by_the_controllers_field_manager() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    let controller = Controller::start(&client, provider.clone()).await;
    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("gpu"), Some(&2), "{summary:?}");

    let group = node_group(&client, "gpu").await;
    let managers: Vec<(String, String, String)> = group
        .metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.manager.unwrap_or_default(),
                m.operation.unwrap_or_default(),
                m.subresource.unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("dra-autoscaler".into(), "Apply".into(), "status".into())),
        "{managers:?}"
    );
    let status = group.status.expect("status");
    assert_eq!(status.upcoming_size, 2);
    let active = status
        .conditions
        .iter()
        .find(|c| c.type_ == "ScalingActive")
        .expect("ScalingActive");
    assert_eq!(
        (active.status.as_str(), active.reason.as_str()),
        ("True", "Active")
    );
}

#[tokio::test]
async fn a_409_is_a_lost_race_and_any_other_failure_an_error_and_neither_calls_the_provider() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    let controller = Controller::start(&client, provider.clone()).await;

    server.fail_next(Verb::Patch, "nodegroups/status", 1, 409);
    let summary = controller.run_once().await;
    assert_eq!(summary.conflicts, ["gpu"], "{summary:?}");
    assert!(summary.status_errors.is_empty(), "{summary:?}");
    assert!(summary.scaled_up.is_empty(), "{summary:?}");

    // 500 is not retried by kube's client (429, 503 and 504 are).
    server.fail_next(Verb::Patch, "nodegroups/status", 1, 500);
    let summary = controller.run_once().await;
    assert_eq!(summary.status_errors, ["gpu"], "{summary:?}");
    assert!(summary.conflicts.is_empty(), "{summary:?}");
    assert!(summary.scaled_up.is_empty(), "{summary:?}");
    assert!(provider.calls().is_empty(), "{:?}", provider.calls());

    let summary = controller.run_once().await;
    assert_eq!(
        summary.scaled_up.get("gpu"),
        Some(&2),
        "then it scales: {summary:?}"
    );
}
