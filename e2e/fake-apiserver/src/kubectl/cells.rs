//! The cells of a `meta.k8s.io/v1` Table: its column type and how values are printed in
//! it (ages, `<none>`, the name). A leaf shared by the generic Table (`table`) and the
//! printers of the built-in kinds (`printers`).

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// One column of a Table.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// Header.
    pub name: &'static str,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: &'static str,
    /// `name` for the name column, else empty.
    pub format: &'static str,
    /// 0 shows by default, 1 only with `-o wide`.
    pub priority: i64,
    /// Description shown by `kubectl explain`-like tools.
    pub description: &'static str,
}

impl Column {
    /// A column shown by default.
    pub const fn new(name: &'static str, type_: &'static str, description: &'static str) -> Self {
        Self {
            name,
            type_,
            format: "",
            priority: 0,
            description,
        }
    }

    /// The same column shown only with `-o wide`.
    #[must_use]
    pub const fn wide(mut self) -> Self {
        self.priority = 1;
        self
    }

    /// The name column.
    pub const fn name() -> Self {
        Self {
            name: "Name",
            type_: "string",
            format: "name",
            priority: 0,
            description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        }
    }

    /// The column as a Table's `columnDefinitions` entry.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name, "type": self.type_, "format": self.format,
            "description": self.description, "priority": self.priority,
        })
    }
}

/// Upstream's `duration.HumanDuration`: the age format of `kubectl get`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of an RFC 3339 time at `now`, as `kubectl get` prints it (`<unknown>` when
/// absent or unreadable).
pub fn age(time: Option<&str>, now: Timestamp) -> String {
    let Some(parsed) = time.and_then(|t| t.parse::<Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    human_duration(now.as_second() - parsed.as_second())
}

/// The string at `pointer`, or empty.
pub fn s<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `<none>` for an empty value, as kubectl prints it.
pub fn or_none(value: &str) -> Value {
    if value.is_empty() {
        Value::from("<none>")
    } else {
        Value::from(value)
    }
}

/// The array at `pointer`, or empty.
pub fn items<'a>(object: &'a Value, pointer: &str) -> &'a [Value] {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The Age cell: the age of `metadata.creationTimestamp`.
pub fn created(object: &Value, now: Timestamp) -> Value {
    Value::from(age(
        object
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
        now,
    ))
}

/// The Name cell.
pub fn name(object: &Value) -> Value {
    Value::from(s(object, "/metadata/name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_matches_upstreams_table() {
        // From k8s.io/apimachinery/pkg/util/duration TestHumanDuration(Boundaries).
        let cases = [
            (-2, "<invalid>"),
            (0, "0s"),
            (1, "1s"),
            (70, "70s"),
            (119, "119s"),
            (120, "2m"),
            (121, "2m1s"),
            (190, "3m10s"),
            (599, "9m59s"),
            (600, "10m"),
            (601, "10m"),
            (70 * 60, "70m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600 - 1, "7h59m"),
            (8 * 3600 + 59 * 60, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (49 * 3600, "2d1h"),
            (8 * 24 * 3600 - 1, "7d23h"),
            ((8 * 24 + 2) * 3600, "8d"),
            (367 * 24 * 3600, "367d"),
            (2 * 365 * 24 * 3600, "2y"),
            ((365 * 2 * 24 + 25) * 3600, "2y1d"),
            (8 * 365 * 24 * 3600 - 1, "7y364d"),
            ((365 * 8 * 24 + 2) * 3600, "8y"),
            (9 * 365 * 24 * 3600, "9y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(human_duration(seconds), want, "{seconds}s");
        }
    }
}
