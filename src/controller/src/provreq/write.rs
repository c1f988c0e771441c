//! Writing what the plan means for ProvisioningRequests and CapacityBuffers:
//! each request's conditions ([`super::conditions`]) and each buffer's status
//! ([`crate::buffers`]), as merge patches of `/status` carrying the
//! resourceVersion they were computed from (a request changed since is left
//! for the next loop), and an Event on a request whose condition changes.
//!
//! Never touches a pod: `status.nominatedNodeName` is the scheduler's alone
//! (KEP-5278); stand-in pods exist only inside the planner.

use std::collections::BTreeMap;

use dra_plan::provreq::{ProvisioningRequestReport, condition, reason};
use dra_plan::report::PlanReport;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::apis;
use super::conditions::{next_conditions, settle, stamped_anew};
use crate::events::{EventSink, Notice};
use crate::notices::GroupOutcome;
use crate::snapshot::GangObject;

/// Every reason an Event about a request may carry: upstream's condition
/// reasons.
const EVENT_REASONS: &[&str] = &[
    reason::ACCEPTED,
    reason::CAPACITY_IS_FOUND,
    reason::CAPACITY_IS_PROVISIONED,
    reason::CAPACITY_IS_NOT_FOUND,
    reason::FAILED_TO_CREATE_PODS,
    reason::CAPACITY_RESERVATION_TIME_EXPIRED,
    reason::CAPACITY_BOOKING_CONSUMED,
    reason::EXPIRED,
];

/// What one loop wrote, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    /// Requests whose conditions were written, `namespace/name`.
    pub requests: Vec<String>,
    /// Buffers whose status was written, `namespace/name`.
    pub buffers: Vec<String>,
    /// Requests planned onto a scale-up that was not attempted this loop
    /// (its intent lost a race): nothing written, decided again next loop,
    /// so this loop does not count as a try for their retry backoff.
    pub unsettled: Vec<String>,
}

/// Writes the status of requests and buffers.
#[derive(Clone)]
pub struct StandInWriter {
    client: kube::Client,
}

impl std::fmt::Debug for StandInWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandInWriter").finish_non_exhaustive()
    }
}

fn key(object: &DynamicObject) -> (String, String) {
    (
        object
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        object.metadata.name.clone().unwrap_or_default(),
    )
}

fn find<'a>(
    objects: &'a [GangObject],
    kind: &str,
    namespace: &str,
    name: &str,
) -> Option<&'a GangObject> {
    objects.iter().find(|o| {
        o.kind == kind && {
            let (ns, n) = key(&o.object);
            ns == namespace && n == name
        }
    })
}

/// The conditions a request has now; a list that does not decode counts as
/// none (the write then replaces it).
fn current_conditions(object: &DynamicObject) -> Vec<Condition> {
    object
        .data
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default()
}

fn reference(object: &GangObject) -> ObjectReference {
    ObjectReference {
        api_version: Some(object.api_version.clone()),
        kind: Some(object.kind.clone()),
        namespace: object.object.metadata.namespace.clone(),
        name: object.object.metadata.name.clone(),
        uid: object.object.metadata.uid.clone(),
        resource_version: object.object.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// The Events for conditions that `next` adds or changes over `current`.
fn notices(object: &GangObject, current: &[Condition], next: &[Condition]) -> Vec<Notice> {
    next.iter()
        .filter(|c| {
            !current
                .iter()
                .any(|p| p.type_ == c.type_ && p.status == c.status && p.reason == c.reason)
        })
        .filter_map(|c| {
            let reason: &'static str = EVENT_REASONS.iter().copied().find(|r| *r == c.reason)?;
            let warning = c.type_ == condition::FAILED
                || (c.type_ == condition::PROVISIONED && c.status == "False");
            Some(Notice {
                regarding: reference(object),
                warning,
                reason,
                action: "ProvisioningRequest",
                note: format!("{}={}: {}", c.type_, c.status, c.message),
            })
        })
        .collect()
}

impl StandInWriter {
    /// Writes through `client`.
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    async fn patch_status(
        &self,
        ar: &ApiResource,
        object: &DynamicObject,
        status: Value,
    ) -> Result<(), kube::Error> {
        let (namespace, name) = key(object);
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &namespace, ar);
        let patch = json!({
            "metadata": {"resourceVersion": object.metadata.resource_version},
            "status": status,
        });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
    }

    /// Writes the conditions of every request and the status of every
    /// buffer `report` plans, given this loop's scale-up `outcomes` and the
    /// watched `objects`. Failures are logged; the next loop retries.
    pub async fn write(
        &self,
        report: &PlanReport,
        outcomes: &BTreeMap<String, GroupOutcome>,
        objects: &[GangObject],
        events: &EventSink,
        now: Timestamp,
    ) -> Written {
        let mut written = Written::default();
        for planned in &report.provisioning_requests {
            let name = planned.provisioning_request.to_string();
            match self
                .write_request(planned, report, outcomes, objects, events, now)
                .await
            {
                Some(true) => written.requests.push(name),
                Some(false) => {}
                None => written.unsettled.push(name),
            }
        }
        for planned in &report.capacity_buffers {
            let name = &planned.capacity_buffer;
            let Some(object) = find(
                objects,
                dra_plan::buffers::KIND,
                &name.namespace,
                &name.name,
            ) else {
                continue;
            };
            let generation = |kind: &str, template: &str| {
                find(objects, kind, &name.namespace, template)
                    .and_then(|t| t.object.metadata.generation)
            };
            let Some(status) = crate::buffers::next_status(
                object.object.data.get("status"),
                planned,
                generation,
                now,
            ) else {
                continue;
            };
            match self
                .patch_status(&apis::capacity_buffers(), &object.object, status)
                .await
            {
                Ok(()) => written.buffers.push(name.to_string()),
                Err(error) => {
                    tracing::warn!(%error, capacity_buffer = %name, "CapacityBuffer status not written; retrying next loop");
                }
            }
        }
        written
    }

    /// Writes one request's conditions. Returns whether they were written,
    /// or `None` when the scale-up it was planned onto was not attempted.
    async fn write_request(
        &self,
        planned: &ProvisioningRequestReport,
        report: &PlanReport,
        outcomes: &BTreeMap<String, GroupOutcome>,
        objects: &[GangObject],
        events: &EventSink,
        now: Timestamp,
    ) -> Option<bool> {
        let name = &planned.provisioning_request;
        let Some(object) = find(
            objects,
            dra_plan::provreq::KIND,
            &name.namespace,
            &name.name,
        ) else {
            return Some(false);
        };
        let settled = settle(planned, &report.scale_ups, outcomes)?;
        let current = current_conditions(&object.object);
        let Some(next) =
            next_conditions(&current, &settled, object.object.metadata.generation, now)
        else {
            return Some(false);
        };
        let Ok(conditions) = serde_json::to_value(&next) else {
            return Some(false);
        };
        match self
            .patch_status(
                &apis::provisioning_requests(),
                &object.object,
                json!({ "conditions": conditions }),
            )
            .await
        {
            Ok(()) => {
                for c in next.iter().filter(|c| !current.contains(c)) {
                    if current.iter().any(|p| stamped_anew(p, c)) {
                        tracing::debug!(
                            provisioning_request = %name,
                            condition = %c.type_,
                            status = %c.status,
                            "ProvisioningRequest retried; condition stamped anew"
                        );
                    } else {
                        tracing::info!(
                            provisioning_request = %name,
                            condition = %c.type_,
                            status = %c.status,
                            reason = %c.reason,
                            message = %c.message,
                            "ProvisioningRequest condition set"
                        );
                    }
                }
                for notice in notices(object, &current, &next) {
                    events.publish(&notice, now).await;
                }
                Some(true)
            }
            Err(error) => {
                tracing::warn!(%error, provisioning_request = %name, "ProvisioningRequest conditions not written; retrying next loop");
                Some(false)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::sync::Arc;

    fn condition(type_: &str, status: &str, reason: &str, at: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: "m".into(),
            observed_generation: Some(1),
            last_transition_time: Time(at.parse().expect("timestamp")),
        }
    }

    #[test]
    fn a_condition_stamped_anew_is_no_new_event_but_a_change_is() {
        let object = GangObject {
            api_version: "autoscaling.x-k8s.io/v1".into(),
            kind: "ProvisioningRequest".into(),
            object: Arc::new(DynamicObject::new("r", &apis::provisioning_requests()).within("ml")),
        };
        let current = [
            condition("Accepted", "True", "Accepted", "2026-12-01T10:00:00Z"),
            condition(
                "Provisioned",
                "False",
                "CapacityIsNotFound",
                "2026-12-01T10:00:00Z",
            ),
        ];
        let restamped = [
            condition("Accepted", "True", "Accepted", "2026-12-01T10:01:01Z"),
            condition(
                "Provisioned",
                "False",
                "CapacityIsNotFound",
                "2026-12-01T10:01:01Z",
            ),
        ];
        assert!(notices(&object, &current, &restamped).is_empty());
        let provisioned = [
            restamped[0].clone(),
            condition(
                "Provisioned",
                "True",
                "CapacityIsProvisioned",
                "2026-12-01T10:01:01Z",
            ),
        ];
        let sent = notices(&object, &current, &provisioned);
        assert_eq!(
            sent.iter()
                .map(|n| (n.reason, n.warning))
                .collect::<Vec<_>>(),
            [("CapacityIsProvisioned", false)]
        );
    }
}
