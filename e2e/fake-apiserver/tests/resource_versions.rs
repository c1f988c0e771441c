//! resourceVersions the server has not reached or no longer has, as upstream's watch cache
//! answers them, and restarts: kube-runtime's watcher (as the controller runs it) relists
//! instead of keeping a stale cache.
//!
//! Upstream (`staging/src/k8s.io/apiserver/pkg/storage/cacher`): a GET or LIST at a
//! resourceVersion the cache has not reached waits up to 3 s (`blockTimeout`), then fails with
//! 504 `Timeout`, message `Timeout: Too large resource version: N, current: M`, cause
//! `ResourceVersionTooLarge`, `retryAfterSeconds: 1`; a streaming list (`sendInitialEvents`)
//! gets that Status as an ERROR event; a plain watch from such a resourceVersion is accepted
//! and waits for events. A resourceVersion older than the cache's window (after a restart the
//! window starts at the restart) gets 410 Expired, and clients relist.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dra_fake_apiserver::FakeApiServer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, PostParams, VersionMatch, WatchEvent, WatchParams},
    runtime::{WatchStreamExt, reflector, watcher},
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(15);

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": "1"}})).unwrap()
}

async fn create(client: &Client, name: &str) -> ConfigMap {
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cm(name))
        .await
        .unwrap()
}

/// A client that does not retry (kube's default retries a 504 up to 15 times, which a test of
/// the 504 itself would only wait out).
fn no_retry_client(server: &FakeApiServer) -> Client {
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.default_retry = false;
    Client::try_from(config).unwrap()
}

fn status_of(err: kube::Error) -> kube::core::Status {
    match err {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_list_from_a_resource_version_not_reached_waits_then_is_too_large() {
    let server = FakeApiServer::builder()
        .too_large_wait(Duration::from_millis(300))
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(no_retry_client(&server), "default");
    let current = server.resource_version();
    let future = current + 50;
    let params = ListParams::default().at(&future.to_string());
    let started = std::time::Instant::now();
    let err = status_of(api.list(&params).await.unwrap_err());
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "waited first"
    );
    assert_eq!(err.code, 504);
    assert_eq!(err.reason, "Timeout");
    assert_eq!(
        err.message,
        format!("Timeout: Too large resource version: {future}, current: {current}")
    );
    let request = http::Request::get(format!(
        "/api/v1/namespaces/default/configmaps?resourceVersion={future}"
    ))
    .body(Vec::new())
    .unwrap();
    let response = no_retry_client(&server)
        .send(request.map(Into::into))
        .await
        .unwrap();
    assert_eq!(response.status(), 504);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1"),
        "clients are told when to retry"
    );

    // A write that reaches the resourceVersion during the wait lets the list through.
    let target = current + 1;
    let params = ListParams::default().at(&target.to_string());
    let client = server.client();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        create(&client, "late").await;
    });
    let list = api.list(&params).await.unwrap();
    writer.await.unwrap();
    assert_eq!(list.items.len(), 1);
    // resourceVersion "0" and NotOlderThan an older one are served at once.
    assert!(api.list(&ListParams::default().match_any()).await.is_ok());
    let exact = ListParams::default()
        .at(&(current + 100).to_string())
        .matching(VersionMatch::Exact);
    assert_eq!(status_of(api.list(&exact).await.unwrap_err()).code, 504);
}

#[tokio::test]
async fn a_streaming_list_from_the_future_gets_the_504_in_the_stream_a_plain_watch_waits() {
    let server = FakeApiServer::builder()
        .too_large_wait(Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let future = (server.resource_version() + 2).to_string();
    let streaming = WatchParams::streaming_lists();
    let mut stream = api.watch(&streaming, &future).await.unwrap().boxed();
    match tokio::time::timeout(WAIT, stream.next()).await.unwrap() {
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!(status.code, 504);
            assert_eq!(status.reason, "Timeout");
        }
        other => panic!("expected a 504 ERROR event, got {other:?}"),
    }

    let mut plain = api
        .watch(&WatchParams::default(), &future)
        .await
        .unwrap()
        .boxed();
    create(&server.client(), "a").await; // future - 1
    create(&server.client(), "b").await; // future: not after it
    create(&server.client(), "c").await; // after it: delivered
    match tokio::time::timeout(WAIT, plain.next()).await.unwrap() {
        Some(Ok(WatchEvent::Added(cm))) => assert_eq!(cm.name_any(), "c"),
        other => panic!("expected the first event after {future}, got {other:?}"),
    }
}

/// A reflector over ConfigMaps, as the controller runs its watches (default config).
fn reflect(client: Client) -> (reflector::Store<ConfigMap>, tokio::task::JoinHandle<()>) {
    let (reader, writer) = reflector::store();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let stream = reflector::reflector(writer, watcher::watcher(api, watcher::Config::default()))
        .default_backoff()
        .applied_objects();
    let task = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    (reader, task)
}

async fn wait_for_names(store: &reflector::Store<ConfigMap>, want: &[&str]) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut names: Vec<String> = store.state().iter().map(|c| c.name_any()).collect();
        names.sort();
        if names == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "cache holds {names:?}, expected {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn after_a_restart_on_the_same_data_the_watcher_relists_and_sees_every_change() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let server = FakeApiServer::builder()
        .state_file(&state)
        .start()
        .await
        .unwrap();
    let addr = server.addr();
    let (cache, task) = reflect(server.client());
    create(&server.client(), "before").await;
    wait_for_names(&cache, &["before"]).await;
    // A write elsewhere moves the resourceVersion past the watcher's last event.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(server.client());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "other"}})).unwrap(),
        )
        .await
        .unwrap();
    server.shutdown().await;

    // Restarted on its data (same address), with changes the watcher never saw as events.
    let server = FakeApiServer::builder()
        .bind(addr)
        .state_file(&state)
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.delete("before", &Default::default()).await.unwrap();
    create(&server.client(), "after").await;
    wait_for_names(&cache, &["after"]).await;
    assert!(relisted(&server), "{:?}", server.request_log());
    task.abort();
}

/// Whether the watcher listed ConfigMaps again (its resume was refused with 410).
fn relisted(server: &FakeApiServer) -> bool {
    server.request_log().iter().any(|r| {
        r.verb == Some(dra_fake_apiserver::Verb::List)
            && r.resource.as_deref() == Some("configmaps")
    })
}

#[tokio::test]
async fn after_a_restart_without_its_data_a_bumped_server_makes_the_watcher_relist() {
    let server = FakeApiServer::builder().start().await.unwrap();
    let addr = server.addr();
    let (cache, task) = reflect(server.client());
    for name in ["old-1", "old-2"] {
        create(&server.client(), name).await;
    }
    wait_for_names(&cache, &["old-1", "old-2"]).await;
    server.shutdown().await;

    // A new, empty server on the same address, its resourceVersions above the old ones and
    // the old ones compacted: the watcher's resume gets 410 and it relists.
    let server = FakeApiServer::builder()
        .bind(addr)
        .initial_resource_version(1_000)
        .start()
        .await
        .unwrap();
    create(&server.client(), "new").await;
    wait_for_names(&cache, &["new"]).await;
    assert!(relisted(&server));
    task.abort();
}

#[tokio::test]
async fn a_killed_server_restarts_with_its_resource_versions_bumped() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let server = FakeApiServer::builder()
        .state_file(&state)
        .start()
        .await
        .unwrap();
    create(&server.client(), "kept").await;
    tokio::time::sleep(Duration::from_millis(400)).await; // the periodic save
    let before = server.resource_version();
    let addr = server.addr();
    server.kill().await;
    let server = FakeApiServer::builder()
        .bind(addr)
        .state_file(&state)
        .start()
        .await
        .unwrap();
    assert!(server.resource_version() >= before + dra_fake_apiserver::UNCLEAN_BUMP);
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    assert!(api.get_opt("kept").await.unwrap().is_some(), "objects kept");
    let stale = WatchParams::default();
    let mut stream = api
        .watch(&stale, &before.to_string())
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(WAIT, stream.next()).await.unwrap() {
        Some(Ok(WatchEvent::Error(status))) => assert_eq!(status.code, 410),
        other => panic!("expected 410 Expired, got {other:?}"),
    }
}
