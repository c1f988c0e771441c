//! LIST with label and field selectors, across and within namespaces.

use dra_fake_apiserver::FakeApiServer;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{
    Api, ResourceExt,
    api::{ListParams, PostParams},
};
use serde_json::json;

fn pod(name: &str, labels: serde_json::Value, node: Option<&str>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": spec}))
        .expect("pod")
}

async fn names(api: &Api<Pod>, params: &ListParams) -> Vec<String> {
    api.list(params)
        .await
        .expect("list")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect()
}

async fn seeded() -> (FakeApiServer, Api<Pod>, Api<Pod>) {
    let server = FakeApiServer::builder().start().await.expect("server");
    let default: Api<Pod> = Api::namespaced(server.client(), "default");
    let system: Api<Pod> = Api::namespaced(server.client(), "kube-system");
    let pp = PostParams::default();
    default
        .create(
            &pp,
            &pod(
                "web-1",
                json!({"app": "web", "tier": "front"}),
                Some("node-a"),
            ),
        )
        .await
        .expect("create");
    default
        .create(&pp, &pod("web-2", json!({"app": "web"}), None))
        .await
        .expect("create");
    default
        .create(
            &pp,
            &pod("db-1", json!({"app": "db", "gang": "g1"}), Some("node-b")),
        )
        .await
        .expect("create");
    system
        .create(&pp, &pod("dns", json!({"app": "dns"}), Some("node-a")))
        .await
        .expect("create");
    (server, default, system)
}

#[tokio::test]
async fn label_selectors_filter_lists() {
    let (_server, default, _) = seeded().await;
    let by = |s: &str| ListParams::default().labels(s);
    assert_eq!(names(&default, &by("app=web")).await, ["web-1", "web-2"]);
    assert_eq!(names(&default, &by("app==web,tier=front")).await, ["web-1"]);
    assert_eq!(names(&default, &by("app!=web")).await, ["db-1"]);
    assert_eq!(names(&default, &by("app in (db,dns)")).await, ["db-1"]);
    assert_eq!(names(&default, &by("app notin (web)")).await, ["db-1"]);
    assert_eq!(names(&default, &by("gang")).await, ["db-1"]);
    assert_eq!(names(&default, &by("!gang")).await, ["web-1", "web-2"]);
    assert!(names(&default, &by("app=nothing")).await.is_empty());
}

#[tokio::test]
async fn field_selectors_filter_lists() {
    let (server, default, _) = seeded().await;
    let all: Api<Pod> = Api::all(server.client());
    let by = |s: &str| ListParams::default().fields(s);
    // The scheduler's and autoscaler's classic queries.
    assert_eq!(names(&default, &by("spec.nodeName=")).await, ["web-2"]);
    assert_eq!(
        names(&all, &by("spec.nodeName=node-a")).await,
        ["web-1", "dns"]
    );
    assert_eq!(
        names(&all, &by("spec.nodeName!=node-a")).await,
        ["db-1", "web-2"]
    );
    assert_eq!(
        names(&all, &by("metadata.namespace=kube-system")).await,
        ["dns"]
    );
    assert_eq!(names(&all, &by("metadata.name=db-1")).await, ["db-1"]);
    let both = ListParams::default()
        .fields("spec.nodeName=node-a")
        .labels("app=web");
    assert_eq!(names(&all, &both).await, ["web-1"]);
}

#[tokio::test]
async fn list_across_namespaces_is_sorted_by_namespace_then_name() {
    let (server, _, _) = seeded().await;
    let all: Api<Pod> = Api::all(server.client());
    assert_eq!(
        names(&all, &ListParams::default()).await,
        ["db-1", "web-1", "web-2", "dns"]
    );
}

#[tokio::test]
async fn malformed_selectors_are_bad_requests() {
    let (_server, default, _) = seeded().await;
    let err = default
        .list(&ListParams::default().labels("app in web"))
        .await
        .expect_err("malformed");
    match err {
        kube::Error::Api(status) => {
            assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"))
        }
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn involved_object_field_selectors_find_core_events() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let events: Api<Event> = Api::namespaced(server.client(), "default");
    for (name, pod) in [("e1", "web-1"), ("e2", "web-2")] {
        let event: Event = serde_json::from_value(json!({
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": pod, "namespace": "default"},
            "reason": "NotTriggerScaleUp",
            "message": "pod didn't trigger scale-up",
            "type": "Normal",
        }))
        .expect("event");
        events
            .create(&PostParams::default(), &event)
            .await
            .expect("create event");
    }
    let found = events
        .list(&ListParams::default().fields("involvedObject.kind=Pod,involvedObject.name=web-2"))
        .await
        .expect("list");
    let names: Vec<String> = found.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(names, ["e2"]);
}
