//! How a node group shrinks: the optional `spec.scaleDown` block and the `status.unneededNodes`
//! record.
//!
//! Every setting is optional; an unset one takes the controller-wide default (the
//! `--scale-down-*` flags of `dra-autoscaler run`, whose defaults follow cluster-autoscaler's),
//! so a NodeGroup written before scale-down existed keeps its meaning.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::SignedDuration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Scale-down settings of one node group (`spec.scaleDown`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScaleDownPolicy {
    /// `false` keeps every node of the group; unset: the controller's `--scale-down-enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// A node is underused when its utilisation — the highest of CPU and memory requested, the
    /// share of devices allocated in each of its DRA pools and of shared counters consumed by
    /// allocated partitions — is below this fraction (0 to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1))]
    pub utilization_threshold: Option<f64>,
    /// How long a node must stay underused, with all its pods able to move, before it is
    /// removed (a duration such as `10m` or `1h30m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unneeded_time: Option<String>,
    /// The same for a node with no pod to move (only DaemonSet, mirror or finished pods):
    /// usually shorter, since removing it disrupts nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_unneeded_time: Option<String>,
    /// Reserved groups only: `true` lets their nodes go before the reservation ends. By default
    /// a reserved node, already paid for, is removed only once its reservation has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove_reserved_nodes: Option<bool>,
}

/// A node the controller found unneeded, and since when (`status.unneededNodes`). Kept in the
/// status so that a restarted controller or a new leader does not start counting again.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnneededNode {
    /// The Node's name.
    pub name: String,
    /// When it was first found unneeded (and has been ever since).
    pub since: Time,
}

/// A duration field that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a duration (expected e.g. 10m, 90s or 1h30m): {message}")]
pub struct BadDuration {
    /// The text found.
    pub value: String,
    /// The parser's words.
    pub message: String,
}

/// Parses a duration as the autoscaler's flags take them (`10m`, `1h30m`, `90s`); negative
/// durations are refused.
///
/// # Errors
/// [`BadDuration`] naming the text.
pub fn parse_duration(value: &str) -> Result<SignedDuration, BadDuration> {
    let parsed: SignedDuration = value
        .trim()
        .parse()
        .map_err(|e: k8s_openapi::jiff::Error| BadDuration {
            value: value.to_owned(),
            message: e.to_string(),
        })?;
    if parsed.is_negative() {
        return Err(BadDuration {
            value: value.to_owned(),
            message: "must not be negative".to_owned(),
        });
    }
    Ok(parsed)
}

impl ScaleDownPolicy {
    /// `unneededTime`, parsed, when set.
    ///
    /// # Errors
    /// The text is not a duration.
    pub fn unneeded_time(&self) -> Result<Option<SignedDuration>, BadDuration> {
        self.unneeded_time
            .as_deref()
            .map(parse_duration)
            .transpose()
    }

    /// `emptyUnneededTime`, parsed, when set.
    ///
    /// # Errors
    /// The text is not a duration.
    pub fn empty_unneeded_time(&self) -> Result<Option<SignedDuration>, BadDuration> {
        self.empty_unneeded_time
            .as_deref()
            .map(parse_duration)
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn durations_parse_as_the_flags_write_them() {
        assert_eq!(
            parse_duration("10m").unwrap(),
            SignedDuration::from_mins(10)
        );
        assert_eq!(
            parse_duration("1h30m").unwrap(),
            SignedDuration::from_mins(90)
        );
        assert_eq!(parse_duration("0s").unwrap(), SignedDuration::ZERO);
        let err = parse_duration("soon").unwrap_err();
        assert!(err.to_string().contains("\"soon\""), "{err}");
        assert!(parse_duration("-5m").is_err());
    }

    #[test]
    fn unset_fields_stay_out_of_the_wire_form() {
        let policy: ScaleDownPolicy =
            serde_json::from_value(serde_json::json!({"utilizationThreshold": 0.3})).unwrap();
        assert_eq!(policy.utilization_threshold, Some(0.3));
        assert_eq!(policy.unneeded_time().unwrap(), None);
        assert_eq!(
            serde_json::to_value(&policy).unwrap(),
            serde_json::json!({"utilizationThreshold": 0.3})
        );
    }
}
