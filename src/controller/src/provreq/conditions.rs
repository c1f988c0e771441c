//! A request's next `status.conditions`, as cluster-autoscaler's
//! `AddOrUpdateCondition` writes them: a request the autoscaler serves is
//! first `Accepted`; the condition the plan calls for then replaces the one
//! of the same type (or is appended), stamped with the request's generation
//! and the current time. Other conditions are kept as they are. When nothing
//! would change, nothing is written, so a `Provisioned=True` keeps the time
//! it turned true, from which its booking's expiry counts.

use dra_plan::provreq::{Condition as PlannedCondition, ProvisioningRequestReport, RequestOutcome};
use dra_plan::provreq::{condition, reason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// Upstream's message for `Accepted=True`.
pub const ACCEPTED_MESSAGE: &str = "ProvisioningRequest is accepted by ClusterAutoscaler";

fn same(current: &Condition, planned: &PlannedCondition) -> bool {
    current.status == planned.status
        && current.reason == planned.reason
        && current.message == planned.message
}

fn add_or_update(
    conditions: &mut Vec<Condition>,
    planned: &PlannedCondition,
    generation: Option<i64>,
    now: Timestamp,
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
        Some(existing) if same(existing, planned) => false,
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
        RequestOutcome::NotHandled | RequestOutcome::Finished
    ) {
        return None;
    }
    let mut conditions = current.to_vec();
    let mut changed = false;
    if !conditions.iter().any(|c| c.type_ == condition::ACCEPTED) {
        let accepted = PlannedCondition {
            type_: condition::ACCEPTED.to_string(),
            status: "True".to_string(),
            reason: reason::ACCEPTED.to_string(),
            message: ACCEPTED_MESSAGE.to_string(),
        };
        changed |= add_or_update(&mut conditions, &accepted, generation, now);
    }
    if let Some(planned) = &report.condition {
        changed |= add_or_update(&mut conditions, planned, generation, now);
    }
    changed.then_some(conditions)
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
            pods: Vec::new(),
            condition: condition.map(|(t, s, r)| PlannedCondition {
                type_: t.into(),
                status: s.into(),
                reason: r.into(),
                message: "m".into(),
            }),
            reasons: Vec::new(),
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
}
