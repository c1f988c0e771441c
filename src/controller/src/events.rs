//! Events for operators, on the objects they look at: the pending Pod, its
//! PodGroup and the NodeGroup.
//!
//! Reasons are cluster-autoscaler's where it has one, so existing alerts and
//! habits keep working. Events are aggregated here on (object, reason, note),
//! not by kube-runtime's recorder: that one keys on (type, reason, action,
//! object), so a new note became a count bump on an Event still showing the
//! old text. Every loop would repeat the same decision for a pod that keeps
//! waiting, so an identical event is written at most once per dedup window; a
//! repeat after the window bumps the `series` (count, lastObservedTime) of the
//! Event it repeats, as the `events.k8s.io` series semantics say; a changed
//! note is a new Event.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};

// The Event reasons live in the catalog, which the reference pages are generated from.
pub use crate::catalog::{
    BACK_OFF, FAILED_TO_SCALE_UP_GROUP, INVALID_NODE_GROUP, NOT_TRIGGER_SCALE_UP,
    SCALE_UP_TIMED_OUT, SCALED_UP_GROUP, TRIGGERED_SCALE_UP,
};

/// The API caps an event note at 1 KiB.
const MAX_NOTE: usize = 1024;

/// Event writes [`EventSink::publish_all`] has in flight at once when the loop waits for
/// them: enough to write a burst's Events in a fraction of a second, few enough for the API
/// server's fairness limits (its default is 400 requests in flight for all clients).
pub const PUBLISHING_AT_ONCE: usize = 16;

/// Event writes in flight at once when they are written while the next loop runs: few,
/// so that the loop's own writes (a scale-up's intent, conditional on the NodeGroup's
/// version, goes out before its provider is called) do not queue behind them at the API
/// server. client-go's event broadcaster writes one at a time.
pub const PUBLISHING_IN_BACKGROUND: usize = 2;

/// What to do with an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Write a new Event.
    New,
    /// Bump the series of the Event `name` (in `namespace`) to `count`.
    Repeat {
        /// The Event's name.
        name: String,
        /// The Event's namespace.
        namespace: String,
        /// The new `series.count`.
        count: i32,
    },
    /// An identical event went out within the window: write nothing.
    Suppress,
}

#[derive(Debug, Clone)]
struct Seen {
    written: Option<(String, String)>,
    count: i32,
    last: Timestamp,
}

/// Remembers the Events written recently, keyed on (object, reason, note).
/// Time comes in as an argument.
#[derive(Debug)]
pub struct Deduper {
    window: SignedDuration,
    seen: HashMap<(String, String, String), Seen>,
}

impl Deduper {
    /// Suppresses repeats within `window`; a repeat later than that (and
    /// within two windows of the last write) extends the series.
    #[must_use]
    pub fn new(window: SignedDuration) -> Self {
        Self {
            window,
            seen: HashMap::new(),
        }
    }

    /// What to do with an event with this key at `now`; it is recorded as
    /// written (call [`Deduper::written`] with the Event's name once it is).
    pub fn decide(&mut self, object: &str, reason: &str, note: &str, now: Timestamp) -> Decision {
        let keep = self.window.checked_mul(2).unwrap_or(self.window);
        self.seen
            .retain(|_, s| s.last.checked_add(keep).is_ok_and(|end| end > now));
        let key = (object.to_string(), reason.to_string(), note.to_string());
        match self.seen.get_mut(&key) {
            Some(seen)
                if seen
                    .last
                    .checked_add(self.window)
                    .is_ok_and(|end| end > now) =>
            {
                Decision::Suppress
            }
            Some(seen) => {
                seen.last = now;
                match &seen.written {
                    Some((namespace, name)) => {
                        seen.count += 1;
                        Decision::Repeat {
                            name: name.clone(),
                            namespace: namespace.clone(),
                            count: seen.count,
                        }
                    }
                    None => Decision::New,
                }
            }
            None => {
                self.seen.insert(
                    key,
                    Seen {
                        written: None,
                        count: 1,
                        last: now,
                    },
                );
                Decision::New
            }
        }
    }

    /// Records that the Event for this key was written as `namespace/name`.
    pub fn written(&mut self, object: &str, reason: &str, note: &str, namespace: &str, name: &str) {
        let key = (object.to_string(), reason.to_string(), note.to_string());
        if let Some(seen) = self.seen.get_mut(&key) {
            seen.written = Some((namespace.to_string(), name.to_string()));
            seen.count = 1;
        }
    }

    /// Forgets every event about `object` with `reason` whose note is not `keep`, and returns
    /// the Events written for them (`namespace`, `name`).
    pub fn forget_others(
        &mut self,
        object: &str,
        reason: &str,
        keep: Option<&str>,
    ) -> Vec<(String, String)> {
        let mut written = Vec::new();
        self.seen.retain(|(o, r, note), seen| {
            let other = o == object && r == reason && keep != Some(note.as_str());
            if other && let Some(event) = seen.written.take() {
                written.push(event);
            }
            !other
        });
        written
    }

    /// Whether an event with this key should be written at `now`.
    pub fn admit(&mut self, object: &str, reason: &str, note: &str, now: Timestamp) -> bool {
        self.decide(object, reason, note, now) != Decision::Suppress
    }
}

/// Cuts a note to the API's limit on a character boundary.
#[must_use]
pub fn truncate_note(note: &str) -> String {
    if note.len() <= MAX_NOTE {
        return note.to_string();
    }
    let mut end = MAX_NOTE - 3;
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &note[..end])
}

/// One event to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The object it is about.
    pub regarding: ObjectReference,
    /// Normal or warning.
    pub warning: bool,
    /// One of the reason constants of this module.
    pub reason: &'static str,
    /// What the controller did (`ScaleUp`, `Plan`, ...).
    pub action: &'static str,
    /// The human-readable explanation.
    pub note: String,
}

fn object_key(r: &ObjectReference) -> String {
    format!(
        "{}/{}/{}/{}/{}",
        r.api_version.as_deref().unwrap_or_default(),
        r.kind.as_deref().unwrap_or_default(),
        r.namespace.as_deref().unwrap_or_default(),
        r.name.as_deref().unwrap_or_default(),
        r.uid.as_deref().unwrap_or_default()
    )
}

/// Writes `events.k8s.io/v1` Events, aggregated as the module docs say.
pub struct EventSink {
    client: kube::Client,
    controller: String,
    instance: String,
    dedup: Mutex<Deduper>,
    sequence: AtomicU64,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink").finish_non_exhaustive()
    }
}

/// The namespace of an Event about `regarding`: its own, or `default` for a
/// cluster-scoped object (as client-go's event recorder does).
fn event_namespace(regarding: &ObjectReference) -> String {
    regarding
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

impl EventSink {
    /// Events reported as `controller` (instance `instance`).
    #[must_use]
    pub fn new(
        client: kube::Client,
        controller: &str,
        instance: &str,
        window: SignedDuration,
    ) -> Self {
        Self {
            client,
            controller: controller.to_string(),
            instance: instance.to_string(),
            dedup: Mutex::new(Deduper::new(window)),
            sequence: AtomicU64::new(0),
        }
    }

    fn dedup(&self) -> std::sync::MutexGuard<'_, Deduper> {
        self.dedup
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `text` about `object` under `what` is news: not said within the dedup window
    /// (it is recorded as said now). For log lines that should follow the Events' rhythm.
    pub fn is_news(&self, object: &str, what: &str, text: &str, now: Timestamp) -> bool {
        self.dedup().admit(object, what, text, now)
    }

    /// Publishes `notice` unless an identical one went out within the window.
    /// Returns whether anything was written. Failures are logged, not
    /// returned: an event that cannot be written must not stop a scale-up.
    pub async fn publish(&self, notice: &Notice, now: Timestamp) -> bool {
        // The catalog's type is what the reference pages tell users; an emitter that
        // disagrees with it is a bug every test that publishes would show.
        debug_assert!(
            crate::catalog::event_type(notice.reason).is_none_or(|t| t.allows(notice.warning)),
            "Event {} is written as {} but the catalog says otherwise",
            notice.reason,
            if notice.warning { "Warning" } else { "Normal" }
        );
        let note = truncate_note(&notice.note);
        let object = object_key(&notice.regarding);
        let decision = self.dedup().decide(&object, notice.reason, &note, now);
        let result = match decision {
            Decision::Suppress => return false,
            Decision::New => self
                .create(notice, &note, now)
                .await
                .map(|(namespace, name)| {
                    self.dedup()
                        .written(&object, notice.reason, &note, &namespace, &name);
                }),
            Decision::Repeat {
                name,
                namespace,
                count,
            } => self.bump(&namespace, &name, count, now).await,
        };
        match result {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(
                    %error,
                    reason = notice.reason,
                    object = %object,
                    "unable to publish event"
                );
                false
            }
        }
    }

    /// Publishes `notices` as [`EventSink::publish`] does, up to `at_once` at a time (at
    /// least one; [`PUBLISHING_AT_ONCE`] when the caller waits for them): a plan for a burst of pods has an Event for each, and one write after the other
    /// took seconds at 1,000 pods (issue #28) while gangs arriving meanwhile waited for the
    /// loop to end. The notices of one object go out in their order, one after the other,
    /// so its aggregation decides as it would one by one. Returns how many were written.
    pub async fn publish_all(&self, notices: Vec<Notice>, now: Timestamp, at_once: usize) -> usize {
        use futures::StreamExt;
        let mut by_object: Vec<Vec<Notice>> = Vec::new();
        let mut slot: HashMap<String, usize> = HashMap::new();
        for notice in notices {
            let i = *slot
                .entry(object_key(&notice.regarding))
                .or_insert_with(|| {
                    by_object.push(Vec::new());
                    by_object.len() - 1
                });
            by_object[i].push(notice);
        }
        futures::stream::iter(by_object)
            .map(|of_one| async move {
                let mut written = 0;
                for notice in &of_one {
                    written += usize::from(self.publish(notice, now).await);
                }
                written
            })
            .buffer_unordered(at_once.max(1))
            .fold(0, |total, written| async move { total + written })
            .await
    }

    /// Publishes `notice` as the one standing Event of its reason on its object: the Events
    /// this sink wrote before with the same reason and another note are deleted, so the object
    /// never shows a text whose cause is gone next to the current one.
    pub async fn replace(&self, notice: &Notice, now: Timestamp) -> bool {
        let written = self.publish(notice, now).await;
        let note = truncate_note(&notice.note);
        self.delete_written(&notice.regarding, notice.reason, Some(&note))
            .await;
        written
    }

    /// Deletes the Events with `reason` this sink wrote about `regarding` (their cause is gone).
    pub async fn retract(&self, regarding: &ObjectReference, reason: &str) {
        self.delete_written(regarding, reason, None).await;
    }

    async fn delete_written(&self, regarding: &ObjectReference, reason: &str, keep: Option<&str>) {
        let object = object_key(regarding);
        let stale = self.dedup().forget_others(&object, reason, keep);
        for (namespace, name) in stale {
            let deleted = Api::<Event>::namespaced(self.client.clone(), &namespace)
                .delete(&name, &kube::api::DeleteParams::default())
                .await;
            match deleted {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(error) => {
                    tracing::warn!(%error, %reason, object = %object, event = %name, "unable to delete an Event whose cause is gone");
                }
            }
        }
    }

    async fn create(
        &self,
        notice: &Notice,
        note: &str,
        now: Timestamp,
    ) -> Result<(String, String), kube::Error> {
        let namespace = event_namespace(&notice.regarding);
        // client-go names Events `<object>.<unix nanos in hex>`; a sequence
        // number keeps two Events of one loop (same `now`) apart.
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed);
        let name = format!(
            "{}.{:x}.{sequence:x}",
            notice.regarding.name.as_deref().unwrap_or("object"),
            now.as_nanosecond()
        );
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(notice.action.to_string()),
            reason: Some(notice.reason.to_string()),
            note: Some(note.to_string()),
            type_: Some(if notice.warning { "Warning" } else { "Normal" }.to_string()),
            regarding: Some(notice.regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        };
        Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await?;
        Ok((namespace, name))
    }

    async fn bump(
        &self,
        namespace: &str,
        name: &str,
        count: i32,
        now: Timestamp,
    ) -> Result<(), kube::Error> {
        let series = EventSeries {
            count,
            last_observed_time: MicroTime(now),
        };
        let patch = serde_json::json!({ "series": series });
        Api::<Event>::namespaced(self.client.clone(), namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_events_are_suppressed_within_the_window() {
        let t0: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let mut d = Deduper::new(SignedDuration::from_mins(5));
        assert!(d.admit("pod/a", TRIGGERED_SCALE_UP, "gpu +2", t0));
        assert!(!d.admit(
            "pod/a",
            TRIGGERED_SCALE_UP,
            "gpu +2",
            t0 + SignedDuration::from_mins(4)
        ));
        // A different note or object is news.
        assert!(d.admit("pod/a", TRIGGERED_SCALE_UP, "gpu +3", t0));
        assert!(d.admit("pod/b", TRIGGERED_SCALE_UP, "gpu +2", t0));
        // After the window the same event goes out again.
        assert!(d.admit(
            "pod/a",
            TRIGGERED_SCALE_UP,
            "gpu +2",
            t0 + SignedDuration::from_mins(5)
        ));
    }

    #[test]
    fn a_repeat_after_the_window_extends_the_series_and_a_new_note_is_a_new_event() {
        let t0: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let min = SignedDuration::from_mins;
        let mut d = Deduper::new(min(5));
        assert_eq!(d.decide("ng/a", BACK_OFF, "until 12:05", t0), Decision::New);
        d.written("ng/a", BACK_OFF, "until 12:05", "default", "a.1");
        assert_eq!(
            d.decide("ng/a", BACK_OFF, "until 12:05", t0 + min(1)),
            Decision::Suppress
        );
        // The message changed: a new Event, never a count on the old text.
        assert_eq!(
            d.decide("ng/a", BACK_OFF, "until 12:15", t0 + min(2)),
            Decision::New
        );
        assert_eq!(
            d.decide("ng/a", BACK_OFF, "until 12:05", t0 + min(6)),
            Decision::Repeat {
                name: "a.1".into(),
                namespace: "default".into(),
                count: 2
            }
        );
        // Long after: forgotten, a new Event again.
        assert_eq!(
            d.decide("ng/a", BACK_OFF, "until 12:05", t0 + min(30)),
            Decision::New
        );
    }

    #[test]
    fn long_notes_are_cut_to_the_api_limit() {
        let note = "é".repeat(1000);
        let cut = truncate_note(&note);
        assert!(cut.len() <= MAX_NOTE);
        assert!(cut.ends_with("..."));
        assert_eq!(truncate_note("short"), "short");
    }
}
