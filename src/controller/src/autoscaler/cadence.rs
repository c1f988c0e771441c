//! How often the loop evaluates scale-down (see docs/design/loop-cadence.md).
//!
//! A loop started because a pod became unschedulable is there to buy capacity for it; the
//! scale-down analysis indexes the whole cluster once more (at 10,000 nodes and 100,000 pods,
//! about as long as the plan itself) and gangs completing meanwhile wait for the loop to
//! end. Scale-down's own clocks move on minutes (`--scale-down-unneeded-time`,
//! `--scale-down-delay-after-add`, 10 minutes each by default), so such a loop evaluates it
//! only when the last evaluation is at least a scan interval old; a loop the scan-interval
//! timer starts always does. Scale-down is so still evaluated about once per scan interval
//! however many pods arrive, as in cluster-autoscaler, whose loops run a scan interval apart.

use std::sync::Mutex;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// What started a loop: it decides whether the loop evaluates scale-down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The scan-interval timer, or a caller that wants every step: scale-down is evaluated.
    Timer,
    /// A pod became unschedulable: scale-down is evaluated only when its last evaluation
    /// (by the loop's time) is at least `every` old.
    PendingPod {
        /// The least time between two evaluations in such loops: the scan interval.
        every: SignedDuration,
    },
}

/// When scale-down was last evaluated.
#[derive(Debug, Default)]
pub(super) struct Cadence {
    last: Mutex<Option<Timestamp>>,
}

impl Cadence {
    /// Whether a loop at `now` started by `trigger` evaluates scale-down; if so, it counts
    /// as the last evaluation from now on.
    pub(super) fn scale_down_due(&self, trigger: Trigger, now: Timestamp) -> bool {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = match (trigger, *last) {
            (Trigger::Timer, _) | (Trigger::PendingPod { .. }, None) => true,
            (Trigger::PendingPod { every }, Some(at)) => now.duration_since(at) >= every,
        };
        if due {
            *last = Some(now);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_pod_triggered_loop_evaluates_scale_down_once_per_scan_interval() {
        let t0: Timestamp = "2026-12-05T12:00:00Z".parse().unwrap();
        let secs = SignedDuration::from_secs;
        let pod = Trigger::PendingPod { every: secs(10) };
        let cadence = Cadence::default();
        assert!(cadence.scale_down_due(pod, t0), "never evaluated yet");
        assert!(!cadence.scale_down_due(pod, t0 + secs(3)));
        assert!(!cadence.scale_down_due(pod, t0 + secs(9)));
        assert!(
            cadence.scale_down_due(pod, t0 + secs(10)),
            "a scan interval later"
        );
        assert!(
            !cadence.scale_down_due(pod, t0 + secs(12)),
            "counted from t0 + 10 s"
        );
    }

    #[test]
    fn a_timer_loop_always_evaluates_scale_down_and_restarts_the_interval() {
        let t0: Timestamp = "2026-12-05T12:00:00Z".parse().unwrap();
        let secs = SignedDuration::from_secs;
        let pod = Trigger::PendingPod { every: secs(10) };
        let cadence = Cadence::default();
        assert!(cadence.scale_down_due(Trigger::Timer, t0));
        assert!(cadence.scale_down_due(Trigger::Timer, t0 + secs(1)));
        assert!(!cadence.scale_down_due(pod, t0 + secs(5)));
        assert!(cadence.scale_down_due(pod, t0 + secs(11)));
    }
}
