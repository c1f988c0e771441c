//! Why the scheduler would not put a pod on a node, as a value: the plugin
//! upstream names, a stable [`Code`], the node it is about, and the words.
//!
//! kube-scheduler reports a refusal as a framework `Status` — a code, the
//! plugin that failed and its reasons — and cluster-autoscaler keeps its own
//! outcomes as enums (`UnremovableReason`, `drainability.Status`). A `Reason`
//! is our equivalent: callers branch and count on [`Reason::code`] and
//! [`Reason::plugin`], and print with `Display`, which writes exactly the
//! words upstream (or our diagnosis) uses. A node a sentence mentions is kept
//! as a [`Piece::Node`], so a caller that knows the node better (the planner:
//! "a new node of group gpu") names it when printing, without rewriting text.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The plugin name for refusals that are not any plugin's (a caller bug).
pub const INTERNAL: &str = "Internal";

/// One distinct refusal of the filters, the allocator or PreFilter. The
/// serialised form ([`Code::as_str`]) is a contract: JSON `code` keys and
/// metric labels carry it; add variants, never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Code {
    /// NodeUnschedulable: the node is cordoned.
    NodeUnschedulable,
    /// NodeName: `spec.nodeName` names another node.
    NodeNameMismatch,
    /// TaintToleration: a NoSchedule/NoExecute taint the pod does not tolerate.
    UntoleratedTaint,
    /// NodeAffinity: `nodeSelector` or required node affinity does not match.
    NodeAffinityMismatch,
    /// NodeAffinity PreFilter: the node is not among the names the pod's
    /// affinity pins.
    NotInPreFilterResult,
    /// NodeAffinity PreFilter: the affinity terms pin disjoint node names.
    NodeAffinityConflict,
    /// NodePorts: a requested host port is taken.
    HostPortsTaken,
    /// NodeResourcesFit: requests exceed what is left of allocatable.
    InsufficientResources,
    /// NodeResourcesFit PreFilter: a request is not a quantity.
    InvalidResourceRequest,
    /// PodTopologySpread: the node lacks a constraint's topology label.
    SpreadMissingLabel,
    /// PodTopologySpread: placing here would exceed `maxSkew`.
    SpreadSkew,
    /// PodTopologySpread PreFilter: a constraint does not parse.
    InvalidSpreadConstraint,
    /// InterPodAffinity: required pod affinity not met.
    PodAffinityMismatch,
    /// InterPodAffinity: the pod's own anti-affinity is violated.
    PodAntiAffinityMismatch,
    /// InterPodAffinity: an existing pod's anti-affinity is violated.
    ExistingPodAntiAffinityMismatch,
    /// InterPodAffinity PreFilter: a term's selector does not parse.
    InvalidAffinityTerm,
    /// DynamicResources: the allocator finds no devices for the claims here.
    CannotAllocateAllClaims,
    /// DynamicResources: an allocated claim is usable on other nodes only.
    ClaimNotAvailableOnNode,
    /// DynamicResources: the allocator's search ran out of time on this node
    /// (UnschedulableAndUnresolvable upstream).
    AllocationTimedOut,
    /// DynamicResources: no fit, and some resource pool here is invalid.
    InvalidResourcePools,
    /// DynamicResources: the allocator fails the pod with an error (bad
    /// CEL, an incomplete pool, an unsupported constraint…).
    AllocationError,
    /// DynamicResources PreFilter: an allocated claim's node selector does
    /// not parse.
    InvalidAllocationNodeSelector,
    /// DynamicResources PreFilter: a claim the pod names does not exist.
    ClaimNotFound,
    /// DynamicResources PreFilter: a claim the pod names is being deleted.
    ClaimBeingDeleted,
    /// DynamicResources PreFilter: the claim's template does not exist.
    ClaimTemplateNotFound,
    /// DynamicResources PreFilter: a request's DeviceClass does not exist.
    DeviceClassNotFound,
    /// DynamicResources PreFilter: `firstAvailable` with DRAPrioritizedList off.
    PrioritizedListDisabled,
    /// DynamicResources PreFilter: a request is neither kind.
    UnknownRequestType,
    /// The snapshot has no nodes to try.
    NoNodes,
    /// A check of a node the filter state does not hold (a caller bug).
    UnknownNode,
    /// Something our code should not reach (a caller bug).
    Internal,
}

impl Code {
    /// The stable spelling: the JSON `code` value and the metric label.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Code::NodeUnschedulable => "NodeUnschedulable",
            Code::NodeNameMismatch => "NodeNameMismatch",
            Code::UntoleratedTaint => "UntoleratedTaint",
            Code::NodeAffinityMismatch => "NodeAffinityMismatch",
            Code::NotInPreFilterResult => "NotInPreFilterResult",
            Code::NodeAffinityConflict => "NodeAffinityConflict",
            Code::HostPortsTaken => "HostPortsTaken",
            Code::InsufficientResources => "InsufficientResources",
            Code::InvalidResourceRequest => "InvalidResourceRequest",
            Code::SpreadMissingLabel => "SpreadMissingLabel",
            Code::SpreadSkew => "SpreadSkew",
            Code::InvalidSpreadConstraint => "InvalidSpreadConstraint",
            Code::PodAffinityMismatch => "PodAffinityMismatch",
            Code::PodAntiAffinityMismatch => "PodAntiAffinityMismatch",
            Code::ExistingPodAntiAffinityMismatch => "ExistingPodAntiAffinityMismatch",
            Code::InvalidAffinityTerm => "InvalidAffinityTerm",
            Code::CannotAllocateAllClaims => "CannotAllocateAllClaims",
            Code::ClaimNotAvailableOnNode => "ClaimNotAvailableOnNode",
            Code::AllocationTimedOut => "AllocationTimedOut",
            Code::InvalidResourcePools => "InvalidResourcePools",
            Code::AllocationError => "AllocationError",
            Code::InvalidAllocationNodeSelector => "InvalidAllocationNodeSelector",
            Code::ClaimNotFound => "ClaimNotFound",
            Code::ClaimBeingDeleted => "ClaimBeingDeleted",
            Code::ClaimTemplateNotFound => "ClaimTemplateNotFound",
            Code::DeviceClassNotFound => "DeviceClassNotFound",
            Code::PrioritizedListDisabled => "PrioritizedListDisabled",
            Code::UnknownRequestType => "UnknownRequestType",
            Code::NoNodes => "NoNodes",
            Code::UnknownNode => "UnknownNode",
            Code::Internal => "Internal",
        }
    }

    /// The upstream plugin that reports this refusal.
    #[must_use]
    pub fn plugin(self) -> &'static str {
        match self {
            Code::NodeUnschedulable => "NodeUnschedulable",
            Code::NodeNameMismatch => "NodeName",
            Code::UntoleratedTaint => "TaintToleration",
            Code::NodeAffinityMismatch
            | Code::NotInPreFilterResult
            | Code::NodeAffinityConflict => "NodeAffinity",
            Code::HostPortsTaken => "NodePorts",
            Code::InsufficientResources | Code::InvalidResourceRequest => "NodeResourcesFit",
            Code::SpreadMissingLabel | Code::SpreadSkew | Code::InvalidSpreadConstraint => {
                "PodTopologySpread"
            }
            Code::PodAffinityMismatch
            | Code::PodAntiAffinityMismatch
            | Code::ExistingPodAntiAffinityMismatch
            | Code::InvalidAffinityTerm => "InterPodAffinity",
            Code::CannotAllocateAllClaims
            | Code::ClaimNotAvailableOnNode
            | Code::AllocationTimedOut
            | Code::InvalidResourcePools
            | Code::AllocationError
            | Code::InvalidAllocationNodeSelector
            | Code::ClaimNotFound
            | Code::ClaimBeingDeleted
            | Code::ClaimTemplateNotFound
            | Code::DeviceClassNotFound
            | Code::PrioritizedListDisabled
            | Code::UnknownRequestType => "DynamicResources",
            Code::NoNodes | Code::UnknownNode | Code::Internal => INTERNAL,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A part of a sentence: words, or a node the sentence is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Words as printed.
    Text(String),
    /// A node by name; printed `node <name>` unless the printer names it
    /// otherwise (see [`Words::naming`]).
    Node(String),
}

/// A sentence whose nodes are references, printed with `Display`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Words(Vec<Piece>);

impl Words {
    /// Plain words.
    #[must_use]
    pub fn text(text: impl Into<String>) -> Self {
        Words(vec![Piece::Text(text.into())])
    }

    /// Appends words.
    #[must_use]
    pub fn then(mut self, text: impl Into<String>) -> Self {
        self.0.push(Piece::Text(text.into()));
        self
    }

    /// Appends a reference to node `name`.
    #[must_use]
    pub fn node(mut self, name: impl Into<String>) -> Self {
        self.0.push(Piece::Node(name.into()));
        self
    }

    /// The pieces, in order.
    #[must_use]
    pub fn pieces(&self) -> &[Piece] {
        &self.0
    }

    /// Joins sentences with `separator` into one.
    #[must_use]
    pub fn join(sentences: Vec<Words>, separator: &str) -> Self {
        let mut out = Vec::new();
        for (i, words) in sentences.into_iter().enumerate() {
            if i > 0 {
                out.push(Piece::Text(separator.to_string()));
            }
            out.extend(words.0);
        }
        Words(out)
    }

    /// Prints the sentence with node `name` called `words` (e.g. "a new node
    /// of group gpu") instead of `node <name>`.
    #[must_use]
    pub fn naming<'a>(&'a self, name: &'a str, words: &'a str) -> Naming<'a> {
        Naming {
            words: self,
            name,
            called: words,
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, name: &str, called: &str) -> fmt::Result {
        for piece in &self.0 {
            match piece {
                Piece::Text(t) => f.write_str(t)?,
                Piece::Node(n) if !name.is_empty() && n == name => f.write_str(called)?,
                Piece::Node(n) => write!(f, "node {n}")?,
            }
        }
        Ok(())
    }
}

impl fmt::Display for Words {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, "", "")
    }
}

/// [`Words`] printed with one node named by the caller ([`Words::naming`]).
#[derive(Debug, Clone, Copy)]
pub struct Naming<'a> {
    words: &'a Words,
    name: &'a str,
    called: &'a str,
}

impl fmt::Display for Naming<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.words.write(f, self.name, self.called)
    }
}

/// Why a node refused a pod, or why a pod cannot be scheduled at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// The upstream plugin that refuses, e.g. `NodeResourcesFit`.
    pub plugin: &'static str,
    /// Which refusal it is.
    pub code: Code,
    /// The node refused on; `None` for PreFilter refusals (every node).
    pub node: Option<String>,
    /// The words upstream (or our diagnosis) prints.
    pub detail: Words,
}

impl Reason {
    /// A reason with `code`'s plugin and plain words.
    #[must_use]
    pub fn new(code: Code, detail: impl Into<String>) -> Self {
        Self::with_words(code, Words::text(detail))
    }

    /// A reason with `code`'s plugin and `detail`.
    #[must_use]
    pub fn with_words(code: Code, detail: Words) -> Self {
        Reason {
            plugin: code.plugin(),
            code,
            node: None,
            detail,
        }
    }

    /// The same reason, about node `name`.
    #[must_use]
    pub fn on(mut self, name: Option<&str>) -> Self {
        self.node = name.map(str::to_string);
        self
    }

    /// The words with the refusing node called `called` where they mention
    /// it (the planner's "a new node of group gpu").
    #[must_use]
    pub fn naming<'a>(&'a self, called: &'a str) -> Naming<'a> {
        self.detail
            .naming(self.node.as_deref().unwrap_or_default(), called)
    }

    /// The serialisable code entry for this reason.
    #[must_use]
    pub fn code_entry(&self) -> ReasonCode {
        ReasonCode {
            code: self.code,
            plugin: self.plugin.to_string(),
            node: self.node.clone(),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.detail.fmt(f)
    }
}

impl std::error::Error for Reason {}

/// A reason equals the words it prints (tests hold upstream's words).
impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        self.to_string().as_str() == other
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

/// The JSON entry beside a reason sentence: its code, plugin and node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonCode {
    /// The refusal ([`Code::as_str`]).
    pub code: Code,
    /// The upstream plugin that refuses.
    pub plugin: String,
    /// The node refused on, when the refusal is one node's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub node: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_reference_prints_as_node_name_or_as_the_callers_words() {
        let words = Words::text("cannot allocate all claims: ")
            .node("gpu-new-0")
            .then(" has no resource pools");
        let reason = Reason::with_words(Code::CannotAllocateAllClaims, words).on(Some("gpu-new-0"));
        assert_eq!(
            reason.to_string(),
            "cannot allocate all claims: node gpu-new-0 has no resource pools"
        );
        assert_eq!(
            reason.naming("a new node of group gpu").to_string(),
            "cannot allocate all claims: a new node of group gpu has no resource pools"
        );
        assert_eq!(reason.plugin, "DynamicResources");
    }

    #[test]
    fn codes_serialise_as_their_stable_spelling() {
        let json = serde_json::to_string(&Code::InsufficientResources).unwrap();
        assert_eq!(json, "\"InsufficientResources\"");
        assert_eq!(Code::UntoleratedTaint.plugin(), "TaintToleration");
    }
}
