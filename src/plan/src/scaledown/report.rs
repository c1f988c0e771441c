//! What a scale-down analysis found. `simulate` prints `scaleDowns` and `scaleDownBlocked`
//! (keys are a contract: each entry is exactly `{node, nodeGroup, reason, code}`, `reason` the
//! words and `code` what they are); the controller also reads what the JSON leaves out (where
//! each pod would go, since when a node is unneeded).

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::reasons::{Removable, RemovableReason, Unremovable, UnremovableReason};

/// A node to remove now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "Entry<RemovableReason>", try_from = "Entry<RemovableReason>")]
pub struct ScaleDown {
    /// The Node's name.
    pub node: String,
    /// Its NodeGroup.
    pub node_group: String,
    /// Why it may go: empty, or underused with every pod and where it would land.
    pub reason: Removable,
}

impl ScaleDown {
    /// No pod needs a new place (only DaemonSet, mirror or finished pods).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.reason == Removable::Empty
    }

    /// Pods to evict, `namespace/name`, with the node each would land on.
    #[must_use]
    pub fn moves(&self) -> &[(String, String)] {
        match &self.reason {
            Removable::Empty => &[],
            Removable::Underutilized { moves, .. } => moves,
        }
    }
}

/// An underused node that is kept, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    into = "Entry<UnremovableReason>",
    try_from = "Entry<UnremovableReason>"
)]
pub struct ScaleDownBlocked {
    /// The Node's name.
    pub node: String,
    /// Its NodeGroup.
    pub node_group: String,
    /// What keeps it; [`Unremovable::is_waiting`] tells a node kept only for now (unneeded,
    /// but not long enough yet, or waiting for room among the removals under way).
    pub reason: Unremovable,
}

/// The JSON form of one entry: the reason's words and its code.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry<C> {
    node: String,
    node_group: String,
    reason: String,
    code: C,
}

/// An entry whose words are not what its code says.
#[derive(Debug, thiserror::Error)]
#[error("node {node}: reason {reason:?} is not the words of code {code}")]
pub struct ReasonMismatch {
    node: String,
    reason: String,
    code: String,
}

impl From<ScaleDown> for Entry<RemovableReason> {
    fn from(s: ScaleDown) -> Self {
        Entry {
            code: s.reason.code(),
            reason: s.reason.to_string(),
            node: s.node,
            node_group: s.node_group,
        }
    }
}

impl TryFrom<Entry<RemovableReason>> for ScaleDown {
    type Error = ReasonMismatch;
    fn try_from(e: Entry<RemovableReason>) -> Result<Self, Self::Error> {
        match Removable::parse(e.code, &e.reason) {
            Some(reason) => Ok(ScaleDown {
                node: e.node,
                node_group: e.node_group,
                reason,
            }),
            None => Err(ReasonMismatch {
                node: e.node,
                reason: e.reason,
                code: format!("{:?}", e.code),
            }),
        }
    }
}

impl From<ScaleDownBlocked> for Entry<UnremovableReason> {
    fn from(b: ScaleDownBlocked) -> Self {
        Entry {
            code: b.reason.code(),
            reason: b.reason.to_string(),
            node: b.node,
            node_group: b.node_group,
        }
    }
}

impl TryFrom<Entry<UnremovableReason>> for ScaleDownBlocked {
    type Error = ReasonMismatch;
    fn try_from(e: Entry<UnremovableReason>) -> Result<Self, Self::Error> {
        match Unremovable::parse(e.code, &e.reason) {
            Some(reason) => Ok(ScaleDownBlocked {
                node: e.node,
                node_group: e.node_group,
                reason,
            }),
            None => Err(ReasonMismatch {
                node: e.node,
                reason: e.reason,
                code: e.code.as_str().to_string(),
            }),
        }
    }
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
                reason: Removable::Empty,
            }],
            scale_down_blocked: vec![ScaleDownBlocked {
                node: "k".into(),
                node_group: "g".into(),
                reason: Unremovable::MinSize { min: 1 },
            }],
            ..Default::default()
        };
        let json = serde_json::to_value(&report).unwrap();
        // A node at its group's minimum is cluster-autoscaler's NodeGroupMinSizeReached.
        assert_eq!(
            json,
            serde_json::json!({
                "scaleDowns": [{"node": "n", "nodeGroup": "g", "reason": "empty", "code": "Empty"}],
                "scaleDownBlocked": [{"node": "k", "nodeGroup": "g", "reason": "minSize 1",
                                      "code": "NodeGroupMinSizeReached"}]
            })
        );
        let back: ScaleDownReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, report);
        let text = report.to_text();
        assert!(text.contains("SCALE-DOWNS\n  n (g): empty\n"), "{text}");
        assert!(
            text.contains("KEPT (underused)\n  k (g): minSize 1\n"),
            "{text}"
        );
    }

    #[test]
    fn words_that_are_not_their_codes_do_not_read_back() {
        let wrong = serde_json::json!({
            "scaleDownBlocked": [{"node": "k", "nodeGroup": "g", "reason": "minSize one",
                                  "code": "NodeGroupMinSizeReached"}]
        });
        let error = serde_json::from_value::<ScaleDownReport>(wrong).unwrap_err();
        assert!(error.to_string().contains("node k"), "{error}");
        let no_code = serde_json::json!({
            "scaleDowns": [{"node": "n", "nodeGroup": "g", "reason": "empty"}]
        });
        assert!(serde_json::from_value::<ScaleDownReport>(no_code).is_err());
    }
}
