//! The ProvisioningRequest API's vocabulary (group, classes, annotations,
//! condition types and reasons, upstream's times) and the report the planner
//! gives for each request: what callers outside the planner read.

use dra_sim::ObjectRef;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// API group of ProvisioningRequests (and CapacityBuffers).
pub const API_GROUP: &str = "autoscaling.x-k8s.io";
/// Kind of a ProvisioningRequest.
pub const KIND: &str = "ProvisioningRequest";
/// Class: book existing capacity, never scale.
pub const CHECK_CAPACITY_CLASS: &str = "check-capacity.autoscaling.x-k8s.io";
/// Class: scale up for every pod or none.
pub const BEST_EFFORT_ATOMIC_CLASS: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
/// Annotation naming the request a pod consumes.
pub const CONSUME_ANNOTATION: &str = "autoscaling.x-k8s.io/consume-provisioning-request";
/// The annotation's older name, still honoured upstream.
pub const DEPRECATED_CONSUME_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/consume-provisioning-request";
/// Annotation naming the class on pods made for a request.
pub const CLASS_ANNOTATION: &str = "autoscaling.x-k8s.io/provisioning-class-name";
/// How long capacity stays booked after `Provisioned` turned true.
pub const BOOKING_TIME: SignedDuration = SignedDuration::from_mins(10);
/// How long a check-capacity request may stay unprovisioned.
pub const EXPIRATION_TIME: SignedDuration = SignedDuration::from_hours(7 * 24);

/// Condition types, as upstream spells them.
pub mod condition {
    /// The autoscaler took the request on.
    pub const ACCEPTED: &str = "Accepted";
    /// The capacity exists (found or created).
    pub const PROVISIONED: &str = "Provisioned";
    /// The request cannot be satisfied; terminal.
    pub const FAILED: &str = "Failed";
    /// The booking ran out before its pods arrived.
    pub const BOOKING_EXPIRED: &str = "BookingExpired";
    /// The capacity is no longer valid.
    pub const CAPACITY_REVOKED: &str = "CapacityRevoked";
}

/// Condition reasons, as upstream spells them.
pub mod reason {
    /// `Accepted=True`.
    pub const ACCEPTED: &str = "Accepted";
    /// `Provisioned=True`: existing capacity holds the pods.
    pub const CAPACITY_IS_FOUND: &str = "CapacityIsFound";
    /// `Provisioned=True`: a scale-up for the pods was requested.
    pub const CAPACITY_IS_PROVISIONED: &str = "CapacityIsProvisioned";
    /// `Provisioned=False`: no capacity; retried later.
    pub const CAPACITY_IS_NOT_FOUND: &str = "CapacityIsNotFound";
    /// `Failed=True`: the pods could not be made from the templates.
    pub const FAILED_TO_CREATE_PODS: &str = "FailedToCreatePods";
    /// `BookingExpired=True`.
    pub const CAPACITY_RESERVATION_TIME_EXPIRED: &str = "CapacityReservationTimeExpired";
    /// `BookingExpired=True`: every pod of the request is scheduled.
    pub const CAPACITY_BOOKING_CONSUMED: &str = "CapacityBookingConsumed";
    /// `Failed=True`: a check-capacity request was never provisioned.
    pub const EXPIRED: &str = "Expired";
}

/// What the planner does with a request.
/// A condition a request has, or that the autoscaler would set now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// `Accepted`, `Provisioned`, `Failed`, `BookingExpired`, `CapacityRevoked`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    /// Upstream's reason (see [`reason`]).
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
}

impl Condition {
    pub(crate) fn new(type_: &str, status: bool, reason: &str, message: impl Into<String>) -> Self {
        Condition {
            type_: type_.to_string(),
            status: if status { "True" } else { "False" }.to_string(),
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

/// What the plan means for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestOutcome {
    /// All pods fit, on existing capacity or on the planned scale-up.
    Provisioned,
    /// They do not all fit (or, for check-capacity, not without new nodes).
    CapacityNotFound,
    /// Provisioned before: its capacity is held for its pods.
    Booked,
    /// Provisioned before, and the booking ran out.
    BookingExpired,
    /// A check-capacity request past its 7 days.
    Expired,
    /// Not provisioned, and the request asks not to be retried
    /// (check-capacity parameter `noRetry: "true"`).
    Failed,
    /// `Failed` or `BookingExpired` already true: nothing more happens.
    Finished,
    /// Its pods could not be made (missing or invalid PodTemplate).
    Invalid,
    /// A provisioning class this autoscaler does not serve, a request for
    /// another check-capacity processor instance, or one whose `Provisioned`
    /// condition is neither true nor false (upstream never tries it).
    NotHandled,
    /// `Provisioned=False`, and its retry backoff has not run out: not tried
    /// in this plan (`retryAt` says when it will be).
    RetryLater,
}

/// The plan for one ProvisioningRequest (`provisioningRequests` in JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestReport {
    /// The request, `namespace/name`.
    pub provisioning_request: ObjectRef,
    /// Its `metadata.uid`, which keys its retry backoff (empty when the input
    /// has none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Its `spec.provisioningClassName`.
    pub provisioning_class: String,
    /// What the plan means for it.
    pub outcome: RequestOutcome,
    /// Pods asked for, over all pod sets.
    pub pod_count: usize,
    /// Pods whose capacity is held by the booking (outcome `booked`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub booked: usize,
    /// The nodes the booking holds room on, by name, each once (scale-down
    /// keeps them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub booked_nodes: Vec<String>,
    /// The stand-in pods planned or booked, `namespace/name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<ObjectRef>,
    /// The condition the autoscaler sets now, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<Condition>,
    /// Why, when it is not provisioned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Tried again in this plan after `Provisioned=False` once its retry
    /// backoff ran out (its backoff then doubles; see [`super::backoff`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retried: bool,
    /// Outcome `retry-later`: when it will be tried again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Timestamp>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
