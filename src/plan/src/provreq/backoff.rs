//! Retry backoff of ProvisioningRequests that were not provisioned, as
//! cluster-autoscaler's `ProvisioningRequestPodsInjector`
//! (`cluster-autoscaler/processors/provreq/injector.go`) keeps it:
//! - a request without a `Provisioned` condition is tried at once;
//! - one with `Provisioned=False` is tried again only once its
//!   `lastTransitionTime` plus its backoff has passed (strictly after); the
//!   backoff starts at `--provisioning-request-initial-backoff-time` (1m) and
//!   each retry doubles it, up to `--provisioning-request-max-backoff-time`
//!   (10m). Every try rewrites `Provisioned=False` with a new time, so the
//!   waits are 1m, 2m, 4m, 8m, 10m, 10m… after each try;
//! - one with `Provisioned` neither true nor false is never tried;
//! - the backoffs are kept in memory per request UID, at most
//!   `--provisioning-request-max-backoff-cache-size` (1000) of them, the least
//!   recently used forgotten first; one whose request is seen `Failed` or
//!   `Provisioned` is forgotten.
//!
//! [`RetryBackoff`] is that memory. The planner only reads it (a plan decides
//! with the backoffs as they were when it started); whoever runs plans in a
//! loop records each plan's tries with [`RetryBackoff::record`].

use std::collections::BTreeMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use dra_sim::ObjectRef;

use super::api::{ProvisioningRequestReport, RequestOutcome};

/// The key of a request's backoff: its UID, as upstream keys it, or
/// `namespace/name` when the input has none.
pub(crate) fn key(uid: &str, name: &ObjectRef) -> String {
    if uid.is_empty() {
        name.to_string()
    } else {
        uid.to_string()
    }
}

/// Upstream's `--provisioning-request-initial-backoff-time` default.
pub const DEFAULT_INITIAL_BACKOFF: SignedDuration = SignedDuration::from_mins(1);
/// Upstream's `--provisioning-request-max-backoff-time` default.
pub const DEFAULT_MAX_BACKOFF: SignedDuration = SignedDuration::from_mins(10);
/// Upstream's `--provisioning-request-max-backoff-cache-size` default.
pub const DEFAULT_CACHE_SIZE: usize = 1000;

/// One remembered backoff and when it was last used (for eviction).
#[derive(Debug, Clone, Copy)]
struct Remembered {
    wait: SignedDuration,
    used: u64,
}

/// The per-request retry backoffs of `Provisioned=False` requests.
#[derive(Debug, Clone)]
pub struct RetryBackoff {
    initial: SignedDuration,
    max: SignedDuration,
    capacity: usize,
    waits: BTreeMap<String, Remembered>,
    /// Ticks at every use, so the least recently used entry has the lowest.
    uses: u64,
}

impl Default for RetryBackoff {
    fn default() -> Self {
        Self::new(
            DEFAULT_INITIAL_BACKOFF,
            DEFAULT_MAX_BACKOFF,
            DEFAULT_CACHE_SIZE,
        )
    }
}

/// Whether a request may be tried in this plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Tried now; `retried`: after `Provisioned=False` and its backoff (not
    /// a first try).
    Now { retried: bool },
    /// Not tried in this plan.
    Wait(Waiting),
}

/// Why a request is not tried in this plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// `Provisioned=False` changed at `since`; tried once `since + wait` has
    /// passed.
    Later {
        since: Timestamp,
        wait: SignedDuration,
    },
    /// `Provisioned` is neither `True` nor `False` (its status is given):
    /// never tried.
    Never(String),
}

impl RetryBackoff {
    /// Backoffs starting at `initial`, doubling up to `max`, remembered for at
    /// most `capacity` requests (0: no limit, as for upstream's
    /// `k8s.io/utils/lru`).
    #[must_use]
    pub fn new(initial: SignedDuration, max: SignedDuration, capacity: usize) -> Self {
        Self {
            initial,
            max,
            capacity,
            waits: BTreeMap::new(),
            uses: 0,
        }
    }

    /// The first backoff after `Provisioned=False`.
    #[must_use]
    pub fn initial(&self) -> SignedDuration {
        self.initial
    }

    /// The longest backoff.
    #[must_use]
    pub fn max(&self) -> SignedDuration {
        self.max
    }

    /// For how many requests backoffs are remembered (0: no limit).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The same settings with nothing remembered (a controller that loses
    /// its lease forgets, as a restarted cluster-autoscaler does).
    #[must_use]
    pub fn emptied(&self) -> Self {
        Self::new(self.initial, self.max, self.capacity)
    }

    /// How many requests' backoffs are remembered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.waits.len()
    }

    /// Whether no backoff is remembered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.waits.is_empty()
    }

    /// The backoff in force for the request `key` (its UID): what earlier
    /// retries doubled it to, else the initial one.
    #[must_use]
    pub fn wait(&self, key: &str) -> SignedDuration {
        self.waits.get(key).map_or(self.initial, |r| r.wait)
    }

    /// Whether the request `key`, whose `Provisioned` condition is
    /// `provisioned` (status and `lastTransitionTime`; `None`: it has none),
    /// may be tried at `now` (`None`: no clock, every request is tried).
    pub(crate) fn retry(
        &self,
        key: &str,
        provisioned: Option<(&str, Option<Timestamp>)>,
        now: Option<Timestamp>,
    ) -> Retry {
        let Some((status, since)) = provisioned else {
            return Retry::Now { retried: false };
        };
        if status != "False" {
            return Retry::Wait(Waiting::Never(status.to_string()));
        }
        let wait = self.wait(key);
        match (since, now) {
            (Some(since), Some(now)) => match since.checked_add(wait) {
                Ok(end) if end < now => Retry::Now { retried: true },
                // Past the end of time (`Err`): never due.
                _ => Retry::Wait(Waiting::Later { since, wait }),
            },
            // Without a clock or a time to count from, nothing says wait.
            _ => Retry::Now { retried: true },
        }
    }

    /// Records what a plan did with the requests `reports` describe: a
    /// request retried after `Provisioned=False` has its backoff doubled (up
    /// to the maximum); one seen `Failed` or `Provisioned` is forgotten.
    pub fn record<'a>(&mut self, reports: impl IntoIterator<Item = &'a ProvisioningRequestReport>) {
        for report in reports {
            let key = report.backoff_key();
            match report.outcome {
                RequestOutcome::Finished
                | RequestOutcome::Booked
                | RequestOutcome::BookingExpired => {
                    self.waits.remove(&key);
                }
                // Upstream reads (and so refreshes) a waiting request's
                // backoff every loop.
                RequestOutcome::RetryLater => self.touch(&key),
                _ if report.retried => {
                    let doubled = self
                        .wait(&key)
                        .checked_mul(2)
                        .unwrap_or(SignedDuration::MAX)
                        .min(self.max);
                    self.remember(key, doubled);
                }
                _ => {}
            }
        }
    }

    fn touch(&mut self, key: &str) {
        if let Some(remembered) = self.waits.get_mut(key) {
            self.uses += 1;
            remembered.used = self.uses;
        }
    }

    fn remember(&mut self, key: String, wait: SignedDuration) {
        self.uses += 1;
        if self.capacity != 0 && !self.waits.contains_key(&key) && self.waits.len() >= self.capacity
        {
            let oldest = self
                .waits
                .iter()
                .min_by_key(|(_, r)| r.used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.waits.remove(&oldest);
            }
        }
        self.waits.insert(
            key,
            Remembered {
                wait,
                used: self.uses,
            },
        );
    }
}

// Here rather than beside the report type: the key is this module's rule, and
// the report's module stays a leaf.
impl ProvisioningRequestReport {
    /// The key of its retry backoff: the UID, as upstream keys it, or
    /// `namespace/name` when the input has no UID.
    #[must_use]
    pub fn backoff_key(&self) -> String {
        key(&self.uid, &self.provisioning_request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn the_backoff_counts_from_the_last_transition_and_must_be_strictly_past() {
        let b = RetryBackoff::default();
        let since = Some(at("2026-12-01T10:00:00Z"));
        assert_eq!(
            b.retry("u", None, Some(at("2026-12-01T10:00:00Z"))),
            Retry::Now { retried: false }
        );
        assert_eq!(
            b.retry(
                "u",
                Some(("False", since)),
                Some(at("2026-12-01T10:01:00Z"))
            ),
            Retry::Wait(Waiting::Later {
                since: at("2026-12-01T10:00:00Z"),
                wait: SignedDuration::from_mins(1)
            })
        );
        assert_eq!(
            b.retry(
                "u",
                Some(("False", since)),
                Some(at("2026-12-01T10:01:00.001Z"))
            ),
            Retry::Now { retried: true }
        );
        assert_eq!(
            b.retry(
                "u",
                Some(("Unknown", since)),
                Some(at("2026-12-02T00:00:00Z"))
            ),
            Retry::Wait(Waiting::Never("Unknown".into()))
        );
        // No clock, or no time to count from (upstream's zero time): tried.
        assert_eq!(
            b.retry("u", Some(("False", since)), None),
            Retry::Now { retried: true }
        );
        assert_eq!(
            b.retry("u", Some(("False", None)), Some(at("2026-12-01T10:00:00Z"))),
            Retry::Now { retried: true }
        );
    }

    #[test]
    fn the_least_recently_used_backoff_goes_first_when_full() {
        let mut b = RetryBackoff::new(
            SignedDuration::from_mins(1),
            SignedDuration::from_mins(10),
            2,
        );
        b.remember("a".into(), SignedDuration::from_mins(2));
        b.remember("b".into(), SignedDuration::from_mins(2));
        b.remember("a".into(), SignedDuration::from_mins(4));
        b.remember("c".into(), SignedDuration::from_mins(2));
        assert_eq!(b.len(), 2);
        assert_eq!(b.wait("a"), SignedDuration::from_mins(4));
        assert_eq!(b.wait("b"), SignedDuration::from_mins(1), "b was forgotten");
        // Reading a waiting request's backoff (upstream's Get) keeps it: `c` goes next.
        b.touch("a");
        b.remember("d".into(), SignedDuration::from_mins(2));
        assert_eq!(b.wait("a"), SignedDuration::from_mins(4));
        assert_eq!(b.wait("c"), SignedDuration::from_mins(1), "c was forgotten");
        // Size 0 is no limit, as for upstream's cache.
        let mut unbounded = RetryBackoff::new(
            SignedDuration::from_mins(1),
            SignedDuration::from_mins(10),
            0,
        );
        for key in ["a", "b", "c"] {
            unbounded.remember(key.into(), SignedDuration::from_mins(2));
        }
        assert_eq!(unbounded.len(), 3);
        assert!(unbounded.emptied().is_empty());
        assert_eq!(unbounded.emptied().max(), SignedDuration::from_mins(10));
    }
}
