//! Prometheus metrics, all under `dra_autoscaler_`. Labels are bounded: node
//! group names (operator-defined, few), capacity types and error categories.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};

use dra_plan::report::{GangOutcome, PlanReport};
use dra_plan::scaledown::{ScaleDownReport, UnremovableReason};
use dra_sim::report::Outcome;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of per-group scale-up counters.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScaleUpLabels {
    /// The NodeGroup.
    pub node_group: String,
    /// `reserved`, `on-demand` or `spot`.
    pub capacity_type: String,
}

/// Labels of failure counters.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// The NodeGroup.
    pub node_group: String,
    /// A bounded reason (`out_of_capacity`, `quota`, `timeout`, ...).
    pub reason: String,
}

/// Labels of the scale-down counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScaleDownLabels {
    /// The NodeGroup.
    pub node_group: String,
    /// `empty` or `underutilized`.
    pub reason: String,
}

/// Labels of gauges counted by reason code.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ReasonLabels {
    /// A reason code (`NodeGroupMinSizeReached`, `InsufficientResources`, ...).
    pub reason: String,
}

/// Labels of per-group gauges.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    /// The NodeGroup.
    pub node_group: String,
}

/// Labels of the status write duration histogram.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusWriteLabels {
    /// What the write is for (`reconcile`, `scale_up_intent`, `validity`, ...; see
    /// `crate::status::StatusWrite`).
    pub write: String,
}

/// Labels of the status write failure counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusWriteFailureLabels {
    /// What the write was for.
    pub write: String,
    /// `conflict` (a lost race, 409) or `error` (anything else).
    pub reason: String,
}

/// The constructor of the status write histograms.
type StatusWriteBuckets = fn() -> Histogram;

/// Every metric the controller exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Pending pods planned for in the last loop.
    pub unschedulable_pods: Gauge,
    /// Pending gangs (of more than one pod) in the last loop, by reason code; set with
    /// [`Metrics::set_unschedulable_gangs`].
    pub unschedulable_gangs: Family<ReasonLabels, Gauge>,
    /// Underused nodes the last scale-down pass kept, by reason code; set with
    /// [`Metrics::set_unremovable_nodes`].
    pub unremovable_nodes: Family<ReasonLabels, Gauge>,
    /// The `reason`s of `unschedulable_gangs` ever set, so that each pass sets the ones that
    /// disappeared to 0.
    gang_reasons_seen: Mutex<BTreeSet<String>>,
    /// Pending gangs that could not land in the last loop.
    pub waiting_gangs: Gauge,
    /// Successful scale-up requests.
    pub scale_ups: Family<ScaleUpLabels, Counter>,
    /// Nodes requested by successful scale-ups.
    pub nodes_added: Family<ScaleUpLabels, Counter>,
    /// Failed scale-ups and timed-out nodes.
    pub failed_scale_ups: Family<FailureLabels, Counter>,
    /// Time of a whole loop.
    pub loop_duration: Histogram,
    /// Time of the planner alone.
    pub plan_duration: Histogram,
    /// Time of each NodeGroup status write, by what it writes.
    pub status_write_duration: Family<StatusWriteLabels, Histogram, StatusWriteBuckets>,
    /// NodeGroup status writes that failed, by what they wrote and why.
    pub status_write_failures: Family<StatusWriteFailureLabels, Counter>,
    /// Nodes requested and not registered, per group.
    pub upcoming_nodes: Family<GroupLabels, Gauge>,
    /// Nodes of reserved groups that count against their reservation.
    pub reservation_used: Family<GroupLabels, Gauge>,
    /// Free reservation slots, per reserved group.
    pub reservation_left: Family<GroupLabels, Gauge>,
    /// 1 while this replica holds the lease.
    pub leader: Gauge,
    /// Unix time of the last finished loop.
    pub last_loop_timestamp: Gauge,
    /// Loops that failed before finishing.
    pub loop_errors: Counter,
    /// Nodes removed by scale-down.
    pub scaled_down_nodes: Family<ScaleDownLabels, Counter>,
    /// Nodes found unneeded in the last loop, per group.
    pub unneeded_nodes: Family<GroupLabels, Gauge>,
    /// NodeGroups left out because they do not decode or validate.
    pub invalid_node_groups: Gauge,
}

/// `reason` of `failed_scale_ups` for nodes that never registered.
pub const TIMED_OUT: &str = "timeout";
/// `reason` of `scaled_down_nodes` for a node with no pod to move.
pub const SCALED_DOWN_EMPTY: &str = "empty";
/// `reason` of `scaled_down_nodes` for an underused node whose pods were moved.
pub const SCALED_DOWN_UNDERUTILIZED: &str = "underutilized";

/// Every `reason` of `failed_scale_ups`: the provider error categories and [`TIMED_OUT`].
fn failure_reasons() -> impl Iterator<Item = &'static str> {
    use dra_provider::ErrorCategory as C;
    [
        C::NotSent,
        C::Unknown,
        C::OutOfCapacity,
        C::Quota,
        C::NotImplemented,
        C::Config,
        C::Rejected,
    ]
    .into_iter()
    .map(C::metric_label)
    .chain([TIMED_OUT])
}

impl Metrics {
    /// Removes every per-group series of a NodeGroup that is gone (deleted, or left out as
    /// invalid), so that it does not report its last values forever: the gauges, scale-down's
    /// series and the per-group counters (their other labels are bounded and enumerated here).
    pub fn forget_group(&self, node_group: &str) {
        let labels = GroupLabels {
            node_group: node_group.to_string(),
        };
        self.upcoming_nodes.remove(&labels);
        self.reservation_used.remove(&labels);
        self.reservation_left.remove(&labels);
        self.unneeded_nodes.remove(&labels);
        for capacity_type in [
            dra_api::CapacityType::Reserved,
            dra_api::CapacityType::OnDemand,
            dra_api::CapacityType::Spot,
        ] {
            let labels = ScaleUpLabels {
                node_group: node_group.to_string(),
                capacity_type: capacity_type.as_str().to_string(),
            };
            self.scale_ups.remove(&labels);
            self.nodes_added.remove(&labels);
        }
        for reason in failure_reasons() {
            self.failed_scale_ups.remove(&FailureLabels {
                node_group: node_group.to_string(),
                reason: reason.to_string(),
            });
        }
        for reason in [SCALED_DOWN_EMPTY, SCALED_DOWN_UNDERUTILIZED] {
            self.scaled_down_nodes.remove(&ScaleDownLabels {
                node_group: node_group.to_string(),
                reason: reason.to_string(),
            });
        }
    }
}

/// `reason` of `unschedulable_gangs` for a gang the plan lands with a member on a new node.
pub const GANG_SCALE_UP_PLANNED: &str = "ScaleUpPlanned";
/// `reason` of `unschedulable_gangs` for a gang the plan lands on nodes that exist or are
/// coming (the scheduler has not placed it yet).
pub const GANG_FITS_EXISTING_NODES: &str = "FitsExistingNodes";
/// `reason` of `unschedulable_gangs` for a gang that waits with no fit-engine code given.
pub const GANG_UNCLASSIFIED: &str = "Unclassified";

/// Why a pending gang is pending, as one bounded code: the fit engine's code
/// (`dra_sim::reason::Code`) most of its members' refusals carry (ties to the first code in
/// declaration order); without one, [`GANG_SCALE_UP_PLANNED`] or [`GANG_FITS_EXISTING_NODES`]
/// for a gang that lands and [`GANG_UNCLASSIFIED`] for one that waits.
#[must_use]
pub fn gang_reason(report: &PlanReport, gang: &dra_plan::report::PodGroupReport) -> &'static str {
    let members: BTreeSet<String> = gang.members.iter().map(ToString::to_string).collect();
    let pods: Vec<_> = report
        .pods
        .iter()
        .filter(|p| members.contains(&p.pod))
        .collect();
    let mut codes: BTreeMap<dra_sim::reason::Code, usize> = BTreeMap::new();
    for code in pods.iter().flat_map(|p| &p.reason_codes) {
        *codes.entry(code.code).or_default() += 1;
    }
    let top = codes
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(code, _)| code.as_str());
    match (top, gang.outcome) {
        (Some(code), _) => code,
        (None, GangOutcome::Lands) if pods.iter().any(|p| p.outcome == Outcome::FitsNewNode) => {
            GANG_SCALE_UP_PLANNED
        }
        (None, GangOutcome::Lands) => GANG_FITS_EXISTING_NODES,
        (None, GangOutcome::Waits) => GANG_UNCLASSIFIED,
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("dra_autoscaler");
        let unschedulable_pods = Gauge::default();
        let unschedulable_gangs = Family::default();
        let unremovable_nodes = Family::default();
        let waiting_gangs = Gauge::default();
        let scale_ups = Family::default();
        let nodes_added = Family::default();
        let failed_scale_ups = Family::default();
        let loop_duration = Histogram::new(exponential_buckets(0.01, 2.0, 14));
        let plan_duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        // 1 ms to ~16 s: an apply to a healthy API server takes milliseconds; the top buckets
        // show one that is struggling.
        let status_write_duration: Family<_, _, StatusWriteBuckets> =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 15)));
        let status_write_failures = Family::default();
        registry.register(
            "status_write_duration_seconds",
            "Duration of one NodeGroup status write (server-side apply), by what it writes",
            status_write_duration.clone(),
        );
        registry.register(
            "status_write_failures",
            "NodeGroup status writes that failed, by what they wrote and why (conflict, error)",
            status_write_failures.clone(),
        );
        let upcoming_nodes = Family::default();
        let reservation_used = Family::default();
        let reservation_left = Family::default();
        let leader = Gauge::default();
        let last_loop_timestamp = Gauge::default();
        let loop_errors = Counter::default();
        let scaled_down_nodes = Family::default();
        let unneeded_nodes = Family::default();
        let invalid_node_groups = Gauge::default();
        registry.register(
            "invalid_node_groups",
            "NodeGroups left out because they do not decode or validate (see their Valid condition)",
            invalid_node_groups.clone(),
        );
        registry.register(
            "unschedulable_pods",
            "Pending pods the last loop planned for",
            unschedulable_pods.clone(),
        );
        registry.register(
            "unschedulable_gangs",
            "Pending gangs of more than one pod in the last loop, by reason code (sum over reason for the total)",
            unschedulable_gangs.clone(),
        );
        registry.register(
            "unremovable_nodes",
            "Underused nodes the last scale-down pass kept, by reason code",
            unremovable_nodes.clone(),
        );
        registry.register(
            "waiting_gangs",
            "Pending gangs no node group could land in the last loop",
            waiting_gangs.clone(),
        );
        registry.register(
            "scale_ups",
            "Successful scale-up requests",
            scale_ups.clone(),
        );
        registry.register(
            "nodes_added",
            "Nodes requested by successful scale-ups",
            nodes_added.clone(),
        );
        registry.register(
            "failed_scale_ups",
            "Failed scale-up requests and timed-out nodes, by reason",
            failed_scale_ups.clone(),
        );
        registry.register(
            "loop_duration_seconds",
            "Duration of one autoscaling loop",
            loop_duration.clone(),
        );
        registry.register(
            "plan_duration_seconds",
            "Duration of the planner in one loop",
            plan_duration.clone(),
        );
        registry.register(
            "upcoming_nodes",
            "Nodes requested and not registered yet",
            upcoming_nodes.clone(),
        );
        registry.register(
            "reservation_used_nodes",
            "Nodes of a reserved group counted against its reservation",
            reservation_used.clone(),
        );
        registry.register(
            "reservation_left_nodes",
            "Free slots in the reservation behind a reserved group",
            reservation_left.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease",
            leader.clone(),
        );
        registry.register(
            "last_loop_timestamp_seconds",
            "Unix time the last loop finished",
            last_loop_timestamp.clone(),
        );
        registry.register(
            "loop_errors",
            "Loops that failed before finishing",
            loop_errors.clone(),
        );
        registry.register(
            "scaled_down_nodes",
            "Nodes removed by scale-down, by reason (empty, underutilized)",
            scaled_down_nodes.clone(),
        );
        registry.register(
            "unneeded_nodes",
            "Nodes found unneeded (underused, every pod able to move) in the last loop",
            unneeded_nodes.clone(),
        );
        Self {
            registry,
            unschedulable_pods,
            unschedulable_gangs,
            unremovable_nodes,
            gang_reasons_seen: Mutex::default(),
            waiting_gangs,
            scale_ups,
            nodes_added,
            failed_scale_ups,
            loop_duration,
            plan_duration,
            status_write_duration,
            status_write_failures,
            upcoming_nodes,
            reservation_used,
            reservation_left,
            leader,
            last_loop_timestamp,
            loop_errors,
            scaled_down_nodes,
            unneeded_nodes,
            invalid_node_groups,
        }
    }

    /// The OpenMetrics text exposition.
    #[must_use]
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Counts one scale-up of `count` nodes.
    pub fn record_scale_up(&self, node_group: &str, capacity_type: &str, count: usize) {
        let labels = ScaleUpLabels {
            node_group: node_group.to_string(),
            capacity_type: capacity_type.to_string(),
        };
        self.scale_ups.get_or_create(&labels).inc();
        self.nodes_added
            .get_or_create(&labels)
            .inc_by(u64::try_from(count).unwrap_or(u64::MAX));
    }

    /// Records one NodeGroup status write of `write` that took `seconds`; `failed` is the
    /// failure's reason when it failed.
    pub fn record_status_write(&self, write: &str, seconds: f64, failed: Option<&str>) {
        self.status_write_duration
            .get_or_create(&StatusWriteLabels {
                write: write.to_string(),
            })
            .observe(seconds);
        if let Some(reason) = failed {
            self.status_write_failures
                .get_or_create(&StatusWriteFailureLabels {
                    write: write.to_string(),
                    reason: reason.to_string(),
                })
                .inc();
        }
    }

    /// Sets `unschedulable_gangs` from a plan (an empty one when nothing was planned): each
    /// pending gang of more than one pod counted under [`gang_reason`], every reason seen
    /// before and not now at 0.
    pub fn set_unschedulable_gangs(&self, report: &PlanReport) {
        let mut counts: BTreeMap<String, i64> = BTreeMap::new();
        for gang in report.pod_groups.iter().filter(|g| g.api.is_gang()) {
            *counts
                .entry(gang_reason(report, gang).to_string())
                .or_default() += 1;
        }
        let mut seen = self
            .gang_reasons_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        seen.extend(counts.keys().cloned());
        for reason in seen.iter() {
            self.unschedulable_gangs
                .get_or_create(&ReasonLabels {
                    reason: reason.clone(),
                })
                .set(counts.get(reason).copied().unwrap_or(0));
        }
    }

    /// Sets `unremovable_nodes` from a scale-down pass: every code, 0 when no node was kept
    /// for it.
    pub fn set_unremovable_nodes(&self, report: &ScaleDownReport) {
        for code in UnremovableReason::ALL {
            let n = report
                .scale_down_blocked
                .iter()
                .filter(|b| b.reason.code() == code)
                .count();
            self.unremovable_nodes
                .get_or_create(&ReasonLabels {
                    reason: code.as_str().to_string(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Counts one failure.
    pub fn record_failure(&self, node_group: &str, reason: &str) {
        self.failed_scale_ups
            .get_or_create(&FailureLabels {
                node_group: node_group.to_string(),
                reason: reason.to_string(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names_carry_the_prefix_and_labels() {
        let m = Metrics::new();
        m.record_scale_up("gpu", "reserved", 4);
        m.record_failure("gpu", "out_of_capacity");
        m.upcoming_nodes
            .get_or_create(&GroupLabels {
                node_group: "gpu".into(),
            })
            .set(4);
        m.loop_duration.observe(0.2);
        m.scaled_down_nodes
            .get_or_create(&ScaleDownLabels {
                node_group: "gpu".into(),
                reason: "empty".into(),
            })
            .inc();
        m.unneeded_nodes
            .get_or_create(&GroupLabels {
                node_group: "gpu".into(),
            })
            .set(2);
        let text = m.encode();
        for line in [
            "dra_autoscaler_scale_ups_total{node_group=\"gpu\",capacity_type=\"reserved\"} 1",
            "dra_autoscaler_nodes_added_total{node_group=\"gpu\",capacity_type=\"reserved\"} 4",
            "dra_autoscaler_failed_scale_ups_total{node_group=\"gpu\",reason=\"out_of_capacity\"} 1",
            "dra_autoscaler_upcoming_nodes{node_group=\"gpu\"} 4",
            "dra_autoscaler_loop_duration_seconds_count 1",
            "# TYPE dra_autoscaler_plan_duration_seconds histogram",
            "# TYPE dra_autoscaler_unschedulable_pods gauge",
            "dra_autoscaler_scaled_down_nodes_total{node_group=\"gpu\",reason=\"empty\"} 1",
            "dra_autoscaler_unneeded_nodes{node_group=\"gpu\"} 2",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn status_writes_are_timed_and_failures_counted_by_what_they_write() {
        let m = Metrics::new();
        m.record_status_write("reconcile", 0.003, None);
        m.record_status_write("scale_up_intent", 0.002, Some("conflict"));
        let text = m.encode();
        for line in [
            "# TYPE dra_autoscaler_status_write_duration_seconds histogram",
            "dra_autoscaler_status_write_duration_seconds_count{write=\"reconcile\"} 1",
            "dra_autoscaler_status_write_duration_seconds_count{write=\"scale_up_intent\"} 1",
            "# TYPE dra_autoscaler_status_write_failures counter",
            "dra_autoscaler_status_write_failures_total{write=\"scale_up_intent\",reason=\"conflict\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(
            !text.contains("status_write_failures_total{write=\"reconcile\""),
            "{text}"
        );
    }

    fn plan(json: serde_json::Value) -> PlanReport {
        serde_json::from_value(json).expect("a plan")
    }

    fn gang(name: &str, outcome: &str, members: &[&str]) -> serde_json::Value {
        serde_json::json!({"podGroup": name, "api": "pod-group", "outcome": outcome,
            "minCount": members.len(), "members": members, "reasons": []})
    }

    #[test]
    fn gangs_are_counted_by_reason_and_a_reason_that_goes_drops_to_zero() {
        let m = Metrics::new();
        let first = plan(serde_json::json!({
            "scaleUps": [],
            "podGroups": [
                gang("ml/a", "waits", &["ml/a-0", "ml/a-1"]),
                gang("ml/b", "lands", &["ml/b-0", "ml/b-1"]),
                gang("ml/c", "waits", &["ml/c-0", "ml/c-1"]),
                {"podGroup": "ml/solo", "api": "single", "outcome": "waits", "minCount": 1,
                 "members": ["ml/solo"], "reasons": []}
            ],
            "pods": [
                {"pod": "ml/a-0", "outcome": "unschedulable", "reasons": ["n: Insufficient cpu", "m: x"],
                 "reasonCodes": [{"code": "InsufficientResources", "plugin": "NodeResourcesFit", "node": "n"},
                                 {"code": "UntoleratedTaint", "plugin": "TaintToleration", "node": "m"}]},
                {"pod": "ml/a-1", "outcome": "unschedulable", "reasons": ["n: Insufficient cpu"],
                 "reasonCodes": [{"code": "InsufficientResources", "plugin": "NodeResourcesFit", "node": "n"}]},
                {"pod": "ml/b-0", "outcome": "fits-new-node", "node": "gpu-new-0", "nodeGroup": "gpu", "reasons": []},
                {"pod": "ml/b-1", "outcome": "fits", "node": "gpu-1", "reasons": []},
                {"pod": "ml/c-0", "outcome": "unschedulable", "reasons": ["max size"]},
                {"pod": "ml/c-1", "outcome": "unschedulable", "reasons": ["max size"]},
                {"pod": "ml/solo", "outcome": "unschedulable", "reasons": ["n: Insufficient cpu"],
                 "reasonCodes": [{"code": "InsufficientResources", "plugin": "NodeResourcesFit", "node": "n"}]}
            ]
        }));
        m.set_unschedulable_gangs(&first);
        let text = m.encode();
        // A single pod is no gang; the most frequent code of the members names a gang.
        for line in [
            "dra_autoscaler_unschedulable_gangs{reason=\"InsufficientResources\"} 1",
            "dra_autoscaler_unschedulable_gangs{reason=\"ScaleUpPlanned\"} 1",
            "dra_autoscaler_unschedulable_gangs{reason=\"Unclassified\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(!text.contains("reason=\"UntoleratedTaint\""), "{text}");
        m.set_unschedulable_gangs(&PlanReport::default());
        let text = m.encode();
        for reason in ["InsufficientResources", "ScaleUpPlanned", "Unclassified"] {
            let line = format!("dra_autoscaler_unschedulable_gangs{{reason=\"{reason}\"}} 0");
            assert!(text.contains(&line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn unremovable_nodes_are_counted_by_code_and_reset_each_pass() {
        let m = Metrics::new();
        let report: ScaleDownReport = serde_json::from_value(serde_json::json!({
            "scaleDowns": [{"node": "e", "nodeGroup": "g", "reason": "empty", "code": "Empty"}],
            "scaleDownBlocked": [
                {"node": "a", "nodeGroup": "g", "reason": "minSize 1", "code": "NodeGroupMinSizeReached"},
                {"node": "b", "nodeGroup": "g", "reason": "pod ml/x has no controller", "code": "BlockedByPod"},
                {"node": "c", "nodeGroup": "g", "reason": "pod ml/y has no controller", "code": "BlockedByPod"}
            ]
        }))
        .expect("a scale-down report");
        m.set_unremovable_nodes(&report);
        let text = m.encode();
        for line in [
            "# TYPE dra_autoscaler_unremovable_nodes gauge",
            "dra_autoscaler_unremovable_nodes{reason=\"NodeGroupMinSizeReached\"} 1",
            "dra_autoscaler_unremovable_nodes{reason=\"BlockedByPod\"} 2",
            "dra_autoscaler_unremovable_nodes{reason=\"NoPlaceToMovePods\"} 0",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        m.set_unremovable_nodes(&ScaleDownReport::default());
        let text = m.encode();
        assert!(
            text.contains("dra_autoscaler_unremovable_nodes{reason=\"BlockedByPod\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn a_group_that_goes_leaves_no_series_behind() {
        let m = Metrics::new();
        let group = |name: &str| GroupLabels {
            node_group: name.into(),
        };
        for name in ["gpu", "cpu"] {
            m.record_scale_up(name, "spot", 2);
            m.record_scale_up(name, "on-demand", 1);
            m.record_failure(name, "quota");
            m.record_failure(name, TIMED_OUT);
            m.upcoming_nodes.get_or_create(&group(name)).set(1);
            m.reservation_used.get_or_create(&group(name)).set(1);
            m.reservation_left.get_or_create(&group(name)).set(3);
            m.unneeded_nodes.get_or_create(&group(name)).set(2);
            for reason in [SCALED_DOWN_EMPTY, SCALED_DOWN_UNDERUTILIZED] {
                m.scaled_down_nodes
                    .get_or_create(&ScaleDownLabels {
                        node_group: name.into(),
                        reason: reason.into(),
                    })
                    .inc();
            }
        }
        m.forget_group("gpu");
        let text = m.encode();
        assert!(!text.contains("node_group=\"gpu\""), "{text}");
        // The other group keeps every series.
        let cpu_series = text
            .lines()
            .filter(|l| l.contains("node_group=\"cpu\""))
            .count();
        assert_eq!(cpu_series, 12, "{text}");
    }
}
