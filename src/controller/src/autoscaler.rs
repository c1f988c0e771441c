//! One autoscaling loop: reconcile in-flight capacity, plan, scale, report.
//!
//! ```text
//!  stores ──► reconcile NodeGroup status (upcoming, timeouts, backoff) ──► write status
//!     │                                   │
//!     └──► snapshot::build ◄──────────────┘ (groups in backoff left out)
//!                 │
//!          dra_plan::plan  (spawn_blocking)
//!                 │
//!     for each ScaleUp: write intent (upcoming placeholders) ─► provider ─► write outcome
//!                 │
//!          Events on pods, PodGroups, NodeGroups · metrics
//! ```
//!
//! The intent is written before the provider is called, conditional on the
//! resourceVersion the plan was made from. A crash anywhere after that leaves
//! placeholders that count as upcoming capacity, so neither this process after
//! a restart nor another leader asks for the same nodes again; if the nodes
//! never come, the placeholders time out and the group backs off.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use dra_api::{LastScaleUp, NodeGroup, NodeGroupStatus, ScaleUpOutcome};
use dra_plan::report::{GangOutcome, PlanReport, ScaleUp};
use dra_plan::{PlanOptions, plan};
use dra_sim::FeatureGates;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Resource;
use tokio::sync::watch;

use crate::backoff::{self, BackoffPolicy};
use crate::events::{
    BACK_OFF, EventSink, FAILED_TO_SCALE_UP_GROUP, Notice, SCALE_UP_TIMED_OUT, SCALED_UP_GROUP,
};
use crate::executor::{ErrorCategory, GroupRef, IncreaseRequest, ScaleExecutor};
use crate::inflight::{self, placeholders};
use crate::metrics::{GroupLabels, Metrics};
use crate::notices::{self, GroupOutcome, Refs};
use crate::pods::PendingPolicy;
use crate::snapshot::{self, BuildOptions, Inputs, node_group_of};
use crate::status::StatusWriter;

/// Settings of the loop.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// The cluster's scheduler features.
    pub gates: FeatureGates,
    /// Expander and reservation horizon (`now` is set per loop).
    pub plan: PlanOptions,
    /// Pods younger than this are left to the scheduler.
    pub new_pod_delay: SignedDuration,
    /// Pods below this priority never trigger a scale-up.
    pub expendable_cutoff: i32,
    /// Requested nodes that have not registered (or become Ready) after this
    /// are given up on.
    pub max_node_provision_time: SignedDuration,
    /// Backoff after failures.
    pub backoff: BackoffPolicy,
}

/// What one loop did, for logs and tests.
#[derive(Debug, Clone, Default)]
pub struct LoopSummary {
    /// Pending pods planned for.
    pub planned_for: usize,
    /// The plan, when the planner ran.
    pub report: Option<PlanReport>,
    /// Nodes started per group.
    pub scaled_up: BTreeMap<String, usize>,
    /// Failed scale-ups per group, with the message.
    pub failed: BTreeMap<String, String>,
    /// Placeholders given up on per group.
    pub timed_out: BTreeMap<String, usize>,
    /// Groups held back by backoff.
    pub backing_off: Vec<String>,
    /// Groups whose status write lost a race (retried next loop).
    pub conflicts: Vec<String>,
}

/// The loop's collaborators.
pub struct Autoscaler {
    status: StatusWriter,
    executor: Arc<dyn ScaleExecutor>,
    events: EventSink,
    metrics: Arc<Metrics>,
    config: LoopConfig,
    leading: Option<watch::Receiver<bool>>,
}

impl std::fmt::Debug for Autoscaler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Autoscaler")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn name_of(group: &NodeGroup) -> String {
    group.metadata.name.clone().unwrap_or_default()
}

fn group_ref(group: &NodeGroup) -> GroupRef {
    GroupRef {
        name: name_of(group),
        provider: group.spec.provider.clone(),
        provider_id: group.spec.provider_id.clone(),
    }
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn usize_of(n: i32) -> usize {
    usize::try_from(n.max(0)).unwrap_or(0)
}

impl Autoscaler {
    /// Assembles a loop. With `leading`, provider calls and status writes are
    /// made only while it reads `true`.
    #[must_use]
    pub fn new(
        client: kube::Client,
        executor: Arc<dyn ScaleExecutor>,
        events: EventSink,
        metrics: Arc<Metrics>,
        config: LoopConfig,
        leading: Option<watch::Receiver<bool>>,
    ) -> Self {
        Self {
            status: StatusWriter::new(client),
            executor,
            events,
            metrics,
            config,
            leading,
        }
    }

    fn is_leader(&self) -> bool {
        self.leading.as_ref().is_none_or(|l| *l.borrow())
    }

    fn group_notice(
        group: &NodeGroup,
        warning: bool,
        reason: &'static str,
        note: String,
    ) -> Notice {
        Notice {
            regarding: group.object_ref(&()),
            warning,
            reason,
            action: "ScaleUp",
            note,
        }
    }

    /// Runs one loop over `inputs` at `now`.
    pub async fn run_once(&self, inputs: &Inputs, now: Timestamp) -> LoopSummary {
        let started = Instant::now();
        let mut summary = LoopSummary::default();
        if !self.is_leader() {
            return summary;
        }

        let (groups, held_back) = self.reconcile_groups(inputs, now, &mut summary).await;
        let planning: Vec<NodeGroup> = groups
            .values()
            .filter(|g| {
                !summary.backing_off.contains(&name_of(g))
                    && !summary.conflicts.contains(&name_of(g))
            })
            .cloned()
            .collect();
        let built = snapshot::build(
            inputs,
            &planning,
            &BuildOptions {
                pending: PendingPolicy {
                    now,
                    new_pod_delay: self.config.new_pod_delay,
                    expendable_cutoff: self.config.expendable_cutoff,
                },
                max_node_provision_time: self.config.max_node_provision_time,
            },
        );
        summary.planned_for = built.planned_for.len();
        self.metrics
            .unschedulable_pods
            .set(i64::try_from(built.planned_for.len()).unwrap_or(i64::MAX));
        if !built.skipped.is_empty() {
            tracing::debug!(skipped = ?built.skipped, "pending pods left out");
        }
        if built.planned_for.is_empty() {
            self.metrics.unschedulable_gangs.set(0);
            self.metrics.waiting_gangs.set(0);
            self.finish(started, now);
            return summary;
        }

        let report = self.plan(built.objects, now).await;
        let Some(report) = report else {
            self.metrics.loop_errors.inc();
            self.finish(started, now);
            return summary;
        };
        let gangs = report.pod_groups.iter().filter(|g| g.api.is_gang()).count();
        self.metrics
            .unschedulable_gangs
            .set(i64::try_from(gangs).unwrap_or(i64::MAX));
        let waiting = report
            .pod_groups
            .iter()
            .filter(|g| g.outcome == GangOutcome::Waits)
            .count();
        self.metrics
            .waiting_gangs
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));

        let mut outcomes = BTreeMap::new();
        for scale_up in &report.scale_ups {
            if !self.is_leader() {
                tracing::warn!("lost leadership; stopping before the next scale-up");
                break;
            }
            let Some(group) = groups.get(&scale_up.node_group) else {
                continue;
            };
            if let Some(outcome) = self
                .scale_up(group, scale_up, &report, now, &mut summary)
                .await
            {
                outcomes.insert(scale_up.node_group.clone(), outcome);
            }
        }

        let refs = Refs::new(inputs.pods.iter().map(AsRef::as_ref), &inputs.gang_objects);
        for notice in notices::for_plan(&report, &outcomes, &held_back, &refs) {
            self.events.publish(&notice, now).await;
        }
        summary.report = Some(report);
        self.finish(started, now);
        summary
    }

    fn finish(&self, started: Instant, now: Timestamp) {
        self.metrics
            .loop_duration
            .observe(started.elapsed().as_secs_f64());
        self.metrics.last_loop_timestamp.set(now.as_second());
    }

    async fn plan(&self, objects: dra_sim::ClusterObjects, now: Timestamp) -> Option<PlanReport> {
        let gates = self.config.gates;
        let mut options = self.config.plan.clone();
        options.now = Some(now);
        let plan_started = Instant::now();
        // The planner is CPU-bound and synchronous: keep it off the runtime's workers.
        let result = tokio::task::spawn_blocking(move || plan(objects, gates, &options)).await;
        self.metrics
            .plan_duration
            .observe(plan_started.elapsed().as_secs_f64());
        match result {
            Ok(report) => {
                for error in &report.node_group_errors {
                    tracing::warn!(node_group = %error.node_group, error = %error.error, "invalid NodeGroup left out");
                }
                Some(report)
            }
            Err(error) => {
                tracing::error!(%error, "the planner panicked");
                None
            }
        }
    }

    /// Reconciles every group's status with the registered nodes, gives up on
    /// timed-out nodes, and writes what changed. Returns the groups as they now
    /// are, and a line per group held back by backoff.
    async fn reconcile_groups(
        &self,
        inputs: &Inputs,
        now: Timestamp,
        summary: &mut LoopSummary,
    ) -> (BTreeMap<String, NodeGroup>, Vec<String>) {
        // Per group: how many nodes registered, and their names and provider
        // ids (providers answer a scale-up with instance ids).
        let mut registered: BTreeMap<&str, (usize, BTreeSet<String>)> = BTreeMap::new();
        for node in &inputs.nodes {
            if let (Some(group), Some(name)) = (node_group_of(node), node.metadata.name.as_ref()) {
                let entry = registered.entry(group).or_default();
                entry.0 += 1;
                entry.1.insert(name.clone());
                if let Some(id) = node.spec.as_ref().and_then(|s| s.provider_id.clone()) {
                    entry.1.insert(id);
                }
            }
        }
        let empty = (0, BTreeSet::new());
        let mut desired: BTreeMap<String, (NodeGroup, NodeGroupStatus)> = BTreeMap::new();
        for stored in &inputs.node_groups {
            let group = self.status.freshest(stored);
            let name = name_of(&group);
            let current = group.status.clone().unwrap_or_default();
            let (count, ids) = registered.get(name.as_str()).unwrap_or(&empty);
            let mut rec = inflight::reconcile(
                &current,
                *count,
                ids,
                now,
                self.config.max_node_provision_time,
            );
            if !rec.timed_out.is_empty() {
                self.give_up(&group, &mut rec, now, summary).await;
            }
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
            status.reserved_left =
                inflight::reserved_left(&group.spec, sizes.iter().map(|(a, b)| (a, b)));
            self.record_group_gauges(&name, &group, &status);
            if let Some(until) = backoff::backing_off_until(&status, now) {
                let reason = backoff::backoff_reason(&status).unwrap_or("Failed");
                held_back.push(format!("{name}: backing off until {until} ({reason})"));
                summary.backing_off.push(name.clone());
            }
            match self.status.write(&group, status).await {
                Ok(written) => {
                    out.insert(name, written);
                }
                Err(error) => {
                    tracing::warn!(%error, "status not written; the group sits out this loop");
                    summary.conflicts.push(name.clone());
                    out.insert(name, group);
                }
            }
        }
        (out, held_back)
    }

    fn record_group_gauges(&self, name: &str, group: &NodeGroup, status: &NodeGroupStatus) {
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

    /// Timed-out placeholders: ask the provider to delete them, mark the last
    /// scale-up failed if they were its nodes, and back the group off.
    async fn give_up(
        &self,
        group: &NodeGroup,
        rec: &mut inflight::Reconciled,
        now: Timestamp,
        summary: &mut LoopSummary,
    ) {
        let name = name_of(group);
        let names: Vec<String> = rec.timed_out.iter().map(|e| e.name.clone()).collect();
        let waited = self.config.max_node_provision_time;
        if let Err(error) = self
            .executor
            .delete_unregistered(&group_ref(group), &names)
            .await
        {
            tracing::warn!(%error, node_group = %name, "could not delete nodes that never registered");
        }
        let message = format!(
            "{} node(s) did not register within {waited:#}: {}",
            names.len(),
            names.join(", ")
        );
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
        self.metrics.record_failure(&name, "timeout");
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

    /// Executes one ScaleUp of the plan. `None` when it was not attempted
    /// (the intent could not be recorded).
    async fn scale_up(
        &self,
        group: &NodeGroup,
        scale_up: &ScaleUp,
        report: &PlanReport,
        now: Timestamp,
        summary: &mut LoopSummary,
    ) -> Option<GroupOutcome> {
        let name = name_of(group);
        let before = group.status.clone().unwrap_or_default();
        let request_id = format!("{name}-{}", now.as_millisecond());
        let count = scale_up.count;

        // 1. Record the intent, conditional on the version we planned from.
        let mut intent = before.clone();
        intent
            .upcoming_nodes
            .extend(placeholders(&request_id, count, now));
        intent.upcoming_size = to_i32(intent.upcoming_nodes.len());
        intent.target_size = intent.current_size + intent.upcoming_size;
        let group = match self.status.write(group, intent.clone()).await {
            Ok(g) => g,
            Err(error) => {
                tracing::warn!(%error, node_group = %name, "scale-up intent not recorded; retrying next loop");
                summary.conflicts.push(name);
                return None;
            }
        };

        // 2. Ask the provider.
        let is_gang = report
            .pod_groups
            .iter()
            .any(|g| g.api.is_gang() && scale_up.pod_groups.contains(&g.pod_group));
        let mut request = IncreaseRequest {
            group: group_ref(&group),
            count,
            atomic_min: is_gang.then_some(scale_up.min_count.min(count)),
            request_id: request_id.clone(),
        };
        let mut result = self.executor.increase(&request).await;
        if matches!(&result, Err(e) if e.category == ErrorCategory::NotImplemented && request.atomic_min.is_some())
        {
            // cluster-autoscaler's best-effort atomic scale-up does the same: a
            // provider without all-or-nothing gets a plain increase.
            tracing::info!(node_group = %name, "provider has no atomic increase; asking for a plain one");
            request.atomic_min = None;
            result = self.executor.increase(&request).await;
        }

        // 3. Record the outcome.
        let mut status = intent;
        let max = usize_of(group.spec.max_size);
        let from = usize_of(
            before
                .target_size
                .max(before.current_size + before.upcoming_size),
        );
        match result {
            Ok(done) => {
                let started = done.started.min(count);
                let mut mine: Vec<_> = status
                    .upcoming_nodes
                    .iter()
                    .filter(|e| e.name.starts_with(&request_id))
                    .cloned()
                    .collect();
                status
                    .upcoming_nodes
                    .retain(|e| !e.name.starts_with(&request_id));
                mine.truncate(started);
                if done.instance_ids.len() == mine.len() {
                    for (entry, id) in mine.iter_mut().zip(&done.instance_ids) {
                        entry.name.clone_from(id);
                    }
                }
                status.upcoming_nodes.extend(mine);
                status.upcoming_size = to_i32(status.upcoming_nodes.len());
                status.target_size = status.current_size + status.upcoming_size;
                status.last_scale_up = Some(LastScaleUp {
                    time: Time(now),
                    count: to_i32(started),
                    outcome: ScaleUpOutcome::Succeeded,
                    message: format!(
                        "started {started} node(s) for {}",
                        scale_up.pod_group_list()
                    ),
                });
                backoff::clear(&mut status, now);
                if let Err(error) = self.status.write(&group, status).await {
                    // The placeholders stay; they are matched as nodes register.
                    tracing::warn!(%error, node_group = %name, "scale-up outcome not recorded");
                }
                let to = from + started;
                self.metrics
                    .record_scale_up(&name, scale_up.capacity_type.as_str(), started);
                summary.scaled_up.insert(name.clone(), started);
                let note = format!(
                    "scaled up node group {name} from {from} to {to} (max {max}), {} capacity, for {}",
                    scale_up.capacity_type,
                    scale_up.pod_group_list()
                );
                self.events
                    .publish(
                        &Self::group_notice(&group, false, SCALED_UP_GROUP, note),
                        now,
                    )
                    .await;
                Some(GroupOutcome::Started {
                    from,
                    to,
                    max,
                    capacity_type: scale_up.capacity_type,
                })
            }
            Err(error) => {
                let message = error.to_string();
                let transient = error.category == ErrorCategory::Transient;
                if !transient {
                    // The provider refused: nothing started, nothing upcoming.
                    status
                        .upcoming_nodes
                        .retain(|e| !e.name.starts_with(&request_id));
                    status.upcoming_size = to_i32(status.upcoming_nodes.len());
                    status.target_size = status.current_size + status.upcoming_size;
                }
                status.last_scale_up = Some(LastScaleUp {
                    time: Time(now),
                    count: to_i32(count),
                    outcome: error.category.outcome(),
                    message: if transient {
                        format!(
                            "{message}; the request may have gone through, so its nodes count as upcoming until they register or time out"
                        )
                    } else {
                        message.clone()
                    },
                });
                let until = (!transient).then(|| {
                    backoff::enter(
                        &self.config.backoff,
                        &mut status,
                        now,
                        error.category.reason(),
                        &message,
                    )
                });
                if let Err(e) = self.status.write(&group, status).await {
                    tracing::warn!(error = %e, node_group = %name, "scale-up failure not recorded");
                }
                self.metrics
                    .record_failure(&name, error.category.metric_label());
                summary.failed.insert(name.clone(), message.clone());
                self.events
                    .publish(
                        &Self::group_notice(
                            &group,
                            true,
                            FAILED_TO_SCALE_UP_GROUP,
                            format!("scale-up of {count} node(s) failed: {message}"),
                        ),
                        now,
                    )
                    .await;
                if let Some(until) = until {
                    self.events
                        .publish(
                            &Self::group_notice(
                                &group,
                                true,
                                BACK_OFF,
                                format!(
                                    "not scaling node group {name} until {until}: {}",
                                    error.category.reason()
                                ),
                            ),
                            now,
                        )
                        .await;
                }
                Some(GroupOutcome::Failed(message))
            }
        }
    }
}
