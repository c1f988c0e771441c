//! What to tell whom after a loop: the plan and the scale-up outcomes turned
//! into Events on pods and PodGroups. Pure; the caller publishes them.

use std::collections::BTreeMap;

use dra_api::CapacityType;
use dra_plan::gang::{GangApi, GangRef};
use dra_plan::report::{GangOutcome, PlanReport};
use dra_sim::ObjectRef;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Resource;

use crate::events::{NOT_TRIGGER_SCALE_UP, Notice, TRIGGERED_SCALE_UP};
use crate::snapshot::GangObject;

/// How the scale-up of one group ended in this loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupOutcome {
    /// The provider started nodes: `from → to` of `max`, bought as `capacity_type`.
    Started {
        /// Size before.
        from: usize,
        /// Size after.
        to: usize,
        /// `spec.maxSize`.
        max: usize,
        /// How the nodes are bought.
        capacity_type: CapacityType,
    },
    /// The provider failed, or the request was not sent; the message says why.
    Failed(String),
}

/// References to the objects events are attached to.
#[derive(Debug, Clone, Default)]
pub struct Refs {
    pods: BTreeMap<ObjectRef, ObjectReference>,
    /// By (API group, kind) and the object.
    gangs: BTreeMap<((String, String), ObjectRef), ObjectReference>,
}

impl Refs {
    /// Indexes pods and gang objects.
    pub fn new<'a>(pods: impl IntoIterator<Item = &'a Pod>, gangs: &[GangObject]) -> Self {
        let mut refs = Self::default();
        for pod in pods {
            refs.pods
                .insert(ObjectRef::namespaced(&pod.metadata), pod.object_ref(&()));
        }
        for gang in gangs {
            let group = dra_sim::api_version::ApiGroupVersion::parse(&gang.api_version).group();
            let meta = &gang.object.metadata;
            let reference = ObjectReference {
                api_version: Some(gang.api_version.clone()),
                kind: Some(gang.kind.clone()),
                name: meta.name.clone(),
                namespace: meta.namespace.clone(),
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone(),
                field_path: None,
            };
            refs.gangs.insert(
                (
                    (group.to_string(), gang.kind.clone()),
                    ObjectRef::namespaced(meta),
                ),
                reference,
            );
        }
        refs
    }

    /// Indexes, of `pods`, the pending members of `report`'s pod groups (the only pods its
    /// notices are about), and the gang objects. Indexing every pod of a 100,000-pod
    /// cluster for a plan's few hundred Events took a fifth of a burst loop's time (issue
    /// #28).
    pub fn for_report<'a>(
        report: &PlanReport,
        pods: impl IntoIterator<Item = &'a Pod>,
        gangs: &[GangObject],
    ) -> Self {
        // Every pod of the cluster is looked up: foldhash, not SipHash, seeded per process
        // (pod names are chosen by whoever creates the pods).
        let members: std::collections::HashSet<(&str, &str), foldhash::fast::RandomState> = report
            .pod_groups
            .iter()
            .flat_map(|g| &g.members)
            .map(|m| (m.namespace.as_str(), m.name.as_str()))
            .collect();
        let named = |pod: &&Pod| {
            let meta = &pod.metadata;
            members.contains(&(
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default(),
            ))
        };
        Self::new(pods.into_iter().filter(named), gangs)
    }

    /// The object that defines a gang of `api` (for a 1.35 Workload gang,
    /// the Workload), if the cluster has it.
    fn gang(&self, api: GangApi, gang: &GangRef) -> Option<&ObjectReference> {
        api.object_kinds().iter().find_map(|&(group, kind)| {
            self.gangs
                .get(&((group.to_string(), kind.to_string()), gang.object.clone()))
        })
    }
}

/// Events for every pending gang of the plan: `TriggeredScaleUp` when a group
/// started nodes for it, `NotTriggerScaleUp` when it waits or its scale-up
/// failed; nothing when it fits on existing or upcoming capacity.
/// `held_back` explains groups left out of planning (backoff).
#[must_use]
pub fn for_plan(
    report: &PlanReport,
    outcomes: &BTreeMap<String, GroupOutcome>,
    held_back: &[String],
    refs: &Refs,
) -> Vec<Notice> {
    let mut notices = Vec::new();
    for gang in &report.pod_groups {
        let groups: Vec<&str> = report
            .scale_ups
            .iter()
            .filter(|s| s.pod_groups.contains(&gang.pod_group))
            .map(|s| s.node_group.as_str())
            .collect();
        let (warning, reason, note) = match gang.outcome {
            GangOutcome::Lands if groups.is_empty() => continue,
            // A scale-up not attempted this loop (its status write lost a
            // race) is retried next loop; say nothing until then.
            GangOutcome::Lands if groups.iter().any(|g| !outcomes.contains_key(*g)) => continue,
            GangOutcome::Lands => {
                let failed: Vec<String> = groups
                    .iter()
                    .filter_map(|g| match outcomes.get(*g) {
                        Some(GroupOutcome::Failed(why)) => Some(format!("{g}: {why}")),
                        Some(GroupOutcome::Started { .. }) | None => None,
                    })
                    .collect();
                if failed.is_empty() {
                    let parts: Vec<String> = groups
                        .iter()
                        .filter_map(|g| match outcomes.get(*g) {
                            Some(GroupOutcome::Started {
                                from,
                                to,
                                max,
                                capacity_type,
                            }) => Some(format!(
                                "{{{g} {from}->{to} (max: {max}), {capacity_type}}}"
                            )),
                            _ => None,
                        })
                        .collect();
                    (
                        false,
                        TRIGGERED_SCALE_UP,
                        format!("pod triggered scale-up: [{}]", parts.join(" ")),
                    )
                } else {
                    (
                        true,
                        NOT_TRIGGER_SCALE_UP,
                        format!(
                            "pod didn't trigger scale-up: scale-up failed: {}",
                            failed.join("; ")
                        ),
                    )
                }
            }
            GangOutcome::Waits => {
                let mut reasons = gang.reasons.clone();
                reasons.extend(held_back.iter().cloned());
                if reasons.is_empty() {
                    reasons.push("no node group can run it".into());
                }
                (
                    false,
                    NOT_TRIGGER_SCALE_UP,
                    format!("pod didn't trigger scale-up: {}", reasons.join("; ")),
                )
            }
        };
        let action = if reason == TRIGGERED_SCALE_UP {
            "ScaleUp"
        } else {
            "Plan"
        };
        let mut targets: Vec<&ObjectReference> = gang
            .members
            .iter()
            .filter_map(|m| refs.pods.get(m))
            .collect();
        if let Some(r) = refs.gang(gang.api, &gang.pod_group) {
            targets.push(r);
        }
        for regarding in targets {
            notices.push(Notice {
                regarding: regarding.clone(),
                warning,
                reason,
                action,
                note: note.clone(),
            });
        }
    }
    notices
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dra_plan::report::{PodGroupReport, ScaleUp};
    use kube::api::DynamicObject;

    use super::*;
    use crate::test_support::pending_pod;

    fn gang_report(outcome: GangOutcome, reasons: &[&str]) -> PodGroupReport {
        PodGroupReport {
            pod_group: "default/train".parse().unwrap(),
            api: GangApi::Coscheduling,
            outcome,
            min_count: 2,
            members: vec![
                ObjectRef::new("default", "a"),
                ObjectRef::new("default", "b"),
            ],
            reasons: reasons.iter().map(|r| (*r).to_string()).collect(),
        }
    }

    fn refs() -> Refs {
        let pods = [pending_pod("a", "1", 60), pending_pod("b", "1", 60)];
        let group: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "default", "uid": "pg-uid"}
        }))
        .unwrap();
        Refs::new(
            pods.iter(),
            &[GangObject {
                api_version: "scheduling.x-k8s.io/v1alpha1".into(),
                kind: "PodGroup".into(),
                object: Arc::new(group),
            }],
        )
    }

    fn scale_up() -> ScaleUp {
        ScaleUp {
            node_group: "gpu".into(),
            count: 2,
            pod_groups: vec!["default/train".parse().unwrap()],
            capacity_type: CapacityType::OnDemand,
            price_per_hour: 2.0,
            min_count: 2,
            why: Vec::new(),
        }
    }

    #[test]
    fn started_gang_gets_triggered_on_every_member_and_its_pod_group() {
        let report = PlanReport {
            scale_ups: vec![scale_up()],
            pod_groups: vec![gang_report(GangOutcome::Lands, &[])],
            ..Default::default()
        };
        let outcomes = [(
            "gpu".to_string(),
            GroupOutcome::Started {
                from: 0,
                to: 2,
                max: 8,
                capacity_type: CapacityType::OnDemand,
            },
        )]
        .into();
        let notices = for_plan(&report, &outcomes, &[], &refs());
        let targets: Vec<_> = notices
            .iter()
            .map(|n| {
                (
                    n.regarding.kind.clone().unwrap(),
                    n.regarding.name.clone().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            targets,
            vec![
                ("Pod".into(), "a".into()),
                ("Pod".into(), "b".into()),
                ("PodGroup".into(), "train".into())
            ]
        );
        assert!(
            notices
                .iter()
                .all(|n| n.reason == TRIGGERED_SCALE_UP && !n.warning)
        );
        assert_eq!(
            notices[0].note,
            "pod triggered scale-up: [{gpu 0->2 (max: 8), on-demand}]"
        );
    }

    #[test]
    fn refs_for_a_report_hold_its_members_and_tell_the_same_as_refs_of_every_pod() {
        let report = PlanReport {
            pod_groups: vec![gang_report(GangOutcome::Waits, &["cpu: max size reached"])],
            ..Default::default()
        };
        // "c" is a running pod of the cluster, "a" in another namespace is not a member.
        let mut elsewhere = pending_pod("a", "1", 60);
        elsewhere.metadata.namespace = Some("other".into());
        let pods = [
            pending_pod("a", "1", 60),
            pending_pod("b", "1", 60),
            pending_pod("c", "1", 60),
            elsewhere,
        ];
        let indexed = Refs::for_report(&report, pods.iter(), &[]);
        let names: Vec<&ObjectRef> = indexed.pods.keys().collect();
        assert_eq!(
            names,
            [
                &ObjectRef::new("default", "a"),
                &ObjectRef::new("default", "b")
            ]
        );
        let every = Refs::new(pods.iter(), &[]);
        let told = |refs: &Refs| {
            for_plan(&report, &BTreeMap::new(), &[], refs)
                .into_iter()
                .map(|n| (n.regarding.namespace, n.regarding.name, n.note))
                .collect::<Vec<_>>()
        };
        assert_eq!(told(&indexed), told(&every));
        assert_eq!(told(&indexed).len(), 2, "one Event per member");
    }

    #[test]
    fn waiting_gang_gets_the_planner_reasons_and_backoff() {
        let report = PlanReport {
            pod_groups: vec![gang_report(GangOutcome::Waits, &["cpu: max size reached"])],
            ..Default::default()
        };
        let held = ["gpu: backing off until 2026-11-29T12:05:00Z (OutOfCapacity)".to_string()];
        let notices = for_plan(&report, &BTreeMap::new(), &held, &refs());
        assert_eq!(notices.len(), 3);
        assert_eq!(notices[2].reason, NOT_TRIGGER_SCALE_UP);
        assert_eq!(
            notices[2].note,
            "pod didn't trigger scale-up: cpu: max size reached; gpu: backing off until 2026-11-29T12:05:00Z (OutOfCapacity)"
        );
    }

    #[test]
    fn a_workload_pod_group_gang_is_told_on_its_workload() {
        // A 1.35 Workload gang is one pod group of the Workload; the Event
        // goes to the Workload object, found from the typed gang reference.
        let workload: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
            "metadata": {"name": "trainer", "namespace": "default", "uid": "wl-uid"}
        }))
        .unwrap();
        let pods = [pending_pod("a", "1", 60), pending_pod("b", "1", 60)];
        let refs = Refs::new(
            pods.iter(),
            &[GangObject {
                api_version: "scheduling.k8s.io/v1alpha1".into(),
                kind: "Workload".into(),
                object: Arc::new(workload),
            }],
        );
        let mut gang = gang_report(GangOutcome::Waits, &["no room"]);
        gang.api = GangApi::Workload;
        gang.pod_group = GangRef {
            object: ObjectRef::new("default", "trainer"),
            pod_group: Some("workers".into()),
            replica_key: None,
        };
        let report = PlanReport {
            pod_groups: vec![gang],
            ..Default::default()
        };
        let notices = for_plan(&report, &BTreeMap::new(), &[], &refs);
        let targets: Vec<_> = notices
            .iter()
            .map(|n| {
                (
                    n.regarding.kind.clone().unwrap(),
                    n.regarding.name.clone().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            targets,
            vec![
                ("Pod".into(), "a".into()),
                ("Pod".into(), "b".into()),
                ("Workload".into(), "trainer".into())
            ]
        );
    }

    #[test]
    fn failed_scale_up_is_a_warning_and_fitting_gangs_get_nothing() {
        let mut fits = gang_report(GangOutcome::Lands, &[]);
        fits.pod_group = "default/other".parse().unwrap();
        let report = PlanReport {
            scale_ups: vec![scale_up()],
            pod_groups: vec![gang_report(GangOutcome::Lands, &[]), fits],
            ..Default::default()
        };
        let outcomes = [(
            "gpu".to_string(),
            GroupOutcome::Failed("out of capacity".into()),
        )]
        .into();
        let notices = for_plan(&report, &outcomes, &[], &refs());
        assert_eq!(
            notices.len(),
            3,
            "only the gang that needed the failed group"
        );
        assert!(
            notices
                .iter()
                .all(|n| n.warning && n.reason == NOT_TRIGGER_SCALE_UP)
        );
        assert!(
            notices[0].note.contains("gpu: out of capacity"),
            "{}",
            notices[0].note
        );
    }
}
