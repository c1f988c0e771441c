//! Watch semantics as kube-runtime relies on them: ordered events, list+watch (kube
//! 5's default), streaming lists, resume after a clean close, 410 → relist, history
//! replay, selectors, bookmarks and timeouts.

use std::{collections::BTreeMap, future::ready, time::Duration};

use dra_fake_apiserver::{FakeApiServer, RequestRecord, Verb};
use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
    runtime::{
        WatchStreamExt, reflector,
        reflector::Store,
        watcher::{self, Event, watcher},
    },
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

fn cm(name: &str, app: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "data": {"v": "1"},
    }))
    .expect("valid configmap")
}

fn rv(obj: &impl ResourceExt) -> u64 {
    obj.resource_version()
        .expect("resourceVersion")
        .parse()
        .expect("integer resourceVersion")
}

async fn next<S, T>(stream: &mut S) -> T
where
    S: Stream<Item = T> + Unpin,
{
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("an event before the timeout")
        .expect("the stream is still open")
}

/// Next watcher event, skipping errors (the watcher reports and recovers from them).
async fn next_event<S>(stream: &mut S) -> Event<ConfigMap>
where
    S: Stream<Item = Result<Event<ConfigMap>, watcher::Error>> + Unpin,
{
    loop {
        if let Ok(event) = next(stream).await {
            return event;
        }
    }
}

fn describe(event: &Event<ConfigMap>) -> String {
    match event {
        Event::Init => "Init".into(),
        Event::InitApply(o) => format!("InitApply({})", o.name_any()),
        Event::InitDone => "InitDone".into(),
        Event::Apply(o) => format!(
            "Apply({}:{})",
            o.name_any(),
            o.data
                .as_ref()
                .and_then(|d| d.get("v"))
                .map_or("", String::as_str)
        ),
        Event::Delete(o) => format!("Delete({})", o.name_any()),
    }
}

fn configmap_requests(log: &[RequestRecord], verb: Verb) -> Vec<RequestRecord> {
    log.iter()
        .filter(|r| r.verb == Some(verb) && r.resource.as_deref() == Some("configmaps"))
        .cloned()
        .collect()
}

async fn set_value(api: &Api<ConfigMap>, name: &str, value: &str) -> ConfigMap {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": value}})),
    )
    .await
    .expect("patch")
}

async fn wait_for_store(store: &Store<ConfigMap>, want: &BTreeMap<String, String>) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let have: BTreeMap<String, String> = store
            .state()
            .iter()
            .map(|o| {
                (
                    o.name_any(),
                    o.data
                        .as_ref()
                        .and_then(|d| d.get("v"))
                        .cloned()
                        .unwrap_or_default(),
                )
            })
            .collect();
        if &have == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "store never converged: have {have:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn default_watcher_lists_then_watches_and_sees_changes_in_order() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let listed_at = server.resource_version();
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    assert_eq!(describe(&next_event(&mut stream).await), "Init");
    assert_eq!(describe(&next_event(&mut stream).await), "InitDone");

    let created = api
        .create(&PostParams::default(), &cm("a", "web"))
        .await
        .expect("create");
    let updated = set_value(&api, "a", "2").await;
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    let mut seen = Vec::new();
    let mut rvs = Vec::new();
    for _ in 0..3 {
        let event = next_event(&mut stream).await;
        seen.push(describe(&event));
        if let Event::Apply(o) | Event::Delete(o) = &event {
            rvs.push(rv(o));
        }
    }
    assert_eq!(seen, ["Apply(a:1)", "Apply(a:2)", "Delete(a)"]);
    assert!(
        rvs.windows(2).all(|w| w[0] < w[1]),
        "resourceVersions increase: {rvs:?}"
    );
    assert_eq!(rvs[0], rv(&created));
    assert_eq!(rvs[1], rv(&updated));

    // kube 5's default initial list strategy is a LIST followed by a WATCH from the
    // list's resourceVersion (not a streaming list).
    let log = server.request_log();
    let lists = configmap_requests(&log, Verb::List);
    let watches = configmap_requests(&log, Verb::Watch);
    assert_eq!(lists.len(), 1);
    // kube asks for pages of 500; the server may (and does) answer in one page.
    assert!(lists[0].query.contains("limit=500"), "{:?}", lists[0].query);
    assert!(!watches.is_empty());
    assert!(
        watches[0]
            .query
            .contains(&format!("resourceVersion={listed_at}")),
        "the watch starts at the list's resourceVersion: {:?}",
        watches[0].query
    );
    assert!(
        !watches[0].query.contains("sendInitialEvents"),
        "{:?}",
        watches[0].query
    );
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events_then_changes() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &cm(name, "web"))
            .await
            .expect("create");
    }
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher(api.clone(), config).boxed();
    let mut initial = Vec::new();
    for _ in 0..4 {
        initial.push(describe(&next_event(&mut stream).await));
    }
    assert_eq!(
        initial,
        ["Init", "InitApply(a)", "InitApply(b)", "InitDone"]
    );
    api.create(&PostParams::default(), &cm("c", "web"))
        .await
        .expect("create");
    assert_eq!(describe(&next_event(&mut stream).await), "Apply(c:1)");

    let log = server.request_log();
    assert!(
        configmap_requests(&log, Verb::List).is_empty(),
        "a streaming list issues no LIST"
    );
    let watches = configmap_requests(&log, Verb::Watch);
    assert!(
        watches[0].query.contains("sendInitialEvents=true"),
        "{:?}",
        watches[0].query
    );
}

#[tokio::test]
async fn reflector_recovers_from_expired_watches_without_losing_objects() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let (store, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(api.clone(), watcher::Config::default()).default_backoff(),
    );
    let task = tokio::spawn(stream.for_each(|_| ready(())));
    tokio::time::timeout(WAIT, store.wait_until_ready())
        .await
        .expect("ready in time")
        .expect("store ready");

    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &cm(name, "web"))
            .await
            .expect("create");
    }
    let want: BTreeMap<String, String> = [("a", "1"), ("b", "1"), ("c", "1")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
    wait_for_store(&store, &want).await;

    server.expire_watches();
    // Changes made while the watch is broken must still reach the store via the relist.
    api.create(&PostParams::default(), &cm("d", "web"))
        .await
        .expect("create d");
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    set_value(&api, "b", "2").await;
    let want: BTreeMap<String, String> = [("b", "2"), ("c", "1"), ("d", "1")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
    wait_for_store(&store, &want).await;

    let lists = configmap_requests(&server.request_log(), Verb::List);
    assert!(
        lists.len() >= 2,
        "the 410 made the watcher relist: {} lists",
        lists.len()
    );

    // And the new watch keeps working.
    set_value(&api, "c", "3").await;
    let want: BTreeMap<String, String> = [("b", "2"), ("c", "3"), ("d", "1")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
    wait_for_store(&store, &want).await;
    task.abort();
}

#[tokio::test]
async fn closed_watches_resume_from_the_last_resource_version() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    assert_eq!(describe(&next_event(&mut stream).await), "Init");
    assert_eq!(describe(&next_event(&mut stream).await), "InitDone");
    let a = api
        .create(&PostParams::default(), &cm("a", "web"))
        .await
        .expect("create");
    assert_eq!(describe(&next_event(&mut stream).await), "Apply(a:1)");

    server.close_watches();
    api.create(&PostParams::default(), &cm("b", "web"))
        .await
        .expect("create");
    assert_eq!(describe(&next_event(&mut stream).await), "Apply(b:1)");

    let log = server.request_log();
    assert_eq!(
        configmap_requests(&log, Verb::List).len(),
        1,
        "no relist after a clean close"
    );
    let watches = configmap_requests(&log, Verb::Watch);
    assert_eq!(watches.len(), 2);
    assert!(
        watches[1]
            .query
            .contains(&format!("resourceVersion={}", rv(&a))),
        "resumed from the last seen resourceVersion: {:?}",
        watches[1].query
    );
}

#[tokio::test]
async fn too_old_resource_version_gets_410_and_recent_ones_replay() {
    let server = FakeApiServer::builder()
        .history_limit(2)
        .start()
        .await
        .expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut created = Vec::new();
    for name in ["a", "b", "c", "d"] {
        created.push(
            api.create(&PostParams::default(), &cm(name, "web"))
                .await
                .expect("create"),
        );
    }

    let from_first = rv(&created[0]).to_string();
    let mut expired = api
        .watch(&WatchParams::default(), &from_first)
        .await
        .expect("watch")
        .boxed();
    match next(&mut expired).await.expect("decodes") {
        WatchEvent::Error(status) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(
        tokio::time::timeout(WAIT, expired.next())
            .await
            .expect("closes")
            .is_none()
    );

    let from_second = rv(&created[1]).to_string();
    let mut replay = api
        .watch(&WatchParams::default(), &from_second)
        .await
        .expect("watch")
        .boxed();
    for expected in ["c", "d"] {
        match next(&mut replay).await.expect("decodes") {
            WatchEvent::Added(o) => assert_eq!(o.name_any(), expected),
            other => panic!("expected ADDED {expected}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn watch_from_zero_starts_with_the_current_objects() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let other: Api<ConfigMap> = Api::namespaced(server.client(), "kube-system");
    api.create(&PostParams::default(), &cm("a", "web"))
        .await
        .expect("create");
    other
        .create(&PostParams::default(), &cm("elsewhere", "web"))
        .await
        .expect("create");
    let mut stream = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    match next(&mut stream).await.expect("decodes") {
        WatchEvent::Added(o) => assert_eq!(o.name_any(), "a"),
        other => panic!("expected ADDED a, got {other:?}"),
    }
    api.create(&PostParams::default(), &cm("b", "web"))
        .await
        .expect("create");
    match next(&mut stream).await.expect("decodes") {
        WatchEvent::Added(o) => assert_eq!(
            o.name_any(),
            "b",
            "namespace-scoped watch skips kube-system"
        ),
        other => panic!("expected ADDED b, got {other:?}"),
    }
}

#[tokio::test]
async fn label_selected_watch_sees_objects_enter_and_leave() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let start = server.resource_version().to_string();
    let params = WatchParams::default().labels("app=web");
    let mut stream = api.watch(&params, &start).await.expect("watch").boxed();

    api.create(&PostParams::default(), &cm("x", "db"))
        .await
        .expect("create");
    let relabel = |app: &str| Patch::Merge(json!({"metadata": {"labels": {"app": app}}}));
    api.patch("x", &PatchParams::default(), &relabel("web"))
        .await
        .expect("enter");
    api.patch("x", &PatchParams::default(), &relabel("db"))
        .await
        .expect("leave");
    api.create(&PostParams::default(), &cm("y", "web"))
        .await
        .expect("create");

    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(match next(&mut stream).await.expect("decodes") {
            WatchEvent::Added(o) => format!("ADDED {}", o.name_any()),
            WatchEvent::Modified(o) => format!("MODIFIED {}", o.name_any()),
            WatchEvent::Deleted(o) => format!("DELETED {}", o.name_any()),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(seen, ["ADDED x", "DELETED x", "ADDED y"]);
}

#[tokio::test]
async fn bookmarks_report_the_current_resource_version() {
    let server = FakeApiServer::builder()
        .bookmark_interval(Duration::from_millis(50))
        .start()
        .await
        .expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let other: Api<ConfigMap> = Api::namespaced(server.client(), "kube-system");
    let a = api
        .create(&PostParams::default(), &cm("a", "web"))
        .await
        .expect("create");
    // A write elsewhere moves the global resourceVersion past `a`.
    other
        .create(&PostParams::default(), &cm("b", "web"))
        .await
        .expect("create");
    let mut stream = api
        .watch(&WatchParams::default(), &rv(&a).to_string())
        .await
        .expect("watch")
        .boxed();
    match next(&mut stream).await.expect("decodes") {
        WatchEvent::Bookmark(b) => {
            assert_eq!(
                b.metadata.resource_version,
                server.resource_version().to_string()
            );
            assert!(server.resource_version() > rv(&a));
        }
        other => panic!("only a bookmark is expected, got {other:?}"),
    }
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let started = tokio::time::Instant::now();
    let stream = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .expect("watch");
    let events: Vec<_> = tokio::time::timeout(WAIT, stream.try_collect::<Vec<_>>())
        .await
        .expect("the server ends the watch")
        .expect("no stream error");
    assert!(events.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn metadata_only_requests_get_partial_object_metadata() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &cm("a", "web"))
        .await
        .expect("create");
    let listed = api
        .list_metadata(&kube::api::ListParams::default())
        .await
        .expect("list metadata");
    let kinds: Vec<Option<String>> = listed
        .items
        .iter()
        .map(|o| o.types.as_ref().map(|t| t.kind.clone()))
        .collect();
    assert_eq!(kinds, [Some("PartialObjectMetadata".to_owned())]);

    let meta_api: Api<kube::api::PartialObjectMeta<ConfigMap>> =
        Api::namespaced(server.client(), "default");
    let mut stream = watcher(meta_api, watcher::Config::default()).boxed();
    let mut seen = Vec::new();
    while seen.len() < 4 {
        match next(&mut stream).await {
            Ok(Event::Init) => seen.push("Init".to_owned()),
            Ok(Event::InitApply(o)) => seen.push(format!("InitApply({})", o.name_any())),
            Ok(Event::InitDone) => {
                seen.push("InitDone".to_owned());
                api.create(&PostParams::default(), &cm("b", "web"))
                    .await
                    .expect("create");
            }
            Ok(Event::Apply(o)) => {
                assert_eq!(
                    o.types.as_ref().map(|t| t.kind.as_str()),
                    Some("PartialObjectMetadata")
                );
                seen.push(format!("Apply({})", o.name_any()));
            }
            Ok(Event::Delete(o)) => seen.push(format!("Delete({})", o.name_any())),
            Err(err) => panic!("metadata watcher error: {err}"),
        }
    }
    assert_eq!(seen, ["Init", "InitApply(a)", "InitDone", "Apply(b)"]);
}
