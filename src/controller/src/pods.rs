//! Which pending pods the autoscaler acts for.
//!
//! cluster-autoscaler only scales for pods the scheduler has already tried and
//! given up on (`PodScheduled=False`, reason `Unschedulable`), and leaves out
//! pods that are too new (the scheduler may still place them), pods nominated
//! for a node by preemption (they will run there once victims leave) and pods
//! whose priority is below the expendable cutoff. We follow the same rules, and
//! keep gang members and gated pods the scheduler holds back as a group, since
//! the planner needs every member to decide whether the gang can start.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;

/// The scheduler's reason on `PodScheduled=False` when no node fits.
pub const REASON_UNSCHEDULABLE: &str = "Unschedulable";

/// The rules for leaving pending pods out, with the time they are judged at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingPolicy {
    /// The time of this loop.
    pub now: Timestamp,
    /// Pods younger than this are left to the scheduler.
    pub new_pod_delay: SignedDuration,
    /// Pods with a priority below this never trigger a scale-up.
    pub expendable_cutoff: i32,
}

/// Why a pending pod is left out of planning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Skip {
    /// Created less than the new-pod delay ago.
    TooYoung,
    /// `status.nominatedNodeName` is set: preemption made room for it.
    Nominated,
    /// Priority below the expendable cutoff.
    Expendable,
    /// The scheduler has not marked it unschedulable (yet), and it is not in a gang.
    NotUnschedulable,
    /// Being deleted.
    Terminating,
}

impl Skip {
    /// A short label for logs and metrics.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::TooYoung => "too_young",
            Self::Nominated => "nominated",
            Self::Expendable => "expendable",
            Self::NotUnschedulable => "not_unschedulable",
            Self::Terminating => "terminating",
        }
    }
}

pub use dra_sim::pods::is_pending;

/// The reason of `PodScheduled=False`, if the condition says so.
#[must_use]
pub fn not_scheduled_reason(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .map(|c| c.reason.as_deref().unwrap_or(""))
}

/// `PodScheduled=False` with reason `Unschedulable`: the scheduler tried and
/// found no node.
#[must_use]
pub fn is_unschedulable(pod: &Pod) -> bool {
    not_scheduled_reason(pod) == Some(REASON_UNSCHEDULABLE)
}

/// Whether the pod belongs to a gang under any API the planner reads,
/// including the 1.35 `spec.workloadRef` (`workload_ref`, kept from the
/// untyped pod since later Pod types lack the field). Upstream links count
/// whatever the gates: the planner decides whether they make a gang.
#[must_use]
pub fn is_gang_member(pod: &Pod, workload_ref: Option<&Value>) -> bool {
    dra_sim::pods::gang_link(pod, workload_ref, true).is_some()
}

/// `status.nominatedNodeName`, when set.
#[must_use]
pub fn nominated_node(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .nominated_node_name
        .as_deref()
        .filter(|n| !n.is_empty())
}

/// Resolves pod priorities the way the Priority admission plugin does:
/// `spec.priority` when set, else the named PriorityClass, else the global
/// default class, else 0.
#[derive(Debug, Clone, Default)]
pub struct Priorities {
    by_name: BTreeMap<String, i32>,
    global_default: Option<i32>,
}

impl Priorities {
    /// Indexes the cluster's PriorityClasses.
    pub fn new<'a>(classes: impl IntoIterator<Item = &'a PriorityClass>) -> Self {
        let mut out = Self::default();
        for class in classes {
            let value = class.value.unwrap_or(0);
            if let Some(name) = &class.metadata.name {
                out.by_name.insert(name.clone(), value);
            }
            if class.global_default == Some(true) {
                // Upstream allows one global default; with several, the
                // highest is the conservative pick for the cutoff.
                out.global_default = Some(out.global_default.map_or(value, |v| v.max(value)));
            }
        }
        out
    }

    /// The pod's effective priority.
    #[must_use]
    pub fn of(&self, pod: &Pod) -> i32 {
        let spec = pod.spec.as_ref();
        if let Some(p) = spec.and_then(|s| s.priority) {
            return p;
        }
        spec.and_then(|s| s.priority_class_name.as_deref())
            .and_then(|n| self.by_name.get(n).copied())
            .or(self.global_default)
            .unwrap_or(0)
    }
}

/// Decides whether a pending pod is planned for; `None` means it is.
/// `workload_ref` is the pod's 1.35 `spec.workloadRef`, if it has one.
#[must_use]
pub fn classify(
    pod: &Pod,
    workload_ref: Option<&Value>,
    policy: &PendingPolicy,
    priorities: &Priorities,
) -> Option<Skip> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Some(Skip::Terminating);
    }
    if nominated_node(pod).is_some() {
        return Some(Skip::Nominated);
    }
    if priorities.of(pod) < policy.expendable_cutoff {
        return Some(Skip::Expendable);
    }
    if let Some(created) = pod.metadata.creation_timestamp.as_ref() {
        let ready_at = created
            .0
            .checked_add(policy.new_pod_delay)
            .unwrap_or(Timestamp::MAX);
        if ready_at > policy.now {
            return Some(Skip::TooYoung);
        }
    }
    // Gang members count even before the scheduler marks them (upstream gang
    // scheduling holds members back until the whole group exists): the planner
    // decides for the gang as a whole.
    if is_unschedulable(pod) || is_gang_member(pod, workload_ref) {
        return None;
    }
    Some(Skip::NotUnschedulable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_sim::pods::COSCHEDULING_LABEL;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn now() -> Timestamp {
        "2026-11-29T12:00:00Z".parse().unwrap()
    }

    fn policy() -> PendingPolicy {
        PendingPolicy {
            now: now(),
            new_pod_delay: SignedDuration::from_secs(10),
            expendable_cutoff: -10,
        }
    }

    fn pod(age_secs: i64, reason: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("default".into()),
                creation_timestamp: Some(Time(now() - SignedDuration::from_secs(age_secs))),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            status: Some(PodStatus {
                phase: Some("Pending".into()),
                conditions: reason.map(|r| {
                    vec![PodCondition {
                        type_: "PodScheduled".into(),
                        status: "False".into(),
                        reason: Some(r.into()),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn unschedulable_old_enough_pod_is_planned_for() {
        let p = pod(60, Some(REASON_UNSCHEDULABLE));
        assert_eq!(classify(&p, None, &policy(), &Priorities::default()), None);
    }

    #[test]
    fn pod_younger_than_the_delay_waits() {
        let p = pod(5, Some(REASON_UNSCHEDULABLE));
        assert_eq!(
            classify(&p, None, &policy(), &Priorities::default()),
            Some(Skip::TooYoung)
        );
    }

    #[test]
    fn pod_the_scheduler_has_not_tried_is_left_to_it() {
        let p = pod(60, None);
        assert_eq!(
            classify(&p, None, &policy(), &Priorities::default()),
            Some(Skip::NotUnschedulable)
        );
    }

    #[test]
    fn gang_member_counts_before_the_scheduler_marks_it() {
        let mut p = pod(60, None);
        p.metadata.labels = Some([(COSCHEDULING_LABEL.to_string(), "g".to_string())].into());
        assert_eq!(classify(&p, None, &policy(), &Priorities::default()), None);
    }

    #[test]
    fn a_1_35_workload_ref_makes_a_gang_member_as_the_planner_reads_it() {
        let p = pod(60, None);
        let reference = serde_json::json!({"name": "trainer", "podGroup": "workers"});
        assert_eq!(
            classify(&p, None, &policy(), &Priorities::default()),
            Some(Skip::NotUnschedulable)
        );
        assert_eq!(
            classify(&p, Some(&reference), &policy(), &Priorities::default()),
            None,
            "held back by gang scheduling, planned for as a gang member"
        );
    }

    #[test]
    fn nominated_pod_is_skipped() {
        let mut p = pod(60, Some(REASON_UNSCHEDULABLE));
        if let Some(s) = p.status.as_mut() {
            s.nominated_node_name = Some("n1".into());
        }
        assert_eq!(
            classify(&p, None, &policy(), &Priorities::default()),
            Some(Skip::Nominated)
        );
    }

    #[test]
    fn expendable_pod_by_class_is_skipped_and_spec_priority_wins() {
        let classes = [
            PriorityClass {
                metadata: ObjectMeta {
                    name: Some("low".into()),
                    ..Default::default()
                },
                value: Some(-100),
                ..Default::default()
            },
            PriorityClass {
                metadata: ObjectMeta {
                    name: Some("default".into()),
                    ..Default::default()
                },
                value: Some(5),
                global_default: Some(true),
                ..Default::default()
            },
        ];
        let priorities = Priorities::new(&classes);
        let mut p = pod(60, Some(REASON_UNSCHEDULABLE));
        assert_eq!(
            priorities.of(&p),
            5,
            "global default applies without a class"
        );
        if let Some(s) = p.spec.as_mut() {
            s.priority_class_name = Some("low".into());
        }
        assert_eq!(
            classify(&p, None, &policy(), &priorities),
            Some(Skip::Expendable)
        );
        if let Some(s) = p.spec.as_mut() {
            s.priority = Some(0);
        }
        assert_eq!(classify(&p, None, &policy(), &priorities), None);
    }
}
