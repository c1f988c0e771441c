//! What a cloud provider's config file says about one of its groups, beside the group's id and
//! the cloud's own fields: the size bounds, how the machines are bought, price, priority,
//! topology domain, template overrides and scale-down policy. AWS and GCE read the same
//! fields (flattened into their `nodeGroups` entries) and turn them into a `NodeGroup` spec the
//! same way; only what the cloud itself says (its sizes, its reservation, the machine's
//! template) differs.

use dra_api::{
    CapacityType, NodeGroupSpec, NodeTemplate, Reservation, ScaleDownPolicy, TopologyDomain,
};
use serde::{Deserialize, Serialize};

use crate::options::TemplateOptions;

/// The settings every provider's group entry shares. Flattened into each cloud's entry
/// (`#[serde(flatten)]`), whose own `deny_unknown_fields` still refuses a key neither knows:
/// serde checks what the flattened part left over.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupSettings {
    /// Fewest machines; the cloud group's own minimum (or 0) when absent.
    #[serde(default)]
    pub min_size: Option<i32>,
    /// Most machines; the cloud group's own maximum when absent.
    #[serde(default)]
    pub max_size: Option<i32>,
    /// How the machines are bought; derived from the cloud's template when absent.
    #[serde(default)]
    pub capacity_type: Option<CapacityType>,
    /// Price of one machine per hour.
    #[serde(default)]
    pub price_per_hour: Option<f64>,
    /// Expander priority.
    #[serde(default)]
    pub priority: i32,
    /// Topology domain every machine shares.
    #[serde(default)]
    pub topology_domain: Option<TopologyDomain>,
    /// Template overrides.
    #[serde(default)]
    pub template: TemplateOptions,
    /// The group's `spec.scaleDown` (a NodeGroup's), printed by `print-nodegroups` and
    /// answered to cluster-autoscaler's `NodeGroupGetOptions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<ScaleDownPolicy>,
}

/// What the cloud says about a group, for [`GroupSettings::spec`].
#[derive(Debug, Clone)]
pub struct CloudGroup {
    /// `spec.provider`: `aws`, `gce`.
    pub provider: &'static str,
    /// The group id (`spec.providerID`).
    pub provider_id: String,
    /// The cloud group's own minimum size, used when the settings give none.
    pub min_size: i32,
    /// The cloud group's own maximum size, used when the settings give none.
    pub max_size: i32,
    /// How the machines are bought, as decided from the settings and the cloud's template.
    pub capacity_type: CapacityType,
    /// The reservation the group consumes.
    pub reservation: Option<Reservation>,
    /// The node a machine of the group registers as.
    pub template: NodeTemplate,
}

/// A group entry whose fields disagree with each other.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// `minSize` above `maxSize`.
    #[error("minSize {min} is above maxSize {max}")]
    MinAboveMax {
        /// `minSize`.
        min: i32,
        /// `maxSize`.
        max: i32,
    },
}

impl GroupSettings {
    /// Checks the rules across fields that hold whatever the cloud says.
    ///
    /// # Errors
    /// [`SettingsError::MinAboveMax`] when both bounds are set and `minSize > maxSize`.
    pub fn check(&self) -> Result<(), SettingsError> {
        match (self.min_size, self.max_size) {
            (Some(min), Some(max)) if min > max => Err(SettingsError::MinAboveMax { min, max }),
            _ => Ok(()),
        }
    }

    /// The group's `NodeGroup` spec: the settings where they are given, the cloud's
    /// otherwise.
    #[must_use]
    pub fn spec(&self, cloud: CloudGroup) -> NodeGroupSpec {
        NodeGroupSpec {
            provider: cloud.provider.to_owned(),
            provider_id: cloud.provider_id,
            min_size: self.min_size.unwrap_or(cloud.min_size),
            max_size: self.max_size.unwrap_or(cloud.max_size),
            capacity_type: cloud.capacity_type,
            reservation: cloud.reservation,
            price_per_hour: self.price_per_hour.unwrap_or(0.0),
            priority: self.priority,
            topology_domain: self.topology_domain.clone(),
            template: cloud.template,
            scale_down: self.scale_down.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cloud's entry as the providers declare theirs: own fields, the shared ones
    /// flattened, unknown keys refused.
    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Entry {
        asg: String,
        #[serde(default)]
        subnets: Vec<String>,
        #[serde(flatten)]
        settings: GroupSettings,
    }

    fn parse(text: &str) -> Result<Entry, String> {
        serde_saphyr::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn shared_and_own_fields_are_read_from_one_entry() {
        let entry = parse(
            "asg: gpu\nsubnets: [a]\nmaxSize: 16\ncapacityType: reserved\npricePerHour: 98\npriority: 10\ntemplate: {labels: {team: ml}}\n",
        )
        .expect("valid entry");
        assert_eq!(entry.asg, "gpu");
        assert_eq!(entry.subnets, ["a"]);
        assert_eq!(entry.settings.max_size, Some(16));
        assert_eq!(entry.settings.min_size, None);
        assert_eq!(entry.settings.capacity_type, Some(CapacityType::Reserved));
        // An integer where a price is expected is still a price.
        assert_eq!(entry.settings.price_per_hour, Some(98.0));
        assert_eq!(entry.settings.priority, 10);
        assert_eq!(entry.settings.template.labels["team"], "ml");
    }

    #[test]
    fn a_key_neither_part_knows_is_refused_by_name() {
        let err = parse("asg: gpu\nmaxSzie: 16\n").expect_err("typo");
        assert!(err.contains("unknown field `maxSzie`"), "{err}");
        // Inside the shared part's nested objects the template's own check still holds.
        let err = parse("asg: gpu\ntemplate: {lables: {}}\n").expect_err("typo in template");
        assert!(err.contains("lables"), "{err}");
    }

    #[test]
    fn a_shared_field_of_the_wrong_type_is_refused() {
        let err = parse("asg: gpu\nmaxSize: many\n").expect_err("not a number");
        // Flattened fields are typed after the entry is read whole, so the parser names
        // the line of the key rather than its column; the value and the type are named.
        assert!(err.contains("line 2"), "{err}");
        assert!(err.contains("\"many\"") && err.contains("i32"), "{err}");
        let err = parse("asg: gpu\ncapacityType: sometimes\n").expect_err("no such type");
        assert!(err.contains("sometimes"), "{err}");
    }

    #[test]
    fn bounds_are_checked_together() {
        let settings = GroupSettings {
            min_size: Some(5),
            max_size: Some(2),
            ..GroupSettings::default()
        };
        assert_eq!(
            settings.check(),
            Err(SettingsError::MinAboveMax { min: 5, max: 2 })
        );
        assert_eq!(
            settings.check().expect_err("min above max").to_string(),
            "minSize 5 is above maxSize 2"
        );
        let only_min = GroupSettings {
            min_size: Some(5),
            ..GroupSettings::default()
        };
        assert_eq!(only_min.check(), Ok(()));
    }

    #[test]
    fn the_spec_takes_the_settings_over_the_cloud() {
        let cloud = CloudGroup {
            provider: "aws",
            provider_id: "gpu".into(),
            min_size: 1,
            max_size: 4,
            capacity_type: CapacityType::OnDemand,
            reservation: None,
            template: NodeTemplate::default(),
        };
        let unset = GroupSettings::default().spec(cloud.clone());
        assert_eq!((unset.min_size, unset.max_size), (1, 4));
        assert_eq!(unset.price_per_hour, 0.0);
        assert_eq!(unset.provider, "aws");
        assert_eq!(unset.provider_id, "gpu");
        let set = GroupSettings {
            max_size: Some(16),
            price_per_hour: Some(3.5),
            priority: 7,
            ..GroupSettings::default()
        }
        .spec(cloud);
        assert_eq!((set.min_size, set.max_size), (1, 16));
        assert_eq!(set.price_per_hour, 3.5);
        assert_eq!(set.priority, 7);
    }
}
