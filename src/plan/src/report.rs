//! The plan as `simulate` prints it when NodeGroups are in the input. It
//! extends the simulation report with `scaleUps`, `podGroups` and
//! `nodeGroupErrors`; keys are a contract: add, never rename.

use dra_api::CapacityType;
use dra_sim::ObjectRef;
use dra_sim::report::PodReport;
use serde::{Deserialize, Serialize};

use crate::buffers::CapacityBufferReport;
use crate::gang::{GangApi, GangRef};
use crate::groups::GroupError;
use crate::provreq::ProvisioningRequestReport;

/// New nodes for one group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleUp {
    /// The NodeGroup's name.
    pub node_group: String,
    /// How many nodes to add.
    pub count: usize,
    /// The pod groups (gangs) these nodes are for.
    pub pod_groups: Vec<GangRef>,
    /// `reserved`, `on-demand` or `spot`.
    pub capacity_type: CapacityType,
    /// Marginal cost of the new nodes per hour (count × the group's price).
    pub price_per_hour: f64,
    /// The smallest number of nodes that must start together for every gang
    /// served to land: an atomic increase asks the provider for at least this
    /// many or none.
    pub min_count: usize,
    /// Why the plan stops where it does, in words: the limit this group
    /// reached (its `maxSize`, its reservation's remaining slots), and the
    /// groups serving the same gangs whose limit sent the rest here. Empty
    /// when no limit shaped the choice.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub why: Vec<String>,
}

impl ScaleUp {
    /// The gangs served, as people read them: `ns/a, ns/b`.
    #[must_use]
    pub fn pod_group_list(&self) -> String {
        self.pod_groups
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Whether a gang lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GangOutcome {
    /// Enough members fit (on existing or new nodes) for the gang to start.
    #[serde(rename = "lands")]
    Lands,
    /// It cannot start whole; no node is planned for it.
    #[serde(rename = "waits")]
    Waits,
}

/// The decision for one gang.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupReport {
    /// The group (a single pod for a gang of one), written `namespace/name`.
    pub pod_group: GangRef,
    /// Which API defines the group (`pod-group`, `workload`, `coscheduling`, `volcano`, `kueue`, `single`).
    pub api: GangApi,
    /// Lands or waits.
    pub outcome: GangOutcome,
    /// Members that must run together, counting bound ones.
    pub min_count: usize,
    /// The pending members, written `namespace/name`.
    pub members: Vec<ObjectRef>,
    /// Why it waits: per node group, what ruled it out.
    pub reasons: Vec<String>,
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanReport {
    /// Every pending pod, in placement order.
    pub pods: Vec<PodReport>,
    /// New nodes per group, in group name order.
    pub scale_ups: Vec<ScaleUp>,
    /// Every pending gang, in planning order.
    pub pod_groups: Vec<PodGroupReport>,
    /// NodeGroups that were not usable, and why.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub node_group_errors: Vec<GroupError>,
    /// Every ProvisioningRequest in the input and what the plan means for
    /// it (the condition the autoscaler sets), in input order.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub provisioning_requests: Vec<ProvisioningRequestReport>,
    /// Every CapacityBuffer in the input and where its chunks are, in input
    /// order.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub capacity_buffers: Vec<CapacityBufferReport>,
}

impl PlanReport {
    /// A readable summary: scale-ups, then gangs, then the pod table.
    #[must_use]
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "SCALE-UPS");
        if self.scale_ups.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for s in &self.scale_ups {
            let _ = writeln!(
                out,
                "  {} +{} ({}, {:.2}/h) for {}",
                s.node_group,
                s.count,
                s.capacity_type,
                s.price_per_hour,
                s.pod_group_list()
            );
            for why in &s.why {
                let _ = writeln!(out, "    - {why}");
            }
        }
        let _ = writeln!(out, "POD GROUPS");
        for g in &self.pod_groups {
            let outcome = match g.outcome {
                GangOutcome::Lands => "lands",
                GangOutcome::Waits => "waits",
            };
            let _ = writeln!(
                out,
                "  {} ({}, min {}, {} pending): {outcome}",
                g.pod_group,
                g.api,
                g.min_count,
                g.members.len()
            );
            for r in &g.reasons {
                let _ = writeln!(out, "    - {r}");
            }
        }
        if !self.provisioning_requests.is_empty() {
            let _ = writeln!(out, "PROVISIONING REQUESTS");
        }
        for r in &self.provisioning_requests {
            let outcome = serde_json::to_value(r.outcome)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = write!(
                out,
                "  {} ({}, {} pods): {outcome}",
                r.provisioning_request, r.provisioning_class, r.pod_count
            );
            if r.booked > 0 {
                let _ = write!(out, ", {} booked", r.booked);
            }
            if let Some(c) = &r.condition {
                let _ = write!(out, " [{}={} {}]", c.type_, c.status, c.reason);
            }
            let _ = writeln!(out);
            for reason in &r.reasons {
                let _ = writeln!(out, "    - {reason}");
            }
        }
        if !self.capacity_buffers.is_empty() {
            let _ = writeln!(out, "CAPACITY BUFFERS");
        }
        for b in &self.capacity_buffers {
            let outcome = serde_json::to_value(b.outcome)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {} ({} x {}): {outcome}: {} on existing nodes, {} on new nodes, {} waiting",
                b.capacity_buffer,
                b.replicas,
                b.pod_template.as_deref().unwrap_or("?"),
                b.existing,
                b.new_nodes,
                b.waiting
            );
            for reason in &b.reasons {
                let _ = writeln!(out, "    - {reason}");
            }
        }
        for e in &self.node_group_errors {
            let _ = writeln!(
                out,
                "INVALID NODEGROUP {} ({}): {}",
                e.node_group, e.origin, e.error
            );
        }
        let pods = dra_sim::report::Report {
            pods: self.pods.clone(),
        };
        out.push_str(&pods.to_text());
        out
    }
}
