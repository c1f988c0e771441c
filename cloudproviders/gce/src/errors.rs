//! Compute Engine error codes sorted into the classes the planner acts on.
//!
//! Codes come from three places: a finished operation's `error.errors[].code`, a managed
//! instance's `lastAttempt.errors[].code` and a resize request's `status.error.errors[].code`
//! (all the same `Errors` shape), and the `reason` of a failed call's HTTP error. The classes
//! follow cluster-autoscaler's GCE provider (`autoscaling_gce_client.go` `GetErrorInfo`):
//! `RESOURCE_POOL_EXHAUSTED`, `ZONE_RESOURCE_POOL_EXHAUSTED*` and `INSUFFICIENT_CAPACITY` are out
//! of capacity, any code containing `QUOTA` is a quota. Like the AWS provider (and unlike
//! cluster-autoscaler, which files them under "other"), a reservation without room
//! (`RESERVATION_CAPACITY_EXCEEDED`, automatic reservations full) is out of capacity too: the
//! planner should try another group, not the same one again. Rate limits are retried.

use dra_provider::{ErrorClass, ProviderError};

/// What a Compute Engine error code means for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GceErrorKind {
    /// No capacity for the machine type in the zone (stockout), or the reservation is full.
    Stockout,
    /// A project or region quota.
    Quota,
    /// The API rate limit: retried with backoff.
    RateLimit,
    /// Anything else.
    Other,
}

/// Classifies a code or reason (`ZONE_RESOURCE_POOL_EXHAUSTED`, `QUOTA_EXCEEDED`,
/// `rateLimitExceeded`, ...).
#[must_use]
pub fn classify(code: &str) -> GceErrorKind {
    let upper = code.to_ascii_uppercase();
    if upper.starts_with("ZONE_RESOURCE_POOL_EXHAUSTED")
        || upper == "RESOURCE_POOL_EXHAUSTED"
        || upper == "INSUFFICIENT_CAPACITY"
        || upper == "RESERVATION_CAPACITY_EXCEEDED"
        || upper == "AUTOMATIC_RESERVATIONS_NO_CAPACITY"
        || upper == "RESOURCE_NOT_READY_RESERVATION"
    {
        GceErrorKind::Stockout
    } else if upper.contains("RATE_LIMIT") || upper.contains("RATELIMIT") {
        // `rateLimitExceeded`, `userRateLimitExceeded`, `RATE_LIMIT_EXCEEDED`.
        GceErrorKind::RateLimit
    } else if upper.contains("QUOTA") {
        GceErrorKind::Quota
    } else {
        GceErrorKind::Other
    }
}

/// The instance error class of a code, as the extension reports it.
#[must_use]
pub fn error_class(code: &str) -> ErrorClass {
    match classify(code) {
        GceErrorKind::Stockout => ErrorClass::OutOfCapacity,
        GceErrorKind::Quota => ErrorClass::Quota,
        GceErrorKind::RateLimit | GceErrorKind::Other => ErrorClass::Other,
    }
}

/// The provider error for a failed scale-up whose first error has `code`.
#[must_use]
pub fn scale_up_error(code: &str, message: String, rolled_back: i32) -> ProviderError {
    match classify(code) {
        GceErrorKind::Stockout => ProviderError::OutOfCapacity {
            code: code.to_owned(),
            message,
            rolled_back,
        },
        GceErrorKind::Quota => ProviderError::Quota {
            code: code.to_owned(),
            message,
        },
        GceErrorKind::RateLimit => ProviderError::Unavailable {
            message: format!("{code}: {message}"),
        },
        GceErrorKind::Other => ProviderError::Internal {
            message: format!("{code}: {message}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_fall_into_the_planner_classes() {
        for code in [
            "ZONE_RESOURCE_POOL_EXHAUSTED",
            "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
            "RESOURCE_POOL_EXHAUSTED",
            "INSUFFICIENT_CAPACITY",
            "RESERVATION_CAPACITY_EXCEEDED",
        ] {
            assert_eq!(classify(code), GceErrorKind::Stockout, "{code}");
            assert_eq!(error_class(code), ErrorClass::OutOfCapacity, "{code}");
        }
        assert_eq!(classify("QUOTA_EXCEEDED"), GceErrorKind::Quota);
        assert_eq!(classify("quotaExceeded"), GceErrorKind::Quota);
        assert_eq!(error_class("QUOTA_EXCEEDED"), ErrorClass::Quota);
        assert_eq!(classify("rateLimitExceeded"), GceErrorKind::RateLimit);
        assert_eq!(classify("RATE_LIMIT_EXCEEDED"), GceErrorKind::RateLimit);
        assert_eq!(classify("PERMISSIONS_ERROR"), GceErrorKind::Other);
        assert!(matches!(
            scale_up_error("ZONE_RESOURCE_POOL_EXHAUSTED", "none".into(), 3),
            ProviderError::OutOfCapacity { rolled_back: 3, .. }
        ));
        assert!(matches!(
            scale_up_error("QUOTA_EXCEEDED", "no".into(), 0),
            ProviderError::Quota { .. }
        ));
    }
}
