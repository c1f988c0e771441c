//! What a scale-down analysis found. `simulate` prints `scaleDowns` and `scaleDownBlocked`
//! (keys are a contract: each entry is exactly `{node, nodeGroup, reason}`); the controller
//! also reads what the JSON leaves out (empty or not, where each pod would go, since when a node
//! is unneeded).

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// A node to remove now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleDown {
    /// The Node's name.
    pub node: String,
    /// Its NodeGroup.
    pub node_group: String,
    /// Why it may go: `empty`, or `underutilized: 12% (<resource>)` with every pod and where it
    /// would land.
    pub reason: String,
    /// No pod needs a new place (only DaemonSet, mirror or finished pods).
    #[serde(skip)]
    pub empty: bool,
    /// Pods to evict, `namespace/name`, with the node each would land on.
    #[serde(skip)]
    pub moves: Vec<(String, String)>,
}

/// An underused node that is kept, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleDownBlocked {
    /// The Node's name.
    pub node: String,
    /// Its NodeGroup.
    pub node_group: String,
    /// What keeps it (`running gang ml/train-a`, `pod ml/x has no controller`,
    /// `PodDisruptionBudget ml/y …`, `reserved capacity …`, `minSize 1`, `pod ml/z cannot
    /// move: …`).
    pub reason: String,
    /// Kept only for now: unneeded, but not for long enough yet, or waiting for room among the
    /// removals under way.
    #[serde(skip)]
    pub waiting: bool,
}

/// A node found unneeded in this pass (underused, every pod able to move), for the
/// controller's bookkeeping of how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Unneeded {
    /// The Node's name.
    pub node: String,
    /// Its NodeGroup.
    pub node_group: String,
    /// Since when (the time passed in when first seen; `None` without a clock).
    pub since: Option<Timestamp>,
    /// No pod needs a new place.
    pub empty: bool,
}

/// The whole analysis.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleDownReport {
    /// Nodes to remove now, in removal order.
    pub scale_downs: Vec<ScaleDown>,
    /// Underused nodes kept, in node order, with the cause.
    pub scale_down_blocked: Vec<ScaleDownBlocked>,
    /// Every node found unneeded, removable now or not yet.
    #[serde(skip)]
    pub unneeded: Vec<Unneeded>,
    /// Removals already under way (tainted by the controller) that can no longer finish: their
    /// pods have nowhere to go. The controller reverts them.
    #[serde(skip)]
    pub abandoned: Vec<ScaleDownBlocked>,
}

impl ScaleDownReport {
    /// The readable form: removals, then kept nodes.
    #[must_use]
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "SCALE-DOWNS");
        if self.scale_downs.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for s in &self.scale_downs {
            let _ = writeln!(out, "  {} ({}): {}", s.node, s.node_group, s.reason);
        }
        if !self.scale_down_blocked.is_empty() {
            let _ = writeln!(out, "KEPT (underused)");
            for b in &self.scale_down_blocked {
                let _ = writeln!(out, "  {} ({}): {}", b.node, b.node_group, b.reason);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn json_entries_are_exactly_node_node_group_and_reason() {
        let report = ScaleDownReport {
            scale_downs: vec![ScaleDown {
                node: "n".into(),
                node_group: "g".into(),
                reason: "empty".into(),
                empty: true,
                moves: vec![("ml/a".into(), "m".into())],
            }],
            scale_down_blocked: vec![ScaleDownBlocked {
                node: "k".into(),
                node_group: "g".into(),
                reason: "minSize 1".into(),
                waiting: false,
            }],
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            serde_json::json!({
                "scaleDowns": [{"node": "n", "nodeGroup": "g", "reason": "empty"}],
                "scaleDownBlocked": [{"node": "k", "nodeGroup": "g", "reason": "minSize 1"}]
            })
        );
        let text = report.to_text();
        assert!(text.contains("SCALE-DOWNS\n  n (g): empty\n"), "{text}");
        assert!(
            text.contains("KEPT (underused)\n  k (g): minSize 1\n"),
            "{text}"
        );
    }
}
