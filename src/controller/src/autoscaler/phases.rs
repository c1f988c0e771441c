//! Where one loop's time went, step by step, for the run loop's `loop finished` debug line:
//! at 10,000 nodes a loop takes seconds, and which step takes them decides what to cut
//! (issue #28).

use std::time::{Duration, Instant};

/// How long each step of one loop took. A step the loop did not reach stays zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Phases {
    /// Membership (the providers asked which group a node is in), NodeGroup status
    /// reconciled and written, unconfirmed scale-ups sent again.
    pub reconcile: Duration,
    /// The planner's input brought up to date from the stores (`snapshot::View`).
    pub view: Duration,
    /// The planner, its snapshot's indexing included.
    pub plan: Duration,
    /// The plan's scale-ups: intents written, providers called, outcomes written.
    pub scale_ups: Duration,
    /// Events on pods and gangs, ProvisioningRequest and CapacityBuffer status.
    pub notices: Duration,
    /// The scale-down analysis, its snapshot's indexing included.
    pub scale_down_analysis: Duration,
    /// The rest of scale-down: unneeded nodes written to the groups' status, Events on
    /// kept nodes, taints, removals started.
    pub scale_down_writes: Duration,
    /// The planner's nodes and pods taken back into the view for the next loop.
    pub hand_back: Duration,
}

/// Measures the steps of a loop one after another: each call to [`Clock::lap`] returns the
/// time since the previous one.
#[derive(Debug)]
pub(crate) struct Clock {
    last: Instant,
}

impl Clock {
    /// A clock starting now.
    pub(crate) fn start() -> Self {
        Self {
            last: Instant::now(),
        }
    }

    /// The time since the clock started or since the previous lap.
    pub(crate) fn lap(&mut self) -> Duration {
        let now = Instant::now();
        let took = now.duration_since(self.last);
        self.last = now;
        took
    }
}

/// `d` in whole milliseconds, as the `loop finished` line gives each step.
#[must_use]
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lap_is_the_time_since_the_previous_one() {
        let mut clock = Clock::start();
        std::thread::sleep(Duration::from_millis(20));
        let first = clock.lap();
        let second = clock.lap();
        // A sleep never ends early; the second lap measures no sleep at all.
        assert!(first >= Duration::from_millis(20), "{first:?}");
        assert!(second < first, "{second:?} after {first:?}");
    }

    #[test]
    fn the_log_fields_are_whole_milliseconds() {
        assert_eq!(millis(Duration::from_micros(1_999)), 1);
        assert_eq!(millis(Duration::from_secs(2)), 2_000);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
