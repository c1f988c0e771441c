//! A JSON `kind: List` read item by item.
//!
//! `kubectl get -A -o json` of a large cluster is one document of hundreds of megabytes.
//! Parsed whole into a [`Value`] it takes several times its own size before the first
//! object is typed; read here, serde_json walks the top-level object once, keeps the
//! `kind` and, from `items`, only where each element's text is (a [`RawValue`], no copy),
//! and each item is then typed from its text ([`super::parallel`], [`super::direct`]). The
//! result is the one of parsing the whole document (same objects, same order, same first
//! error): only a text that is one valid JSON object whose `kind` makes it a list and
//! whose one `items` is an array is read here ([`Shape::is_list`]); any other takes the
//! whole-document path. The same reading serves a text handed over in pieces
//! ([`super::pieces`]), so both paths apply one set of rules.

use std::borrow::Cow;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{LoadError, Loader, is_list_kind};
use crate::objects::Origin;

/// What a reading saw of the top-level object.
#[derive(Debug, Default)]
pub(super) struct Shape {
    /// The last `kind` (a later duplicate key wins, as in a parsed [`Value`]).
    kind: Option<Value>,
    /// Whether `items` is there, and an array.
    items_is_array: bool,
}

impl Shape {
    /// Whether the object is a list read item by item: its `kind` makes it a list and its
    /// one `items` is an array (a second `items` stops the reading: the last one would
    /// count, as in a parsed value, so such a text takes the whole-document path).
    pub(super) fn is_list(&self) -> bool {
        let kind = self.kind.as_ref().and_then(Value::as_str).unwrap_or("");
        self.items_is_array && is_list_kind(kind, true)
    }
}

/// Reads `text` as a JSON object, appending the text of each element of its `items` to
/// `items`, in order. `placeholder`: the first element stands for items handed over by an
/// earlier reading and is passed over ([`super::pieces`]). `whole`: `text` is the whole
/// input, so nothing but whitespace may follow the object; otherwise it may be a start of
/// one, and an error that [`serde_json::Error::is_eof`] says so.
///
/// # Errors
/// `text` is not such an object (or not all of one), or has `items` twice.
pub(super) fn read_object<'t>(
    text: &'t str,
    placeholder: bool,
    whole: bool,
    items: &mut Vec<&'t str>,
) -> Result<Shape, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let shape = deserializer.deserialize_map(ObjectVisitor { items, placeholder })?;
    if whole {
        deserializer.end()?;
    }
    Ok(shape)
}

/// The items of `text` when it is a list read item by item ([`Shape::is_list`]).
pub(super) fn list_items(text: &str) -> Option<Vec<&str>> {
    let mut items = Vec::new();
    let shape = read_object(text, false, true, &mut items).ok()?;
    shape.is_list().then_some(items)
}

/// Adds `items` (the list's items from its `first_index`th on) to `loader`, in order,
/// typing them on the loader's threads when there are enough of them.
///
/// # Errors
/// The first item that is not a valid object.
pub(super) fn add_items(
    loader: &mut Loader,
    origin: &Origin,
    items: &[&str],
    first_index: usize,
) -> Result<(), LoadError> {
    let threads = if super::parallel::worth_it(loader.threads, items.len()) {
        loader.threads
    } else {
        1
    };
    super::parallel::add_items(loader, origin, items, threads, first_index)
}

struct ObjectVisitor<'v, 't> {
    items: &'v mut Vec<&'t str>,
    placeholder: bool,
}

impl<'t> Visitor<'t> for ObjectVisitor<'_, 't> {
    type Value = Shape;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'t>>(self, mut map: A) -> Result<Shape, A::Error> {
        let mut shape = Shape::default();
        let mut seen_items = false;
        while let Some(key) = map.next_key::<Cow<'t, str>>()? {
            match key.as_ref() {
                "kind" => shape.kind = Some(map.next_value()?),
                "items" if seen_items => return Err(de::Error::custom("`items` twice")),
                "items" => {
                    seen_items = true;
                    shape.items_is_array = map.next_value_seed(Items {
                        items: &mut *self.items,
                        placeholder: self.placeholder,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(shape)
    }
}

/// The `items` value: its elements' texts when an array (then `true`), else skipped.
struct Items<'v, 't> {
    items: &'v mut Vec<&'t str>,
    placeholder: bool,
}

impl<'t> DeserializeSeed<'t> for Items<'_, 't> {
    type Value = bool;

    fn deserialize<D: Deserializer<'t>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'t> Visitor<'t> for Items<'_, 't> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any value")
    }

    fn visit_seq<A: SeqAccess<'t>>(self, mut seq: A) -> Result<bool, A::Error> {
        if self.placeholder {
            seq.next_element::<IgnoredAny>()?;
        }
        while let Some(item) = seq.next_element::<&'t RawValue>()? {
            self.items.push(item.get());
        }
        Ok(true)
    }

    fn visit_map<A: MapAccess<'t>>(self, map: A) -> Result<bool, A::Error> {
        IgnoredAny.visit_map(map)?;
        Ok(false)
    }

    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::fixtures::{DEPLOYMENT, GROUP, NODE, POD};

    /// What the whole-document path makes of `text`: parsed into one value, then added.
    fn whole(text: &str) -> Result<String, LoadError> {
        let mut loader = Loader::new();
        loader.keep_kind("dra-autoscaler.io", "NodeGroup");
        let origin = Origin {
            source: "t.json".into(),
            document: 0,
            item: None,
        };
        let value: Value = serde_json::from_str(text).map_err(|e| LoadError {
            origin: origin.clone(),
            object: None,
            field: None,
            message: format!("not valid JSON: {e}"),
        })?;
        loader.add_value(origin, value)?;
        Ok(format!("{:?}", loader.finish()))
    }

    fn streamed(text: &str) -> Result<String, LoadError> {
        let mut loader = Loader::new();
        loader.keep_kind("dra-autoscaler.io", "NodeGroup");
        loader.add_json("t.json", text)?;
        Ok(format!("{:?}", loader.finish()))
    }

    #[test]
    fn a_list_read_item_by_item_loads_what_the_whole_document_does() {
        // kubectl prints `items` before `kind`; a hand-written list may put it after.
        let texts = [
            format!(
                r#"{{"apiVersion":"v1","items":[{NODE},{POD},{GROUP},{DEPLOYMENT},{NODE}],"kind":"List","metadata":{{"resourceVersion":""}}}}"#
            ),
            format!(r#"{{"kind":"NodeList","apiVersion":"v1","items":[{NODE}]}}"#),
            r#"{"kind":"List","items":[]}"#.to_string(),
        ];
        for text in &texts {
            assert!(list_items(text).is_some(), "{text}");
            let loaded = streamed(text).unwrap();
            assert_eq!(loaded, whole(text).unwrap(), "{text}");
        }
        // The duplicate second node is noted as the whole-document path notes it.
        assert!(streamed(&texts[0]).unwrap().contains("Node n1"));
    }

    /// Every typed kind, duplicates, managedFields, a 1.35 `workloadRef`, escapes, and
    /// items the direct path hands to the general one (a bad field, a refused default).
    #[test]
    fn items_typed_from_their_text_load_as_through_a_parsed_value() {
        let managed = r#""managedFields":[{"manager":"kubelet","operation":"Update"}]"#;
        let items = [
            format!(
                r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"n1",{managed}}},"status":{{"images":[{{"names":["i"]}}]}}}}"#
            ),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p1"},"spec":{"containers":[{"name":"c","env":[{"name":"E","value":"é"}],"resources":{"limits":{"cpu":"2"}}}]}}"#.into(),
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"g1","namespace":"ml"},"spec":{"workloadRef":{"name":"w","podGroup":"pg"},"containers":[{"name":"c"}]}}"#.into(),
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","namespace":"default"},"spec":{"containers":[]}}"#.into(),
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ml","labels":{"team":"a"}}}"#.into(),
            r#"{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"gpu"},"spec":{"selectors":[{"cel":{"expression":"true"}}]}}"#.into(),
            r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d","pool":{"name":"p","generation":1,"resourceSliceCount":1},"nodeName":"n1","devices":[{"name":"g0"}]}}"#.into(),
            r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ml"},"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu","count":0}}]}}}"#.into(),
            r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"t","namespace":"ml"},"spec":{"spec":{}}}"#.into(),
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}"#.into(),
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2"}}"#.into(),
            // The last `kind` counts: a Namespace.
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n4"},"kind":"Namespace"}"#.into(),
        ];
        let bad = [
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n9"},"spec":{"unschedulable":"maybe"}}"#,
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"x"},"spec":{"containers":[]}}"#,
            r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c"},"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"g","count":-1}}]}}}"#,
        ];
        let list = |items: &[String]| format!(r#"{{"kind":"List","items":[{}]}}"#, items.join(","));
        for trim in [false, true] {
            let load = |text: &str, whole_document: bool| {
                let mut loader = Loader::new();
                if trim {
                    loader.trim_unread();
                }
                let origin = Origin {
                    source: "t.json".into(),
                    document: 0,
                    item: None,
                };
                if whole_document {
                    let value: Value = serde_json::from_str(text).unwrap();
                    loader.add_value(origin, value)?;
                } else {
                    loader.add_json("t.json", text)?;
                }
                Ok::<_, LoadError>(format!("{:?}", loader.finish()))
            };
            let mut items = items.to_vec();
            if trim {
                // Malformed managedFields are dropped unread when trimming.
                items.push(r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n3","managedFields":7}}"#.into());
            }
            let text = list(&items);
            let loaded = load(&text, false).unwrap();
            assert_eq!(loaded, load(&text, true).unwrap());
            assert!(loaded.contains("Pod default/p1") && loaded.contains("Node n1"));
            assert!(loaded.contains("name: Some(\"n4\")"), "{loaded}");
            assert!(loaded.contains("\"podGroup\": String(\"pg\")"), "{loaded}");
            assert_eq!(loaded.contains("kubelet"), !trim);
            assert_eq!(loaded.contains("\"n3\""), trim);
            for bad in bad {
                let mut with_bad = items.to_vec();
                with_bad.insert(3, bad.to_string());
                let text = list(&with_bad);
                let error = load(&text, false).unwrap_err();
                assert_eq!(error, load(&text, true).unwrap_err());
                assert_eq!(error.origin.item, Some(3));
            }
        }
    }

    #[test]
    fn the_first_bad_item_is_the_error_as_for_the_whole_document() {
        let bad = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2"},"spec":{"unschedulable":"maybe"}}"#;
        let text = format!(r#"{{"items":[{NODE},{bad},{POD},"oops"],"kind":"List"}}"#);
        assert!(list_items(&text).is_some());
        let error = streamed(&text).unwrap_err();
        assert_eq!(error, whole(&text).unwrap_err());
        assert_eq!(error.origin.item, Some(1));
        assert_eq!(error.field.as_deref(), Some("spec.unschedulable"));
    }

    #[test]
    fn other_texts_take_the_whole_document_path() {
        let texts = [
            // Not valid JSON, or more than one value.
            format!(r#"{{"kind":"List","items":[{NODE},]}}"#),
            format!(r#"{{"kind":"List","items":[{NODE}]}} {{}}"#),
            // Not lists: a single object, a kind that is not a list, items that are no array.
            NODE.to_string(),
            format!(
                r#"{{"kind":"Thing","apiVersion":"x/v1","metadata":{{"name":"t"}},"items":[{NODE}]}}"#
            ),
            r#"{"kind":"List","items":{"a":1}}"#.to_string(),
            r#"{"kind":"List","items":null}"#.to_string(),
            // `items` twice: the last one counts, as in a parsed value.
            format!(r#"{{"kind":"List","items":[{NODE}],"items":[{POD}]}}"#),
            "[1, 2]".to_string(),
        ];
        for text in &texts {
            assert!(list_items(text).is_none(), "{text}");
            assert_eq!(streamed(text), whole(text), "{text}");
        }
        // The duplicate-items list still loads the last items only.
        assert!(streamed(&texts[6]).unwrap().contains("pods: [Pod"));
    }

    #[test]
    fn items_are_found_whatever_their_shape_and_the_keys_around_them() {
        let text = r#" {"apiVersion":"v1","it\u0065ms" : [ {"a":"]}\"{"} , [1,[2]] ,"s",-1.5e3,null,true ],
            "kind":"List","metadata":{"items":[9]}} "#;
        let items = list_items(text).unwrap();
        assert_eq!(
            items,
            [
                r#"{"a":"]}\"{"}"#,
                "[1,[2]]",
                r#""s""#,
                "-1.5e3",
                "null",
                "true"
            ]
        );
        assert_eq!(list_items(r#"{"kind":"List"}"#), None);
        assert_eq!(
            list_items(r#"{"kind":"List","items":[]}"#),
            Some(Vec::new())
        );
        // A placeholder first element is passed over.
        let mut items = Vec::new();
        let shape = read_object(
            r#"{"kind":"List","items":[0, 1, 2]}"#,
            true,
            true,
            &mut items,
        );
        assert!(shape.unwrap().is_list());
        assert_eq!(items, ["1", "2"]);
    }
}
