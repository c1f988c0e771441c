//! The Kubernetes objects a simulation reads, as the API server would hold them.

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Which object: its namespace (empty for cluster-scoped kinds) and name.
///
/// Printed as `namespace/name`, or just `name` when cluster-scoped — as
/// klog's `KObj` prints an object — and serialised as that same string.
/// Ordered by namespace, then name.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// The namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ObjectRef {
    /// A reference from its parts.
    #[must_use]
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectRef {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The object `meta` describes, as written: no namespace means
    /// cluster-scoped (the loader defaults namespaced kinds to `default`).
    #[must_use]
    pub fn of(meta: &ObjectMeta) -> Self {
        ObjectRef {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }

    /// A namespaced object (a Pod, a ResourceClaim, …): namespace `default`
    /// when `meta` has none, as the API server defaults it.
    #[must_use]
    pub fn namespaced(meta: &ObjectMeta) -> Self {
        ObjectRef {
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

impl std::str::FromStr for ObjectRef {
    type Err = std::convert::Infallible;

    /// `namespace/name`, or `name` alone for a cluster-scoped object.
    /// Neither part can contain `/`, so the first one separates them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.split_once('/') {
            Some((namespace, name)) => ObjectRef::new(namespace, name),
            None => ObjectRef::new("", s),
        })
    }
}

impl serde::Serialize for ObjectRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ObjectRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        let Ok(r) = s.parse();
        Ok(r)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_ref_prints_as_klog_does() {
        assert_eq!(
            ObjectRef::new("team-a", "pod-0").to_string(),
            "team-a/pod-0"
        );
        assert_eq!(ObjectRef::new("", "node-1").to_string(), "node-1");
    }

    #[test]
    fn object_ref_of_meta_keeps_a_missing_namespace_empty() {
        let meta = ObjectMeta {
            name: Some("gpu".into()),
            ..Default::default()
        };
        assert_eq!(ObjectRef::of(&meta), ObjectRef::new("", "gpu"));
        let meta = ObjectMeta {
            name: Some("c".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        };
        assert_eq!(ObjectRef::of(&meta).to_string(), "ns/c");
    }

    #[test]
    fn object_ref_serialises_as_its_string_and_back() {
        let r = ObjectRef::new("ns", "claim-1");
        let json = serde_json::to_value(&r).expect("serialise");
        assert_eq!(json, serde_json::json!("ns/claim-1"));
        let back: ObjectRef = serde_json::from_value(json).expect("deserialise");
        assert_eq!(back, r);
        let cluster: ObjectRef = serde_json::from_str("\"node-1\"").expect("deserialise");
        assert_eq!(cluster, ObjectRef::new("", "node-1"));
    }

    #[test]
    fn object_refs_order_by_namespace_then_name() {
        let mut refs = [
            ObjectRef::new("b", "a"),
            ObjectRef::new("a", "z"),
            ObjectRef::new("a", "b"),
        ];
        refs.sort();
        let printed: Vec<String> = refs.iter().map(ToString::to_string).collect();
        assert_eq!(printed, ["a/b", "a/z", "b/a"]);
    }
}
