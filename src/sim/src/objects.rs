//! The Kubernetes objects a simulation reads, as the API server would hold them.

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};

/// Where an object came from, so that every later message can point at it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Origin {
    /// The file (or other source) name.
    pub source: String,
    /// Zero-based index of the YAML document (or JSON value) in the source.
    pub document: usize,
    /// Zero-based index inside a `kind: List`, when the object came from one.
    pub item: Option<usize>,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: document {}", self.source, self.document)?;
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        Ok(())
    }
}

/// An object of a kind the fit simulator does not model itself but that a
/// caller asked to keep (NodeGroups, PodGroups, Workloads, DaemonSets, …).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraObject {
    /// `apiVersion` as written.
    pub api_version: String,
    /// `kind` as written.
    pub kind: String,
    /// Where it came from.
    pub origin: Origin,
    /// The object, untouched.
    pub value: serde_json::Value,
}

/// Everything a snapshot is built from, in load order.
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Pods, bound or pending.
    pub pods: Vec<Pod>,
    /// Namespaces (their labels matter to admin access and affinity).
    pub namespaces: Vec<Namespace>,
    /// DeviceClasses.
    pub device_classes: Vec<DeviceClass>,
    /// ResourceSlices.
    pub resource_slices: Vec<ResourceSlice>,
    /// ResourceClaims, allocated or not.
    pub resource_claims: Vec<ResourceClaim>,
    /// ResourceClaimTemplates.
    pub resource_claim_templates: Vec<ResourceClaimTemplate>,
    /// DeviceTaintRules.
    pub device_taint_rules: Vec<DeviceTaintRule>,
    /// Objects of kinds the caller asked to keep, untyped.
    pub extra: Vec<ExtraObject>,
    /// `spec.workloadRef` of pods written for Kubernetes 1.35 (the v1alpha1
    /// Workload API), keyed by `(namespace, name)`. The field was removed from
    /// the Pod type in 1.36, so the typed Pod cannot carry it.
    pub pod_workload_refs: std::collections::BTreeMap<(String, String), serde_json::Value>,
}

impl ClusterObjects {
    /// Appends everything from `other`, keeping order.
    pub fn extend(&mut self, other: ClusterObjects) {
        self.nodes.extend(other.nodes);
        self.pods.extend(other.pods);
        self.namespaces.extend(other.namespaces);
        self.device_classes.extend(other.device_classes);
        self.resource_slices.extend(other.resource_slices);
        self.resource_claims.extend(other.resource_claims);
        self.resource_claim_templates
            .extend(other.resource_claim_templates);
        self.device_taint_rules.extend(other.device_taint_rules);
        self.extra.extend(other.extra);
        self.pod_workload_refs.extend(other.pod_workload_refs);
    }
}
