//! kube-runtime's event `Recorder` publishing through the fake server.

use dra_fake_apiserver::{FakeApiServer, Verb};
use k8s_openapi::api::{core::v1::ObjectReference, events::v1::Event as K8sEvent};
use kube::{
    Api, ResourceExt,
    api::ListParams,
    runtime::events::{Event, EventType, Recorder, Reporter},
};

fn reporter() -> Reporter {
    Reporter {
        controller: "dra-autoscaler".into(),
        instance: Some("dra-autoscaler-0".into()),
    }
}

fn scale_up(note: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: "TriggeredScaleUp".into(),
        note: Some(note.into()),
        action: "ScaleUp".into(),
        secondary: None,
    }
}

#[tokio::test]
async fn recorder_creates_then_patches_a_series() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let recorder = Recorder::new(server.client(), reporter());
    let pod = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some("trainer-0".into()),
        namespace: Some("default".into()),
        uid: Some("3b9e1c1e-0000-4000-8000-000000000001".into()),
        ..ObjectReference::default()
    };
    let event = scale_up("pod triggered scale-up: [h200 0->2 (max: 8)]");
    recorder
        .publish(&event, &pod)
        .await
        .expect("first publish creates");
    recorder
        .publish(&event, &pod)
        .await
        .expect("repeat publish patches the series");

    let verbs: Vec<Verb> = server
        .request_log()
        .iter()
        .filter(|r| {
            r.resource.as_deref() == Some("events") && r.path.starts_with("/apis/events.k8s.io/v1/")
        })
        .filter_map(|r| r.verb)
        .collect();
    assert_eq!(verbs, [Verb::Create, Verb::Patch]);

    let events: Api<K8sEvent> = Api::namespaced(server.client(), "default");
    let listed = events
        .list(&ListParams::default())
        .await
        .expect("list")
        .items;
    assert_eq!(listed.len(), 1, "a repeat is a series, not a new event");
    let stored = &listed[0];
    assert_eq!(stored.reason.as_deref(), Some("TriggeredScaleUp"));
    assert_eq!(
        stored.reporting_controller.as_deref(),
        Some("dra-autoscaler")
    );
    assert_eq!(
        stored.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("trainer-0")
    );
    assert_eq!(stored.series.as_ref().map(|s| s.count), Some(2));
    assert!(stored.name_any().starts_with("trainer-0."));
}

#[tokio::test]
async fn events_about_cluster_scoped_objects_land_in_default() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let recorder = Recorder::new(server.client(), reporter());
    let node = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some("gpu-node-1".into()),
        ..ObjectReference::default()
    };
    recorder
        .publish(&scale_up("node group h200 scaled down"), &node)
        .await
        .expect("publish");
    let events: Api<K8sEvent> = Api::namespaced(server.client(), "default");
    let listed = events
        .list(&ListParams::default())
        .await
        .expect("list")
        .items;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].namespace().as_deref(), Some("default"));
}
