//! The loop's first step: every NodeGroup's status reconciled with the nodes that
//! registered (upcoming placeholders matched or timed out, backoff expired, conditions
//! and the fields derived from every group's size set), scale-ups that finished unrecorded
//! adopted, and the result written.

use std::collections::BTreeMap;

use dra_api::{LastScaleUp, NodeGroup, NodeGroupStatus, ScaleUpOutcome};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::{Autoscaler, LoopSummary, name_of, to_i32};
use crate::backoff;
use crate::conditions;
use crate::events::SCALED_UP_GROUP;
use crate::inflight;
use crate::membership::{self, Membership};
use crate::metrics::GroupLabels;
use crate::snapshot::Inputs;
use crate::status::StatusWrite;
use crate::validity;

/// The status fields derived from the sizes of every group: `reservedLeft`
/// (a reservation's slots are shared by its groups) and `AtMinSize`.
pub(super) fn set_derived(
    spec: &dra_api::NodeGroupSpec,
    status: &mut NodeGroupStatus,
    sizes: &[(dra_api::NodeGroupSpec, NodeGroupStatus)],
    now: Timestamp,
) {
    status.reserved_left = inflight::reserved_left(spec, sizes.iter().map(|(a, b)| (a, b)));
    let (at_min, reason, message) = conditions::at_min_size(
        spec,
        status.current_size.saturating_add(status.upcoming_size),
    );
    conditions::set(
        &mut status.conditions,
        conditions::AT_MIN_SIZE,
        at_min,
        reason,
        &message,
        now,
    );
}

impl Autoscaler {
    /// Reconciles every group's status with the registered nodes, gives up on
    /// timed-out nodes, and writes what changed. Returns the groups as they now
    /// are, and a line per group held back by backoff.
    pub(super) async fn reconcile_groups(
        &self,
        inputs: &Inputs,
        membership: &Membership,
        view: &membership::ProviderView,
        now: Timestamp,
        summary: &mut LoopSummary,
    ) -> (BTreeMap<String, NodeGroup>, Vec<String>) {
        let mut desired: BTreeMap<String, (NodeGroup, NodeGroupStatus)> = BTreeMap::new();
        for stored in &inputs.node_groups {
            let group = self.status.freshest(stored);
            let name = name_of(&group);
            if view.refused.contains_key(&name) {
                continue;
            }
            let current = group.status.clone().unwrap_or_default();
            // How many nodes registered, and their names and provider ids
            // (providers answer a scale-up with instance ids).
            let (count, ids) = membership.registered(&name);
            let mut rec = inflight::reconcile(
                &current,
                count,
                &ids,
                now,
                self.config.max_node_provision_time,
            );
            backoff::expire(&mut rec.status, now);
            validity::set_valid(
                &mut rec.status.conditions,
                true,
                crate::catalog::VALID_REASON,
                "the NodeGroup decodes and passes validation",
                now,
            );
            let (active, reason, message) = conditions::scaling_active(&group.spec);
            conditions::set(
                &mut rec.status.conditions,
                conditions::SCALING_ACTIVE,
                active,
                reason,
                &message,
                now,
            );
            if !rec.adopted.is_empty() {
                self.adopt(&group, &mut rec, now).await;
            }
            self.give_back(&group, &mut rec, membership, view, now, summary)
                .await;
            desired.insert(name, (group, rec.status));
        }

        // Reservation slots are shared between groups: compute after all.
        let sizes: Vec<(dra_api::NodeGroupSpec, NodeGroupStatus)> = desired
            .values()
            .map(|(g, s)| (g.spec.clone(), s.clone()))
            .collect();
        let mut out = BTreeMap::new();
        let mut held_back = Vec::new();
        for (name, (group, mut status)) in desired {
            set_derived(&group.spec, &mut status, &sizes, now);
            self.record_group_gauges(&name, &group, &status);
            if let Some(until) = backoff::backing_off_until(&status, now) {
                let reason = backoff::backoff_reason(&status).unwrap_or("Failed");
                held_back.push(format!("{name}: backing off until {until} ({reason})"));
                summary.backing_off.push(name.clone());
            }
            match self
                .status
                .write(StatusWrite::Reconcile, &group, status)
                .await
            {
                Ok(written) => {
                    out.insert(name, written);
                }
                Err(error) => {
                    summary.status_not_written(&name, &error, "status not written");
                    out.insert(name, group);
                }
            }
        }
        self.forget_gone_groups(&out);
        (out, held_back)
    }

    /// Removes the metric series of groups that are gone (deleted, or left
    /// out as invalid).
    pub(super) fn forget_gone_groups(&self, groups: &BTreeMap<String, NodeGroup>) {
        let mut with_series = self
            .with_series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for gone in with_series
            .iter()
            .filter(|name| !groups.contains_key(*name))
        {
            self.metrics.forget_group(gone);
        }
        *with_series = groups.keys().cloned().collect();
    }

    pub(super) fn record_group_gauges(
        &self,
        name: &str,
        group: &NodeGroup,
        status: &NodeGroupStatus,
    ) {
        let labels = GroupLabels {
            node_group: name.to_string(),
        };
        self.metrics
            .upcoming_nodes
            .get_or_create(&labels)
            .set(i64::from(status.upcoming_size));
        if let Some(left) = status.reserved_left {
            self.metrics
                .reservation_left
                .get_or_create(&labels)
                .set(i64::from(left));
        }
        if group.spec.reservation.is_some() {
            self.metrics
                .reservation_used
                .get_or_create(&labels)
                .set(i64::from(status.current_size) + i64::from(status.upcoming_size));
        }
    }

    /// Scale-ups whose machines registered with no answer recorded (the controller that asked
    /// stopped, or lost its lease, between the intent and the answer; its successor finds the
    /// nodes already there): recorded as the last scale-up and reported as one would have been,
    /// so no purchase goes unaccounted for.
    pub(super) async fn adopt(
        &self,
        group: &NodeGroup,
        rec: &mut inflight::Reconciled,
        now: Timestamp,
    ) {
        let name = name_of(group);
        for adopted in &rec.adopted {
            let request = adopted
                .request_id
                .as_deref()
                .map_or_else(|| "a scale-up".to_string(), |id| format!("request {id}"));
            let message = format!(
                "{} node(s) registered for {request}, asked for at {} by a controller that stopped before recording the answer",
                adopted.count, adopted.requested_at
            );
            tracing::info!(node_group = %name, request_id = ?adopted.request_id, nodes = adopted.count, "adopting a scale-up whose answer was never recorded: its nodes registered");
            rec.status.last_scale_up = Some(LastScaleUp {
                time: Time(adopted.requested_at),
                count: to_i32(adopted.count),
                outcome: ScaleUpOutcome::Succeeded,
                message: message.clone(),
            });
            self.metrics
                .record_scale_up(&name, group.spec.capacity_type.as_str(), adopted.count);
            self.events
                .publish(
                    &Self::group_notice(
                        group,
                        false,
                        SCALED_UP_GROUP,
                        format!("scaled up node group {name}: {message}"),
                    ),
                    now,
                )
                .await;
        }
    }
}
