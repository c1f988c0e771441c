//! A node group's cluster-autoscaler options (`NodeGroupGetOptions`) from its NodeGroup spec:
//! the one mapping every provider answers with.
//!
//! cluster-autoscaler replaces its defaults by the answer as a whole (externalgrpc's
//! `GetOptions`: every field of the response is used, an unset duration reads as zero), so
//! every field the group does not set is the default the request carried. Fields of
//! `spec.scaleDown` and what they become:
//!
//! | `spec.scaleDown` | option |
//! |---|---|
//! | `utilizationThreshold` | `scaleDownUtilizationThreshold` and `scaleDownGpuUtilizationThreshold` (ours covers every resource of the node, devices included; cluster-autoscaler uses the GPU one for GPU nodes) |
//! | `unneededTime` | `scaleDownUnneededDuration` |
//! | `enabled: false` | `scaleDownUnneededDuration` and `scaleDownUnreadyDuration` of [`NEVER`]: cluster-autoscaler has no per-group switch, and a threshold cannot say "never" (a node at or below it is removable, so even 0 lets empty nodes go) |
//! | `emptyUnneededTime`, `removeReservedNodes` | nothing: cluster-autoscaler has no per-group equivalent |
//!
//! A group that sets none of the mapped fields gets no options (the response's message is
//! absent), which cluster-autoscaler reads as "use the defaults". That matters beyond tidiness:
//! cluster-autoscaler 1.35 and 1.36 (and master without kubernetes/autoscaler#10266) take
//! `MaxNodeStartupTime` from the answer too, and the protocol had no field for it, so any answer
//! sets it to 0 there (kubernetes/autoscaler#10245). Answering only for groups that ask for
//! something keeps that upstream bug away from every other group.

use std::time::Duration;

use dra_api::NodeGroupSpec;

use crate::error::ProviderError;
use crate::model::AutoscalingOptions;

/// The unneeded and unready durations that stand for `spec.scaleDown.enabled: false`: 100
/// years, far below what cluster-autoscaler's Go `time.Duration` holds (292 years).
pub const NEVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The options of the group `id` with spec `spec`, given the `defaults` cluster-autoscaler
/// sent; `None` when the spec sets nothing cluster-autoscaler has an option for.
///
/// # Errors
/// [`ProviderError::InvalidArgument`] naming the group and the field when `unneededTime` is
/// not a duration.
pub fn options_for(
    id: &str,
    spec: &NodeGroupSpec,
    defaults: &AutoscalingOptions,
) -> Result<Option<AutoscalingOptions>, ProviderError> {
    let Some(policy) = &spec.scale_down else {
        return Ok(None);
    };
    let unneeded = policy
        .unneeded_time()
        .map_err(|error| ProviderError::InvalidArgument {
            message: format!("node group {id:?}: spec.scaleDown.unneededTime: {error}"),
        })?
        .map(|d| d.unsigned_abs());
    let disabled = policy.enabled == Some(false);
    if policy.utilization_threshold.is_none() && unneeded.is_none() && !disabled {
        return Ok(None);
    }
    let mut options = defaults.clone();
    if let Some(threshold) = policy.utilization_threshold {
        options.scale_down_utilization_threshold = threshold;
        options.scale_down_gpu_utilization_threshold = threshold;
    }
    if unneeded.is_some() {
        options.scale_down_unneeded = unneeded;
    }
    if disabled {
        options.scale_down_unneeded = Some(NEVER);
        options.scale_down_unready = Some(NEVER);
    }
    Ok(Some(options))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn spec(scale_down: serde_json::Value) -> NodeGroupSpec {
        serde_json::from_value(serde_json::json!({
            "provider": "fake", "providerID": "gpu", "minSize": 0, "maxSize": 4,
            "capacityType": "on-demand", "pricePerHour": 1.0,
            "template": {"capacity": {"cpu": "8", "pods": "110"}},
            "scaleDown": scale_down,
        }))
        .unwrap()
    }

    /// What cluster-autoscaler sends: its flag defaults (0.5, 0.5, 10m, 20m, 15m), and from
    /// kubernetes/autoscaler#10266 on a startup time and the non-atomic switch.
    fn ca_defaults() -> AutoscalingOptions {
        AutoscalingOptions {
            scale_down_utilization_threshold: 0.5,
            scale_down_gpu_utilization_threshold: 0.5,
            zero_or_max_node_scaling: false,
            ignore_daemon_sets_utilization: false,
            scale_down_unneeded: Some(Duration::from_secs(600)),
            scale_down_unready: Some(Duration::from_secs(1200)),
            max_node_provision: Some(Duration::from_secs(900)),
            max_node_startup: Some(Duration::from_secs(900)),
            allow_non_atomic_scale_up_to_max: false,
        }
    }

    #[test]
    fn set_fields_replace_the_defaults_and_the_rest_are_echoed() {
        let spec = spec(serde_json::json!({"utilizationThreshold": 0.3, "unneededTime": "20m"}));
        let options = options_for("gpu", &spec, &ca_defaults()).unwrap().unwrap();
        assert_eq!(
            options,
            AutoscalingOptions {
                scale_down_utilization_threshold: 0.3,
                scale_down_gpu_utilization_threshold: 0.3,
                scale_down_unneeded: Some(Duration::from_secs(1200)),
                ..ca_defaults()
            }
        );
    }

    #[test]
    fn a_group_that_sets_nothing_mapped_gets_no_options() {
        let defaults = ca_defaults();
        let mut no_block = spec(serde_json::json!({}));
        no_block.scale_down = None;
        assert_eq!(options_for("gpu", &no_block, &defaults).unwrap(), None);
        for unmapped in [
            serde_json::json!({}),
            serde_json::json!({"enabled": true}),
            serde_json::json!({"emptyUnneededTime": "1m"}),
        ] {
            assert_eq!(
                options_for("gpu", &spec(unmapped.clone()), &defaults).unwrap(),
                None,
                "{unmapped}"
            );
        }
    }

    #[test]
    fn disabled_scale_down_never_lets_a_node_become_removable() {
        let spec = spec(serde_json::json!({"enabled": false, "unneededTime": "5m"}));
        let options = options_for("gpu", &spec, &ca_defaults()).unwrap().unwrap();
        assert_eq!(options.scale_down_unneeded, Some(NEVER));
        assert_eq!(options.scale_down_unready, Some(NEVER));
        assert_eq!(options.scale_down_utilization_threshold, 0.5);
        // Go's time.Duration holds at most 2^63 - 1 ns (about 292 years).
        assert!(NEVER.as_nanos() < i64::MAX as u128);
    }

    #[test]
    fn a_bad_duration_names_the_group_and_the_field() {
        let spec = spec(serde_json::json!({"unneededTime": "soon"}));
        let error = options_for("gpu", &spec, &ca_defaults()).unwrap_err();
        let ProviderError::InvalidArgument { message } = error else {
            panic!("InvalidArgument")
        };
        assert!(message.contains("\"gpu\""), "{message}");
        assert!(message.contains("spec.scaleDown.unneededTime"), "{message}");
        assert!(message.contains("\"soon\""), "{message}");
    }
}
