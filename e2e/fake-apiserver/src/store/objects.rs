//! A collection's objects in key order, with the one index the real API server's watch cache
//! keeps for pods: by `spec.nodeName`. A kubelet lists and watches only its own node's pods
//! (`fieldSelector=spec.nodeName=<node>`); with the index such a list reads that node's
//! objects instead of testing every object of the cluster.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::selector::FieldSelector;

/// `(namespace or "", name)`: sorts like the real server's etcd keys.
pub(super) type ObjectKey = (String, String);

/// The indexed field.
const NODE_NAME: &str = "spec.nodeName";

/// Objects by key, and the keys of those with a `spec.nodeName` by its value.
#[derive(Default)]
pub(super) struct Objects {
    by_key: BTreeMap<ObjectKey, Value>,
    by_node: HashMap<String, BTreeSet<ObjectKey>>,
}

fn node_name(object: &Value) -> Option<&str> {
    object
        .get("spec")?
        .get("nodeName")?
        .as_str()
        .filter(|n| !n.is_empty())
}

impl Objects {
    /// Stores `object` at `key`, returning what was there.
    pub(super) fn insert(&mut self, key: ObjectKey, object: Value) -> Option<Value> {
        let node = node_name(&object).map(str::to_owned);
        if let Some(node) = &node {
            self.by_node
                .entry(node.clone())
                .or_default()
                .insert(key.clone());
        }
        let old = self.by_key.insert(key.clone(), object)?;
        if let Some(old_node) = node_name(&old)
            && Some(old_node) != node.as_deref()
        {
            self.unindex(old_node.to_owned(), &key);
        }
        Some(old)
    }

    /// Takes the object at `key` out.
    pub(super) fn remove(&mut self, key: &ObjectKey) -> Option<Value> {
        let old = self.by_key.remove(key)?;
        if let Some(node) = node_name(&old) {
            self.unindex(node.to_owned(), key);
        }
        Some(old)
    }

    fn unindex(&mut self, node: String, key: &ObjectKey) {
        if let Some(keys) = self.by_node.get_mut(&node) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_node.remove(&node);
            }
        }
    }

    pub(super) fn get(&self, key: &ObjectKey) -> Option<&Value> {
        self.by_key.get(key)
    }

    pub(super) fn contains_key(&self, key: &ObjectKey) -> bool {
        self.by_key.contains_key(key)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Value> {
        self.by_key.values()
    }

    /// The objects of `namespace` (all namespaces when `None`) in key order that `fields`
    /// may select: with a `spec.nodeName=<node>` term only that node's, else all of them.
    /// The caller still applies the selectors: this only narrows what it tests.
    pub(super) fn candidates<'a>(
        &'a self,
        namespace: Option<&'a str>,
        fields: &FieldSelector,
    ) -> Box<dyn Iterator<Item = &'a Value> + 'a> {
        let in_namespace = move |(ns, _): &&ObjectKey| namespace.is_none_or(|want| want == ns);
        match fields.required(NODE_NAME).filter(|n| !n.is_empty()) {
            Some(node) => {
                let keys = self.by_node.get(node).into_iter().flatten();
                Box::new(keys.filter(in_namespace).filter_map(|k| self.by_key.get(k)))
            }
            None => Box::new(
                self.by_key
                    .iter()
                    .filter(move |(k, _)| in_namespace(k))
                    .map(|(_, v)| v),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn meta(object: &Value, field: &str) -> String {
        object
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    }

    fn pod(name: &str, node: Option<&str>) -> (ObjectKey, Value) {
        let mut object = json!({"metadata": {"namespace": "ns", "name": name}, "spec": {}});
        if let Some(node) = node {
            object["spec"]["nodeName"] = json!(node);
        }
        (("ns".to_owned(), name.to_owned()), object)
    }

    fn names(objects: &Objects, namespace: Option<&str>, fields: &str) -> Vec<String> {
        let fields = FieldSelector::parse(fields).expect("selector parses");
        objects
            .candidates(namespace, &fields)
            .map(|o| meta(o, "name"))
            .collect()
    }

    #[test]
    fn a_node_name_term_reads_that_nodes_objects_as_they_move() {
        let mut objects = Objects::default();
        for (name, node) in [
            ("a", Some("n1")),
            ("b", None),
            ("c", Some("n2")),
            ("d", Some("n1")),
        ] {
            let (key, object) = pod(name, node);
            objects.insert(key, object);
        }
        assert_eq!(names(&objects, None, "spec.nodeName=n1"), ["a", "d"]);
        assert_eq!(
            names(&objects, Some("other"), "spec.nodeName=n1"),
            Vec::<String>::new()
        );
        // Unindexed forms read everything (the selectors decide).
        assert_eq!(
            names(&objects, None, "spec.nodeName="),
            ["a", "b", "c", "d"]
        );
        assert_eq!(
            names(&objects, None, "spec.nodeName!=n1"),
            ["a", "b", "c", "d"]
        );
        // Bound (b), moved (a: impossible for a pod, possible for the store), removed (d).
        let (key, object) = pod("b", Some("n1"));
        objects.insert(key, object);
        let (key, object) = pod("a", Some("n2"));
        objects.insert(key, object);
        objects.remove(&("ns".to_owned(), "d".to_owned()));
        assert_eq!(names(&objects, None, "spec.nodeName=n1"), ["b"]);
        assert_eq!(names(&objects, None, "spec.nodeName=n2"), ["a", "c"]);
        assert!(!objects.by_node.contains_key("n3"));
        objects.remove(&("ns".to_owned(), "b".to_owned()));
        assert!(
            !objects.by_node.contains_key("n1"),
            "no empty index entry is kept"
        );
    }
}
