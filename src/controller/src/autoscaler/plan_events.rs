//! The Events of a plan on its pods and gangs, written while the next loop runs when a
//! pending pod started the loop (issue #28).
//!
//! A plan for a burst of pods has an Event for each: at 1,000 pods writing them took the
//! loop 0.7-2.4 s on the project's machine, and gangs that became complete meanwhile waited
//! for it before the next loop could plan them. client-go's event recorder, which
//! cluster-autoscaler uses, writes Events in the background too. The next loop waits for
//! them before writing its own plan's Events, so one object's Events still go out in
//! order, and a loop the scan-interval timer starts (or a test calling
//! `Autoscaler::run_once`) writes them before it returns.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use tokio::task::JoinHandle;

use crate::events::{EventSink, Notice, PUBLISHING_AT_ONCE, PUBLISHING_IN_BACKGROUND};

/// The writing of a previous loop's plan Events, while it runs.
#[derive(Debug, Default)]
pub(super) struct PlanEvents {
    in_flight: tokio::sync::Mutex<Option<JoinHandle<()>>>,
}

impl PlanEvents {
    /// Writes `notices` through `sink`: before returning when `wait`, else in the
    /// background. Either way, after the Events a previous call left writing.
    pub(super) async fn write(
        &self,
        sink: &Arc<EventSink>,
        notices: Vec<Notice>,
        now: Timestamp,
        wait: bool,
    ) {
        let mut in_flight = self.in_flight.lock().await;
        if let Some(previous) = in_flight.take()
            && let Err(error) = previous.await
        {
            tracing::warn!(%error, "writing a plan's Events failed");
        }
        if wait {
            sink.publish_all(notices, now, PUBLISHING_AT_ONCE).await;
            return;
        }
        let sink = sink.clone();
        *in_flight = Some(tokio::spawn(async move {
            sink.publish_all(notices, now, PUBLISHING_IN_BACKGROUND)
                .await;
        }));
    }
}
