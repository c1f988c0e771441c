//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/<group>` and
//! `/apis/<group>/<version>`, built from the registry with k8s-openapi's types so the
//! JSON is what kube's `Discovery` and `ApiResource::from_gvk` users parse.

use std::{cmp::Reverse, collections::BTreeMap, net::SocketAddr};

use k8s_openapi::apimachinery::pkg::{
    apis::meta::v1::{
        APIGroup, APIGroupList, APIResource, APIResourceList, APIVersions,
        GroupVersionForDiscovery, ServerAddressByClientCIDR,
    },
    version::Info,
};
use kube::core::{
    Version,
    discovery::v2::{
        APIGroupDiscovery, APIGroupDiscoveryList, APIResourceDiscovery, APISubresourceDiscovery,
        APIVersionDiscovery, GroupVersionKind as DiscoveryGvk,
    },
};
use serde::Serialize;
use serde_json::Value;

use crate::{
    error::ApiError,
    resource::{Registry, ResourceDef},
};

/// Media type of an aggregated discovery response (`apidiscovery.k8s.io/v2`).
pub const AGGREGATED_MEDIA_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an Accept header asks for aggregated discovery (kubectl, kube's
/// `Discovery::run_aggregated`). Clients list it first and fall back to the plain
/// documents when the response is not of that type.
pub fn wants_aggregated(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|media| {
            let params: Vec<&str> = media.split(';').map(str::trim).collect();
            params.contains(&"g=apidiscovery.k8s.io")
                && params.contains(&"v=v2")
                && params.contains(&"as=APIGroupDiscoveryList")
        })
    })
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn to_value(doc: &impl Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(doc)
        .map_err(|e| ApiError::Internal(format!("unable to encode discovery document: {e}")))
}

/// The `/version` document for a `MAJOR.MINOR.PATCH` version.
pub fn version_info(major: &str, minor: &str, patch: &str) -> Info {
    Info {
        major: major.to_owned(),
        minor: minor.to_owned(),
        git_version: format!("v{major}.{minor}.{patch}"),
        git_commit: "0000000000000000000000000000000000000000".into(),
        git_tree_state: "clean".into(),
        build_date: "2026-01-01T00:00:00Z".into(),
        go_version: "go1.25.0".into(),
        compiler: "gc".into(),
        platform: format!("{}/{}", std::env::consts::OS, go_arch()),
        emulation_major: Some(major.to_owned()),
        emulation_minor: Some(minor.to_owned()),
        min_compatibility_major: None,
        min_compatibility_minor: None,
    }
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

fn server_addresses(addr: SocketAddr) -> Vec<ServerAddressByClientCIDR> {
    vec![ServerAddressByClientCIDR {
        client_cidr: "0.0.0.0/0".into(),
        server_address: addr.to_string(),
    }]
}

/// `/version`.
pub fn version(info: &Info) -> Result<Value, ApiError> {
    to_value(info)
}

/// `/api`: the core group's versions.
pub fn core_versions(addr: SocketAddr) -> Result<Value, ApiError> {
    to_value(&APIVersions {
        versions: vec!["v1".into()],
        server_address_by_client_cidrs: server_addresses(addr),
    })
}

/// Versions served per group, highest kubectl priority first (the preferred one).
fn group_versions(registry: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for def in registry.iter().filter(|d| !d.group.is_empty()) {
        let versions = groups.entry(def.group.clone()).or_default();
        if !versions.contains(&def.version) {
            versions.push(def.version.clone());
        }
    }
    for versions in groups.values_mut() {
        versions.sort_by_cached_key(|v| Reverse(Version::parse(v).priority()));
    }
    groups
}

fn api_group(name: &str, versions: &[String]) -> APIGroup {
    let entry = |v: &String| GroupVersionForDiscovery {
        group_version: format!("{name}/{v}"),
        version: v.clone(),
    };
    APIGroup {
        name: name.to_owned(),
        preferred_version: versions.first().map(entry),
        server_address_by_client_cidrs: None,
        versions: versions.iter().map(entry).collect(),
    }
}

/// `/apis`: every non-core group.
pub fn group_list(registry: &Registry) -> Result<Value, ApiError> {
    to_value(&APIGroupList {
        groups: group_versions(registry)
            .iter()
            .map(|(name, versions)| api_group(name, versions))
            .collect(),
    })
}

/// `/apis/<group>`.
pub fn group(registry: &Registry, name: &str) -> Result<Value, ApiError> {
    let groups = group_versions(registry);
    let versions = groups.get(name).ok_or(ApiError::UnknownResource)?;
    to_value(&api_group(name, versions))
}

/// `/api/v1` or `/apis/<group>/<version>`: the resources and subresources served.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Result<Value, ApiError> {
    if !registry.serves(group, version) {
        return Err(ApiError::UnknownResource);
    }
    let mut resources = Vec::new();
    for def in registry
        .iter()
        .filter(|d| d.group == group && d.version == version)
    {
        resources.push(APIResource {
            name: def.plural.clone(),
            singular_name: def.singular.clone(),
            categories: (!def.categories.is_empty()).then(|| def.categories.clone()),
            namespaced: def.namespaced,
            kind: def.kind.clone(),
            verbs: VERBS.iter().map(|v| (*v).to_owned()).collect(),
            short_names: (!def.short_names.is_empty()).then(|| def.short_names.clone()),
            ..APIResource::default()
        });
        for sub in def.subresources() {
            let (kind, verbs): (&str, &[&str]) = match sub {
                "binding" => ("Binding", &["create"]),
                "eviction" => ("Eviction", &["create"]),
                _ => (def.kind.as_str(), &["get", "patch", "update"]),
            };
            resources.push(APIResource {
                name: format!("{}/{sub}", def.plural),
                singular_name: String::new(),
                namespaced: def.namespaced,
                kind: kind.to_owned(),
                verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
                ..APIResource::default()
            });
        }
    }
    to_value(&APIResourceList {
        group_version: if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        },
        resources,
    })
}

fn discovery_gvk(def: &ResourceDef, kind: &str) -> DiscoveryGvk {
    DiscoveryGvk {
        group: Some(def.group.clone()),
        version: Some(def.version.clone()),
        kind: Some(kind.to_owned()),
    }
}

fn resource_discovery(def: &ResourceDef) -> APIResourceDiscovery {
    APIResourceDiscovery {
        resource: Some(def.plural.clone()),
        response_kind: Some(discovery_gvk(def, &def.kind)),
        scope: Some(
            if def.namespaced {
                "Namespaced"
            } else {
                "Cluster"
            }
            .into(),
        ),
        singular_resource: Some(def.singular.clone()),
        verbs: VERBS.iter().map(|v| (*v).to_owned()).collect(),
        short_names: def.short_names.clone(),
        categories: def.categories.clone(),
        subresources: def
            .subresources()
            .into_iter()
            .map(|sub| {
                let (kind, verbs): (&str, &[&str]) = match sub {
                    "binding" => ("Binding", &["create"]),
                    "eviction" => ("Eviction", &["create"]),
                    _ => (def.kind.as_str(), &["get", "patch", "update"]),
                };
                APISubresourceDiscovery {
                    subresource: Some(sub.to_owned()),
                    response_kind: Some(discovery_gvk(def, kind)),
                    accepted_types: Vec::new(),
                    verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
                }
            })
            .collect(),
    }
}

fn group_discovery(registry: &Registry, group: &str, versions: &[String]) -> APIGroupDiscovery {
    APIGroupDiscovery {
        metadata: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(group.to_owned()),
            ..Default::default()
        }),
        versions: versions
            .iter()
            .map(|version| APIVersionDiscovery {
                version: Some(version.clone()),
                resources: registry
                    .iter()
                    .filter(|d| d.group == group && &d.version == version)
                    .map(resource_discovery)
                    .collect(),
                freshness: Some("Current".into()),
            })
            .collect(),
    }
}

/// Aggregated discovery for `/api` (`core`) or `/apis`: every resource in one document.
pub fn aggregated(registry: &Registry, core: bool) -> Result<Value, ApiError> {
    let items = if core {
        vec![group_discovery(registry, "", &["v1".to_owned()])]
    } else {
        group_versions(registry)
            .iter()
            .map(|(group, versions)| group_discovery(registry, group, versions))
            .collect()
    };
    let mut doc = to_value(&APIGroupDiscoveryList {
        metadata: Some(Default::default()),
        items,
    })?;
    if let Some(map) = doc.as_object_mut() {
        map.insert("kind".into(), Value::from("APIGroupDiscoveryList"));
        map.insert("apiVersion".into(), Value::from("apidiscovery.k8s.io/v2"));
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::ResourceDef;

    #[test]
    fn preferred_version_follows_kubectl_priority() {
        let mut reg = Registry::builtins();
        reg.insert(ResourceDef::new(
            "scheduling.k8s.io",
            "v1alpha3",
            "workloads",
            "Workload",
            true,
            false,
        ));
        reg.insert(ResourceDef::new(
            "scheduling.k8s.io",
            "v1beta1",
            "workloads",
            "Workload",
            true,
            false,
        ));
        let doc = group(&reg, "scheduling.k8s.io").expect("group served");
        assert_eq!(doc["preferredVersion"]["version"], "v1");
        let versions: Vec<&str> = doc["versions"]
            .as_array()
            .expect("versions")
            .iter()
            .filter_map(|v| v["version"].as_str())
            .collect();
        assert_eq!(versions, vec!["v1", "v1beta1", "v1alpha3"]);
    }

    #[test]
    fn aggregated_accept_headers_are_recognised() {
        let kube = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert!(wants_aggregated(Some(kube)));
        assert!(!wants_aggregated(Some(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        )));
        assert!(!wants_aggregated(Some("application/json")));
        assert!(!wants_aggregated(None));
    }

    #[test]
    fn resource_list_names_subresources() {
        let mut reg = Registry::builtins();
        reg.insert(ResourceDef::new(
            "dra-autoscaler.io",
            "v1alpha1",
            "nodegroups",
            "NodeGroup",
            false,
            true,
        ));
        let doc = resource_list(&reg, "dra-autoscaler.io", "v1alpha1").expect("served");
        assert_eq!(doc["kind"], "APIResourceList");
        assert_eq!(doc["groupVersion"], "dra-autoscaler.io/v1alpha1");
        let names: Vec<&str> = doc["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(names, vec!["nodegroups", "nodegroups/status"]);
        assert_eq!(doc["resources"][0]["namespaced"], false);
        assert!(resource_list(&reg, "dra-autoscaler.io", "v9").is_err());
    }
}
