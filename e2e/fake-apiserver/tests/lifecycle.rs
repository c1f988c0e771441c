//! Start-up and shutdown of the in-process server.

use std::time::Duration;

use dra_fake_apiserver::FakeApiServer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ListParams, WatchParams},
};

#[tokio::test]
async fn health_endpoints_answer_ok() {
    let server = FakeApiServer::builder().start().await.expect("server");
    for path in ["/healthz", "/readyz", "/livez"] {
        let request = http::Request::get(path).body(Vec::new()).expect("request");
        let body = server.client().request_text(request).await.expect("probe");
        assert_eq!(body, "ok", "{path}");
    }
}

#[tokio::test]
async fn shutdown_ends_watches_and_stops_serving() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let client = server.client();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();

    tokio::time::timeout(Duration::from_secs(10), server.shutdown())
        .await
        .expect("shutdown completes with a watch open");
    let ended = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("the watch ends");
    assert!(
        ended.is_none_or(|item| item.is_err()),
        "no more events after shutdown"
    );
    assert!(
        api.list(&ListParams::default()).await.is_err(),
        "nothing listens any more"
    );
}

#[tokio::test]
async fn two_servers_are_independent() {
    let one = FakeApiServer::builder().start().await.expect("server one");
    let two = FakeApiServer::builder().start().await.expect("server two");
    assert_ne!(one.addr(), two.addr());
    let cms_one: Api<ConfigMap> = Api::namespaced(one.client(), "default");
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "only-in-one"}}))
            .expect("cm");
    cms_one
        .create(&Default::default(), &cm)
        .await
        .expect("create");
    let cms_two: Api<ConfigMap> = Api::namespaced(two.client(), "default");
    assert!(
        cms_two
            .get_opt("only-in-one")
            .await
            .expect("get_opt")
            .is_none()
    );
}
