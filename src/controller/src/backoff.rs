//! Exponential backoff of a node group after a failed or timed-out scale-up,
//! kept in the NodeGroup's status so that a restarted controller honours it.
//!
//! The window is `status.backoffStarted` to `status.backoffUntil`. The `Backoff`
//! condition is True while a window is open (its reason and message say why) and
//! turns False when the window ends or a scale-up succeeds; the window's bounds
//! stay so that a failure soon after it can double it. A failure while a window is open or
//! shortly after doubles the previous window up to the maximum; after
//! [`BACKOFF_RESET`] without a new failure the next one starts from the initial
//! window again, as cluster-autoscaler's node group backoff does.

use dra_api::NodeGroupStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Type of the condition that records a backoff window.
pub use crate::catalog::BACKOFF as BACKOFF_CONDITION;
use crate::catalog::{BACKOFF_ENDED, SCALE_UP_SUCCEEDED};
/// How long after a window ends a new failure still doubles it
/// (cluster-autoscaler's `nodeGroupBackoffResetTimeout` default).
pub const BACKOFF_RESET: SignedDuration = SignedDuration::from_hours(3);

/// Bounds of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// The first window after a failure.
    pub initial: SignedDuration,
    /// The longest window.
    pub max: SignedDuration,
}

/// The open window's end, if the group is backing off at `now`.
#[must_use]
pub fn backing_off_until(status: &NodeGroupStatus, now: Timestamp) -> Option<Timestamp> {
    status
        .backoff_until
        .as_ref()
        .map(|t| t.0)
        .filter(|until| *until > now)
}

fn condition(status: &NodeGroupStatus) -> Option<&Condition> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == BACKOFF_CONDITION)
}

/// The reason of the open window (`OutOfCapacity`, `ScaleUpTimedOut`, ...).
#[must_use]
pub fn backoff_reason(status: &NodeGroupStatus) -> Option<&str> {
    condition(status)
        .filter(|c| c.status == "True")
        .map(|c| c.reason.as_str())
}

/// The length of the next window for a failure at `now`.
#[must_use]
pub fn next_window(
    policy: &BackoffPolicy,
    status: &NodeGroupStatus,
    now: Timestamp,
) -> SignedDuration {
    // Statuses written before `backoffStarted` existed: the open window's
    // condition moved when it started.
    let started = status.backoff_started.as_ref().map(|t| t.0).or_else(|| {
        condition(status)
            .filter(|c| c.status == "True")
            .map(|c| c.last_transition_time.0)
    });
    let previous = started
        .zip(status.backoff_until.as_ref())
        .and_then(|(start, until)| {
            let recent = until
                .0
                .checked_add(BACKOFF_RESET)
                .is_ok_and(|reset| reset > now);
            recent.then(|| until.0.duration_since(start))
        })
        .filter(|d| d.is_positive());
    match previous {
        Some(d) => d
            .checked_mul(2)
            .unwrap_or(policy.max)
            .min(policy.max)
            .max(policy.initial),
        None => policy.initial.min(policy.max),
    }
}

/// Opens a new window at `now` and returns its end.
pub fn enter(
    policy: &BackoffPolicy,
    status: &mut NodeGroupStatus,
    now: Timestamp,
    reason: &str,
    message: &str,
) -> Timestamp {
    let window = next_window(policy, status, now);
    let until = now.checked_add(window).unwrap_or(Timestamp::MAX);
    status.backoff_until = Some(Time(until));
    status.backoff_started = Some(Time(now));
    set_condition(status, "True", reason, message, now);
    until
}

/// Turns the `Backoff` condition False once the window has passed at `now`
/// (the transition is dated when the window ended). The window's bounds stay,
/// so a failure soon after still doubles it.
pub fn expire(status: &mut NodeGroupStatus, now: Timestamp) {
    let Some(until) = status.backoff_until.as_ref().map(|t| t.0) else {
        return;
    };
    if until > now || condition(status).is_none_or(|c| c.status != "True") {
        return;
    }
    set_condition(
        status,
        "False",
        BACKOFF_ENDED,
        "the backoff window has ended; scale-ups are tried again",
        until,
    );
}

/// Closes the window after a successful scale-up.
pub fn clear(status: &mut NodeGroupStatus, now: Timestamp) {
    status.backoff_until = None;
    status.backoff_started = None;
    if condition(status).is_some_and(|c| c.status == "True") {
        set_condition(
            status,
            "False",
            SCALE_UP_SUCCEEDED,
            "the last scale-up succeeded",
            now,
        );
    }
}

fn set_condition(
    status: &mut NodeGroupStatus,
    value: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let new = Condition {
        type_: BACKOFF_CONDITION.into(),
        status: value.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Time(now),
        observed_generation: None,
    };
    match status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == BACKOFF_CONDITION)
    {
        Some(c) => *c = new,
        None => status.conditions.push(new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> BackoffPolicy {
        BackoffPolicy {
            initial: SignedDuration::from_mins(5),
            max: SignedDuration::from_mins(30),
        }
    }

    fn t0() -> Timestamp {
        "2026-11-29T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn windows_double_up_to_the_maximum() {
        let mut status = NodeGroupStatus::default();
        let mut now = t0();
        let mut windows = Vec::new();
        for _ in 0..5 {
            let until = enter(&policy(), &mut status, now, "OutOfCapacity", "no capacity");
            windows.push(until.duration_since(now).as_mins());
            // The next failure comes right after the window ends.
            now = until;
        }
        assert_eq!(windows, vec![5, 10, 20, 30, 30]);
        assert_eq!(backoff_reason(&status), Some("OutOfCapacity"));
    }

    #[test]
    fn window_is_honoured_and_ends() {
        let mut status = NodeGroupStatus::default();
        let until = enter(&policy(), &mut status, t0(), "QuotaExceeded", "quota");
        assert_eq!(backing_off_until(&status, t0()), Some(until));
        assert_eq!(backing_off_until(&status, until), None);
    }

    #[test]
    fn the_condition_turns_false_when_the_window_ends_and_a_new_failure_still_doubles() {
        let mut status = NodeGroupStatus::default();
        let until = enter(&policy(), &mut status, t0(), "QuotaExceeded", "quota");
        expire(&mut status, until - SignedDuration::from_secs(1));
        assert_eq!(backoff_reason(&status), Some("QuotaExceeded"), "still open");
        let later = until + SignedDuration::from_mins(1);
        expire(&mut status, later);
        let c = condition(&status).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "BackoffEnded")
        );
        assert_eq!(
            c.last_transition_time.0, until,
            "dated when the window ended"
        );
        assert_eq!(backoff_reason(&status), None);
        // A failure a minute after the 5-minute window: 10 minutes.
        assert_eq!(next_window(&policy(), &status, later).as_mins(), 10);
        let before = status.clone();
        expire(&mut status, later + SignedDuration::from_mins(1));
        assert_eq!(status, before, "expiring twice changes nothing");
    }

    #[test]
    fn success_resets_and_a_late_failure_starts_small() {
        let mut status = NodeGroupStatus::default();
        let until = enter(&policy(), &mut status, t0(), "Failed", "x");
        let until = enter(&policy(), &mut status, until, "Failed", "x");
        assert_eq!(next_window(&policy(), &status, until).as_mins(), 20);
        // Long after the window: back to the initial one.
        let later = until + SignedDuration::from_hours(4);
        assert_eq!(next_window(&policy(), &status, later).as_mins(), 5);
        clear(&mut status, until);
        assert_eq!(status.backoff_until, None);
        assert_eq!(backoff_reason(&status), None);
        assert_eq!(next_window(&policy(), &status, until).as_mins(), 5);
    }
}
