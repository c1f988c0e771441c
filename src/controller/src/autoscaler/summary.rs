//! What one loop did: for the run loop's log line, for tests, and for the steps of the loop
//! that must know which groups sit the rest of it out.

use std::collections::BTreeMap;

use dra_plan::report::PlanReport;

use crate::scaledown::ScaleDownSummary;
use crate::status::StatusError;

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
    /// Groups whose status write lost a race (409: the object changed since it was read);
    /// they sit out this loop and are planned again next loop.
    pub conflicts: Vec<String>,
    /// Groups whose status could not be written for another reason (the API server
    /// unreachable, the write refused): they sit out this loop too, and it is logged as the
    /// error it is.
    pub status_errors: Vec<String>,
    /// What scale-down did, when it is on.
    pub scale_down: Option<ScaleDownSummary>,
    /// ProvisioningRequests and CapacityBuffers whose status was written.
    pub stand_ins: crate::provreq::write::Written,
    /// A scale-up never reached its provider: the next loop should come soon
    /// (with jitter), not a whole scan interval later.
    pub retry_soon: bool,
    /// How long each step of the loop took.
    pub phases: super::Phases,
}

impl LoopSummary {
    /// Whether `group` sits out the rest of this loop: its status could not be written, so
    /// nothing may be asked of its provider before the next loop.
    #[must_use]
    pub fn sits_out(&self, group: &str) -> bool {
        self.conflicts
            .iter()
            .chain(&self.status_errors)
            .any(|g| g == group)
    }

    /// Records a failed status write of `group` as a lost race (409) or an error.
    pub(super) fn status_not_written(&mut self, group: &str, error: &StatusError, what: &str) {
        if error.is_conflict() {
            tracing::info!(node_group = %group, "{what}: the NodeGroup changed since it was read (409); planning it again next loop");
            self.conflicts.push(group.to_owned());
        } else {
            tracing::warn!(node_group = %group, error = %error.source, "{what}: the status write failed; the group sits out this loop");
            self.status_errors.push(group.to_owned());
        }
    }
}
