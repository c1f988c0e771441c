//! Conversion between a resource and the storage it shares with another one.
//!
//! The real server keeps `events.k8s.io/v1` Events and core `v1` Events in one etcd
//! collection: an Event written through either API is read through both, with the field
//! names of the API it is read through (upstream `Convert_v1_Event_To_core_Event` and back).
//! So a recorder writing `events.k8s.io` Events is seen by `kubectl describe`, which lists
//! core Events with a field selector on `involvedObject`.
//!
//! The real server also keeps Events as Go structs, so a time it was not given comes back
//! as `null`, not as a missing key (`metav1.Time` ignores `omitempty`), an unset source as
//! `{}` (a struct) and the core strings without `omitempty` (`reportingComponent`,
//! `reportingInstance`) as `""`: an Event written
//! through `events.k8s.io` reads as `"lastTimestamp": null` through core `v1`. kubectl
//! relies on it: `kubectl get events -A --sort-by=.lastTimestamp` finds the key in every
//! object and sorts; with the key missing from every object it printed nothing.

use serde_json::{Map, Value};

use crate::resource::Conversion;

/// `(events.k8s.io/v1 name, core v1 name)` of the fields that differ.
const EVENT_FIELDS: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(object: Value, api_version: &str, to_core: bool) -> Value {
    let Value::Object(map) = object else {
        return object;
    };
    let mut out = Map::with_capacity(map.len());
    for (key, value) in map {
        let renamed = EVENT_FIELDS
            .iter()
            .find_map(|(events, core)| {
                if to_core {
                    (key == *events).then_some(*core)
                } else {
                    (key == *core).then_some(*events)
                }
            })
            .map_or(key, str::to_owned);
        out.insert(renamed, value);
    }
    if out.contains_key("apiVersion") || out.contains_key("kind") {
        out.insert("apiVersion".into(), Value::String(api_version.to_owned()));
    }
    Value::Object(out)
}

/// Core `v1` Event times the real server always prints: `metav1.Time` and `MicroTime`
/// print `null` when unset, in spite of `omitempty`.
const CORE_EVENT_TIMES: [&str; 3] = ["firstTimestamp", "lastTimestamp", "eventTime"];

/// A stored core Event with every unset time as `null`. Added on the way out only:
/// the store keeps no `null` members (`object::strip_nulls`), so a write of what a
/// read returned is still a no-op.
fn with_unset_times(mut event: Value) -> Value {
    if let Value::Object(map) = &mut event {
        for key in CORE_EVENT_TIMES {
            map.entry(key).or_insert(Value::Null);
        }
    }
    event
}

/// A stored Event with an unset `source` as `{}`: a struct member, which
/// `omitempty` never drops (core `source`, events.k8s.io `deprecatedSource`).
fn with_unset_source(mut event: Value) -> Value {
    if let Value::Object(map) = &mut event {
        map.entry("source")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    event
}

/// Core `v1` Event strings without `omitempty`, printed as `""` when unset
/// (their events.k8s.io twins have it, so only the core view gains them).
const CORE_EVENT_STRINGS: [&str; 2] = ["reportingComponent", "reportingInstance"];

fn with_unset_core_strings(mut event: Value) -> Value {
    if let Value::Object(map) = &mut event {
        for key in CORE_EVENT_STRINGS {
            map.entry(key)
                .or_insert_with(|| Value::String(String::new()));
        }
    }
    event
}

/// The stored object as the resource with `conversion` serves it, borrowed when serving
/// changes nothing: selectors are checked on this form, and most objects checked are not
/// sent, so copying each one first (a whole Pod, for every watch and list) is waste.
pub fn view(conversion: Conversion, stored: &Value) -> std::borrow::Cow<'_, Value> {
    match conversion {
        Conversion::None => std::borrow::Cow::Borrowed(stored),
        Conversion::CoreEvent | Conversion::EventsV1 => {
            std::borrow::Cow::Owned(to_view(conversion, stored.clone()))
        }
    }
}

/// The stored object as the resource with `conversion` serves it.
pub fn to_view(conversion: Conversion, stored: Value) -> Value {
    match conversion {
        Conversion::None => stored,
        Conversion::CoreEvent => {
            with_unset_core_strings(with_unset_source(with_unset_times(stored)))
        }
        Conversion::EventsV1 => rename(
            with_unset_source(with_unset_times(stored)),
            "events.k8s.io/v1",
            false,
        ),
    }
}

/// An object of the resource with `conversion`, as stored.
pub fn to_stored(conversion: Conversion, view: Value) -> Value {
    match conversion {
        Conversion::None | Conversion::CoreEvent => view,
        Conversion::EventsV1 => rename(view, "v1", true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_v1_fields_map_to_their_core_names_and_back() {
        let view = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns"},
            "regarding": {"kind": "Pod", "name": "p"},
            "note": "Scaled up", "reason": "ScaledUp", "type": "Normal",
            "reportingController": "dra-autoscaler", "reportingInstance": "a-1",
            "eventTime": "2026-01-01T00:00:00.000000Z", "action": "ScaleUp",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
            "deprecatedCount": 3
        });
        let stored = to_stored(Conversion::EventsV1, view.clone());
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "Scaled up");
        assert_eq!(stored["reportingComponent"], "dra-autoscaler");
        assert_eq!(stored["count"], 3);
        assert_eq!(stored["series"]["count"], 2);
        assert!(stored.get("regarding").is_none());
        // Times the writer left unset read back as null, as from the real server's structs.
        let mut expected = view;
        expected["deprecatedFirstTimestamp"] = Value::Null;
        expected["deprecatedLastTimestamp"] = Value::Null;
        // So does the source, a struct (Go's omitempty never drops one).
        expected["deprecatedSource"] = json!({});
        assert_eq!(to_view(Conversion::EventsV1, stored.clone()), expected);
        // Read as a core Event it has the core names, the empty source too.
        let core = to_view(Conversion::CoreEvent, stored);
        assert_eq!(core["source"], json!({}));
        assert_eq!(core["reportingComponent"], "dra-autoscaler");
        assert_eq!(core["reportingInstance"], "a-1");
    }

    #[test]
    fn core_events_read_back_unset_times_as_null_and_keep_set_ones() {
        let written = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "lastTimestamp": "2026-01-01T00:05:00Z", "count": 2
        });
        let stored = to_stored(Conversion::CoreEvent, written.clone());
        assert_eq!(stored, written, "the store keeps no nulls");
        let core = to_view(Conversion::CoreEvent, stored.clone());
        assert_eq!(core["lastTimestamp"], "2026-01-01T00:05:00Z");
        assert_eq!(core["count"], 2);
        assert_eq!(core["firstTimestamp"], Value::Null);
        assert_eq!(core["eventTime"], Value::Null);
        // Strings without omitempty print empty; the source struct prints {}.
        assert_eq!(core["reportingComponent"], "");
        assert_eq!(core["reportingInstance"], "");
        assert_eq!(core["source"], json!({}));
        let v1 = to_view(Conversion::EventsV1, stored);
        assert_eq!(v1["deprecatedLastTimestamp"], "2026-01-01T00:05:00Z");
        assert_eq!(v1["deprecatedFirstTimestamp"], Value::Null);
        assert_eq!(v1["eventTime"], Value::Null);
        // events.k8s.io has omitempty on both strings.
        assert!(v1.get("reportingController").is_none(), "{v1}");
        assert_eq!(v1["deprecatedSource"], json!({}));
    }
}
