//! Events for operators, on the objects they look at: the pending Pod, its
//! PodGroup and the NodeGroup.
//!
//! Reasons are cluster-autoscaler's where it has one, so existing alerts and
//! habits keep working. Every loop would repeat the same decision for a pod
//! that keeps waiting, so an identical event (same object, reason and note) is
//! published at most once per dedup window; kube-runtime's recorder then turns
//! the repeats it does see into an event series.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// On a pod (and its PodGroup): new nodes were requested for it.
pub const TRIGGERED_SCALE_UP: &str = "TriggeredScaleUp";
/// On a pod (and its PodGroup): no group can help; the note has the reasons.
pub const NOT_TRIGGER_SCALE_UP: &str = "NotTriggerScaleUp";
/// On a NodeGroup: the provider started nodes.
pub const SCALED_UP_GROUP: &str = "ScaledUpGroup";
/// On a NodeGroup: the provider refused or failed.
pub const FAILED_TO_SCALE_UP_GROUP: &str = "FailedToScaleUpGroup";
/// On a NodeGroup: requested nodes did not register in time.
pub const SCALE_UP_TIMED_OUT: &str = "ScaleUpTimedOut";
/// On a NodeGroup: it is not scaled until its backoff ends.
pub const BACK_OFF: &str = "BackOff";
/// On a NodeGroup: it does not decode or validate and is left out.
pub const INVALID_NODE_GROUP: &str = "InvalidNodeGroup";

/// The API caps an event note at 1 KiB.
const MAX_NOTE: usize = 1024;

/// Remembers what was published recently. Time comes in as an argument.
#[derive(Debug)]
pub struct Deduper {
    window: SignedDuration,
    seen: HashMap<(String, String, String), Timestamp>,
}

impl Deduper {
    /// Suppresses repeats within `window`.
    #[must_use]
    pub fn new(window: SignedDuration) -> Self {
        Self {
            window,
            seen: HashMap::new(),
        }
    }

    /// Whether an event with this key should be published at `now`; if so it
    /// is recorded as published.
    pub fn admit(&mut self, object: &str, reason: &str, note: &str, now: Timestamp) -> bool {
        let window = self.window;
        self.seen
            .retain(|_, at| at.checked_add(window).is_ok_and(|end| end > now));
        let key = (object.to_string(), reason.to_string(), note.to_string());
        if self.seen.contains_key(&key) {
            return false;
        }
        self.seen.insert(key, now);
        true
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

/// Publishes events with deduplication.
pub struct EventSink {
    recorder: Recorder,
    dedup: Mutex<Deduper>,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink").finish_non_exhaustive()
    }
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
        let reporter = Reporter {
            controller: controller.to_string(),
            instance: Some(instance.to_string()),
        };
        Self {
            recorder: Recorder::new(client, reporter),
            dedup: Mutex::new(Deduper::new(window)),
        }
    }

    /// Publishes `notice` unless an identical one went out within the window.
    /// Returns whether it was published. Failures are logged, not returned:
    /// an event that cannot be written must not stop a scale-up.
    pub async fn publish(&self, notice: &Notice, now: Timestamp) -> bool {
        let note = truncate_note(&notice.note);
        let admitted = self
            .dedup
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .admit(&object_key(&notice.regarding), notice.reason, &note, now);
        if !admitted {
            return false;
        }
        let event = Event {
            type_: if notice.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: notice.reason.to_string(),
            note: Some(note),
            action: notice.action.to_string(),
            secondary: None,
        };
        match self.recorder.publish(&event, &notice.regarding).await {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(
                    %error,
                    reason = notice.reason,
                    object = %object_key(&notice.regarding),
                    "unable to publish event"
                );
                false
            }
        }
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
    fn long_notes_are_cut_to_the_api_limit() {
        let note = "é".repeat(1000);
        let cut = truncate_note(&note);
        assert!(cut.len() <= MAX_NOTE);
        assert!(cut.ends_with("..."));
        assert_eq!(truncate_note("short"), "short");
    }
}
