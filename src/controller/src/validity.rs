//! NodeGroups read one by one, so that one this binary cannot use never stops
//! the others.
//!
//! The NodeGroup watch is untyped: a list with one object that does not decode
//! (an enum value a newer CRD added, a field of the wrong type applied with
//! `--validate=false`) would otherwise fail the whole list forever. Each object
//! is decoded and checked here ([`dra_plan::groups::check`]: the spec's rules
//! and template quantities); one that fails is left out of the loop and
//! reported where an operator looks: a `Valid=False` condition naming the field
//! and reason, a Warning Event, the `invalid_node_groups` gauge and one log
//! line — once per change of the problem, not once per loop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use dra_api::NodeGroup;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::DynamicObject;

// The condition type and its reasons live in the catalog (the reference page's source).
pub use crate::catalog::{DECODE_FAILED, INVALID_SPEC, PROVIDER_REFUSED, VALID as VALID_CONDITION};

/// A NodeGroup the loop leaves out, and why.
#[derive(Debug, Clone)]
pub struct Unusable {
    /// The object as watched.
    pub object: Arc<DynamicObject>,
    /// `metadata.name`.
    pub name: String,
    /// [`DECODE_FAILED`] or [`INVALID_SPEC`].
    pub reason: &'static str,
    /// What is wrong, naming the field.
    pub message: String,
}

impl Unusable {
    /// A reference for Events about it.
    #[must_use]
    pub fn object_ref(&self) -> ObjectReference {
        let meta = &self.object.metadata;
        ObjectReference {
            api_version: Some(NodeGroup::api_version(&()).into_owned()),
            kind: Some(NodeGroup::kind(&()).into_owned()),
            name: meta.name.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            ..ObjectReference::default()
        }
    }
}

/// A usable NodeGroup whose provider refuses it (`message`), as an [`Unusable`].
#[must_use]
pub fn refused_by_provider(group: &NodeGroup, message: &str) -> Option<Unusable> {
    let object: DynamicObject = serde_json::from_value(serde_json::to_value(group).ok()?).ok()?;
    Some(Unusable {
        name: group.metadata.name.clone().unwrap_or_default(),
        object: Arc::new(object),
        reason: PROVIDER_REFUSED,
        message: format!(
            "provider {:?} does not serve node group {:?}: {message}",
            group.spec.provider, group.spec.provider_id
        ),
    })
}

/// Splits the watched objects into the NodeGroups the loop can use and the
/// others.
#[must_use]
pub fn decode(objects: Vec<Arc<DynamicObject>>) -> (Vec<Arc<NodeGroup>>, Vec<Unusable>) {
    let mut usable = Vec::new();
    let mut unusable = Vec::new();
    for object in objects {
        let name = object.metadata.name.clone().unwrap_or_default();
        let problem = match decode_one(&object) {
            Ok(group) => match dra_plan::groups::check(&group.spec) {
                Ok(()) => {
                    usable.push(Arc::new(group));
                    continue;
                }
                Err(problems) => (INVALID_SPEC, problems.to_string()),
            },
            Err(message) => (DECODE_FAILED, message),
        };
        unusable.push(Unusable {
            object,
            name,
            reason: problem.0,
            message: problem.1,
        });
    }
    (usable, unusable)
}

fn decode_one(object: &DynamicObject) -> Result<NodeGroup, String> {
    let value = serde_json::to_value(object).map_err(|e| e.to_string())?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.inner().to_string()
        } else {
            format!("field {path}: {}", e.inner())
        }
    })
}

/// Sets the `Valid` condition ([`crate::conditions::set`]). Returns whether
/// anything changed.
pub fn set_valid(
    conditions: &mut Vec<Condition>,
    valid: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    crate::conditions::set(conditions, VALID_CONDITION, valid, reason, message, now)
}

/// The conditions of an object that may not decode: those that do, in order.
#[must_use]
pub fn conditions_of(object: &DynamicObject) -> Vec<Condition> {
    object
        .data
        .pointer("/status/conditions")
        .and_then(serde_json::Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|c| serde_json::from_value(c.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// What was last reported per unusable group, so that each problem is
/// reported once per change.
#[derive(Debug, Default)]
pub struct Reported {
    last: Mutex<BTreeMap<String, String>>,
}

/// What changed since the last report.
#[derive(Debug, Default)]
pub struct Changes<'a> {
    /// Unusable groups whose problem is new or different.
    pub new: Vec<&'a Unusable>,
    /// Groups reported before that are usable now (or gone).
    pub recovered: Vec<String>,
}

impl Reported {
    /// Records `now_unusable` and returns what changed.
    pub fn update<'a>(&self, now_unusable: &'a [Unusable]) -> Changes<'a> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let mut changes = Changes::default();
        let current: BTreeMap<&str, &Unusable> =
            now_unusable.iter().map(|u| (u.name.as_str(), u)).collect();
        last.retain(|name, _| {
            let stays = current.contains_key(name.as_str());
            if !stays {
                changes.recovered.push(name.clone());
            }
            stays
        });
        for (name, unusable) in current {
            let text = format!("{}: {}", unusable.reason, unusable.message);
            if last.get(name) != Some(&text) {
                last.insert(name.to_string(), text);
                changes.new.push(unusable);
            }
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::discovery::ApiResource;

    fn object(name: &str, spec: serde_json::Value) -> Arc<DynamicObject> {
        let mut object = DynamicObject::new(name, &ApiResource::erase::<NodeGroup>(&())).data(
            serde_json::json!({
                "spec": spec,
            }),
        );
        object.metadata.uid = Some(format!("uid-{name}"));
        Arc::new(object)
    }

    fn spec(capacity_type: &str, cpu: &str) -> serde_json::Value {
        serde_json::json!({
            "provider": "fake", "providerID": "p", "minSize": 0, "maxSize": 3,
            "capacityType": capacity_type, "pricePerHour": 1.0,
            "template": {"capacity": {"cpu": cpu}},
        })
    }

    #[test]
    fn one_undecodable_or_invalid_group_leaves_the_others_usable() {
        let (usable, unusable) = decode(vec![
            object("good", spec("on-demand", "4")),
            object("newer", spec("preemptible-v2", "4")),
            object("lots", spec("on-demand", "lots")),
        ]);
        let names: Vec<_> = usable
            .iter()
            .map(|g| g.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["good"]);
        assert_eq!(unusable.len(), 2);
        assert_eq!(unusable[0].name, "newer");
        assert_eq!(unusable[0].reason, DECODE_FAILED);
        assert!(
            unusable[0].message.starts_with("field spec.capacityType: "),
            "{}",
            unusable[0].message
        );
        assert!(unusable[0].message.contains("preemptible-v2"));
        assert_eq!(unusable[1].reason, INVALID_SPEC);
        assert!(
            unusable[1]
                .message
                .starts_with("spec.template.capacity.cpu: "),
            "{}",
            unusable[1].message
        );
    }

    #[test]
    fn each_problem_is_reported_once_per_change() {
        let reported = Reported::default();
        let (_, first) = decode(vec![object("a", spec("on-demand", "lots"))]);
        assert_eq!(reported.update(&first).new.len(), 1);
        assert!(reported.update(&first).new.is_empty(), "same problem");
        let (_, other) = decode(vec![object("a", spec("on-demand", "many"))]);
        assert_eq!(reported.update(&other).new.len(), 1, "new message");
        let changes = reported.update(&[]);
        assert_eq!(changes.recovered, ["a"]);
    }
}
