//! Events are aggregated on (object, reason, note): a changed note is a new
//! Event with its own text, never a count bump on the old one; the same note
//! after the dedup window extends that Event's series.

mod common;

use common::{cluster, events};
use dra_controller::events::{BACK_OFF, EventSink, Notice};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::Api;

fn notice(note: &str) -> Notice {
    Notice {
        regarding: ObjectReference {
            api_version: Some("dra-autoscaler.io/v1alpha1".into()),
            kind: Some("NodeGroup".into()),
            name: Some("gpu".into()),
            uid: Some("uid-gpu".into()),
            ..ObjectReference::default()
        },
        warning: true,
        reason: BACK_OFF,
        action: "ScaleUp",
        note: note.into(),
    }
}

#[tokio::test]
async fn a_new_message_is_a_new_event_and_a_late_repeat_extends_the_series() {
    let server = cluster().await;
    let client = server.client();
    let window = SignedDuration::from_mins(10);
    let sink = EventSink::new(client.clone(), "dra-autoscaler", "test", window);
    let t0 = Timestamp::from_second(Timestamp::now().as_second()).expect("whole seconds");

    assert!(
        sink.publish(&notice("not scaling until 12:05: OutOfCapacity"), t0)
            .await
    );
    assert!(
        !sink
            .publish(
                &notice("not scaling until 12:05: OutOfCapacity"),
                t0 + SignedDuration::from_mins(1)
            )
            .await,
        "an identical event within the window is not written"
    );
    assert!(
        sink.publish(
            &notice("not scaling until 12:15: QuotaExceeded"),
            t0 + SignedDuration::from_mins(2)
        )
        .await
    );
    let notes: Vec<String> = events(&client, BACK_OFF)
        .await
        .into_iter()
        .map(|e| e.3)
        .collect();
    assert_eq!(
        notes,
        [
            "not scaling until 12:05: OutOfCapacity",
            "not scaling until 12:15: QuotaExceeded"
        ]
    );

    // The first text again after the window: the same Event, count 2.
    let later = t0 + SignedDuration::from_mins(11);
    assert!(
        sink.publish(&notice("not scaling until 12:05: OutOfCapacity"), later)
            .await
    );
    let all = Api::<Event>::namespaced(client.clone(), "default")
        .list(&Default::default())
        .await
        .expect("events listed")
        .items;
    assert_eq!(all.len(), 2, "{all:?}");
    let first = all
        .iter()
        .find(|e| e.note.as_deref() == Some("not scaling until 12:05: OutOfCapacity"))
        .expect("the first event");
    let series = first.series.as_ref().expect("a series");
    assert_eq!(series.count, 2);
    assert_eq!(series.last_observed_time.0, later);
    assert_eq!(
        first.reporting_controller.as_deref(),
        Some("dra-autoscaler")
    );
    let second = all
        .iter()
        .find(|e| e.note.as_deref() == Some("not scaling until 12:15: QuotaExceeded"))
        .expect("the second event");
    assert!(second.series.is_none());
}

/// A notice about NodeGroup `group`.
fn about(group: &str, note: &str) -> Notice {
    let mut n = notice(note);
    n.regarding.name = Some(group.into());
    n.regarding.uid = Some(format!("uid-{group}"));
    n
}

#[tokio::test]
async fn a_burst_of_notices_is_written_at_once_and_aggregated_as_one_by_one() {
    let server = cluster().await;
    let client = server.client();
    let sink = EventSink::new(
        client.clone(),
        "dra-autoscaler",
        "test",
        SignedDuration::from_mins(10),
    );
    let t0 = Timestamp::from_second(Timestamp::now().as_second()).expect("whole seconds");
    // Forty objects, more than are written at once, and one object told the same twice
    // and then something new: the repeat is suppressed, as when published one by one.
    let mut notices: Vec<Notice> = (0..40)
        .map(|i| about(&format!("g{i:02}"), "waiting"))
        .collect();
    notices.push(about("g00", "waiting"));
    notices.push(about("g00", "changed"));
    assert_eq!(
        sink.publish_all(notices, t0, dra_controller::events::PUBLISHING_AT_ONCE)
            .await,
        41
    );
    let written = events(&client, BACK_OFF).await;
    assert_eq!(written.len(), 41, "{written:?}");
    let of_g00: Vec<&str> = written
        .iter()
        .filter(|e| e.1 == "g00")
        .map(|e| e.3.as_str())
        .collect();
    assert_eq!(of_g00, ["changed", "waiting"]);
}
