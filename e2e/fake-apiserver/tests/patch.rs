//! PATCH flavours, no-op suppression and dry runs.

use std::time::Duration;

use dra_fake_apiserver::FakeApiServer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams, WatchEvent, WatchParams},
};
use serde_json::json;

async fn setup() -> (FakeApiServer, Api<ConfigMap>) {
    let server = FakeApiServer::builder().start().await.expect("server");
    let api = Api::namespaced(server.client(), "default");
    (server, api)
}

fn data(cm: &ConfigMap, key: &str) -> Option<String> {
    cm.data.as_ref().and_then(|d| d.get(key)).cloned()
}

async fn create(api: &Api<ConfigMap>, name: &str) -> ConfigMap {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"a": "1"}},
        "data": {"k": "v", "drop": "me"},
    }))
    .expect("configmap");
    api.create(&PostParams::default(), &cm)
        .await
        .expect("create")
}

#[tokio::test]
async fn merge_patch_sets_and_removes_fields() {
    let (_server, api) = setup().await;
    create(&api, "c").await;
    let patched = api
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"data": {"k": "w", "drop": null}, "metadata": {"labels": {"b": "2"}}}),
            ),
        )
        .await
        .expect("merge patch");
    assert_eq!(data(&patched, "k").as_deref(), Some("w"));
    assert_eq!(data(&patched, "drop"), None);
    assert_eq!(patched.labels().get("a").map(String::as_str), Some("1"));
    assert_eq!(patched.labels().get("b").map(String::as_str), Some("2"));
}

#[tokio::test]
async fn strategic_merge_patch_is_applied_as_a_merge() {
    let (_server, api) = setup().await;
    create(&api, "c").await;
    let patched = api
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Strategic(json!({"data": {"new": "x"}})),
        )
        .await
        .expect("strategic patch");
    assert_eq!(data(&patched, "new").as_deref(), Some("x"));
    assert_eq!(data(&patched, "k").as_deref(), Some("v"));
}

#[tokio::test]
async fn json_patch_applies_operations_and_test_failures_are_422() {
    let (_server, api) = setup().await;
    let created = create(&api, "c").await;
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": created.resource_version()},
        {"op": "replace", "path": "/data/k", "value": "replaced"},
        {"op": "remove", "path": "/data/drop"},
    ]))
    .expect("ops");
    let patched = api
        .patch("c", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .expect("json patch");
    assert_eq!(data(&patched, "k").as_deref(), Some("replaced"));
    assert_eq!(data(&patched, "drop"), None);

    // The same `test` against the old resourceVersion now fails, like upstream: 422.
    let stale: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": created.resource_version()},
        {"op": "replace", "path": "/data/k", "value": "lost"},
    ]))
    .expect("ops");
    let err = api
        .patch("c", &PatchParams::default(), &Patch::<()>::Json(stale))
        .await
        .expect_err("test op fails");
    match err {
        kube::Error::Api(status) => assert_eq!(status.code, 422),
        other => panic!("expected an API error, got {other:?}"),
    }
    assert_eq!(
        data(&api.get("c").await.expect("get"), "k").as_deref(),
        Some("replaced")
    );
}

#[tokio::test]
async fn merge_patch_with_a_stale_resource_version_conflicts() {
    let (_server, api) = setup().await;
    let created = create(&api, "c").await;
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "1"}})),
    )
    .await
    .expect("first patch");
    let stale =
        json!({"metadata": {"resourceVersion": created.resource_version()}, "data": {"k": "2"}});
    let err = api
        .patch("c", &PatchParams::default(), &Patch::Merge(stale))
        .await
        .expect_err("stale precondition");
    match err {
        kube::Error::Api(status) => {
            assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"))
        }
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn apply_creates_then_removes_what_the_manager_no_longer_applies() {
    let (server, api) = setup().await;
    let params = PatchParams::apply("dra-autoscaler").force();
    let first = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "applied"},
        "data": {"a": "1"},
    });
    let created = api
        .patch("applied", &params, &Patch::Apply(&first))
        .await
        .expect("apply creates");
    assert_eq!(data(&created, "a").as_deref(), Some("1"));
    assert_eq!(created.metadata.generation, Some(1));
    let second = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "applied"},
        "data": {"b": "2"},
    });
    let merged = api
        .patch("applied", &params, &Patch::Apply(&second))
        .await
        .expect("apply merges");
    assert_eq!(data(&merged, "b").as_deref(), Some("2"));
    // Upstream server-side apply removes `a`: this manager applied it and no longer does.
    assert_eq!(data(&merged, "a"), None);
    let statuses: Vec<u16> = server
        .request_log()
        .iter()
        .filter(|r| r.resource.as_deref() == Some("configmaps"))
        .map(|r| r.status)
        .collect();
    assert_eq!(
        statuses,
        [201, 200],
        "create-by-apply answers 201 like upstream"
    );
}

#[tokio::test]
async fn no_op_patch_keeps_the_resource_version_and_emits_no_event() {
    let (server, api) = setup().await;
    let created = create(&api, "c").await;
    let start = created.resource_version().expect("rv");
    let mut events = api
        .watch(&WatchParams::default(), &start)
        .await
        .expect("watch")
        .boxed();

    let same = api
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v"}})),
        )
        .await
        .expect("no-op patch");
    assert_eq!(same.resource_version(), created.resource_version());
    assert_eq!(server.resource_version().to_string(), start);
    let same_put = api
        .replace("c", &PostParams::default(), &same)
        .await
        .expect("no-op put");
    assert_eq!(same_put.resource_version(), created.resource_version());

    let changed = api
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "changed"}})),
        )
        .await
        .expect("real patch");
    // The first event on the watch is the real change: the no-ops emitted nothing.
    match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
        Ok(Some(Ok(WatchEvent::Modified(obj)))) => {
            assert_eq!(obj.resource_version(), changed.resource_version());
            assert_eq!(data(&obj, "k").as_deref(), Some("changed"));
        }
        other => panic!("expected MODIFIED for the real change, got {other:?}"),
    }
}

#[tokio::test]
async fn dry_run_writes_are_not_stored() {
    let (server, api) = setup().await;
    let before = server.resource_version();
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "dry"}})).expect("configmap");
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answered = api.create(&params, &cm).await.expect("dry-run create");
    assert_eq!(answered.name_any(), "dry");
    assert_eq!(api.get_opt("dry").await.expect("get_opt"), None);
    assert_eq!(server.resource_version(), before);
}
