//! The provider's answer to a scale-up, recorded in the NodeGroup status, and
//! the re-send of requests whose answer was lost.

use std::collections::BTreeMap;

use dra_api::{LastScaleUp, NodeGroup, NodeGroupStatus, ScaleUpOutcome};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::{Autoscaler, LoopSummary, group_ref, name_of, to_i32, usize_of};
use crate::backoff;
use crate::events::{BACK_OFF, FAILED_TO_SCALE_UP_GROUP, SCALED_UP_GROUP};
use crate::executor::{self, ErrorCategory, IncreaseRequest, Increased, ScaleError};
use crate::inflight;
use crate::status::StatusWrite;

impl Autoscaler {
    /// Sends again, with the same request id, every all-or-nothing request
    /// whose answer was lost (a deadline after sending, or a crash between the
    /// intent and the answer): the provider answers a request id it has seen
    /// with what it started then, so nothing starts twice, and the pods need
    /// not wait out the provision time for machines that were never asked for.
    pub(super) async fn resend_unconfirmed(
        &self,
        groups: &mut BTreeMap<String, NodeGroup>,
        now: Timestamp,
        summary: &mut LoopSummary,
    ) {
        for (name, group) in groups.iter_mut() {
            let status = group.status.clone().unwrap_or_default();
            if status.unconfirmed_requests.is_empty() || summary.sits_out(name) {
                continue;
            }
            for unconfirmed in &status.unconfirmed_requests {
                if !self.is_leader() {
                    return;
                }
                let request = IncreaseRequest {
                    group: group_ref(group),
                    count: usize_of(unconfirmed.count),
                    atomic_min: Some(usize_of(unconfirmed.min_count)),
                    request_id: unconfirmed.request_id.clone(),
                };
                tracing::info!(node_group = %name, request_id = %request.request_id, count = request.count, "sending an unconfirmed scale-up again");
                let result = self.executor.increase(&request).await;
                let current = group.status.clone().unwrap_or_default();
                let for_what = format!("request {} (sent again)", request.request_id);
                if let Ok(started) = self
                    .record_answer(group, current, &request, result, &for_what, now, summary)
                    .await
                {
                    self.metrics
                        .record_scale_up(name, group.spec.capacity_type.as_str(), started);
                    let note = format!(
                        "scale-up request {} confirmed: {started} node(s) of node group {name} started",
                        request.request_id
                    );
                    self.events
                        .publish(
                            &Self::group_notice(group, false, SCALED_UP_GROUP, note),
                            now,
                        )
                        .await;
                }
            }
        }
    }

    /// Records the provider's answer to `request` in `status` (which holds the
    /// request's intent), writes it and updates `group` to what was written.
    /// Returns how many machines started, or the failure message after the
    /// failure's metric and Events.
    ///
    /// The three kinds of failure differ in what is left of the request:
    /// never sent, nothing exists (release, retry shortly, no backoff);
    /// refused, nothing exists (release, back off); unknown, it may exist
    /// (keep the placeholders; an all-or-nothing request is sent again with
    /// its request id next loop).
    #[allow(clippy::too_many_arguments)]
    #[tracing::instrument(
        name = "answer",
        skip_all,
        fields(node_group = %request.group.name, request_id = %request.request_id)
    )]
    pub(super) async fn record_answer(
        &self,
        group: &mut NodeGroup,
        mut status: NodeGroupStatus,
        request: &IncreaseRequest,
        result: Result<Increased, ScaleError>,
        for_what: &str,
        now: Timestamp,
        summary: &mut LoopSummary,
    ) -> Result<usize, String> {
        let name = name_of(group);
        let request_id = &request.request_id;
        let count = request.count;
        let outcome = match result {
            Ok(done) => {
                let started = done.started.min(count);
                inflight::confirm(&mut status, request_id, started, &done.instance_ids);
                status.last_scale_up = Some(LastScaleUp {
                    time: Time(now),
                    count: to_i32(started),
                    outcome: ScaleUpOutcome::Succeeded,
                    message: format!("started {started} node(s) for {for_what}"),
                });
                backoff::clear(&mut status, now);
                summary.scaled_up.insert(name.clone(), started);
                tracing::info!(node_group = %name, %request_id, started, "scale-up succeeded");
                Ok(started)
            }
            Err(error) => Err(error),
        };
        let error = match outcome {
            Ok(started) => {
                match self
                    .status
                    .write(StatusWrite::ScaleUpOutcome, group, status)
                    .await
                {
                    Ok(written) => *group = written,
                    // The placeholders stay; they are matched as nodes register.
                    Err(error) => {
                        tracing::warn!(%error, node_group = %name, "scale-up outcome not recorded");
                    }
                }
                return Ok(started);
            }
            Err(error) => error,
        };
        let message = error.to_string();
        let atomic = request.atomic_min.is_some();
        let (detail, refused) = match error.category {
            ErrorCategory::NotSent => {
                inflight::release(&mut status, request_id);
                summary.retry_soon = true;
                (
                    format!("{message}; nothing was started, retrying shortly"),
                    false,
                )
            }
            ErrorCategory::Unknown if atomic => (
                format!(
                    "{message}; the request may have gone through: its nodes count as upcoming and it is sent again with request id {request_id}"
                ),
                false,
            ),
            // A plain increase has no request id to send again. An atomic one
            // refused as not implemented is a re-send, and a plain increase
            // with its id may have gone out before the answer was lost.
            category
                if category == ErrorCategory::Unknown
                    || (category == ErrorCategory::NotImplemented && atomic) =>
            {
                inflight::unconfirmed_lost(&mut status, request_id);
                (
                    format!(
                        "{message}; the request may have gone through, so its nodes count as upcoming until they register or time out"
                    ),
                    false,
                )
            }
            _ => {
                inflight::release(&mut status, request_id);
                (message.clone(), true)
            }
        };
        tracing::warn!(node_group = %name, %request_id, category = error.category.metric_label(), "{detail}");
        status.last_scale_up = Some(LastScaleUp {
            time: Time(now),
            count: to_i32(count),
            outcome: executor::outcome_of(error.category),
            message: detail.clone(),
        });
        let until = refused.then(|| {
            backoff::enter(
                &self.config.backoff,
                &mut status,
                now,
                error.category.reason(),
                &message,
            )
        });
        match self
            .status
            .write(StatusWrite::ScaleUpOutcome, group, status)
            .await
        {
            Ok(written) => *group = written,
            Err(e) => {
                tracing::warn!(error = %e, node_group = %name, "scale-up failure not recorded");
            }
        }
        self.metrics
            .record_failure(&name, error.category.metric_label());
        summary.failed.insert(name.clone(), message.clone());
        self.events
            .publish(
                &Self::group_notice(
                    group,
                    true,
                    FAILED_TO_SCALE_UP_GROUP,
                    // What happens next too (nothing started and a retry shortly, kept as
                    // upcoming, or a backoff), as the log line and lastScaleUp say it.
                    format!("scale-up of {count} node(s) failed: {detail}"),
                ),
                now,
            )
            .await;
        if let Some(until) = until {
            self.events
                .publish(
                    &Self::group_notice(
                        group,
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
        Err(message)
    }
}
