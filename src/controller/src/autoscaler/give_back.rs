//! Machines that never registered: given back to the cloud by instance id.
//!
//! A requested node that has not registered within `--max-node-provision-time` is given up
//! on. cluster-autoscaler deletes such long-unregistered instances with `DeleteNodes`, naming
//! each by its instance id, and lowers the target only for machines that never started;
//! lowering the target alone would leave a started GPU machine running with no Node (AWS
//! refuses to shrink an Auto Scaling group's desired capacity below its instances). So the
//! timed-out entries are matched with the instances the group's provider lists that no Node
//! registered for ([`inflight::give_back`]): those machines are deleted by id (the provider
//! lowers its target with them), the rest only leave the target. A deletion that fails (here,
//! or of a gang's machines given back, see [`super::together`]) is tried again each loop
//! while the provider still lists the machine.

use std::collections::{BTreeMap, BTreeSet};

use dra_api::{NodeGroup, ScaleUpOutcome};
use k8s_openapi::jiff::Timestamp;

use super::{Autoscaler, LoopSummary, group_ref, name_of};
use crate::backoff;
use crate::events::{BACK_OFF, SCALE_UP_TIMED_OUT};
use crate::executor::{ErrorCategory, GroupRef, InstanceState, NodeToDelete};
use crate::inflight;
use crate::membership::{self, Membership, ProviderView};

impl Autoscaler {
    /// Gives back the group's timed-out machines and those whose deletion failed before;
    /// on a timeout, marks the last scale-up failed if they were its nodes and backs the
    /// group off.
    #[tracing::instrument(name = "give_back", skip_all, fields(node_group = %name_of(group)))]
    pub(super) async fn give_back(
        &self,
        group: &NodeGroup,
        rec: &mut inflight::Reconciled,
        membership: &Membership,
        view: &ProviderView,
        now: Timestamp,
        summary: &mut LoopSummary,
    ) {
        let name = name_of(group);
        let target = group_ref(group);
        let listed = view.instances.get(&name);
        let unregistered: Vec<&str> = listed
            .map(|instances| {
                membership::unregistered(membership, instances)
                    .into_iter()
                    .map(|i| i.id.as_str())
                    .collect()
            })
            .unwrap_or_default();
        // Earlier deletions that failed, while the provider still lists the machine (when
        // it cannot list them, until the provider answers that they are gone).
        let retry: BTreeSet<String> = self
            .undeleted()
            .remove(&name)
            .unwrap_or_default()
            .into_iter()
            .filter(|id| {
                listed.is_none_or(|instances| {
                    instances
                        .iter()
                        .any(|i| &i.id == id && i.state != InstanceState::Deleting)
                })
            })
            .collect();
        if rec.timed_out.is_empty() && retry.is_empty() {
            return;
        }
        let plan = if listed.is_some() {
            inflight::give_back(&rec.timed_out, &rec.status.upcoming_nodes, &unregistered)
        } else {
            // No list of instances (the provider has none, or it failed this loop): entries
            // the provider named after their instance are deleted by that id; of the others
            // all it can be asked is to drop them from its target (what externalgrpc's
            // DecreaseTargetSize means).
            let (named, placeholders): (Vec<_>, Vec<_>) = rec
                .timed_out
                .iter()
                .cloned()
                .partition(|e| inflight::is_instance_id(&e.name));
            inflight::GiveBack {
                delete: named.into_iter().map(|e| (e.clone(), e.name)).collect(),
                never_started: placeholders,
            }
        };
        let mut ids: BTreeSet<String> = plan.delete.iter().map(|(_, id)| id.clone()).collect();
        ids.extend(retry);
        if !ids.is_empty() {
            self.delete_machines(&target, ids).await;
        }
        if !plan.never_started.is_empty() {
            let names: Vec<String> = plan.never_started.iter().map(|e| e.name.clone()).collect();
            tracing::info!(node_group = %name, entries = ?names, "dropping never-started machines from the provider's target");
            if let Err(error) = self.executor.delete_unregistered(&target, &names).await {
                tracing::warn!(%error, node_group = %name, "could not drop never-started machines from the target");
            }
        }
        if rec.timed_out.is_empty() {
            return;
        }
        self.timed_out(group, rec, &plan, now, summary).await;
    }

    pub(super) fn undeleted(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeSet<String>>> {
        self.undeleted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Deletes the machines by instance id; remembers them for another try if that fails.
    async fn delete_machines(&self, group: &GroupRef, ids: BTreeSet<String>) {
        let nodes: Vec<NodeToDelete> = ids
            .iter()
            .map(|id| NodeToDelete {
                provider_id: id.clone(),
                ..NodeToDelete::default()
            })
            .collect();
        tracing::info!(node_group = %group.name, instances = ?ids, provider = %group.provider, "deleting machines that never registered");
        match self.executor.delete_nodes(group, &nodes).await {
            Ok(()) => {}
            Err(error) => {
                let category = error.category;
                tracing::warn!(%error, node_group = %group.name, "could not delete machines that never registered; trying again next loop");
                if category != ErrorCategory::NotImplemented {
                    self.undeleted()
                        .entry(group.name.clone())
                        .or_default()
                        .extend(ids);
                }
            }
        }
    }

    /// The timeout's record: the last scale-up failed if they were its nodes, backoff,
    /// metric and Events.
    async fn timed_out(
        &self,
        group: &NodeGroup,
        rec: &mut inflight::Reconciled,
        plan: &inflight::GiveBack,
        now: Timestamp,
        summary: &mut LoopSummary,
    ) {
        let name = name_of(group);
        let waited = self.config.max_node_provision_time;
        let names: Vec<String> = rec.timed_out.iter().map(|e| e.name.clone()).collect();
        let deleted = plan.delete.len();
        let message = format!(
            "{} node(s) did not register within {waited:#}: {}; {deleted} started machine(s) deleted, {} never started",
            names.len(),
            names.join(", "),
            plan.never_started.len(),
        );
        tracing::info!(node_group = %name, nodes = ?names, deleted, "gave up on nodes that did not register");
        let status = &mut rec.status;
        if let Some(last) = status
            .last_scale_up
            .as_mut()
            .filter(|last| rec.timed_out.iter().any(|e| e.requested_at == last.time))
        {
            last.outcome = ScaleUpOutcome::Failed;
            last.message.clone_from(&message);
        }
        let until = backoff::enter(
            &self.config.backoff,
            status,
            now,
            "ScaleUpTimedOut",
            &message,
        );
        summary.timed_out.insert(name.clone(), names.len());
        self.metrics
            .record_failure(&name, crate::metrics::TIMED_OUT);
        self.events
            .publish(
                &Self::group_notice(group, true, SCALE_UP_TIMED_OUT, message.clone()),
                now,
            )
            .await;
        self.events
            .publish(
                &Self::group_notice(
                    group,
                    true,
                    BACK_OFF,
                    format!("not scaling node group {name} until {until}: {message}"),
                ),
                now,
            )
            .await;
    }
}
