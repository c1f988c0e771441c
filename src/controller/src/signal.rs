//! The signal the pod watch gives the loop when a pod becomes unschedulable, and the wait
//! that lets a gang's members all arrive before a loop plans them.
//!
//! The members of a gang are created and found unschedulable together, within tens of
//! milliseconds; a loop started at the first of them would plan a gang not yet whole, and
//! the rest would wait for that loop and the whole next one. So a signalled loop starts
//! once the watch has been quiet for a short while, measured from the last signal, as
//! Karpenter's batcher measures its idle time from the last pod. Measuring from the last
//! signal, not from the moment the loop is free to start, matters after a long loop: the
//! pods that arrived while it ran have usually been quiet for longer than the wait already,
//! and waiting it again only delayed their scale-up (issue #28).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// A pod became unschedulable: raised by the pod watch, awaited by the loop.
#[derive(Debug, Default)]
pub struct Signal {
    notify: Notify,
    last: Mutex<Option<Instant>>,
}

impl Signal {
    /// A signal never raised.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the signal: wakes a loop waiting in [`Signal::raised`] (or the next one to
    /// wait) and restarts the quiet time.
    pub fn raise(&self) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        self.notify.notify_one();
    }

    /// Waits until the signal is raised (at once when it was raised since the last wait).
    pub async fn raised(&self) {
        self.notify.notified().await;
    }

    fn last(&self) -> Option<Instant> {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until the signal has not been raised for `quiet`, or `max` has passed,
    /// whichever comes first. A signal last raised `quiet` ago or longer ends the wait at
    /// once; one never raised waits the whole `quiet`.
    pub async fn settle(&self, quiet: Duration, max: Duration) {
        let deadline = Instant::now() + max;
        loop {
            let now = Instant::now();
            let quiet_for = self.last().map_or(Duration::ZERO, |last| now - last);
            let wait = quiet
                .saturating_sub(quiet_for)
                .min(deadline.saturating_duration_since(now));
            if wait.is_zero() {
                return;
            }
            tokio::select! {
                () = self.notify.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Raises `signal` every `every` from the start, `times` times.
    fn raise_every(
        signal: &Arc<Signal>,
        every: Duration,
        times: u32,
    ) -> tokio::task::JoinHandle<()> {
        let signal = signal.clone();
        tokio::spawn(async move {
            for _ in 0..times {
                tokio::time::sleep(every).await;
                signal.raise();
            }
        })
    }

    // Real time on a shared machine: a sleep never ends early, so the lower bounds are
    // exact; the upper bounds only say the wait ended, with room for a loaded machine.

    #[tokio::test]
    async fn the_loop_waits_for_the_pod_watch_to_be_quiet() {
        let signal = Arc::new(Signal::new());
        // Members becoming unschedulable 30 ms apart, four of them.
        let members = raise_every(&signal, Duration::from_millis(30), 4);
        let start = std::time::Instant::now();
        signal
            .settle(Duration::from_millis(100), Duration::from_secs(2))
            .await;
        let waited = start.elapsed();
        let _ = members.await;
        // The last came at 120 ms or later; quiet for 100 ms after it.
        assert!(waited >= Duration::from_millis(220), "{waited:?}");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
    }

    #[tokio::test]
    async fn a_steady_stream_of_pods_delays_the_loop_no_more_than_the_maximum() {
        let signal = Arc::new(Signal::new());
        let stream = raise_every(&signal, Duration::from_millis(20), 10_000);
        let start = std::time::Instant::now();
        signal
            .settle(Duration::from_secs(1), Duration::from_millis(1500))
            .await;
        let waited = start.elapsed();
        stream.abort();
        assert!(waited >= Duration::from_millis(1500), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }

    #[tokio::test]
    async fn a_lone_pod_waits_only_the_quiet_time() {
        let signal = Signal::new();
        signal.raise();
        let start = std::time::Instant::now();
        signal
            .settle(Duration::from_millis(100), Duration::from_secs(5))
            .await;
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(90), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }

    /// Pods that became unschedulable while the last loop ran, longer ago than the quiet
    /// time, are planned at once: the wait is measured from the last of them.
    #[tokio::test]
    async fn pods_quiet_for_long_enough_already_start_the_loop_at_once() {
        let signal = Signal::new();
        signal.raise();
        tokio::time::sleep(Duration::from_millis(150)).await;
        let start = std::time::Instant::now();
        signal
            .settle(Duration::from_millis(100), Duration::from_secs(5))
            .await;
        assert!(
            start.elapsed() < Duration::from_millis(50),
            "{:?}",
            start.elapsed()
        );
        // Raised once more, 30 ms before the wait: only the remaining 70 ms are waited.
        signal.raise();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let start = std::time::Instant::now();
        signal
            .settle(Duration::from_millis(100), Duration::from_secs(5))
            .await;
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(60), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }

    #[tokio::test]
    async fn a_raise_while_nobody_waits_wakes_the_next_wait() {
        let signal = Signal::new();
        signal.raise();
        tokio::time::timeout(Duration::from_secs(5), signal.raised())
            .await
            .expect("the raise was kept for the next wait");
    }
}
