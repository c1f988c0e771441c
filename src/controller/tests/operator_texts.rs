//! What an operator reads says what happened and what happens next (issue 31, item 8): a failed
//! scale-up's Event says nothing was started and a retry follows, and a gang no group can land
//! is said at info level in the log, once per change of its reasons.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::{Controller, cluster, create_gang, create_node_group, events};
use dra_controller::executor::ErrorCategory;
use dra_controller::executor::memory::InMemoryProvider;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

#[tokio::test]
async fn failed_to_scale_up_group_says_nothing_was_started_and_a_retry_follows() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;
    let provider = Arc::new(InMemoryProvider::new());
    provider.fail_next(ErrorCategory::NotSent, "connection refused");
    let controller = Controller::start(&client, provider.clone()).await;
    controller.run_once().await;
    let failed = events(&client, "FailedToScaleUpGroup").await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    let note = &failed[0].3;
    assert!(note.contains("connection refused"), "{note}");
    assert!(
        note.contains("nothing was started, retrying shortly"),
        "the Event says what happens next, as the log and lastScaleUp do: {note}"
    );
}

/// A log sink for one test: lines written at info and above, as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self, containing: &str) -> Vec<String> {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| l.contains(containing))
            .map(str::to_owned)
            .collect()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn an_unfit_gang_is_logged_at_info_once_per_change() {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    // 64 CPUs a member: no node of the group holds one.
    create_gang(&client, "huge", 2, "64").await;
    let controller = Controller::start(&client, Arc::new(InMemoryProvider::new())).await;
    let t0 = Timestamp::now();
    controller.run_once_at(t0).await;
    controller
        .run_once_at(t0 + SignedDuration::from_secs(10))
        .await;
    let lines = captured.lines("gang waits");
    assert_eq!(lines.len(), 1, "once, not once a loop: {lines:#?}");
    let line = &lines[0];
    assert!(line.contains(" INFO "), "{line}");
    assert!(line.contains("default/huge"), "{line}");
    assert!(line.contains("Insufficient cpu"), "the reasons: {line}");
}
