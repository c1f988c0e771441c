//! Which node groups the fake serves: the groups its file gives in full, plus the `NodeGroup`
//! objects in the API server whose `spec.provider` is its provider name.
//!
//! [`resolve`] is the pure rule; [`watch_node_groups`] keeps it current from a watch. NodeGroups
//! are read untyped and decoded one by one, so one object this build cannot decode (or that
//! breaks a rule) is skipped with a log line and never hides the others.

use std::collections::BTreeMap;

use dra_api::{InvalidNodeGroup, NodeGroup};
use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::Value;

use crate::config::{Config, GroupConfig};

/// Why a NodeGroup object in the API server is not served.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Skipped {
    /// The object does not decode as a NodeGroup of this build.
    #[error("NodeGroup {name:?} cannot be read: {error}")]
    Undecodable {
        /// The object's name.
        name: String,
        /// Field path and problem.
        error: String,
    },
    /// The spec breaks a NodeGroup rule.
    #[error("NodeGroup {name:?} is invalid: {source}")]
    Invalid {
        /// The object's name.
        name: String,
        /// The rules broken.
        #[source]
        source: InvalidNodeGroup,
    },
    /// Another NodeGroup (first by name) already has this `spec.providerID`.
    #[error("NodeGroup {name:?} has spec.providerID {id:?}, which NodeGroup {kept:?} already uses")]
    DuplicateId {
        /// The object's name.
        name: String,
        /// The shared id.
        id: String,
        /// The NodeGroup served under that id.
        kept: String,
    },
    /// The file gives a group with this id in full, and the file wins.
    #[error(
        "NodeGroup {name:?} (spec.providerID {id:?}) is ignored: the config file gives that group"
    )]
    ShadowedByFile {
        /// The object's name.
        name: String,
        /// The id.
        id: String,
    },
}

/// The groups served, by group id, and the NodeGroups left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    /// Served groups by id.
    pub groups: BTreeMap<String, GroupConfig>,
    /// NodeGroups of this provider that are not served, and why.
    pub skipped: Vec<Skipped>,
}

fn name_of(object: &Value) -> String {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Decodes one NodeGroup, naming the field that does not fit.
fn decode(object: &Value) -> Result<NodeGroup, Skipped> {
    serde_path_to_error::deserialize(object).map_err(|err| Skipped::Undecodable {
        name: name_of(object),
        error: format!("{}: {}", err.path(), err.inner()),
    })
}

/// The groups `config` and the NodeGroup `objects` (as the API server returns them) describe.
#[must_use]
pub fn resolve(config: &Config, objects: &[Value]) -> Resolved {
    let mut resolved = Resolved::default();
    for group in config.file_groups() {
        resolved.groups.insert(group.name.clone(), group);
    }
    let mut sorted: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            o.pointer("/spec/provider").and_then(Value::as_str)
                == Some(config.provider_name.as_str())
        })
        .collect();
    sorted.sort_by_key(|o| name_of(o));
    let mut from_api: BTreeMap<String, String> = BTreeMap::new();
    for object in sorted {
        let group = match decode(object) {
            Ok(group) => group,
            Err(skipped) => {
                resolved.skipped.push(skipped);
                continue;
            }
        };
        let name = group.metadata.name.clone().unwrap_or_default();
        if let Err(source) = group.spec.validate() {
            resolved.skipped.push(Skipped::Invalid { name, source });
            continue;
        }
        let id = group.spec.provider_id.clone();
        if let Some(kept) = from_api.get(&id) {
            resolved.skipped.push(Skipped::DuplicateId {
                name,
                id,
                kept: kept.clone(),
            });
            continue;
        }
        if resolved.groups.contains_key(&id) {
            resolved.skipped.push(Skipped::ShadowedByFile { name, id });
            continue;
        }
        from_api.insert(id.clone(), name.clone());
        resolved.groups.insert(
            id.clone(),
            GroupConfig {
                faults: config.faults_for(&id),
                node_labels: config.node_labels_for(&id, &name),
                name: id,
                node_group: name,
                spec: group.spec,
            },
        );
    }
    resolved
}

/// The API resource of `NodeGroup`, for untyped reads.
#[must_use]
pub fn node_group_resource() -> ApiResource {
    ApiResource::erase::<NodeGroup>(&())
}

/// Lists the NodeGroups once. `Ok(None)` when the API server does not serve them (no CRD).
///
/// # Errors
/// Any other API error.
pub async fn list_node_groups(client: &Client) -> Result<Option<Vec<Value>>, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &node_group_resource());
    match api.list(&Default::default()).await {
        Ok(list) => Ok(Some(list.items.iter().filter_map(to_value).collect())),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
        Err(err) => Err(err),
    }
}

fn to_value(object: &DynamicObject) -> Option<Value> {
    serde_json::to_value(object).ok()
}

/// Watches the NodeGroups and calls `on_change` with all of them after the initial list and
/// after every change, until the stream ends (never, in practice). Errors are retried with
/// backoff; the first one of a run is logged at `info` (the CRD may simply not be applied yet).
pub async fn watch_node_groups(client: Client, mut on_change: impl FnMut(Vec<Value>)) {
    use kube::runtime::WatchStreamExt;
    let api: Api<DynamicObject> = Api::all_with(client, &node_group_resource());
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut objects: BTreeMap<String, Value> = BTreeMap::new();
    let mut initial: BTreeMap<String, Value> = BTreeMap::new();
    let mut failing = false;
    while let Some(event) = stream.next().await {
        let changed = match event {
            Ok(watcher::Event::Init) => {
                initial.clear();
                false
            }
            Ok(watcher::Event::InitApply(object)) => {
                if let Some(value) = to_value(&object) {
                    initial.insert(name_of(&value), value);
                }
                false
            }
            Ok(watcher::Event::InitDone) => {
                objects = std::mem::take(&mut initial);
                true
            }
            Ok(watcher::Event::Apply(object)) => {
                if let Some(value) = to_value(&object) {
                    objects.insert(name_of(&value), value);
                }
                true
            }
            Ok(watcher::Event::Delete(object)) => {
                objects.remove(object.metadata.name.as_deref().unwrap_or_default());
                true
            }
            Err(err) => {
                if !failing {
                    tracing::info!(%err, "cannot watch NodeGroups yet; serving the groups known so far");
                }
                failing = true;
                false
            }
        };
        if changed {
            if failing {
                tracing::info!("watching NodeGroups");
            }
            failing = false;
            on_change(objects.values().cloned().collect());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(text: &str) -> Config {
        Config::parse(text, "test").expect("config")
    }

    fn node_group(name: &str, provider: &str, id: &str, max: i64) -> Value {
        json!({
            "apiVersion": "dra-autoscaler.io/v1alpha1",
            "kind": "NodeGroup",
            "metadata": {"name": name},
            "spec": {
                "provider": provider, "providerID": id, "minSize": 0, "maxSize": max,
                "capacityType": "on-demand", "pricePerHour": 1.0,
                "template": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}
            }
        })
    }

    #[test]
    fn node_groups_of_this_provider_are_served_under_their_provider_id_with_file_faults() {
        let config = config("nodeGroups:\n  - name: pool-a\n    faults: {quotaLimit: 2}\n");
        let objects = [
            node_group("gpu-a", "fake", "pool-a", 4),
            node_group("other", "aws", "asg-1", 4),
        ];
        let resolved = resolve(&config, &objects);
        assert_eq!(resolved.groups.len(), 1, "{resolved:?}");
        let group = &resolved.groups["pool-a"];
        assert_eq!(group.node_group, "gpu-a");
        assert_eq!(group.spec.max_size, 4);
        assert_eq!(group.faults.quota_limit, Some(2));
        assert!(resolved.skipped.is_empty());
    }

    #[test]
    fn a_group_given_in_full_in_the_file_wins_over_a_node_group_with_its_id() {
        let config = config(
            "nodeGroups:\n  - name: cpu\n    spec:\n      provider: fake\n      providerID: cpu\n      minSize: 0\n      maxSize: 9\n      capacityType: on-demand\n      pricePerHour: 1\n      template: {capacity: {cpu: \"8\"}}\n",
        );
        let resolved = resolve(&config, &[node_group("cpu-pool", "fake", "cpu", 3)]);
        assert_eq!(resolved.groups["cpu"].spec.max_size, 9);
        assert_eq!(resolved.groups["cpu"].node_group, "cpu");
        assert_eq!(
            resolved.skipped,
            vec![Skipped::ShadowedByFile {
                name: "cpu-pool".into(),
                id: "cpu".into()
            }]
        );
    }

    #[test]
    fn undecodable_invalid_and_duplicate_node_groups_are_skipped_alone() {
        let config = config("nodeGroups: []\n");
        let mut newer = node_group("newer", "fake", "n", 4);
        newer["spec"]["capacityType"] = json!("flex");
        let mut inverted = node_group("inverted", "fake", "i", 4);
        inverted["spec"]["minSize"] = json!(6);
        let objects = [
            newer,
            inverted,
            node_group("b-second", "fake", "shared", 4),
            node_group("a-first", "fake", "shared", 4),
            node_group("good", "fake", "g", 4),
        ];
        let resolved = resolve(&config, &objects);
        assert_eq!(
            resolved.groups.keys().collect::<Vec<_>>(),
            vec!["g", "shared"]
        );
        assert_eq!(resolved.groups["shared"].node_group, "a-first");
        assert_eq!(resolved.skipped.len(), 3, "{:?}", resolved.skipped);
        let messages: Vec<String> = resolved.skipped.iter().map(ToString::to_string).collect();
        assert!(
            messages[2].contains("newer") && messages[2].contains("spec.capacityType"),
            "{messages:?}"
        );
        assert!(
            messages[0].contains("b-second") && messages[0].contains("a-first"),
            "{messages:?}"
        );
        assert!(matches!(resolved.skipped[1], Skipped::Invalid { .. }));
    }
}
