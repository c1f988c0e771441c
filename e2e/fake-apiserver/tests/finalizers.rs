//! Deletion with finalizers: the object lingers with a deletionTimestamp until the
//! last finalizer is removed, and watches see MODIFIED then DELETED.

use std::time::Duration;

use dra_fake_apiserver::FakeApiServer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent, WatchParams},
};
use serde_json::json;

fn api_code(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(status) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "guarded", "finalizers": ["dra-autoscaler.io/drain"]},
    }))
    .expect("configmap");
    let created = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let mut events = api
        .watch(
            &WatchParams::default(),
            &created.resource_version().expect("rv"),
        )
        .await
        .expect("watch")
        .boxed();

    let pending = api
        .delete("guarded", &DeleteParams::default())
        .await
        .expect("delete");
    let pending = pending
        .left()
        .expect("the object is returned while finalizers remain");
    assert!(pending.metadata.deletion_timestamp.is_some());
    let still_there = api.get("guarded").await.expect("still readable");
    assert!(still_there.metadata.deletion_timestamp.is_some());

    // No new finalizers on a terminating object.
    let add =
        Patch::Merge(json!({"metadata": {"finalizers": ["dra-autoscaler.io/drain", "other/x"]}}));
    let (code, reason) = api_code(
        api.patch("guarded", &PatchParams::default(), &add)
            .await
            .expect_err("forbidden"),
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"));

    let release = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    api.patch("guarded", &PatchParams::default(), &release)
        .await
        .expect("remove finalizer");
    assert_eq!(api.get_opt("guarded").await.expect("get_opt"), None);

    let mut kinds = Vec::new();
    for _ in 0..2 {
        match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
            Ok(Some(Ok(WatchEvent::Modified(o)))) => {
                assert!(o.metadata.deletion_timestamp.is_some());
                kinds.push("MODIFIED");
            }
            Ok(Some(Ok(WatchEvent::Deleted(o)))) => {
                assert!(o.finalizers().is_empty());
                kinds.push("DELETED");
            }
            other => panic!("unexpected watch item {other:?}"),
        }
    }
    assert_eq!(kinds, ["MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn delete_preconditions_are_enforced() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}})).expect("configmap");
    let created = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let stale = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: Some("1".into()),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    let (code, reason) = api_code(
        api.delete("c", &stale)
            .await
            .expect_err("stale precondition"),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    let exact = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: created.resource_version(),
            uid: created.uid(),
        }),
        ..DeleteParams::default()
    };
    api.delete("c", &exact)
        .await
        .expect("matching preconditions delete");
    assert_eq!(api.get_opt("c").await.expect("get_opt"), None);
}
