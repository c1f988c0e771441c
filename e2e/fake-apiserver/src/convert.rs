//! Conversion between a resource and the storage it shares with another one.
//!
//! The real server keeps `events.k8s.io/v1` Events and core `v1` Events in one etcd
//! collection: an Event written through either API is read through both, with the field
//! names of the API it is read through (upstream `Convert_v1_Event_To_core_Event` and back).
//! So a recorder writing `events.k8s.io` Events is seen by `kubectl describe`, which lists
//! core Events with a field selector on `involvedObject`.

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

/// The stored object as the resource with `conversion` serves it.
pub fn to_view(conversion: Conversion, stored: Value) -> Value {
    match conversion {
        Conversion::None => stored,
        Conversion::EventsV1 => rename(stored, "events.k8s.io/v1", false),
    }
}

/// An object of the resource with `conversion`, as stored.
pub fn to_stored(conversion: Conversion, view: Value) -> Value {
    match conversion {
        Conversion::None => view,
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
        assert_eq!(to_view(Conversion::EventsV1, stored), view);
    }
}
