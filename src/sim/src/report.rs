//! The simulation's answer, in the JSON shape `dra-autoscaler simulate -o json`
//! prints. Keys are a contract other tools read: add, never rename.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{DeviceRequestAllocationResult, DeviceToleration};
use serde::{Deserialize, Serialize};

use crate::reason::{Reason, ReasonCode};

/// What happened to one pending pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// It fits on an existing node.
    #[serde(rename = "fits")]
    Fits,
    /// It fits on a node the plan would add.
    #[serde(rename = "fits-new-node")]
    FitsNewNode,
    /// No node takes it.
    #[serde(rename = "unschedulable")]
    Unschedulable,
    /// The scheduler would fail on it with an error (bad CEL, missing class, …).
    #[serde(rename = "error")]
    Error,
}

impl Outcome {
    /// The JSON spelling, for text output.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Fits => "fits",
            Outcome::FitsNewNode => "fits-new-node",
            Outcome::Unschedulable => "unschedulable",
            Outcome::Error => "error",
        }
    }
}

/// One device given to one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceResult {
    /// `req`, or `req/sub` for a `firstAvailable` subrequest.
    pub request: String,
    /// Driver name.
    pub driver: String,
    /// Pool name.
    pub pool: String,
    /// Device name.
    pub device: String,
    /// True for admin access; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_access: Option<bool>,
    /// Share of a multi-allocatable device.
    #[serde(rename = "shareID", skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    /// Capacity consumed from a multi-allocatable device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed_capacity: Option<BTreeMap<String, String>>,
    /// Tolerations copied from the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<DeviceToleration>>,
    /// Conditions the scheduler waits for before binding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding_conditions: Option<Vec<String>>,
    /// Conditions that fail the binding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding_failure_conditions: Option<Vec<String>>,
}

impl From<&DeviceRequestAllocationResult> for DeviceResult {
    fn from(r: &DeviceRequestAllocationResult) -> Self {
        fn non_empty<T: Clone>(v: Option<&Vec<T>>) -> Option<Vec<T>> {
            v.filter(|v| !v.is_empty()).cloned()
        }
        DeviceResult {
            request: r.request.clone(),
            driver: r.driver.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
            admin_access: r.admin_access.filter(|a| *a),
            share_id: r.share_id.clone(),
            consumed_capacity: r.consumed_capacity.as_ref().map(|c| {
                c.iter()
                    .map(|(name, q)| (name.clone(), q.0.clone()))
                    .collect()
            }),
            tolerations: non_empty(r.tolerations.as_ref()),
            binding_conditions: non_empty(r.binding_conditions.as_ref()),
            binding_failure_conditions: non_empty(r.binding_failure_conditions.as_ref()),
        }
    }
}

/// The allocation of one claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimAllocation {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// Where the allocation can be used, as Kubernetes JSON; `{}` when nil
    /// (usable on every node).
    pub node_selector: serde_json::Value,
    /// One entry per device, in allocation order.
    pub results: Vec<DeviceResult>,
}

/// The decision for one pending pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReport {
    /// `namespace/name`.
    pub pod: String,
    /// What happened.
    pub outcome: Outcome,
    /// The node it lands on, for the fitting outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The node group of the new node, for `fits-new-node`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_group: Option<String>,
    /// Claims allocated for it in this simulation, in pod order; only when it fits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocations: Option<Vec<ClaimAllocation>>,
    /// Why nodes refused it, one sentence per node (`node-1: …`), or the error.
    pub reasons: Vec<String>,
    /// Beside each entry of `reasons`, in the same order, what it is: its
    /// `code`, the upstream plugin and the node. Absent when no reason has
    /// a code (a fit, or a planner reason that is not the fit engine's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reason_codes: Vec<ReasonCode>,
}

impl PodReport {
    /// Sets `reasons` and `reason_codes` from values: each printed with its
    /// node first (`node-1: …`) when it is one node's.
    pub fn set_reasons(&mut self, reasons: &[Reason]) {
        self.reasons = reasons
            .iter()
            .map(|r| match &r.node {
                Some(node) => format!("{node}: {r}"),
                None => r.to_string(),
            })
            .collect();
        self.reason_codes = reasons.iter().map(Reason::code_entry).collect();
    }
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Report {
    /// Every pending pod, in placement order.
    pub pods: Vec<PodReport>,
}

impl Report {
    /// A readable table: one line per pod, then its devices or reasons indented.
    #[must_use]
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let width = self
            .pods
            .iter()
            .map(|p| p.pod.len())
            .max()
            .unwrap_or(3)
            .max(3);
        let mut out = String::new();
        let _ = writeln!(out, "{:<width$}  {:<13}  NODE", "POD", "OUTCOME");
        for pod in &self.pods {
            let node = match (&pod.node, &pod.node_group) {
                (Some(n), Some(g)) => format!("{n} (new, group {g})"),
                (Some(n), None) => n.clone(),
                _ => "-".to_string(),
            };
            let _ = writeln!(
                out,
                "{:<width$}  {:<13}  {node}",
                pod.pod,
                pod.outcome.as_str()
            );
            for allocation in pod.allocations.iter().flatten() {
                for r in &allocation.results {
                    let mut extra = String::new();
                    if r.admin_access == Some(true) {
                        extra.push_str(" admin");
                    }
                    if let Some(share) = &r.share_id {
                        let _ = write!(extra, " share={share}");
                    }
                    let _ = writeln!(
                        out,
                        "    {} {}: {}/{}/{}{extra}",
                        allocation.claim, r.request, r.driver, r.pool, r.device
                    );
                }
            }
            for reason in &pod.reasons {
                let _ = writeln!(out, "    - {reason}");
            }
        }
        out
    }
}
