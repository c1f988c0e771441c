//! The OpenAPI v3 schemas the server validates writes with: built-in kinds from k8s-openapi's
//! schemas (upstream's definition names, e.g. `io.k8s.api.core.v1.Pod`), custom resources
//! from their CRD's `openAPIV3Schema`. The documents kubectl reads (`/openapi/v3`) are built
//! from the same schemas in [`crate::kubectl`].

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::api;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Value, json};

use crate::resource::ResourceDef;
use crate::schema::Definitions;

/// How a schema refers to a definition of the same document.
pub(crate) const REF_PREFIX: &str = "#/components/schemas/";
/// The definition name of ObjectMeta, upstream's.
pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The schemas of the built-in kinds, generated once.
pub(crate) struct Builtins {
    /// Every definition, by upstream's name.
    pub(crate) definitions: Definitions,
    /// `(group, version, kind)` → definition name.
    pub(crate) roots: BTreeMap<(String, String, String), String>,
}

fn add<T: JsonSchema>(
    generator: &mut SchemaGenerator,
    roots: &mut BTreeMap<(String, String, String), String>,
    group: &str,
    version: &str,
    kind: &str,
) {
    generator.subschema_for::<T>();
    roots.insert(
        (group.to_owned(), version.to_owned(), kind.to_owned()),
        T::schema_name().into_owned(),
    );
}

/// The built-in kinds' schemas (generated on first use).
pub(crate) fn builtins() -> &'static Builtins {
    static BUILTINS: OnceLock<Builtins> = OnceLock::new();
    BUILTINS.get_or_init(|| {
        let mut generator = SchemaSettings::openapi3().into_generator();
        let mut roots = BTreeMap::new();
        let g = &mut generator;
        let r = &mut roots;
        add::<api::core::v1::Namespace>(g, r, "", "v1", "Namespace");
        add::<api::core::v1::Node>(g, r, "", "v1", "Node");
        add::<api::core::v1::Pod>(g, r, "", "v1", "Pod");
        add::<api::core::v1::Event>(g, r, "", "v1", "Event");
        add::<api::core::v1::ConfigMap>(g, r, "", "v1", "ConfigMap");
        add::<api::core::v1::Binding>(g, r, "", "v1", "Binding");
        add::<api::coordination::v1::Lease>(g, r, "coordination.k8s.io", "v1", "Lease");
        add::<api::events::v1::Event>(g, r, "events.k8s.io", "v1", "Event");
        add::<api::core::v1::PodTemplate>(g, r, "", "v1", "PodTemplate");
        add::<api::apps::v1::DaemonSet>(g, r, "apps", "v1", "DaemonSet");
        add::<api::apps::v1::Deployment>(g, r, "apps", "v1", "Deployment");
        add::<api::apps::v1::ReplicaSet>(g, r, "apps", "v1", "ReplicaSet");
        add::<api::apps::v1::StatefulSet>(g, r, "apps", "v1", "StatefulSet");
        add::<api::batch::v1::Job>(g, r, "batch", "v1", "Job");
        add::<api::scheduling::v1::PriorityClass>(g, r, "scheduling.k8s.io", "v1", "PriorityClass");
        add::<api::policy::v1::PodDisruptionBudget>(g, r, "policy", "v1", "PodDisruptionBudget");
        add::<api::policy::v1::Eviction>(g, r, "policy", "v1", "Eviction");
        let dra = "resource.k8s.io";
        add::<api::resource::v1::DeviceClass>(g, r, dra, "v1", "DeviceClass");
        add::<api::resource::v1::ResourceSlice>(g, r, dra, "v1", "ResourceSlice");
        add::<api::resource::v1::ResourceClaim>(g, r, dra, "v1", "ResourceClaim");
        add::<api::resource::v1::ResourceClaimTemplate>(g, r, dra, "v1", "ResourceClaimTemplate");
        add::<api::resource::v1::DeviceTaintRule>(g, r, dra, "v1", "DeviceTaintRule");
        add::<CustomResourceDefinition>(
            g,
            r,
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
        );
        generator.subschema_for::<ObjectMeta>();
        let mut definitions = generator.take_definitions(true);
        for ((group, version, kind), name) in &roots {
            if let Some(Value::Object(schema)) = definitions.get_mut(name) {
                schema.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": group, "version": version, "kind": kind}]),
                );
                // k8s-openapi requires metadata (a Rust type needs it); upstream does not.
                if let Some(Value::Array(required)) = schema.get_mut("required") {
                    required.retain(|f| f != "metadata");
                    if required.is_empty() {
                        schema.remove("required");
                    }
                }
            }
        }
        Builtins { definitions, roots }
    })
}

/// The schema `def`'s objects are checked with, and the definitions its `$ref`s resolve in:
/// the CRD's schema for custom resources, k8s-openapi's for built-in kinds; `None` for
/// resources registered without one (anything goes, as with
/// `x-kubernetes-preserve-unknown-fields`).
pub fn schema_of(def: &ResourceDef) -> Option<(Value, &'static Definitions)> {
    let builtins = builtins();
    if let Some(schema) = &def.schema {
        return Some(((**schema).clone(), &builtins.definitions));
    }
    let name = builtins
        .roots
        .get(&(def.group.clone(), def.version.clone(), def.kind.clone()))?;
    Some((
        json!({"$ref": format!("{REF_PREFIX}{name}")}),
        &builtins.definitions,
    ))
}

/// The schema of ObjectMeta, for the metadata of every kind.
pub fn object_meta_schema() -> Value {
    json!({"$ref": format!("{REF_PREFIX}{OBJECT_META}")})
}
