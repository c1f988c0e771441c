//! Server-side apply's field ownership, as far as the stand-in's clients rely on it.
//!
//! Upstream records, per field manager and subresource, the fields each apply configuration
//! set (`metadata.managedFields`, `fieldsType: FieldsV1`). When a manager applies again, the
//! fields it set before and no longer sets are removed from the object, unless another
//! manager owns them too. So a controller that applies its whole status each time can clear
//! a field by leaving it out, which a merge patch cannot do.
//!
//! Reduced here to what matters for that: lists are atomic (owned whole, as a leaf), only
//! apply operations record ownership (a PUT or merge patch leaves the record as it is), and
//! a field another manager applied is never a conflict (every apply acts as `force=true`).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::object::Target;

/// A field: the keys from the root of the object.
type Path = Vec<String>;

/// Who applies, and to which part of the object.
#[derive(Clone, Copy, Debug)]
pub struct Applier<'a> {
    /// The `fieldManager` of the request.
    pub manager: &'a str,
    /// The object or its `/status`.
    pub target: Target,
    /// Whether the kind has a status subresource (then the main resource does not own
    /// `status`, and `/status` owns only it).
    pub status_subresource: bool,
}

impl Applier<'_> {
    fn subresource(&self) -> Option<&'static str> {
        (self.target == Target::Status).then_some("status")
    }

    /// The fields `config` sets, for this target: `/status` owns what is under `status`; the
    /// object owns everything else except identity (`apiVersion`, `kind`, and metadata other
    /// than labels, annotations, finalizers and owner references).
    fn fields_of(&self, config: &Value) -> BTreeSet<Path> {
        let mut out = BTreeSet::new();
        let Some(root) = config.as_object() else {
            return out;
        };
        for (key, value) in root {
            let counts = match (self.target, key.as_str()) {
                (Target::Status, k) => k == "status",
                (Target::Main, "apiVersion" | "kind") => false,
                (Target::Main, "status") => !self.status_subresource,
                (Target::Main, "metadata") => {
                    for owned in ["labels", "annotations", "finalizers", "ownerReferences"] {
                        if let Some(v) = value.get(owned) {
                            leaves(v, &mut vec![key.clone(), owned.to_owned()], &mut out);
                        }
                    }
                    false
                }
                (Target::Main, _) => true,
            };
            if counts {
                leaves(value, &mut vec![key.clone()], &mut out);
            }
        }
        out
    }

    fn is_own_entry(&self, entry: &Value) -> bool {
        entry.get("manager").and_then(Value::as_str) == Some(self.manager)
            && entry.get("operation").and_then(Value::as_str) == Some("Apply")
            && same_subresource(entry, self.subresource())
    }

    /// Removes from `object` (the stored object, before `config` is merged into it) the fields
    /// this manager applied last time and leaves out of `config`, unless another manager
    /// applied them too. Maps left empty by a removal go with it.
    pub fn release(&self, object: &mut Value, config: &Value) {
        let entries = managed_fields(object);
        let mut before = BTreeSet::new();
        let mut others = BTreeSet::new();
        for entry in &entries {
            if !same_subresource(entry, self.subresource())
                || entry.get("operation").and_then(Value::as_str) != Some("Apply")
            {
                continue;
            }
            let fields = entry
                .get("fieldsV1")
                .map(from_fields_v1)
                .unwrap_or_default();
            if self.is_own_entry(entry) {
                before.extend(fields);
            } else {
                others.extend(fields);
            }
        }
        let now = self.fields_of(config);
        for path in before.difference(&now) {
            if !others.contains(path) {
                remove_path(object, path);
            }
        }
    }

    /// Records in `object`'s `managedFields` that this manager now owns what `config` sets,
    /// replacing its previous record (kept as it was, time included, when the fields are the
    /// same, so that a repeated apply changes nothing).
    pub fn record(&self, object: &mut Value, config: &Value, now: &str) {
        let fields = to_fields_v1(&self.fields_of(config));
        let api_version = object
            .get("apiVersion")
            .cloned()
            .unwrap_or(Value::String(String::new()));
        let mut entries = managed_fields(object);
        let position = entries.iter().position(|e| self.is_own_entry(e));
        if let Some(i) = position
            && entries[i].get("fieldsV1") == Some(&fields)
        {
            return;
        }
        let mut entry = Map::new();
        entry.insert("manager".into(), Value::String(self.manager.to_owned()));
        entry.insert("operation".into(), Value::String("Apply".into()));
        entry.insert("apiVersion".into(), api_version);
        entry.insert("time".into(), Value::String(now.to_owned()));
        entry.insert("fieldsType".into(), Value::String("FieldsV1".into()));
        entry.insert("fieldsV1".into(), fields);
        if let Some(sub) = self.subresource() {
            entry.insert("subresource".into(), Value::String(sub.into()));
        }
        match position {
            Some(i) => entries[i] = Value::Object(entry),
            None => entries.push(Value::Object(entry)),
        }
        if let Some(meta) = object
            .as_object_mut()
            .map(|root| {
                root.entry("metadata")
                    .or_insert_with(|| Value::Object(Map::new()))
            })
            .and_then(Value::as_object_mut)
        {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

fn same_subresource(entry: &Value, subresource: Option<&str>) -> bool {
    entry
        .get("subresource")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        == subresource
}

fn managed_fields(object: &Value) -> Vec<Value> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The leaf fields under `value` (at `prefix`): scalars, lists (atomic) and empty maps.
/// Nulls set nothing.
fn leaves(value: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    match value {
        Value::Null => {}
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                prefix.push(key.clone());
                leaves(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// `{"f:status": {"f:currentSize": {}}}`: upstream's FieldsV1 shape for a set of fields.
fn to_fields_v1(fields: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in fields {
        let mut node = &mut root;
        for key in path {
            let child = node
                .entry(format!("f:{key}"))
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(map) = child else {
                break;
            };
            node = map;
        }
    }
    Value::Object(root)
}

/// The fields of a FieldsV1 value: every `f:` key path ending in an empty map. Keys of the
/// forms this stand-in does not write (`k:`, `v:`, `i:`, `.`) are skipped.
fn from_fields_v1(value: &Value) -> BTreeSet<Path> {
    fn walk(value: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
        let Some(map) = value.as_object() else {
            return;
        };
        let children: Vec<(&str, &Value)> = map
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("f:").map(|k| (k, v)))
            .collect();
        if children.is_empty() {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
            return;
        }
        for (key, child) in children {
            prefix.push(key.to_owned());
            walk(child, prefix, out);
            prefix.pop();
        }
    }
    let mut out = BTreeSet::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

/// Removes the field at `path`, then every map on the way that the removal left empty
/// (below the top level).
fn remove_path(object: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = &mut *object;
    for key in parents {
        match node.get_mut(key.as_str()) {
            Some(child) if child.is_object() => node = child,
            _ => return,
        }
    }
    if let Some(map) = node.as_object_mut() {
        map.remove(last);
    }
    if parents.len() > 1 && node.as_object().is_some_and(Map::is_empty) {
        remove_path(object, parents);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn status_applier(manager: &str) -> Applier<'_> {
        Applier {
            manager,
            target: Target::Status,
            status_subresource: true,
        }
    }

    #[test]
    fn fields_round_trip_through_fields_v1() {
        let config = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"},
            "spec": {"x": 1}, "status": {"size": 1, "last": {"time": "t", "count": 2}, "list": [1]}});
        let fields = status_applier("m").fields_of(&config);
        let expected: BTreeSet<Path> = [
            vec!["status", "last", "count"],
            vec!["status", "last", "time"],
            vec!["status", "list"],
            vec!["status", "size"],
        ]
        .into_iter()
        .map(|p| p.into_iter().map(str::to_owned).collect())
        .collect();
        assert_eq!(fields, expected);
        let v1 = to_fields_v1(&fields);
        assert_eq!(
            v1,
            json!({"f:status": {"f:last": {"f:count": {}, "f:time": {}}, "f:list": {}, "f:size": {}}})
        );
        assert_eq!(from_fields_v1(&v1), fields);
    }

    #[test]
    fn a_field_left_out_of_the_next_apply_is_removed_unless_another_manager_applied_it() {
        let first = json!({"status": {"size": 1, "backoffUntil": "t", "last": {"time": "t"}}});
        let mut object = json!({"metadata": {"name": "a"}, "status": {"size": 1, "backoffUntil": "t",
            "last": {"time": "t"}, "other": "kept"}});
        status_applier("controller").record(&mut object, &first, "now");
        // Another manager applied `size` too.
        status_applier("someone").record(&mut object, &json!({"status": {"size": 1}}), "now");

        let second = json!({"status": {"upcoming": 2}});
        status_applier("controller").release(&mut object, &second);
        assert_eq!(
            object["status"],
            json!({"size": 1, "other": "kept"}),
            "backoffUntil and the emptied `last` map are gone; size (co-owned) and a field no apply set stay"
        );
    }

    #[test]
    fn a_repeated_apply_leaves_the_record_unchanged() {
        let config = json!({"status": {"size": 1}});
        let mut object = json!({"metadata": {"name": "a"}, "status": {"size": 1}});
        status_applier("c").record(&mut object, &config, "t1");
        let once = object.clone();
        status_applier("c").record(&mut object, &config, "t2");
        assert_eq!(object, once);
        assert_eq!(
            object["metadata"]["managedFields"][0]["subresource"],
            "status"
        );
        assert_eq!(object["metadata"]["managedFields"][0]["operation"], "Apply");
    }
}
