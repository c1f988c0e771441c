//! A request's next `status.conditions`, as cluster-autoscaler's
//! `AddOrUpdateCondition` writes them: a request the autoscaler serves is
//! first `Accepted` (unless its pods cannot be made: then only `Failed`); the
//! condition the plan calls for then replaces the one
//! of the same type (or is appended), stamped with the request's generation
//! and the current time. Other conditions are kept as they are. When nothing
//! would change, nothing is written, so a `Provisioned=True` keeps the time
//! it turned true, from which its booking's expiry counts; but a retry after
//! `Provisioned=False` stamps that condition anew, as upstream does on every
//! try, since the next retry backoff counts from it. A request waiting out
//! its backoff gets nothing.

use dra_plan::gang::GangRef;
use dra_plan::provreq::{Condition as PlannedCondition, ProvisioningRequestReport, RequestOutcome};
use dra_plan::provreq::{condition, reason};
use dra_plan::report::ScaleUp;
use std::collections::BTreeMap;

use crate::notices::GroupOutcome;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// Upstream's message for `Accepted=True`.
pub const ACCEPTED_MESSAGE: &str = "ProvisioningRequest is accepted by ClusterAutoscaler";

fn same(current: &Condition, planned: &PlannedCondition) -> bool {
    current.status == planned.status
        && current.reason == planned.reason
        && current.message == planned.message
}

/// Whether `after` is `before` stamped anew by a retry: the same type,
/// status, reason and message.
#[must_use]
pub fn stamped_anew(before: &Condition, after: &Condition) -> bool {
    before.type_ == after.type_
        && before.status == after.status
        && before.reason == after.reason
        && before.message == after.message
}

/// Sets `planned` in `conditions`; `restamp` rewrites it with `now` even when
/// it is the same (a retry, which upstream stamps anew, and from which the
/// next backoff counts). Returns whether anything changed.
fn add_or_update(
    conditions: &mut Vec<Condition>,
    planned: &PlannedCondition,
    generation: Option<i64>,
    now: Timestamp,
    restamp: bool,
) -> bool {
    let new = Condition {
        type_: planned.type_.clone(),
        status: planned.status.clone(),
        reason: planned.reason.clone(),
        message: planned.message.clone(),
        observed_generation: generation,
        last_transition_time: Time(now),
    };
    match conditions.iter_mut().find(|c| c.type_ == planned.type_) {
        Some(existing) if same(existing, planned) && !restamp => false,
        Some(existing) => {
            *existing = new;
            true
        }
        None => {
            conditions.push(new);
            true
        }
    }
}

/// The conditions to write for the request `report` describes, given its
/// `current` ones and `metadata.generation`; `None` when they stay as
/// they are (and for requests this autoscaler does not serve or that are
/// finished).
#[must_use]
pub fn next_conditions(
    current: &[Condition],
    report: &ProvisioningRequestReport,
    generation: Option<i64>,
    now: Timestamp,
) -> Option<Vec<Condition>> {
    if matches!(
        report.outcome,
        RequestOutcome::NotHandled | RequestOutcome::Finished | RequestOutcome::RetryLater
    ) {
        return None;
    }
    let mut conditions = current.to_vec();
    let mut changed = false;
    // Upstream marks a request whose pods cannot be made Failed without
    // accepting it, and accepts one again at every try (AddOrUpdateCondition
    // stamps it anew).
    if report.outcome != RequestOutcome::Invalid
        && (report.retried || !conditions.iter().any(|c| c.type_ == condition::ACCEPTED))
    {
        let accepted = PlannedCondition {
            type_: condition::ACCEPTED.to_string(),
            status: "True".to_string(),
            reason: reason::ACCEPTED.to_string(),
            message: ACCEPTED_MESSAGE.to_string(),
        };
        changed |= add_or_update(&mut conditions, &accepted, generation, now, report.retried);
    }
    if let Some(planned) = &report.condition {
        changed |= add_or_update(&mut conditions, planned, generation, now, report.retried);
    }
    changed.then_some(conditions)
}

/// Upstream's message for `Provisioned=False` (`CapacityIsNotFound`) after a
/// scale-up that did not happen.
pub const NOT_FOUND_MESSAGE: &str = "Capacity is not found, CA will try to find it later.";

/// The report as this loop's scale-ups leave it: `Provisioned=True`
/// (`CapacityIsProvisioned`) only once every group the request's nodes come
/// from took its scale-up, as cluster-autoscaler sets it after a successful
/// scale-up; `Provisioned=False` (`CapacityIsNotFound`, retried) when one
/// failed. `None`: a scale-up for it was not attempted this loop (its intent
/// lost a race), so nothing is written until the next loop decides.
#[must_use]
pub fn settle(
    report: &ProvisioningRequestReport,
    scale_ups: &[ScaleUp],
    outcomes: &BTreeMap<String, GroupOutcome>,
) -> Option<ProvisioningRequestReport> {
    let provisioning = report
        .condition
        .as_ref()
        .is_some_and(|c| c.reason == reason::CAPACITY_IS_PROVISIONED);
    if !provisioning {
        return Some(report.clone());
    }
    let gang = GangRef::object(report.provisioning_request.clone());
    let mut failed = Vec::new();
    for scale_up in scale_ups.iter().filter(|s| s.pod_groups.contains(&gang)) {
        match outcomes.get(&scale_up.node_group) {
            None => return None,
            Some(GroupOutcome::Failed(why)) => {
                failed.push(format!("{}: {why}", scale_up.node_group))
            }
            Some(GroupOutcome::Started { .. }) => {}
        }
    }
    let mut settled = report.clone();
    if !failed.is_empty() {
        settled.outcome = RequestOutcome::CapacityNotFound;
        settled.condition = Some(PlannedCondition {
            type_: condition::PROVISIONED.to_string(),
            status: "False".to_string(),
            reason: reason::CAPACITY_IS_NOT_FOUND.to_string(),
            message: format!("{NOT_FOUND_MESSAGE} Scale-up failed: {}", failed.join("; ")),
        });
        settled.reasons = failed;
    }
    Some(settled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_sim::ObjectRef;

    fn report(
        outcome: RequestOutcome,
        condition: Option<(&str, &str, &str)>,
    ) -> ProvisioningRequestReport {
        ProvisioningRequestReport {
            provisioning_request: ObjectRef::new("ml", "r"),
            provisioning_class: dra_plan::provreq::BEST_EFFORT_ATOMIC_CLASS.into(),
            outcome,
            pod_count: 2,
            booked: 0,
            booked_nodes: Vec::new(),
            pods: Vec::new(),
            condition: condition.map(|(t, s, r)| PlannedCondition {
                type_: t.into(),
                status: s.into(),
                reason: r.into(),
                message: "m".into(),
            }),
            reasons: Vec::new(),
            uid: String::new(),
            retried: false,
            retry_at: None,
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn a_new_request_is_accepted_and_gets_the_planned_condition() {
        let r = report(
            RequestOutcome::CapacityNotFound,
            Some(("Provisioned", "False", "CapacityIsNotFound")),
        );
        let next = next_conditions(&[], &r, Some(1), at("2026-12-01T10:00:00Z")).expect("written");
        let summary: Vec<_> = next
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("Accepted", "True", "Accepted"),
                ("Provisioned", "False", "CapacityIsNotFound")
            ]
        );
        assert!(next.iter().all(|c| c.observed_generation == Some(1)));
        assert_eq!(next[0].message, ACCEPTED_MESSAGE);
    }

    #[test]
    fn nothing_is_written_when_nothing_changes() {
        let r = report(
            RequestOutcome::CapacityNotFound,
            Some(("Provisioned", "False", "CapacityIsNotFound")),
        );
        let first = next_conditions(&[], &r, Some(1), at("2026-12-01T10:00:00Z")).expect("written");
        assert_eq!(
            next_conditions(&first, &r, Some(1), at("2026-12-01T10:05:00Z")),
            None
        );
    }

    #[test]
    fn a_retry_stamps_provisioned_false_anew_and_a_waiting_request_gets_nothing() {
        let mut r = report(
            RequestOutcome::CapacityNotFound,
            Some(("Provisioned", "False", "CapacityIsNotFound")),
        );
        let first = next_conditions(&[], &r, Some(1), at("2026-12-01T10:00:00Z")).expect("written");
        r.retried = true;
        let retry = at("2026-12-01T10:01:01Z");
        let next = next_conditions(&first, &r, Some(1), retry).expect("stamped anew");
        assert_eq!(next[0].last_transition_time.0, retry, "accepted again");
        assert_eq!(next[1].last_transition_time.0, retry);
        assert_eq!(
            (next[1].status.as_str(), next[1].reason.as_str()),
            ("False", "CapacityIsNotFound")
        );
        let waiting = report(RequestOutcome::RetryLater, None);
        assert_eq!(next_conditions(&first, &waiting, Some(1), retry), None);
    }

    #[test]
    fn a_change_replaces_the_condition_of_its_type_and_stamps_the_time() {
        let r = report(
            RequestOutcome::CapacityNotFound,
            Some(("Provisioned", "False", "CapacityIsNotFound")),
        );
        let first = next_conditions(&[], &r, Some(1), at("2026-12-01T10:00:00Z")).expect("written");
        let r = report(
            RequestOutcome::Provisioned,
            Some(("Provisioned", "True", "CapacityIsProvisioned")),
        );
        let later = at("2026-12-01T10:07:00Z");
        let next = next_conditions(&first, &r, Some(1), later).expect("written");
        assert_eq!(next.len(), 2);
        assert_eq!(next[0], first[0], "Accepted is kept as it was");
        assert_eq!(
            (next[1].status.as_str(), next[1].reason.as_str()),
            ("True", "CapacityIsProvisioned")
        );
        assert_eq!(next[1].last_transition_time, Time(later));
    }

    #[test]
    fn booked_requests_keep_their_provisioned_time_and_unserved_ones_are_left_alone() {
        let provisioned = Condition {
            type_: "Provisioned".into(),
            status: "True".into(),
            reason: "CapacityIsFound".into(),
            message: "m".into(),
            observed_generation: Some(1),
            last_transition_time: Time(at("2026-12-01T10:00:00Z")),
        };
        let accepted = Condition {
            type_: "Accepted".into(),
            status: "True".into(),
            reason: "Accepted".into(),
            message: ACCEPTED_MESSAGE.into(),
            ..provisioned.clone()
        };
        let current = [accepted, provisioned];
        let booked = report(RequestOutcome::Booked, None);
        assert_eq!(
            next_conditions(&current, &booked, Some(1), at("2026-12-01T10:05:00Z")),
            None
        );
        let expired = report(
            RequestOutcome::BookingExpired,
            Some(("BookingExpired", "True", "CapacityReservationTimeExpired")),
        );
        let next = next_conditions(&current, &expired, Some(1), at("2026-12-01T10:11:00Z"))
            .expect("written");
        assert_eq!(next.len(), 3);
        assert_eq!(next[1], current[1], "Provisioned keeps its time");
        assert_eq!(next[2].type_, "BookingExpired");
        let invalid = report(
            RequestOutcome::Invalid,
            Some(("Failed", "True", "FailedToCreatePods")),
        );
        let next =
            next_conditions(&[], &invalid, Some(1), at("2026-12-01T10:00:00Z")).expect("written");
        assert_eq!(
            next.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(),
            ["Failed"],
            "not accepted"
        );
        for outcome in [RequestOutcome::NotHandled, RequestOutcome::Finished] {
            assert_eq!(
                next_conditions(
                    &[],
                    &report(outcome, None),
                    Some(1),
                    at("2026-12-01T10:00:00Z")
                ),
                None
            );
        }
    }

    fn scale_up(group: &str, request: &str) -> ScaleUp {
        serde_json::from_value(serde_json::json!({
            "nodeGroup": group, "count": 1, "minCount": 1, "capacityType": "on-demand",
            "pricePerHour": 1.0, "podGroups": [request]
        }))
        .expect("scale-up")
    }

    #[test]
    fn provisioned_only_once_every_scale_up_for_it_started() {
        let planned = report(
            RequestOutcome::Provisioned,
            Some(("Provisioned", "True", "CapacityIsProvisioned")),
        );
        let ups = [
            scale_up("a", "ml/r"),
            scale_up("b", "ml/r"),
            scale_up("c", "ml/other"),
        ];
        let started = GroupOutcome::Started {
            from: 0,
            to: 1,
            max: 4,
            capacity_type: dra_api::CapacityType::OnDemand,
        };
        let mut outcomes: BTreeMap<String, GroupOutcome> =
            [("a".to_string(), started.clone())].into();
        assert_eq!(
            settle(&planned, &ups, &outcomes),
            None,
            "b not attempted yet"
        );
        outcomes.insert("b".into(), started);
        assert_eq!(settle(&planned, &ups, &outcomes), Some(planned.clone()));
        outcomes.insert("b".into(), GroupOutcome::Failed("quota exceeded".into()));
        let settled = settle(&planned, &ups, &outcomes).expect("settled");
        let c = settled.condition.expect("condition");
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            ("Provisioned", "False", "CapacityIsNotFound")
        );
        assert!(c.message.starts_with(NOT_FOUND_MESSAGE), "{}", c.message);
        assert!(c.message.contains("b: quota exceeded"), "{}", c.message);
        // Other outcomes pass through unchanged.
        let found = report(
            RequestOutcome::Provisioned,
            Some(("Provisioned", "True", "CapacityIsFound")),
        );
        assert_eq!(settle(&found, &ups, &BTreeMap::new()), Some(found.clone()));
    }
}
