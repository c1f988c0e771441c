//! The resource registry: which kinds the fake server serves and how each one behaves.
//!
//! The real API server gets this from compiled-in REST storage strategies and from
//! CustomResourceDefinitions. We keep only the facts that change wire behaviour:
//! path, scope, kind, which subresources exist and what happens to `.status` on create.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// What the server does with a `.status` stanza sent in a create request.
///
/// Upstream this is each strategy's `PrepareForCreate`. Getting it right matters to
/// tests that create objects with a status and expect to read it back (Nodes) or
/// expect it to be ignored (ResourceClaims, custom resources with a status subresource).
#[derive(Clone, Debug, PartialEq)]
pub enum StatusOnCreate {
    /// Keep whatever the client sent (Nodes: "Nodes allow *all* fields, including status,
    /// to be set on create").
    Keep,
    /// Drop `.status` entirely (custom resources with a status subresource,
    /// ResourceClaims, DaemonSets).
    Clear,
    /// Replace `.status` with a fixed value (Pods start `Pending`, Namespaces `Active`).
    Reset(Value),
}

/// One served resource: a (group, version, plural) triple plus its behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceDef {
    /// API group; empty for the core group.
    pub group: String,
    /// API version within the group, e.g. `v1` or `v1alpha1`.
    pub version: String,
    /// Lower-case plural used in URLs, e.g. `resourceslices`.
    pub plural: String,
    /// Kind, e.g. `ResourceSlice`.
    pub kind: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether a `/status` subresource exists. When it does, writes to the main
    /// resource ignore `.status` and writes to `/status` change only `.status`.
    pub status_subresource: bool,
    /// Whether the Pod-style `/binding` (POST sets `spec.nodeName`) and `/eviction` (POST
    /// deletes the pod when its PodDisruptionBudget allows) subresources exist.
    pub binding_subresource: bool,
    /// Treatment of `.status` on create.
    pub status_on_create: StatusOnCreate,
    /// Short names advertised in discovery (`kubectl get no`).
    pub short_names: Vec<String>,
    /// Lower-case singular name (`pod`, `nodegroup`).
    pub singular: String,
    /// Categories advertised in discovery (`kubectl get all`).
    pub categories: Vec<String>,
    /// The CustomResourceDefinition that serves this resource, if any.
    pub crd: Option<String>,
    /// For custom resources: the CRD's `additionalPrinterColumns` of this version.
    pub printer_columns: Vec<PrinterColumn>,
    /// For custom resources: the CRD's `openAPIV3Schema` of this version (validation,
    /// pruning and the OpenAPI document).
    pub schema: Option<Arc<Value>>,
    /// Another resource whose storage this one shares, seen through [`Conversion`]
    /// (`events.k8s.io/v1` events are core `v1` events, as in etcd).
    pub stored_as: Option<ResourceKey>,
    /// How objects of this resource map to and from the shared storage.
    pub conversion: Conversion,
}

/// One `additionalPrinterColumns` entry of a CRD version.
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: String,
    /// OpenAPI format (`name`, `date-time`, ...), may be empty.
    pub format: String,
    /// Column description.
    pub description: String,
    /// 0 in the default view, higher only in `-o wide`.
    pub priority: i64,
    /// Simple JSONPath (`.spec.replicas`) relative to the object.
    pub json_path: String,
}

/// How objects of a resource are converted between what is served and what is stored:
/// for a resource that shares another's storage, and for core Events, which are read
/// back as the real server's Go types print them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Conversion {
    /// Stored as served.
    #[default]
    None,
    /// `events.k8s.io/v1` Event over a core `v1` Event.
    EventsV1,
    /// Core `v1` Event: stored as served, read with the unset times the real server's
    /// Go types print (`"lastTimestamp": null`).
    CoreEvent,
}

impl ResourceDef {
    /// A resource with the custom-resource defaults: status dropped on create when a
    /// status subresource exists, kept otherwise.
    pub fn new(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        status_subresource: bool,
    ) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            kind: kind.to_owned(),
            namespaced,
            status_subresource,
            binding_subresource: false,
            status_on_create: if status_subresource {
                StatusOnCreate::Clear
            } else {
                StatusOnCreate::Keep
            },
            short_names: Vec::new(),
            singular: kind.to_lowercase(),
            categories: Vec::new(),
            crd: None,
            printer_columns: Vec::new(),
            schema: None,
            stored_as: None,
            conversion: Conversion::None,
        }
    }

    /// Sets the categories advertised in discovery.
    #[must_use]
    pub fn with_categories(mut self, names: &[&str]) -> Self {
        self.categories = names.iter().map(|n| (*n).to_owned()).collect();
        self
    }

    /// Shares the storage of `other`, converting objects with `conversion`.
    #[must_use]
    pub fn stored_as(mut self, other: ResourceKey, conversion: Conversion) -> Self {
        self.stored_as = Some(other);
        self.conversion = conversion;
        self
    }

    /// Sets the short names advertised in discovery.
    #[must_use]
    pub fn with_short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|n| (*n).to_owned()).collect();
        self
    }

    /// Overrides what happens to `.status` on create.
    #[must_use]
    pub fn with_status_on_create(mut self, policy: StatusOnCreate) -> Self {
        self.status_on_create = policy;
        self
    }

    /// Adds the Pod-style `/binding` subresource.
    #[must_use]
    pub fn with_binding(mut self) -> Self {
        self.binding_subresource = true;
        self
    }

    /// `apiVersion` as written in objects: `v1` for core, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Name used in error messages, like the real server's `GroupResource.String()`:
    /// `pods`, `leases.coordination.k8s.io`.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The registry key of this resource.
    pub fn key(&self) -> ResourceKey {
        ResourceKey {
            group: self.group.clone(),
            version: self.version.clone(),
            plural: self.plural.clone(),
        }
    }

    /// The key of the collection objects of this resource are stored in.
    pub fn storage_key(&self) -> ResourceKey {
        self.stored_as.clone().unwrap_or_else(|| self.key())
    }

    /// Subresource names served for this resource (for discovery and routing).
    pub fn subresources(&self) -> Vec<&'static str> {
        let mut subs = Vec::new();
        if self.status_subresource {
            subs.push("status");
        }
        if self.binding_subresource {
            subs.push("binding");
            subs.push("eviction");
        }
        subs
    }
}

/// Identity of a served resource.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceKey {
    /// API group; empty for core.
    pub group: String,
    /// API version.
    pub version: String,
    /// Lower-case plural.
    pub plural: String,
}

/// All resources the server knows, keyed by (group, version, plural).
#[derive(Clone, Debug, Default)]
pub struct Registry {
    defs: BTreeMap<ResourceKey, ResourceDef>,
}

impl Registry {
    /// The built-in resources an autoscaler and its tests touch.
    pub fn builtins() -> Self {
        let mut reg = Self::default();
        let core = |plural: &str, kind: &str, namespaced: bool, status: bool| {
            ResourceDef::new("", "v1", plural, kind, namespaced, status)
        };
        reg.insert(
            core("namespaces", "Namespace", false, true)
                .with_short_names(&["ns"])
                .with_status_on_create(StatusOnCreate::Reset(
                    serde_json::json!({"phase": "Active"}),
                )),
        );
        reg.insert(
            core("nodes", "Node", false, true)
                .with_short_names(&["no"])
                .with_status_on_create(StatusOnCreate::Keep),
        );
        reg.insert(
            core("pods", "Pod", true, true)
                .with_short_names(&["po"])
                .with_categories(&["all"])
                .with_binding()
                .with_status_on_create(StatusOnCreate::Reset(
                    serde_json::json!({"phase": "Pending"}),
                )),
        );
        let mut core_events = core("events", "Event", true, false).with_short_names(&["ev"]);
        core_events.conversion = Conversion::CoreEvent;
        let core_events_key = core_events.key();
        reg.insert(core_events);
        reg.insert(core("configmaps", "ConfigMap", true, false).with_short_names(&["cm"]));
        // What ProvisioningRequests and CapacityBuffers take their pod
        // templates from.
        reg.insert(core("podtemplates", "PodTemplate", true, false));
        reg.insert(ResourceDef::new(
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            true,
            false,
        ));
        reg.insert(
            ResourceDef::new("events.k8s.io", "v1", "events", "Event", true, false)
                .with_short_names(&["ev"])
                .stored_as(core_events_key, Conversion::EventsV1),
        );
        reg.insert(
            ResourceDef::new("apps", "v1", "daemonsets", "DaemonSet", true, true)
                .with_short_names(&["ds"])
                .with_categories(&["all"]),
        );
        let apps = |plural: &str, kind: &str, short: &'static [&'static str]| {
            ResourceDef::new("apps", "v1", plural, kind, true, true)
                .with_short_names(short)
                .with_categories(&["all"])
        };
        reg.insert(apps("deployments", "Deployment", &["deploy"]));
        reg.insert(apps("replicasets", "ReplicaSet", &["rs"]));
        reg.insert(apps("statefulsets", "StatefulSet", &["sts"]));
        reg.insert(
            ResourceDef::new("batch", "v1", "jobs", "Job", true, true).with_categories(&["all"]),
        );
        // Its status is reset on create, as upstream's strategy does; evictions spend it.
        reg.insert(
            ResourceDef::new(
                "policy",
                "v1",
                "poddisruptionbudgets",
                "PodDisruptionBudget",
                true,
                true,
            )
            .with_short_names(&["pdb"]),
        );
        reg.insert(
            ResourceDef::new(
                "scheduling.k8s.io",
                "v1",
                "priorityclasses",
                "PriorityClass",
                false,
                false,
            )
            .with_short_names(&["pc"]),
        );
        let dra = |plural: &str, kind: &str, namespaced: bool, status: bool| {
            ResourceDef::new("resource.k8s.io", "v1", plural, kind, namespaced, status)
        };
        reg.insert(dra("deviceclasses", "DeviceClass", false, false));
        reg.insert(dra("resourceslices", "ResourceSlice", false, false));
        reg.insert(dra("resourceclaims", "ResourceClaim", true, true));
        reg.insert(dra(
            "resourceclaimtemplates",
            "ResourceClaimTemplate",
            true,
            false,
        ));
        reg.insert(dra("devicetaintrules", "DeviceTaintRule", false, true));
        reg.insert(
            ResourceDef::new(
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
                true,
            )
            .with_short_names(&["crd", "crds"])
            .with_categories(&["api-extensions"]),
        );
        reg
    }

    /// Removes every resource the CustomResourceDefinition `crd` serves; returns them.
    pub fn remove_crd(&mut self, crd: &str) -> Vec<ResourceDef> {
        let keys: Vec<ResourceKey> = self
            .defs
            .iter()
            .filter(|(_, d)| d.crd.as_deref() == Some(crd))
            .map(|(k, _)| k.clone())
            .collect();
        keys.iter().filter_map(|k| self.defs.remove(k)).collect()
    }

    /// Adds or replaces a resource definition.
    pub fn insert(&mut self, def: ResourceDef) {
        self.defs.insert(def.key(), def);
    }

    /// Looks a resource up by group, version and plural.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceDef> {
        self.defs.get(&ResourceKey {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
        })
    }

    /// Every definition, in key order.
    pub fn iter(&self) -> impl Iterator<Item = &ResourceDef> {
        self.defs.values()
    }

    /// Whether any resource is served under this group/version.
    pub fn serves(&self, group: &str, version: &str) -> bool {
        self.defs
            .keys()
            .any(|k| k.group == group && k.version == version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_resource_with_status_drops_status_on_create() {
        let def = ResourceDef::new("x.io", "v1alpha1", "widgets", "Widget", false, true);
        assert_eq!(def.status_on_create, StatusOnCreate::Clear);
        assert_eq!(def.api_version(), "x.io/v1alpha1");
        assert_eq!(def.group_resource(), "widgets.x.io");
    }

    #[test]
    fn core_resources_use_bare_version() {
        let reg = Registry::builtins();
        let pods = reg.get("", "v1", "pods").expect("pods registered");
        assert_eq!(pods.api_version(), "v1");
        assert_eq!(pods.group_resource(), "pods");
        assert_eq!(pods.subresources(), vec!["status", "binding", "eviction"]);
        assert!(reg.serves("resource.k8s.io", "v1"));
        assert!(!reg.serves("resource.k8s.io", "v1beta1"));
    }
}
