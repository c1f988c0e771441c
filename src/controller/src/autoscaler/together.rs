//! Scale-ups that must start together: a gang whose plan spans several node groups starts
//! all-or-nothing as a whole.
//!
//! Each group's request is all-or-nothing on its own (the provider's `AtomicIncreaseSize`:
//! EC2 Fleet `MinTargetCapacity`, GCE `minCount` or a resize request), but nothing makes two
//! groups' requests one. So the plan's scale-ups are taken in units ([`units`]): every
//! scale-up of a gang, and of the gangs that share a scale-up with it. A unit's requests are
//! sent one by one; when one fails (refused, or never sent), the rest of the unit is not sent
//! and the machines the unit's earlier requests started are given back in the same loop:
//! deleted by instance id (`NodeGroupDeleteNodes`), or, for a provider that named none,
//! dropped from its target. Their placeholders go with them, so nothing of the gang counts
//! as upcoming, and the next loop plans the gang again from scratch (the failed group backs
//! off). A request whose answer was lost is not a failure here: it may have started, and it
//! is sent again with its request id next loop.

use std::collections::{BTreeMap, BTreeSet};

use dra_api::{LastScaleUp, NodeGroup, ScaleUpOutcome};
use dra_plan::report::PlanReport;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::{Autoscaler, LoopSummary, group_ref, name_of, to_i32};
use crate::events::FAILED_TO_SCALE_UP_GROUP;
use crate::executor::{ErrorCategory, IncreaseRequest, Increased, NodeToDelete, ScaleError};
use crate::inflight;
use crate::notices::GroupOutcome;
use crate::status::StatusWrite;

/// What the provider answered one scale-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Answer {
    /// Machines started.
    Started {
        /// The request's id (its placeholders are named after it).
        request_id: String,
        /// The instance ids, when the provider named them.
        instance_ids: Vec<String>,
        /// How many started.
        started: usize,
    },
    /// The request failed with this category.
    Failed(ErrorCategory),
}

impl Answer {
    /// The answer `result` gives to `request`.
    pub(super) fn of(request: &IncreaseRequest, result: &Result<Increased, ScaleError>) -> Self {
        match result {
            Ok(done) => Self::Started {
                request_id: request.request_id.clone(),
                instance_ids: done.instance_ids.clone(),
                started: done.started.min(request.count),
            },
            Err(error) => Self::Failed(error.category),
        }
    }

    /// Whether the rest of a unit must not start: the request was refused or never sent.
    /// A lost answer ([`ErrorCategory::Unknown`]) may have started machines and is sent
    /// again next loop, so it does not stop the unit.
    fn stops_the_unit(&self) -> bool {
        matches!(self, Self::Failed(category) if *category != ErrorCategory::Unknown)
    }
}

/// The plan's scale-ups (indices into `report.scale_ups`) in the units that start together:
/// scale-ups sharing a gang (transitively) form one unit; a scale-up for no gang is its own.
/// Units keep the plan's order (by their first scale-up), and so do the scale-ups in each.
#[must_use]
pub(super) fn units(report: &PlanReport) -> Vec<Vec<usize>> {
    let gangs: BTreeSet<&dra_plan::gang::GangRef> = report
        .pod_groups
        .iter()
        .filter(|g| g.api.is_gang())
        .map(|g| &g.pod_group)
        .collect();
    let count = report.scale_ups.len();
    // Union-find over scale-ups, joined through the gangs they serve.
    let mut parent: Vec<usize> = (0..count).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut first_of: BTreeMap<&dra_plan::gang::GangRef, usize> = BTreeMap::new();
    for (i, scale_up) in report.scale_ups.iter().enumerate() {
        for gang in scale_up.pod_groups.iter().filter(|g| gangs.contains(g)) {
            match first_of.get(gang) {
                Some(&j) => {
                    let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                    parent[a.max(b)] = a.min(b);
                }
                None => {
                    first_of.insert(gang, i);
                }
            }
        }
    }
    let mut units: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..count {
        let r = root(&mut parent, i);
        units.entry(r).or_default().push(i);
    }
    units.into_values().collect()
}

impl Autoscaler {
    /// Executes one unit of the plan's scale-ups (see the module docs), recording each
    /// group's outcome for the notices.
    pub(super) async fn scale_up_together(
        &self,
        unit: &[usize],
        report: &PlanReport,
        groups: &mut BTreeMap<String, NodeGroup>,
        now: Timestamp,
        summary: &mut LoopSummary,
        outcomes: &mut BTreeMap<String, GroupOutcome>,
    ) {
        let mut started: Vec<(String, Answer)> = Vec::new();
        let mut failed: Option<(String, String)> = None;
        for &i in unit {
            let scale_up = &report.scale_ups[i];
            let name = &scale_up.node_group;
            if let Some((failed_group, why)) = &failed {
                let message = format!(
                    "not asked: the same gang's scale-up of node group {failed_group} failed ({why})"
                );
                summary.failed.insert(name.clone(), message.clone());
                outcomes.insert(name.clone(), GroupOutcome::Failed(message));
                continue;
            }
            let Some(group) = groups.get_mut(name) else {
                continue;
            };
            let Some((outcome, answer)) =
                self.scale_up(group, scale_up, report, now, summary).await
            else {
                if unit.len() > 1 {
                    failed = Some((name.clone(), "its intent was not recorded".into()));
                }
                continue;
            };
            if answer.stops_the_unit()
                && let GroupOutcome::Failed(why) = &outcome
            {
                failed = Some((name.clone(), why.clone()));
            } else if matches!(answer, Answer::Started { .. }) {
                started.push((name.clone(), answer));
            }
            outcomes.insert(name.clone(), outcome);
        }
        let Some((failed_group, why)) = failed else {
            return;
        };
        for (name, answer) in started {
            let Some(group) = groups.get_mut(&name) else {
                continue;
            };
            let gangs = report
                .scale_ups
                .iter()
                .find(|s| s.node_group == name)
                .map(dra_plan::report::ScaleUp::pod_group_list)
                .unwrap_or_default();
            let reason = format!(
                "the scale-up of node group {failed_group} for the same gang ({gangs}) failed: {why}"
            );
            let message = self
                .give_back_started(group, &answer, &reason, now, summary)
                .await;
            outcomes.insert(name, GroupOutcome::Failed(message));
        }
    }

    /// Gives back what `answer` started in `group` because its gang did not start whole:
    /// deletes the machines (or drops them from the target), removes their placeholders and
    /// records the scale-up as failed. Returns the message of the outcome.
    async fn give_back_started(
        &self,
        group: &mut NodeGroup,
        answer: &Answer,
        reason: &str,
        now: Timestamp,
        summary: &mut LoopSummary,
    ) -> String {
        let Answer::Started {
            request_id,
            instance_ids,
            started,
        } = answer
        else {
            return String::new();
        };
        let name = name_of(group);
        let target = group_ref(group);
        tracing::warn!(node_group = %name, %request_id, started, instances = ?instance_ids, "giving back a gang's machines: {reason}");
        let deleted = if instance_ids.is_empty() {
            let names: Vec<String> = (0..*started).map(|i| format!("{request_id}-{i}")).collect();
            self.executor.delete_unregistered(&target, &names).await
        } else {
            let nodes: Vec<NodeToDelete> = instance_ids
                .iter()
                .map(|id| NodeToDelete {
                    provider_id: id.clone(),
                    ..NodeToDelete::default()
                })
                .collect();
            self.executor.delete_nodes(&target, &nodes).await
        };
        let message = match &deleted {
            Ok(()) => format!("{started} node(s) started and given back: {reason}"),
            Err(error) => {
                tracing::warn!(%error, node_group = %name, "could not give the gang's machines back; trying again next loop");
                if !instance_ids.is_empty() && error.category != ErrorCategory::NotImplemented {
                    self.undeleted()
                        .entry(name.clone())
                        .or_default()
                        .extend(instance_ids.iter().cloned());
                }
                format!(
                    "{started} node(s) started, giving them back failed ({error}; tried again next loop): {reason}"
                )
            }
        };
        let current = group.status.clone().unwrap_or_default();
        let mut status = current;
        inflight::withdraw(&mut status, request_id, instance_ids);
        status.last_scale_up = Some(LastScaleUp {
            time: Time(now),
            count: to_i32(*started),
            outcome: ScaleUpOutcome::Failed,
            message: message.clone(),
        });
        match self
            .status
            .write(StatusWrite::GiveBack, group, status)
            .await
        {
            Ok(written) => *group = written,
            Err(error) => {
                tracing::warn!(%error, node_group = %name, "the give-back was not recorded; the placeholders time out instead");
            }
        }
        summary.scaled_up.remove(&name);
        summary.failed.insert(name.clone(), message.clone());
        self.events
            .publish(
                &Self::group_notice(group, true, FAILED_TO_SCALE_UP_GROUP, message.clone()),
                now,
            )
            .await;
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_api::CapacityType;
    use dra_plan::gang::{GangApi, GangRef};
    use dra_plan::report::{GangOutcome, PodGroupReport, ScaleUp};

    fn gang(name: &str) -> GangRef {
        GangRef::object(dra_sim::ObjectRef::new("default", name))
    }

    fn scale_up(group: &str, gangs: &[&str]) -> ScaleUp {
        ScaleUp {
            node_group: group.into(),
            count: 1,
            pod_groups: gangs.iter().map(|g| gang(g)).collect(),
            capacity_type: CapacityType::OnDemand,
            price_per_hour: 1.0,
            min_count: 1,
            why: Vec::new(),
        }
    }

    fn pod_group(name: &str, api: GangApi) -> PodGroupReport {
        PodGroupReport {
            pod_group: gang(name),
            api,
            outcome: GangOutcome::Lands,
            min_count: 2,
            members: Vec::new(),
            reasons: Vec::new(),
        }
    }

    #[test]
    fn scale_ups_sharing_a_gang_start_together_and_singles_alone() {
        let report = PlanReport {
            scale_ups: vec![
                scale_up("a", &["train"]),
                scale_up("b", &["web"]),
                scale_up("c", &["train", "eval"]),
                scale_up("d", &["eval"]),
                scale_up("e", &["web"]),
            ],
            pod_groups: vec![
                pod_group("train", GangApi::PodGroup),
                pod_group("eval", GangApi::PodGroup),
                // Single pods share nothing: their scale-ups start on their own.
                pod_group("web", GangApi::Single),
            ],
            ..Default::default()
        };
        assert_eq!(units(&report), vec![vec![0, 2, 3], vec![1], vec![4]]);
    }
}
