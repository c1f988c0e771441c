//! A JSON `kind: List` read item by item.
//!
//! `kubectl get -A -o json` of a large cluster is one document of hundreds of megabytes.
//! Parsed whole into a [`Value`] it takes several times its own size before the first
//! object is typed; read here, each item becomes its typed object before the next is
//! parsed, straight from its text when it can ([`super::direct`]), else through a
//! [`Value`] of that item alone. The result is the one of parsing the whole
//! document (same objects, same order, same first error): the text is first checked to
//! be one valid JSON object whose `kind` makes it a list and whose `items` is an array
//! (a pass that allocates nothing per item); any other text takes the whole-document path.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{LoadError, Loader, is_list_kind};
use crate::objects::Origin;

/// A text that is one JSON object listing its objects in an `items` array.
#[derive(Debug, Clone, Copy)]
pub(super) struct ListShape;

/// What the first pass sees of the top-level object.
#[derive(Default)]
struct Shape {
    /// The last `kind` (a later duplicate key wins, as in a parsed [`Value`]).
    kind: Option<Value>,
    /// How often `items` appears, and whether the last one is an array.
    items: usize,
    items_is_array: bool,
}

impl ListShape {
    /// `Some` when `text` is exactly one valid JSON object whose `kind` makes it a list
    /// and which has one `items` key, an array.
    pub(super) fn of(text: &str) -> Option<Self> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let shape = deserializer.deserialize_map(ShapeVisitor).ok()?;
        deserializer.end().ok()?;
        let kind = shape.kind.as_ref().and_then(Value::as_str).unwrap_or("");
        (shape.items == 1 && shape.items_is_array && is_list_kind(kind, true)).then_some(ListShape)
    }
}

struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Shape;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
        let mut shape = Shape::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "kind" => shape.kind = Some(map.next_value()?),
                "items" => {
                    shape.items += 1;
                    shape.items_is_array = map.next_value::<IsArray>()?.0;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(shape)
    }
}

/// Whether a value is an array (its content skipped).
struct IsArray(bool);

impl<'de> de::Deserialize<'de> for IsArray {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IsArray;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IsArray, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(IsArray(true))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<IsArray, A::Error> {
                IgnoredAny.visit_map(map)?;
                Ok(IsArray(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<IsArray, E> {
                Ok(IsArray(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<IsArray, E> {
                Ok(IsArray(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<IsArray, E> {
                Ok(IsArray(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<IsArray, E> {
                Ok(IsArray(false))
            }
            fn visit_str<E>(self, _: &str) -> Result<IsArray, E> {
                Ok(IsArray(false))
            }
            fn visit_unit<E>(self) -> Result<IsArray, E> {
                Ok(IsArray(false))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// Adds every item of the list `text` (checked by [`ListShape::of`]) to `loader`, in
/// order, stopping at the first item that is not a valid object.
///
/// # Errors
/// That item's error.
pub(super) fn add_items(
    loader: &mut Loader,
    origin: &Origin,
    text: &str,
    _: &ListShape,
) -> Result<(), LoadError> {
    if let Some(spans) = super::scan::item_spans(text) {
        loader.reserve_for(text, &spans);
        if super::parallel::worth_it(loader.threads, spans.len()) {
            let threads = loader.threads;
            return super::parallel::add_items(loader, origin, text, &spans, threads, 0);
        }
        for (index, (start, end)) in spans.into_iter().enumerate() {
            let item = text.get(start..end).unwrap_or_default();
            if !loader.add_typed_text(item) {
                let value: Value = serde_json::from_str(item).map_err(|e| LoadError {
                    origin: origin.clone(),
                    object: None,
                    field: None,
                    message: format!("not valid JSON: {e}"),
                })?;
                loader.add_item(origin, index, value)?;
            }
        }
        return Ok(());
    }
    let mut failed = None;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let read = deserializer.deserialize_map(ListVisitor {
        loader,
        origin,
        failed: &mut failed,
    });
    match (failed, read) {
        (Some(error), _) => Err(error),
        (None, Ok(())) => Ok(()),
        // The first pass parsed this same text without error.
        (None, Err(e)) => Err(LoadError {
            origin: origin.clone(),
            object: None,
            field: None,
            message: format!("not valid JSON: {e}"),
        }),
    }
}

struct ListVisitor<'l> {
    loader: &'l mut Loader,
    origin: &'l Origin,
    /// The first item's error; parsing stops there.
    failed: &'l mut Option<LoadError>,
}

impl<'de> Visitor<'de> for ListVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let ListVisitor {
            loader,
            origin,
            failed,
        } = self;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "items" {
                map.next_value_seed(Items {
                    loader: &mut *loader,
                    origin,
                    failed: &mut *failed,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

struct Items<'l> {
    loader: &'l mut Loader,
    origin: &'l Origin,
    failed: &'l mut Option<LoadError>,
}

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while let Some(item) = seq.next_element::<Value>()? {
            if let Err(error) = self.loader.add_item(self.origin, index, item) {
                *self.failed = Some(error);
                // Stops the parse; the caller returns the item's error.
                return Err(de::Error::custom("stopped at an invalid item"));
            }
            index += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    const NODE: &str = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"a":"b"}},
        "status":{"allocatable":{"cpu":"4"}}}"#;
    const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ml"},
        "spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}"#;
    const GROUP: &str = r#"{"apiVersion":"dra-autoscaler.io/v1alpha1","kind":"NodeGroup","metadata":{"name":"g"},"spec":{}}"#;
    const DEPLOYMENT: &str =
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"x"}}"#;

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
            assert!(ListShape::of(text).is_some(), "{text}");
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
        assert!(ListShape::of(&text).is_some());
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
            assert!(ListShape::of(text).is_none(), "{text}");
            assert_eq!(streamed(text), whole(text), "{text}");
        }
        // The duplicate-items list still loads the last items only.
        assert!(streamed(&texts[6]).unwrap().contains("pods: [Pod"));
    }
}
