//! One autoscaling loop: reconcile in-flight capacity, plan, scale, report.
//!
//! ```text
//!  stores ──► reconcile NodeGroup status (upcoming, timeouts, backoff) ──► write status
//!     │                                   │
//!     └──► snapshot::View ◄───────────────┘ (groups in backoff left out; kept between
//!                 │                           loops, only changed objects copied)
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

use dra_api::NodeGroup;
use dra_plan::PlanOptions;
use dra_plan::handback::plan_keeping_filters;
use dra_plan::report::{GangOutcome, PlanReport, ScaleUp};
use dra_sim::FeatureGates;
use dra_sim::filters::FilterState;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Resource;
use tokio::sync::watch;

use crate::backoff::BackoffPolicy;
use crate::events::{EventSink, Notice, SCALED_UP_GROUP};
use crate::executor::{ErrorCategory, GroupRef, IncreaseRequest, ScaleExecutor};
use crate::inflight;
use crate::membership::{self, Membership};
use crate::metrics::Metrics;
use crate::notices::{self, GroupOutcome, Refs};
use crate::pods::PendingPolicy;
use crate::scaledown::{LoopState, ScaleDowns};
use crate::snapshot::{self, BuildOptions, Inputs};
use crate::status::{StatusWrite, StatusWriter};
use crate::validity;

mod answer;
mod cadence;
mod give_back;
mod phases;
mod plan_events;
mod reconcile;
mod summary;
mod together;
mod upkeep;

pub use cadence::Trigger;
pub use phases::{Phases, millis};
pub use summary::LoopSummary;

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

/// The loop's collaborators.
pub struct Autoscaler {
    status: StatusWriter,
    validity: validity::Reported,
    /// Groups with per-group metric series, to remove those of groups that go.
    with_series: std::sync::Mutex<BTreeSet<String>>,
    executor: Arc<dyn ScaleExecutor>,
    events: Arc<EventSink>,
    metrics: Arc<Metrics>,
    config: LoopConfig,
    leading: Option<watch::Receiver<bool>>,
    scale_down: Option<ScaleDowns>,
    stand_ins: crate::provreq::write::StandInWriter,
    /// ProvisioningRequest retry backoffs, carried from plan to plan.
    provreq_backoff: std::sync::Mutex<dra_plan::provreq::RetryBackoff>,
    /// `NodeGroupForNode` answers kept across loops.
    asked: std::sync::Mutex<membership::Asked>,
    /// Machines that never registered whose deletion failed, by group: tried again each
    /// loop while their provider still lists them.
    undeleted: std::sync::Mutex<BTreeMap<String, BTreeSet<String>>>,
    /// The planner's nodes and pods, kept from loop to loop.
    view: std::sync::Mutex<snapshot::View>,
    /// When scale-down was last evaluated.
    cadence: cadence::Cadence,
    /// The plan Events a pod-triggered loop left writing.
    plan_events: plan_events::PlanEvents,
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
            stand_ins: crate::provreq::write::StandInWriter::new(client.clone()),
            provreq_backoff: std::sync::Mutex::new(
                config.plan.provisioning_request_backoff.clone(),
            ),
            status: StatusWriter::new(client, metrics.clone()),
            validity: validity::Reported::default(),
            with_series: std::sync::Mutex::default(),
            executor,
            events: Arc::new(events),
            metrics,
            config,
            leading,
            scale_down: None,
            asked: std::sync::Mutex::default(),
            undeleted: std::sync::Mutex::default(),
            view: std::sync::Mutex::default(),
            cadence: cadence::Cadence::default(),
            plan_events: plan_events::PlanEvents::default(),
        }
    }

    /// Turns scale-down on: after each plan, unneeded nodes are found and removed.
    #[must_use]
    pub fn with_scale_down(mut self, scale_down: ScaleDowns) -> Self {
        self.scale_down = Some(scale_down);
        self
    }

    /// Scale-down, when on.
    #[must_use]
    pub fn scale_downs(&self) -> Option<&ScaleDowns> {
        self.scale_down.as_ref()
    }

    /// The planner's nodes and pods kept between loops.
    fn view(&self) -> std::sync::MutexGuard<'_, snapshot::View> {
        self.view
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How many nodes and pods the last loop copied into the planner's input, and how
    /// often it started over.
    #[must_use]
    pub fn view_counts(&self) -> snapshot::Counts {
        self.view().counts()
    }

    /// Runs scale-down after the plan (`plan` is empty when nothing was pending) when it is
    /// on and `evaluate` says so, and keeps the nodes and pods of `objects` for the next loop.
    #[allow(clippy::too_many_arguments)]
    async fn after_plan(
        &self,
        evaluate: bool,
        inputs: &Inputs,
        membership: &Membership,
        groups: &BTreeMap<String, NodeGroup>,
        (objects, filters): (dra_sim::ClusterObjects, Option<FilterState>),
        plan: &PlanReport,
        booting: &[String],
        now: Timestamp,
        summary: &mut LoopSummary,
    ) {
        let mut clock = phases::Clock::start();
        let Some(scale_down) = self
            .scale_down
            .as_ref()
            .filter(|_| evaluate && self.is_leader())
        else {
            self.view().give_back(objects.nodes, objects.pods, filters);
            summary.phases.hand_back = clock.lap();
            return;
        };
        let (hand_back, handed_back) = tokio::sync::oneshot::channel();
        let state = LoopState {
            objects,
            hand_back: Some(hand_back),
            groups,
            plan,
            booting,
            nodes: &inputs.nodes,
            membership,
            scaled_up_now: !summary.scaled_up.is_empty(),
            now,
        };
        let ran = scale_down.run(state, self.config.gates, &self.status).await;
        summary.phases.scale_down_analysis = ran.analysis;
        summary.phases.scale_down_writes = clock.lap().saturating_sub(ran.analysis);
        summary.scale_down = Some(ran);
        if let Ok((nodes, pods)) = handed_back.await {
            self.view().give_back(nodes, pods, filters);
        }
        summary.phases.hand_back = clock.lap();
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

    /// Runs one loop over `inputs` at `now`, every step of it.
    pub async fn run_once(&self, inputs: &Inputs, now: Timestamp) -> LoopSummary {
        self.run_once_for(inputs, now, Trigger::Timer).await
    }

    /// Runs one loop over `inputs` at `now`, started by `trigger`: a loop a pending pod
    /// started evaluates scale-down only when it is due ([`Trigger`]).
    #[tracing::instrument(name = "loop", skip_all, fields(at = %now, ?trigger))]
    pub async fn run_once_for(
        &self,
        inputs: &Inputs,
        now: Timestamp,
        trigger: Trigger,
    ) -> LoopSummary {
        let started = Instant::now();
        let mut clock = phases::Clock::start();
        let mut summary = LoopSummary::default();
        if !self.is_leader() {
            // A cluster-autoscaler that loses its lease exits; its successor
            // starts with no retry backoffs. So does this one when it leads
            // again.
            let mut backoff = self.provreq_backoff();
            *backoff = backoff.emptied();
            return summary;
        }

        let scale_down_due = self.scale_down.is_some() && self.cadence.scale_down_due(trigger, now);
        let (membership, view) = self.membership(inputs, now).await;
        // Groups their provider does not serve are left out like invalid ones.
        let mut unusable = inputs.unusable_node_groups.clone();
        unusable.extend(inputs.node_groups.iter().filter_map(|g| {
            let message = view.refused.get(g.metadata.name.as_deref()?)?;
            validity::refused_by_provider(g, message)
        }));
        self.report_unusable(&unusable, now).await;
        let (mut groups, held_back) = self
            .reconcile_groups(inputs, &membership, &view, now, &mut summary)
            .await;
        self.resend_unconfirmed(&mut groups, now, &mut summary)
            .await;
        let planning: Vec<NodeGroup> = groups
            .values()
            .filter(|g| {
                !summary.backing_off.contains(&name_of(g)) && !summary.sits_out(&name_of(g))
            })
            .cloned()
            .collect();
        summary.phases.reconcile = clock.lap();
        let built = self.view().update(
            inputs,
            &membership,
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
        summary.phases.view = clock.lap();
        summary.planned_for = built.planned_for.len();
        self.metrics
            .unschedulable_pods
            .set(i64::try_from(built.planned_for.len()).unwrap_or(i64::MAX));
        if !built.skipped.is_empty() {
            tracing::debug!(skipped = ?built.skipped, "pending pods left out");
        }
        // ProvisioningRequests and CapacityBuffers are planned every loop,
        // pending pods or not: their stand-in pods live only in the planner.
        if built.planned_for.is_empty() && !crate::provreq::any_planned(&inputs.stand_in_objects) {
            self.metrics.set_unschedulable_gangs(&PlanReport::default());
            self.metrics.waiting_gangs.set(0);
            self.after_plan(
                scale_down_due,
                inputs,
                &membership,
                &groups,
                (built.objects, built.filters),
                &PlanReport::default(),
                &built.booting_nodes,
                now,
                &mut summary,
            )
            .await;
            self.finish(started, now);
            return summary;
        }

        // The planner hands the nodes and pods back for the scale-down analysis: one
        // copy of the cluster per loop, not two.
        let planned = self.plan(built.objects, built.filters, now).await;
        summary.phases.plan = clock.lap();
        let Some((report, scale_down_objects, filters)) = planned else {
            self.metrics.loop_errors.inc();
            self.finish(started, now);
            return summary;
        };
        self.metrics.set_unschedulable_gangs(&report);
        let waiting = report
            .pod_groups
            .iter()
            .filter(|g| g.outcome == GangOutcome::Waits)
            .count();
        self.metrics
            .waiting_gangs
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));

        let mut outcomes = BTreeMap::new();
        for unit in together::units(&report) {
            if !self.is_leader() {
                tracing::warn!("lost leadership; stopping before the next scale-up");
                break;
            }
            self.scale_up_together(
                &unit,
                &report,
                &mut groups,
                now,
                &mut summary,
                &mut outcomes,
            )
            .await;
        }

        if !summary.scaled_up.is_empty() {
            self.refresh_reserved_left(&mut groups, now).await;
        }
        summary.phases.scale_ups = clock.lap();

        let refs = Refs::for_report(
            &report,
            inputs.pods.iter().map(AsRef::as_ref),
            &inputs.gang_objects,
        );
        let for_plan = notices::for_plan(&report, &outcomes, &held_back, &refs);
        let wait = !matches!(trigger, Trigger::PendingPod { .. });
        self.plan_events
            .write(&self.events, for_plan, now, wait)
            .await;
        self.log_waiting_gangs(&report, &held_back, now);
        summary.stand_ins = self
            .stand_ins
            .write(
                &report,
                &outcomes,
                &inputs.stand_in_objects,
                &self.events,
                now,
            )
            .await;
        // As upstream's injector, every request tried counts for its retry
        // backoff, whatever its scale-up did, unless its scale-up was not
        // attempted at all (it is decided again next loop).
        let unsettled = &summary.stand_ins.unsettled;
        self.provreq_backoff().record(
            report
                .provisioning_requests
                .iter()
                .filter(|r| !unsettled.contains(&r.provisioning_request.to_string())),
        );
        summary.phases.notices = clock.lap();
        self.after_plan(
            scale_down_due,
            inputs,
            &membership,
            &groups,
            (scale_down_objects, filters),
            &report,
            &built.booting_nodes,
            now,
            &mut summary,
        )
        .await;
        summary.report = Some(report);
        self.finish(started, now);
        summary
    }

    /// Says at info why each gang no group can land waits, as its `NotTriggerScaleUp` Event
    /// does: once, then again when the reasons change or after the Events' dedup window, so an
    /// operator reading the log sees a stuck gang without a loop's worth of lines each scan.
    fn log_waiting_gangs(&self, report: &PlanReport, held_back: &[String], now: Timestamp) {
        for gang in report
            .pod_groups
            .iter()
            .filter(|g| g.outcome == GangOutcome::Waits && g.api.is_gang())
        {
            let mut reasons = gang.reasons.clone();
            reasons.extend(held_back.iter().cloned());
            let reasons = reasons.join("; ");
            let name = gang.pod_group.to_string();
            if self.events.is_news(&name, "log:waiting", &reasons, now) {
                tracing::info!(
                    gang = %name,
                    api = ?gang.api,
                    min_count = gang.min_count,
                    pending = gang.members.len(),
                    %reasons,
                    "gang waits: no node group can land it whole"
                );
            }
        }
    }

    fn provreq_backoff(&self) -> std::sync::MutexGuard<'_, dra_plan::provreq::RetryBackoff> {
        self.provreq_backoff
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn finish(&self, started: Instant, now: Timestamp) {
        self.metrics
            .loop_duration
            .observe(started.elapsed().as_secs_f64());
        self.metrics.last_loop_timestamp.set(now.as_second());
    }

    /// The plan of `objects`, and `objects` handed back as they were given
    /// ([`dra_plan::handback`]), with the planner's index of them (`filters`, kept by the
    /// view) as it was given.
    async fn plan(
        &self,
        objects: dra_sim::ClusterObjects,
        filters: Option<FilterState>,
        now: Timestamp,
    ) -> Option<(PlanReport, dra_sim::ClusterObjects, Option<FilterState>)> {
        let gates = self.config.gates;
        let mut options = self.config.plan.clone();
        options.now = Some(now);
        options.provisioning_request_backoff = self.provreq_backoff().clone();
        let plan_started = Instant::now();
        // The planner is CPU-bound and synchronous: keep it off the runtime's workers.
        let given = filters.is_some();
        let result = tokio::task::spawn_blocking(move || {
            plan_keeping_filters(objects, filters, gates, &options)
        })
        .await;
        self.metrics
            .plan_duration
            .observe(plan_started.elapsed().as_secs_f64());
        match result {
            Ok(handed) => {
                let report = handed.plan;
                // The loop checked every group before (`validity`) and
                // reported the invalid ones once; the planner's copy is noise.
                for error in &report.node_group_errors {
                    tracing::debug!(node_group = %error.node_group, error = %error.error, "invalid NodeGroup left out");
                }
                let mut filters = handed.filters;
                if given && !handed.filters_reused {
                    // The view's index did not hold its nodes and pods: a bug. The planner
                    // indexed afresh; the view makes its own again from its copies (the
                    // planner's is not the one the view marked).
                    tracing::warn!(
                        "the planner's kept index did not match the cluster; indexed afresh"
                    );
                    filters = None;
                }
                Some((report, handed.objects, filters))
            }
            Err(error) => {
                tracing::error!(%error, "the planner panicked");
                None
            }
        }
    }

    /// Which group each Node belongs to this loop, and what the providers said
    /// (see [`membership`]).
    async fn membership(
        &self,
        inputs: &Inputs,
        now: Timestamp,
    ) -> (Membership, membership::ProviderView) {
        let view = membership::gather(
            self.executor.as_ref(),
            &inputs.node_groups,
            &inputs.nodes,
            &self.asked,
            now,
        )
        .await;
        let names: BTreeSet<String> = inputs
            .node_groups
            .iter()
            .filter_map(|g| g.metadata.name.clone())
            .collect();
        let membership = Membership::resolve(inputs.nodes.iter().map(AsRef::as_ref), &names, &view);
        (membership, view)
    }

    /// Executes one ScaleUp of the plan: the outcome for the notices and what
    /// the provider answered. `None` when it was not attempted (the intent
    /// could not be recorded).
    #[tracing::instrument(
        name = "scale_up",
        skip_all,
        fields(node_group = %scale_up.node_group, count = scale_up.count, request_id)
    )]
    async fn scale_up(
        &self,
        group: &mut NodeGroup,
        scale_up: &ScaleUp,
        report: &PlanReport,
        now: Timestamp,
        summary: &mut LoopSummary,
    ) -> Option<(GroupOutcome, together::Answer)> {
        let name = name_of(group);
        let before = group.status.clone().unwrap_or_default();
        let request_id = format!("{name}-{}", now.as_millisecond());
        let count = scale_up.count;
        tracing::Span::current().record("request_id", request_id.as_str());
        let is_gang = report
            .pod_groups
            .iter()
            .any(|g| g.api.is_gang() && scale_up.pod_groups.contains(&g.pod_group));
        let mut request = IncreaseRequest {
            group: group_ref(group),
            count,
            atomic_min: is_gang.then_some(scale_up.min_count.min(count)),
            request_id: request_id.clone(),
        };

        // 1. Record the intent, conditional on the version we planned from.
        let mut intent = before.clone();
        inflight::record_intent(&mut intent, &request_id, count, request.atomic_min, now);
        *group = match self
            .status
            .write(StatusWrite::ScaleUpIntent, group, intent.clone())
            .await
        {
            Ok(g) => g,
            Err(error) => {
                summary.status_not_written(
                    &name,
                    &error,
                    "scale-up intent not recorded, provider not called",
                );
                return None;
            }
        };

        // 2. Ask the provider.
        tracing::info!(
            node_group = %name,
            %request_id,
            provider = %request.group.provider,
            count,
            atomic_min = ?request.atomic_min,
            capacity_type = %scale_up.capacity_type,
            for_what = %scale_up.pod_group_list(),
            "scaling up: intent recorded, asking the provider"
        );
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
        let answer = together::Answer::of(&request, &result);
        let max = usize_of(group.spec.max_size);
        let from = usize_of(
            before
                .target_size
                .max(before.current_size + before.upcoming_size),
        );
        let for_what = scale_up.pod_group_list();
        match self
            .record_answer(group, intent, &request, result, &for_what, now, summary)
            .await
        {
            Ok(started) => {
                let to = from + started;
                self.metrics
                    .record_scale_up(&name, scale_up.capacity_type.as_str(), started);
                let note = format!(
                    "scaled up node group {name} from {from} to {to} (max {max}), {} capacity, for {for_what}",
                    scale_up.capacity_type,
                );
                self.events
                    .publish(
                        &Self::group_notice(group, false, SCALED_UP_GROUP, note),
                        now,
                    )
                    .await;
                Some((
                    GroupOutcome::Started {
                        from,
                        to,
                        max,
                        capacity_type: scale_up.capacity_type,
                    },
                    answer,
                ))
            }
            Err(message) => Some((GroupOutcome::Failed(message), answer)),
        }
    }
}
