//! Watch streams: newline-delimited JSON `WatchEvent`s over a chunked response.
//!
//! A spawned task per watch replays the backlog, forwards live events through the
//! selectors, sends bookmarks, and ends on `timeoutSeconds`, on a test hook, when it
//! falls behind (410, as the real server does to slow watchers) or when the client
//! goes away.

use std::{
    borrow::Cow,
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::body::Bytes;
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{broadcast::error::RecvError, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use crate::{
    convert,
    error::ApiError,
    kubectl::{self, TableRequest},
    lock,
    object::meta_str,
    resource::ResourceDef,
    selector::Selectors,
    store::{Change, ChangeKind, Store, WatchStart},
};

/// Everything a watch request asked for.
#[derive(Clone, Debug)]
pub struct WatchRequest {
    /// The watched resource.
    pub def: ResourceDef,
    /// Namespace from the path; `None` watches all namespaces.
    pub namespace: Option<String>,
    /// Label and field selectors.
    pub selectors: Selectors,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// `sendInitialEvents=true`: end the initial ADDED events with a bookmark carrying
    /// the `k8s.io/initial-events-end` annotation.
    pub initial_events_end: bool,
    /// The client asked for `PartialObjectMetadata` objects.
    pub metadata_only: bool,
    /// The client asked for Tables (`kubectl get -w`): each event's object is a one-row
    /// Table, the first with the column definitions.
    pub table: Option<TableRequest>,
    /// From `timeoutSeconds`.
    pub timeout: Duration,
    /// How often to send a bookmark when bookmarks are allowed.
    pub bookmark_interval: Duration,
}

/// One line of a watch stream.
fn line(kind: &str, object: &Value) -> Bytes {
    let mut text = json!({"type": kind, "object": object}).to_string();
    text.push('\n');
    Bytes::from(text)
}

fn bookmark(def: &ResourceDef, rv: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        &json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": metadata}),
    )
}

/// A stream that sends one ERROR event and ends: how the real watch cache reports a
/// resourceVersion that is too old.
pub fn error_stream(err: &ApiError) -> impl Stream<Item = Result<Bytes, Infallible>> + use<> {
    futures::stream::once(std::future::ready(Ok(line("ERROR", &err.to_status()))))
}

/// Turns a change into what this watch should see, if anything.
///
/// A filtered watch sees an object that starts matching as ADDED and one that stops
/// matching as DELETED, as the real watch cache does.
fn translate<'a>(req: &WatchRequest, change: &'a Change) -> Option<(&'static str, Cow<'a, Value>)> {
    if let Some(ns) = &req.namespace
        && meta_str(&change.object, "namespace") != Some(ns.as_str())
    {
        return None;
    }
    // Selectors apply to the object as this resource serves it.
    let object = convert::view(req.def.conversion, &change.object);
    let now = req.selectors.matches(&object);
    let kind = match change.kind {
        ChangeKind::Added | ChangeKind::Deleted => now.then(|| change.kind.as_str()),
        ChangeKind::Modified => {
            let before = change
                .previous
                .as_ref()
                .is_some_and(|p| req.selectors.matches(&convert::view(req.def.conversion, p)));
            match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            }
        }
    }?;
    Some((kind, object))
}

/// What a watch event carries: the object itself (borrowed: it is serialized at once), or
/// its Table row (`headers` the first time) or metadata when the client asked for those.
fn shape<'a>(req: &WatchRequest, headers: &mut bool, object: &'a Value) -> Cow<'a, Value> {
    if let Some(include) = req.table {
        let t = kubectl::table(
            &req.def,
            std::slice::from_ref(object),
            None,
            include,
            *headers,
            k8s_openapi::jiff::Timestamp::now(),
        );
        *headers = false;
        Cow::Owned(t)
    } else if req.metadata_only {
        Cow::Owned(crate::object::partial_metadata(object))
    } else {
        Cow::Borrowed(object)
    }
}

/// Starts the task feeding one watch and returns the response body stream.
pub fn spawn(
    store: Arc<Mutex<Store>>,
    req: WatchRequest,
    start: WatchStart,
) -> impl Stream<Item = Result<Bytes, Infallible>> + use<> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(run(store, req, start, tx));
    ReceiverStream::new(rx).map(Ok)
}

async fn run(
    store: Arc<Mutex<Store>>,
    req: WatchRequest,
    start: WatchStart,
    tx: mpsc::Sender<Bytes>,
) {
    let WatchStart {
        initial,
        backlog,
        mut events,
        mut control,
        epochs,
        rv,
        after,
    } = start;
    let deadline = tokio::time::sleep(req.timeout);
    tokio::pin!(deadline);

    let mut headers = true;
    for object in initial
        .iter()
        .map(|o| convert::view(req.def.conversion, o))
        .filter(|o| req.selectors.matches(o))
    {
        if tx
            .send(line("ADDED", &shape(&req, &mut headers, &object)))
            .await
            .is_err()
        {
            return;
        }
    }
    if req.initial_events_end && tx.send(bookmark(&req.def, rv, true)).await.is_err() {
        return;
    }
    for change in &backlog {
        if let Some((kind, object)) = translate(&req, change)
            && tx
                .send(line(kind, &shape(&req, &mut headers, &object)))
                .await
                .is_err()
        {
            return;
        }
    }

    let mut ticker = tokio::time::interval(req.bookmark_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.reset();
    loop {
        tokio::select! {
            biased;
            changed = control.changed() => {
                let now = *control.borrow_and_update();
                if changed.is_err() || now.close_epoch != epochs.close_epoch {
                    return;
                }
                if now.expire_epoch != epochs.expire_epoch {
                    let err = ApiError::Expired("watch expired by the test (expire_watches)".into());
                    let _ = tx.send(line("ERROR", &err.to_status())).await;
                    return;
                }
            }
            () = &mut deadline => return,
            received = events.recv() => match received {
                Ok(change) if change.rv <= after => {}
                Ok(change) => {
                    if let Some((kind, object)) = translate(&req, &change)
                        && tx.send(line(kind, &shape(&req, &mut headers, &object))).await.is_err()
                    {
                        return;
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    let err = ApiError::Expired(format!("watch fell behind by {missed} events and was closed; relist"));
                    let _ = tx.send(line("ERROR", &err.to_status())).await;
                    return;
                }
                Err(RecvError::Closed) => return,
            },
            _ = ticker.tick(), if req.bookmarks => {
                // Under the store lock no write can be in flight, so with an empty
                // queue every event up to the current resourceVersion has been sent.
                let rv = {
                    let store = lock(&store);
                    events.is_empty().then(|| store.current_rv())
                };
                if let Some(rv) = rv
                    && tx.send(bookmark(&req.def, rv, false)).await.is_err()
                {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::LabelSelector;

    fn req(selector: &str) -> WatchRequest {
        WatchRequest {
            def: ResourceDef::new("", "v1", "pods", "Pod", true, true),
            namespace: Some("ns".into()),
            selectors: Selectors {
                labels: LabelSelector::parse(selector).expect("selector"),
                ..Selectors::default()
            },
            bookmarks: false,
            initial_events_end: false,
            metadata_only: false,
            table: None,
            timeout: Duration::from_secs(1),
            bookmark_interval: Duration::from_secs(1),
        }
    }

    fn pod(ns: &str, app: &str) -> Value {
        json!({"metadata": {"name": "p", "namespace": ns, "labels": {"app": app}}})
    }

    fn modified(before: Value, after: Value) -> Change {
        Change {
            rv: 2,
            kind: ChangeKind::Modified,
            object: after,
            previous: Some(before),
        }
    }

    #[test]
    fn objects_entering_and_leaving_the_selection_become_added_and_deleted() {
        let r = req("app=web");
        let enter = modified(pod("ns", "db"), pod("ns", "web"));
        assert_eq!(translate(&r, &enter).map(|t| t.0), Some("ADDED"));
        let leave = modified(pod("ns", "web"), pod("ns", "db"));
        assert_eq!(translate(&r, &leave).map(|t| t.0), Some("DELETED"));
        let stay = modified(pod("ns", "web"), pod("ns", "web"));
        assert_eq!(translate(&r, &stay).map(|t| t.0), Some("MODIFIED"));
        let outside = modified(pod("ns", "db"), pod("ns", "db"));
        assert_eq!(translate(&r, &outside), None);
    }

    #[test]
    fn other_namespaces_are_not_seen() {
        let change = Change {
            rv: 1,
            kind: ChangeKind::Added,
            object: pod("elsewhere", "web"),
            previous: None,
        };
        assert_eq!(translate(&req(""), &change), None);
    }

    #[test]
    fn bookmarks_carry_the_initial_events_end_annotation() {
        let def = ResourceDef::new("", "v1", "pods", "Pod", true, true);
        let b: Value = serde_json::from_slice(&bookmark(&def, 7, true)).expect("json line");
        assert_eq!(b["type"], "BOOKMARK");
        assert_eq!(b["object"]["metadata"]["resourceVersion"], "7");
        assert_eq!(
            b["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
    }
}
