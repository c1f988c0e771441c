//! Status upkeep of the loop that is not a scale-up: NodeGroups left out as
//! unusable, and the fields derived from every group's size after the loop's
//! scale-ups.

use std::collections::BTreeMap;

use dra_api::{NodeGroup, NodeGroupStatus};
use k8s_openapi::jiff::Timestamp;

use super::Autoscaler;
use super::reconcile::set_derived;
use crate::events::{INVALID_NODE_GROUP, Notice};
use crate::status::StatusWrite;
use crate::validity::{self, Unusable};

impl Autoscaler {
    /// Reports the NodeGroups the loop leaves out: a Warning Event and one log
    /// line per new or changed problem, the gauge, and a `Valid=False`
    /// condition on every one that does not carry it yet (also after a restart,
    /// or when someone else rewrote the status).
    pub(super) async fn report_unusable(&self, unusable: &[Unusable], now: Timestamp) {
        self.metrics
            .invalid_node_groups
            .set(i64::try_from(unusable.len()).unwrap_or(i64::MAX));
        let changes = self.validity.update(unusable);
        for name in &changes.recovered {
            tracing::info!(node_group = %name, "NodeGroup no longer left out (fixed or deleted)");
        }
        for group in changes.new {
            tracing::warn!(node_group = %group.name, reason = group.reason, "NodeGroup left out of autoscaling: {}", group.message);
            let notice = Notice {
                regarding: group.object_ref(),
                warning: true,
                reason: INVALID_NODE_GROUP,
                action: "Validate",
                note: format!(
                    "left out of autoscaling until fixed ({}): {}",
                    group.reason, group.message
                ),
            };
            self.events.publish(&notice, now).await;
        }
        for group in unusable {
            let mut conditions = validity::conditions_of(&group.object);
            let valid_changed =
                validity::set_valid(&mut conditions, false, group.reason, &group.message, now);
            let active_changed = crate::conditions::set(
                &mut conditions,
                crate::conditions::SCALING_ACTIVE,
                false,
                crate::conditions::SCALING_INACTIVE_INVALID,
                "left out of autoscaling until fixed; see the Valid condition",
                now,
            );
            if !valid_changed && !active_changed {
                continue;
            }
            if let Err(error) = self
                .status
                .write_conditions(&group.object, &conditions)
                .await
            {
                tracing::debug!(%error, node_group = %group.name, "Valid condition not written; next loop will");
            }
        }
    }

    /// Recomputes `reservedLeft` and `AtMinSize` after this loop's scale-ups (a reservation's
    /// slots are shared by its groups, so one group's scale-up changes the
    /// others') and writes the groups whose value changed.
    pub(super) async fn refresh_reserved_left(
        &self,
        groups: &mut BTreeMap<String, NodeGroup>,
        now: Timestamp,
    ) {
        let sizes: Vec<(dra_api::NodeGroupSpec, NodeGroupStatus)> = groups
            .values()
            .map(|g| (g.spec.clone(), g.status.clone().unwrap_or_default()))
            .collect();
        for (name, group) in groups.iter_mut() {
            let mut status = group.status.clone().unwrap_or_default();
            set_derived(&group.spec, &mut status, &sizes, now);
            if group.status.as_ref() == Some(&status) {
                continue;
            }
            self.record_group_gauges(name, group, &status);
            match self.status.write(StatusWrite::Derived, group, status).await {
                Ok(written) => *group = written,
                Err(error) => {
                    tracing::warn!(%error, node_group = %name, "reservedLeft not updated; next loop will");
                }
            }
        }
    }
}
