//! EC2 and Auto Scaling error codes sorted into the classes the planner acts on, and the
//! insufficient-capacity cache (Karpenter's "unavailable offerings"): a (type, zone) that just
//! answered ICE is not tried again for a few minutes.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dra_provider::{ErrorClass, ProviderError};

/// What an AWS error code means for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AwsErrorKind {
    /// No capacity for this type in this zone (or reservation full): try elsewhere, later.
    InsufficientCapacity,
    /// An account limit.
    Quota,
    /// The API throttled us; the SDK retries these with backoff.
    Throttling,
    /// Anything else.
    Other,
}

/// Classifies an EC2/Auto Scaling error code.
#[must_use]
pub fn classify(code: &str) -> AwsErrorKind {
    match code {
        "InsufficientInstanceCapacity"
        | "InsufficientCapacity"
        | "InsufficientHostCapacity"
        | "InsufficientReservedInstanceCapacity"
        | "InsufficientCapacityOnHost"
        | "UnfulfillableCapacity"
        | "ReservationCapacityExceeded"
        | "InsufficientFreeAddressesInSubnet"
        | "Unsupported" => AwsErrorKind::InsufficientCapacity,
        "InstanceLimitExceeded"
        | "VcpuLimitExceeded"
        | "MaxSpotInstanceCountExceeded"
        | "MaxFleetCountExceeded"
        | "MaxSpotFleetRequestCountExceeded"
        | "LimitExceeded"
        | "ServiceQuotaExceededException"
        | "AddressLimitExceeded" => AwsErrorKind::Quota,
        "RequestLimitExceeded"
        | "Throttling"
        | "ThrottlingException"
        | "ThrottledException"
        | "TooManyRequestsException"
        | "RequestThrottled"
        | "RequestThrottledException"
        | "EC2ThrottledException"
        | "SlowDown"
        | "PriorRequestNotComplete" => AwsErrorKind::Throttling,
        _ => AwsErrorKind::Other,
    }
}

/// The instance error class of a code, as the extension reports it.
#[must_use]
pub fn error_class(code: &str) -> ErrorClass {
    match classify(code) {
        AwsErrorKind::InsufficientCapacity => ErrorClass::OutOfCapacity,
        AwsErrorKind::Quota => ErrorClass::Quota,
        AwsErrorKind::Throttling | AwsErrorKind::Other => ErrorClass::Other,
    }
}

/// The provider error for a failed launch with `code`.
#[must_use]
pub fn launch_error(code: &str, message: String, rolled_back: i32) -> ProviderError {
    match classify(code) {
        AwsErrorKind::InsufficientCapacity => ProviderError::OutOfCapacity {
            code: code.to_owned(),
            message,
            rolled_back,
        },
        AwsErrorKind::Quota => ProviderError::Quota {
            code: code.to_owned(),
            message,
        },
        AwsErrorKind::Throttling => ProviderError::Unavailable {
            message: format!("{code}: {message}"),
        },
        AwsErrorKind::Other => ProviderError::Internal {
            message: format!("{code}: {message}"),
        },
    }
}

/// The provider error for a failed AWS call that is not a launch (describe, attach, ...).
#[must_use]
pub fn api_error(action: &str, code: Option<&str>, message: &str) -> ProviderError {
    let text = format!(
        "{action}: {}{message}",
        code.map(|c| format!("{c}: ")).unwrap_or_default()
    );
    match code.map(classify) {
        Some(AwsErrorKind::Throttling) | None => ProviderError::Unavailable { message: text },
        Some(AwsErrorKind::Quota) => ProviderError::Quota {
            code: code.unwrap_or_default().to_owned(),
            message: text,
        },
        Some(AwsErrorKind::InsufficientCapacity) => ProviderError::OutOfCapacity {
            code: code.unwrap_or_default().to_owned(),
            message: text,
            rolled_back: 0,
        },
        Some(AwsErrorKind::Other) => ProviderError::Internal { message: text },
    }
}

/// (instance type, zone) → (until when, the ICE code).
type Entries = BTreeMap<(String, String), (Instant, String)>;

/// Offerings (instance type, zone) that answered insufficient capacity recently.
#[derive(Debug)]
pub struct UnavailableOfferings {
    ttl: Duration,
    entries: Mutex<Entries>,
}

impl UnavailableOfferings {
    /// A cache whose entries expire after `ttl`.
    #[must_use]
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that `instance_type` in `zone` had no capacity (`code`).
    pub fn mark(&self, instance_type: &str, zone: &str, code: &str) {
        tracing::info!(
            instance_type,
            zone,
            code,
            ttl_seconds = self.ttl.as_secs(),
            "marking offering unavailable"
        );
        self.lock().insert(
            (instance_type.to_owned(), zone.to_owned()),
            (Instant::now() + self.ttl, code.to_owned()),
        );
    }

    /// The ICE code if `instance_type` in `zone` is still marked unavailable.
    #[must_use]
    pub fn unavailable(&self, instance_type: &str, zone: &str) -> Option<String> {
        let mut entries = self.lock();
        let key = (instance_type.to_owned(), zone.to_owned());
        match entries.get(&key) {
            Some((until, code)) if *until > Instant::now() => Some(code.clone()),
            Some(_) => {
                entries.remove(&key);
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_fall_into_the_planner_classes() {
        assert_eq!(
            classify("InsufficientInstanceCapacity"),
            AwsErrorKind::InsufficientCapacity
        );
        assert_eq!(
            classify("ReservationCapacityExceeded"),
            AwsErrorKind::InsufficientCapacity
        );
        assert_eq!(classify("VcpuLimitExceeded"), AwsErrorKind::Quota);
        assert_eq!(classify("RequestLimitExceeded"), AwsErrorKind::Throttling);
        assert_eq!(classify("InvalidParameterValue"), AwsErrorKind::Other);
        assert!(matches!(
            launch_error("InsufficientInstanceCapacity", "none".into(), 2),
            ProviderError::OutOfCapacity { rolled_back: 2, .. }
        ));
        assert!(matches!(
            launch_error("VcpuLimitExceeded", "no".into(), 0),
            ProviderError::Quota { .. }
        ));
    }

    #[test]
    fn an_ice_entry_expires() {
        let cache = UnavailableOfferings::new(Duration::from_millis(30));
        cache.mark("p5.48xlarge", "us-east-1a", "InsufficientInstanceCapacity");
        assert!(cache.unavailable("p5.48xlarge", "us-east-1a").is_some());
        assert!(cache.unavailable("p5.48xlarge", "us-east-1b").is_none());
        std::thread::sleep(Duration::from_millis(40));
        assert!(cache.unavailable("p5.48xlarge", "us-east-1a").is_none());
    }
}
