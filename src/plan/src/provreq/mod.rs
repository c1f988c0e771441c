//! ProvisioningRequests (`autoscaling.x-k8s.io/v1`, cluster-autoscaler's API,
//! which Kueue's ProvisioningRequest admission check writes): read into the
//! pods each asks room for, and what cluster-autoscaler would decide for it.
//!
//! A request is a gang: the pods of all its pod sets (`count` copies of each
//! referenced PodTemplate, ResourceClaimTemplates included) land whole or not
//! at all. Upstream semantics kept here:
//! - class `best-effort-atomic-scale-up.autoscaling.x-k8s.io`: if the pods fit
//!   on existing capacity, `Provisioned=True` (`CapacityIsFound`); else a
//!   scale-up for all of them or none (`CapacityIsProvisioned`), else
//!   `Provisioned=False` (`CapacityIsNotFound`). Unlike cluster-autoscaler,
//!   the nodes may come from any mix of node groups.
//! - class `check-capacity.autoscaling.x-k8s.io`: existing capacity only,
//!   never a scale-up.
//! - a request with `Provisioned=True` and neither `Failed` nor
//!   `BookingExpired` true has its capacity booked: its pods are placed on
//!   the free room of registered nodes before anything else is planned
//!   (upstream's `bookCapacity`), after the pending pods the scheduler will
//!   place now (upstream's `FilterOutSchedulable` runs first: the scheduler
//!   ignores bookings), best effort: a booked pod without room is not
//!   booked, and a booking never buys a node nor takes nodes bought for a
//!   pending gang; less the pods consuming it that are already scheduled
//!   (annotation `autoscaling.x-k8s.io/consume-provisioning-request`, or the
//!   deprecated `cluster-autoscaler.kubernetes.io/…`); a pending pod with the
//!   annotation never triggers a scale-up (upstream's
//!   `ProvisioningRequestPodsFilter`): it waits for the booked room. The
//!   booking ends 10 minutes
//!   after `Provisioned` turned true (`BookingExpired`,
//!   `CapacityReservationTimeExpired`), or once as many consuming pods are
//!   scheduled as the request asked for (`BookingExpired`,
//!   `CapacityBookingConsumed`).
//! - a request not provisioned within 7 days of its creation fails
//!   (`Failed`, `Expired`); one with parameter `noRetry: "true"` fails
//!   at once when the capacity is not there (`Failed`, `CapacityIsNotFound`).
//! - pods that cannot be made from the templates fail the request
//!   (`Failed`, `FailedToCreatePods`); other classes, and requests for
//!   another check-capacity processor instance, are not ours.
//! - a request with `Provisioned=False` is tried again only after its retry
//!   backoff ([`backoff`]); until then it is `retry-later` and nothing is
//!   written.

pub mod backoff;

pub use backoff::RetryBackoff;

use dra_sim::ObjectRef;
use dra_sim::objects::ExtraObject;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::groups::friendly;
use crate::templates::{created_at, group_of, pod_from_template, pod_template, ref_of};
use backoff::{Retry, Waiting};

mod api;
mod pod_set_error;

pub use pod_set_error::PodSetError;

pub use api::*;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stage {
    /// Not provisioned yet: its pods are a gang to plan.
    Plan,
    /// Provisioned: its capacity is booked (`since`: when `Provisioned`
    /// turned true).
    Booked { since: Option<Timestamp> },
    /// Provisioned, and as many pods consuming it are scheduled as it asked
    /// for: the booking is used up.
    Consumed,
    /// `Failed` or `BookingExpired` already true: nothing to do.
    Finished(&'static str),
    /// A request this autoscaler does not serve, and why (its class, or the
    /// check-capacity processor instance it names).
    NotHandled(String),
    /// The pods could not be made.
    Invalid(String),
    /// Not tried in this plan (see [`backoff`]): its retry backoff runs, or
    /// its `Provisioned` condition is neither true nor false.
    Waiting(Waiting),
}

/// One request as read.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) name: ObjectRef,
    /// `metadata.uid` (empty when the input has none).
    pub(crate) uid: String,
    /// Tried again in this plan after `Provisioned=False` and its backoff.
    pub(crate) retried: bool,
    pub(crate) class: String,
    /// Served as a check-capacity request (see [`served_class`]).
    pub(crate) check_capacity: bool,
    pub(crate) created: Option<Timestamp>,
    pub(crate) stage: Stage,
    /// Pods asked for in all pod sets.
    pub(crate) total: usize,
    /// Parameter `noRetry: "true"` (check-capacity): fail instead of retrying.
    pub(crate) no_retry: bool,
    /// Pods to plan (stage `Plan`) or to book (stage `Booked`: less those
    /// already consuming it).
    pub(crate) pods: Vec<Pod>,
}

impl Request {
    pub(crate) fn check_capacity(&self) -> bool {
        self.check_capacity
    }
}

fn is_true<'a>(conditions: &'a [Value], type_: &str) -> Option<&'a Value> {
    conditions.iter().find(|c| {
        c.get("type").and_then(Value::as_str) == Some(type_)
            && c.get("status").and_then(Value::as_str) == Some("True")
    })
}

fn timestamp(v: Option<&Value>) -> Option<Timestamp> {
    v.and_then(Value::as_str).and_then(|s| s.parse().ok())
}

/// The request a pod consumes (the consume annotation, or its deprecated
/// name), in the pod's namespace.
#[must_use]
pub fn consumed_request(pod: &Pod) -> Option<&str> {
    let annotations = pod.metadata.annotations.as_ref()?;
    annotations
        .get(CONSUME_ANNOTATION)
        .or_else(|| annotations.get(DEPRECATED_CONSUME_ANNOTATION))
        .map(String::as_str)
}

/// How many live pods in `namespace` consuming the request `name` are
/// scheduled (bound to a node).
fn scheduled_consumers(pods: &[Pod], namespace: &str, name: &str) -> usize {
    pods.iter()
        .filter(|p| p.metadata.namespace.as_deref().unwrap_or("default") == namespace)
        .filter(|p| {
            !p.status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|ph| ph == "Succeeded" || ph == "Failed")
        })
        .filter(|p| consumed_request(p) == Some(name))
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty())
        })
        .count()
}

/// The pods of every pod set, named `<request>-<podSet>-<n>` as upstream
/// names its injected pods.
fn make_pods(
    obj: &ExtraObject,
    name: &ObjectRef,
    class: &str,
    extra: &[ExtraObject],
) -> Result<Vec<Pod>, PodSetError> {
    let pod_sets = obj
        .value
        .pointer("/spec/podSets")
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
        .ok_or(PodSetError::NoPodSets)?;
    let created = created_at(obj);
    let mut pods = Vec::new();
    for (i, set) in pod_sets.iter().enumerate() {
        let template_name = set
            .pointer("/podTemplateRef/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or(PodSetError::NoTemplateName { index: i })?;
        let count = set
            .get("count")
            .and_then(Value::as_u64)
            .filter(|&c| c >= 1)
            .ok_or(PodSetError::BadCount { index: i })?;
        let template = pod_template(extra, &name.namespace, template_name).map_err(|source| {
            PodSetError::Template {
                index: i,
                source: Box::new(source),
            }
        })?;
        for j in 0..count {
            let pod_name = ObjectRef::new(name.namespace.clone(), format!("{}-{i}-{j}", name.name));
            let pod = pod_from_template(
                template,
                &pod_name,
                &[(CONSUME_ANNOTATION, &name.name), (CLASS_ANNOTATION, class)],
                created.as_ref(),
            )
            .map_err(|source| PodSetError::Pod {
                index: i,
                template: template_name.to_owned(),
                source: Box::new(source),
            })?;
            pods.push(pod);
        }
    }
    Ok(pods)
}

/// Parameter naming the autoscaler instance a check-capacity request is for.
pub const PROCESSOR_INSTANCE_PARAMETER: &str = "processorInstance";

/// Whether an autoscaler run with `--check-capacity-processor-instance
/// instance` serves a request of `class` whose `processorInstance` parameter
/// is `requested`, and as which class; else why not. Upstream's
/// `SupportedProvisioningClass` (`cluster-autoscaler/provisioningrequest/
/// supported_classes.go`): with an instance set, best-effort-atomic requests
/// are left to another autoscaler and a check-capacity request is served when
/// its parameter names this instance, or, without the parameter, when its
/// class is the instance name followed by the check-capacity class (a form
/// upstream deprecates); without an instance, a request naming one is left
/// alone.
fn served_class(class: &str, requested: &str, instance: &str) -> Result<&'static str, NotServed> {
    if class == BEST_EFFORT_ATOMIC_CLASS {
        // The parameter is for check-capacity requests only.
        return if instance.is_empty() {
            Ok(BEST_EFFORT_ATOMIC_CLASS)
        } else {
            Err(NotServed::BestEffortAtomicWithInstance {
                instance: instance.to_string(),
            })
        };
    }
    if instance.is_empty() {
        return if class != CHECK_CAPACITY_CLASS {
            Err(NotServed::UnknownClass {
                class: class.to_string(),
            })
        } else if !requested.is_empty() {
            Err(NotServed::InstanceNotSet {
                requested: requested.to_string(),
            })
        } else {
            Ok(CHECK_CAPACITY_CLASS)
        };
    }
    if !requested.is_empty() {
        return if class != CHECK_CAPACITY_CLASS {
            Err(NotServed::NotCheckCapacity {
                class: class.to_string(),
            })
        } else if requested != instance {
            Err(NotServed::OtherInstance {
                requested: requested.to_string(),
                instance: instance.to_string(),
            })
        } else {
            Ok(CHECK_CAPACITY_CLASS)
        };
    }
    if class.strip_prefix(instance) == Some(CHECK_CAPACITY_CLASS) {
        Ok(CHECK_CAPACITY_CLASS)
    } else {
        Err(NotServed::NoInstanceParameter {
            class: class.to_string(),
            instance: instance.to_string(),
        })
    }
}

/// Why this autoscaler instance leaves a ProvisioningRequest alone
/// ([`served_class`]); shown as the request's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotServed {
    /// A best-effort-atomic request, and this run is a check-capacity
    /// processor instance.
    #[error(
        "provisioning class {BEST_EFFORT_ATOMIC_CLASS} is not served by check-capacity processor instance {instance:?}"
    )]
    BestEffortAtomicWithInstance {
        /// This run's instance.
        instance: String,
    },
    /// A class we do not serve at all.
    #[error(
        "provisioning class {class:?} is not served: expected {CHECK_CAPACITY_CLASS} or {BEST_EFFORT_ATOMIC_CLASS}"
    )]
    UnknownClass {
        /// The request's class.
        class: String,
    },
    /// A request naming an instance whose class is not check-capacity.
    #[error("provisioning class {class:?} is not served: expected {CHECK_CAPACITY_CLASS}")]
    NotCheckCapacity {
        /// The request's class.
        class: String,
    },
    /// An instance run, and the request names no instance by parameter or
    /// class prefix.
    #[error(
        "provisioning class {class:?} is not served: expected {CHECK_CAPACITY_CLASS} with parameter {PROCESSOR_INSTANCE_PARAMETER}={instance:?}"
    )]
    NoInstanceParameter {
        /// The request's class.
        class: String,
        /// This run's instance.
        instance: String,
    },
    /// The request names an instance, and this run is none.
    #[error(
        "parameter {PROCESSOR_INSTANCE_PARAMETER}={requested:?} names another autoscaler instance (--check-capacity-processor-instance is not set)"
    )]
    InstanceNotSet {
        /// The instance the request names.
        requested: String,
    },
    /// The request names another instance.
    #[error(
        "parameter {PROCESSOR_INSTANCE_PARAMETER}={requested:?} names another autoscaler instance (this one is {instance:?})"
    )]
    OtherInstance {
        /// The instance the request names.
        requested: String,
        /// This run's instance.
        instance: String,
    },
}

/// How a plan reads requests: which it serves and when it retries them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Serving<'a> {
    /// `--check-capacity-processor-instance` (see [`served_class`]).
    pub(crate) instance: &'a str,
    /// The retry backoffs of earlier plans.
    pub(crate) backoff: &'a RetryBackoff,
    /// The plan's time (`None`: no clock; every request is tried).
    pub(crate) now: Option<Timestamp>,
}

/// The `Provisioned` condition's status and `lastTransitionTime`, if it has
/// one.
fn provisioned_condition(conditions: &[Value]) -> Option<(&str, Option<Timestamp>)> {
    let c = conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(condition::PROVISIONED))?;
    Some((
        c.get("status").and_then(Value::as_str).unwrap_or_default(),
        timestamp(c.get("lastTransitionTime")),
    ))
}

/// Pods asked for over the pod sets whose `count` reads (for a request not
/// tried now, whose pods are not made).
fn counted_pods(obj: &ExtraObject) -> usize {
    obj.value
        .pointer("/spec/podSets")
        .and_then(Value::as_array)
        .map_or(0, |sets| {
            sets.iter()
                .filter_map(|s| s.get("count").and_then(Value::as_u64))
                .map(|c| usize::try_from(c).unwrap_or(usize::MAX))
                .fold(0, usize::saturating_add)
        })
}

/// Every ProvisioningRequest among `extra`, with its pods. `pods` are the
/// snapshot's pods (for the consume annotation).
pub(crate) fn read_requests(
    extra: &[ExtraObject],
    pods: &[Pod],
    serving: Serving<'_>,
) -> Vec<Request> {
    let mut requests = Vec::new();
    for obj in extra
        .iter()
        .filter(|o| o.kind == KIND && group_of(o) == API_GROUP)
    {
        let name = ref_of(obj);
        let class = obj
            .value
            .pointer("/spec/provisioningClassName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let requested = obj
            .value
            .pointer(&format!("/spec/parameters/{PROCESSOR_INSTANCE_PARAMETER}"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let served = served_class(&class, requested, serving.instance);
        let check_capacity = served == Ok(CHECK_CAPACITY_CLASS);
        let conditions: &[Value] = obj
            .value
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let mut request = Request {
            name: name.clone(),
            uid: obj
                .value
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            retried: false,
            created: timestamp(obj.value.pointer("/metadata/creationTimestamp")),
            stage: Stage::Plan,
            total: 0,
            check_capacity,
            no_retry: check_capacity
                && obj
                    .value
                    .pointer("/spec/parameters/noRetry")
                    .and_then(Value::as_str)
                    == Some("true"),
            pods: Vec::new(),
            class: class.clone(),
        };
        if let Err(why) = served {
            request.stage = Stage::NotHandled(why.to_string());
            requests.push(request);
            continue;
        }
        if let Some(done) = [condition::FAILED, condition::BOOKING_EXPIRED]
            .into_iter()
            .find(|t| is_true(conditions, t).is_some())
        {
            request.stage = Stage::Finished(done);
            requests.push(request);
            continue;
        }
        // Upstream's injector: only a request not yet provisioned whose
        // backoff has run out is tried (and only then are its pods made).
        if is_true(conditions, condition::PROVISIONED).is_none() {
            let key = backoff::key(&request.uid, &name);
            match serving
                .backoff
                .retry(&key, provisioned_condition(conditions), serving.now)
            {
                Retry::Now { retried } => request.retried = retried,
                Retry::Wait(waiting) => {
                    request.total = counted_pods(obj);
                    request.stage = Stage::Waiting(waiting);
                    requests.push(request);
                    continue;
                }
            }
        }
        match make_pods(obj, &name, &class, extra) {
            Err(e) => request.stage = Stage::Invalid(format!("ProvisioningRequest {name}: {e}")),
            Ok(mut made) => {
                request.total = made.len();
                if let Some(provisioned) = is_true(conditions, condition::PROVISIONED) {
                    // Scheduled consumers hold their own room; pending ones
                    // are never planned (see `consumed_request`), so their
                    // room stays booked.
                    let scheduled = scheduled_consumers(pods, &name.namespace, &name.name);
                    made.truncate(made.len().saturating_sub(scheduled));
                    // As upstream's bookCapacity: every pod scheduled ends
                    // the booking.
                    request.stage = if scheduled >= request.total {
                        Stage::Consumed
                    } else {
                        Stage::Booked {
                            since: timestamp(provisioned.get("lastTransitionTime")),
                        }
                    };
                }
                request.pods = made;
            }
        }
        requests.push(request);
    }
    requests
}

/// Whether a booking made at `since` has run out at `now`.
pub(crate) fn booking_expired(since: Option<Timestamp>, now: Option<Timestamp>) -> bool {
    match (since, now) {
        (Some(since), Some(now)) => since.checked_add(BOOKING_TIME).is_ok_and(|end| end < now),
        _ => false,
    }
}

/// The report of one request, given how planning went: for a planned one,
/// whether it landed and whether new nodes were needed, with the reasons;
/// for a booked one, how many pods found their booked room.
pub(crate) struct Planned<'a> {
    pub(crate) lands: bool,
    pub(crate) new_nodes: bool,
    /// Where its pods landed, as people read it (`2 new node(s) of group g`,
    /// `existing node(s) a, b`), for the `Provisioned=True` message.
    pub(crate) placed: Vec<String>,
    pub(crate) reasons: &'a [String],
    pub(crate) booked: usize,
    pub(crate) booked_nodes: Vec<String>,
    pub(crate) expired: bool,
    pub(crate) now: Option<Timestamp>,
}

/// Whether `request`, not provisioned, is past its 7 days at `now`: upstream's
/// refresh fails any request of a class it serves that is still
/// unprovisioned 7 days after its creation.
fn expired(request: &Request, now: Option<Timestamp>) -> bool {
    match (request.created, now) {
        (Some(created), Some(now)) => created
            .checked_add(EXPIRATION_TIME)
            .is_ok_and(|end| end < now),
        _ => false,
    }
}

/// Marks `out` expired (`Failed`, `Expired`).
fn expire(out: &mut ProvisioningRequestReport) {
    out.outcome = RequestOutcome::Expired;
    out.condition = Some(Condition::new(
        condition::FAILED,
        true,
        reason::EXPIRED,
        "ProvisioningRequest is expired",
    ));
}

/// The report entry for `request` after planning.
pub(crate) fn report(request: &Request, planned: &Planned<'_>) -> ProvisioningRequestReport {
    let mut out = ProvisioningRequestReport {
        provisioning_request: request.name.clone(),
        provisioning_class: request.class.clone(),
        outcome: RequestOutcome::NotHandled,
        pod_count: request.total,
        booked: 0,
        booked_nodes: Vec::new(),
        pods: request
            .pods
            .iter()
            .map(|p| ObjectRef::namespaced(&p.metadata))
            .collect(),
        condition: None,
        reasons: Vec::new(),
        uid: request.uid.clone(),
        retried: request.retried,
        retry_at: None,
    };
    match &request.stage {
        Stage::NotHandled(why) => out.reasons.push(why.clone()),
        // Upstream's refresh fails an old request whether or not it is tried.
        Stage::Waiting(_) if expired(request, planned.now) => expire(&mut out),
        Stage::Waiting(Waiting::Later { since, wait }) => {
            out.outcome = RequestOutcome::RetryLater;
            let at = since.checked_add(*wait).ok();
            out.retry_at = at;
            out.reasons.push(format!(
                "Provisioned=False since {since}: tried again after {} (retry backoff {}, doubled by each try up to the maximum)",
                at.map_or_else(|| "the end of time".to_string(), |t| t.to_string()),
                friendly(*wait)
            ));
        }
        Stage::Waiting(Waiting::Never(status)) => out.reasons.push(format!(
            "condition Provisioned has status {status:?}: only a request without it or with Provisioned=False is tried"
        )),
        Stage::Finished(done) => {
            out.outcome = RequestOutcome::Finished;
            out.reasons
                .push(format!("condition {done} is already true"));
        }
        Stage::Invalid(e) => {
            out.outcome = RequestOutcome::Invalid;
            out.condition = Some(Condition::new(
                condition::FAILED,
                true,
                reason::FAILED_TO_CREATE_PODS,
                e.clone(),
            ));
            out.reasons.push(e.clone());
        }
        Stage::Consumed => {
            out.outcome = RequestOutcome::BookingExpired;
            out.condition = Some(Condition::new(
                condition::BOOKING_EXPIRED,
                true,
                reason::CAPACITY_BOOKING_CONSUMED,
                "Capacity booking is consumed: every pod of the request is scheduled",
            ));
        }
        Stage::Booked { .. } if planned.expired => {
            out.outcome = RequestOutcome::BookingExpired;
            out.condition = Some(Condition::new(
                condition::BOOKING_EXPIRED,
                true,
                reason::CAPACITY_RESERVATION_TIME_EXPIRED,
                "Capacity reservation time is expired",
            ));
        }
        Stage::Booked { .. } => {
            out.outcome = RequestOutcome::Booked;
            out.booked = planned.booked;
            out.booked_nodes.clone_from(&planned.booked_nodes);
            if planned.booked < request.pods.len() {
                out.reasons.push(format!(
                    "{} of the {} booked pods found no room: a booking holds only free capacity of registered nodes, after the pending pods the scheduler will place there (it ignores bookings); it never buys nodes",
                    request.pods.len() - planned.booked,
                    request.pods.len()
                ));
            }
        }
        Stage::Plan if planned.lands => {
            out.outcome = RequestOutcome::Provisioned;
            // Upstream's message, then where: which groups and how many nodes.
            let message = if planned.placed.is_empty() {
                "Capacity is found in the cluster".to_string()
            } else {
                format!(
                    "Capacity is found in the cluster: {}",
                    planned.placed.join(", ")
                )
            };
            let reason = if planned.new_nodes {
                reason::CAPACITY_IS_PROVISIONED
            } else {
                reason::CAPACITY_IS_FOUND
            };
            out.condition = Some(Condition::new(
                condition::PROVISIONED,
                true,
                reason,
                message,
            ));
        }
        Stage::Plan => {
            out.reasons = planned.reasons.to_vec();
            // Upstream's message, then why (the planner's first reasons).
            let why = |message: &str| match planned.reasons {
                [] => message.to_string(),
                reasons => format!(
                    "{message} Why: {}",
                    reasons
                        .iter()
                        .take(3)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            };
            if expired(request, planned.now) {
                expire(&mut out);
            } else if request.no_retry {
                out.outcome = RequestOutcome::Failed;
                out.condition = Some(Condition::new(
                    condition::FAILED,
                    true,
                    reason::CAPACITY_IS_NOT_FOUND,
                    why(
                        "Capacity is not found in the cluster; the request asks not to be retried (noRetry).",
                    ),
                ));
            } else {
                out.outcome = RequestOutcome::CapacityNotFound;
                out.condition = Some(Condition::new(
                    condition::PROVISIONED,
                    false,
                    reason::CAPACITY_IS_NOT_FOUND,
                    why(if request.check_capacity() {
                        "Capacity is not found in the cluster; check-capacity never adds nodes."
                    } else {
                        "Capacity is not found, CA will try to find it later."
                    }),
                ));
            }
        }
    }
    out
}
