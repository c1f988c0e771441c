//! The provider's YAML: which Auto Scaling groups are node groups (found by tags as
//! cluster-autoscaler does, or listed), and per group what the ASG cannot say (price,
//! priority, the reservation behind it, template overrides).
//!
//! ```yaml
//! clusterName: prod            # discover ASGs tagged k8s.io/cluster-autoscaler/enabled
//!                              #   and k8s.io/cluster-autoscaler/prod
//! discoveryTags: []            # or CA's own list: "key" or "key=value", all must match
//! nodeGroups:
//!   - asg: gpu-p5              # listed groups are always used; discovered ones get defaults
//!     minSize: 0               # overrides the ASG's
//!     maxSize: 16
//!     capacityType: reserved   # on-demand (default), reserved or spot
//!     capacityReservationId: cr-0123456789abcdef0
//!     pricePerHour: 98.32
//!     priority: 10
//!     subnets: [subnet-a]      # CreateFleet subnets; the ASG's VPCZoneIdentifier by default
//!     template: {...}          # dra_provider_machines::TemplateOptions
//! ```

use std::path::Path;

use dra_api::CapacityType;
use dra_provider::config_file::{ConfigFileError, load, parse_yaml};
use dra_provider_machines::GroupSettings;
use serde::{Deserialize, Serialize};

/// Tag that turns cluster-autoscaler (and us) on for an ASG.
pub const ENABLED_TAG: &str = "k8s.io/cluster-autoscaler/enabled";
/// Prefix of the cluster tag: `k8s.io/cluster-autoscaler/<cluster>`.
pub const CLUSTER_TAG_PREFIX: &str = "k8s.io/cluster-autoscaler/";
/// ASG tag with a group's price per hour, for discovered groups without a config entry.
pub const PRICE_TAG: &str = "dra-autoscaler.io/price-per-hour";
/// ASG tag with a group's capacity reservation id.
pub const RESERVATION_TAG: &str = "dra-autoscaler.io/capacity-reservation-id";

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// EKS cluster name; enables discovery by cluster-autoscaler's two tags.
    #[serde(default)]
    pub cluster_name: Option<String>,
    /// Discovery tags in cluster-autoscaler's syntax; replaces the ones from `clusterName`.
    #[serde(default)]
    pub discovery_tags: Vec<String>,
    /// Groups by ASG name.
    #[serde(default)]
    pub node_groups: Vec<GroupConfig>,
    /// How long an insufficient-capacity answer keeps a (type, zone) out (Karpenter: 3 min).
    #[serde(default = "default_ice_ttl")]
    pub ice_ttl_seconds: u64,
    /// How long DescribeInstanceTypes answers are reused.
    #[serde(default = "default_type_ttl")]
    pub instance_type_ttl_seconds: u64,
    /// Groups, launch templates and reservations are re-read at most this often.
    #[serde(default = "default_refresh")]
    pub refresh_seconds: u64,
}

fn default_ice_ttl() -> u64 {
    180
}
fn default_type_ttl() -> u64 {
    3600
}
fn default_refresh() -> u64 {
    60
}

/// Settings of one group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupConfig {
    /// Auto Scaling group name (the node group id).
    pub asg: String,
    /// The ODCR or Capacity Block behind a reserved group.
    #[serde(default)]
    pub capacity_reservation_id: Option<String>,
    /// Subnets CreateFleet may use; the ASG's by default.
    #[serde(default)]
    pub subnets: Vec<String>,
    /// What every provider's group entry says (bounds over the ASG's, capacity type, price,
    /// priority, topology domain, template overrides, scale-down policy).
    #[serde(flatten)]
    pub settings: GroupSettings,
}

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read, or is not the expected YAML shape.
    #[error(transparent)]
    File(#[from] ConfigFileError),
    /// A rule across fields is broken.
    #[error("config file {path}: node group {asg:?}: {message}")]
    Invalid {
        /// The path.
        path: String,
        /// The group.
        asg: String,
        /// What is wrong.
        message: String,
    },
}

impl Config {
    /// Parses and checks YAML text; `origin` names it in errors.
    ///
    /// # Errors
    /// [`ConfigError`].
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: Self = parse_yaml(text, origin)?;
        let mut seen = std::collections::BTreeSet::new();
        for group in &config.node_groups {
            let invalid = |message: String| ConfigError::Invalid {
                path: origin.to_owned(),
                asg: group.asg.clone(),
                message,
            };
            if !seen.insert(group.asg.as_str()) {
                return Err(invalid("listed twice".into()));
            }
            if group.settings.capacity_type == Some(CapacityType::Reserved)
                && group.capacity_reservation_id.is_none()
            {
                return Err(invalid(
                    "capacityType reserved needs capacityReservationId".into(),
                ));
            }
            group
                .settings
                .check()
                .map_err(|err| invalid(err.to_string()))?;
        }
        Ok(config)
    }

    /// Reads and checks a file.
    ///
    /// # Errors
    /// [`ConfigError`].
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        load(path, Self::parse)
    }

    /// Discovery tags: `discoveryTags`, else cluster-autoscaler's pair for `clusterName`, else
    /// none (only listed groups are used).
    #[must_use]
    pub fn discovery(&self) -> Vec<String> {
        if !self.discovery_tags.is_empty() {
            return self.discovery_tags.clone();
        }
        self.cluster_name
            .iter()
            .flat_map(|c| [ENABLED_TAG.to_owned(), format!("{CLUSTER_TAG_PREFIX}{c}")])
            .collect()
    }

    /// The settings of `asg`, if listed.
    #[must_use]
    pub fn group(&self, asg: &str) -> Option<&GroupConfig> {
        self.node_groups.iter().find(|g| g.asg == asg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_entry_reads_the_shared_settings_and_refuses_unknown_keys() {
        let config = Config::parse(
            "nodeGroups:\n- asg: gpu-p5\n  maxSize: 16\n  capacityType: reserved\n  capacityReservationId: cr-0123456789abcdef0\n  pricePerHour: 98.32\n  priority: 10\n  subnets: [subnet-a]\n",
            "test.yaml",
        )
        .expect("valid");
        let group = config.group("gpu-p5").expect("listed");
        assert_eq!(group.settings.max_size, Some(16));
        assert_eq!(group.settings.capacity_type, Some(CapacityType::Reserved));
        assert_eq!(group.settings.price_per_hour, Some(98.32));
        assert_eq!(group.settings.priority, 10);
        assert_eq!(group.subnets, ["subnet-a"]);

        // GCE's field is not AWS's: refused, not silently ignored.
        let err = Config::parse("nodeGroups:\n- asg: gpu-p5\n  atomic: none\n", "test.yaml")
            .expect_err("unknown key");
        assert!(err.to_string().contains("unknown field `atomic`"), "{err}");

        let err = Config::parse(
            "nodeGroups:\n- asg: gpu-p5\n  minSize: 5\n  maxSize: 2\n",
            "test.yaml",
        )
        .expect_err("min above max");
        assert_eq!(
            err.to_string(),
            "config file test.yaml: node group \"gpu-p5\": minSize 5 is above maxSize 2"
        );
        let err = Config::parse(
            "nodeGroups:\n- asg: gpu-p5\n  capacityType: reserved\n",
            "test.yaml",
        )
        .expect_err("reserved without a reservation");
        assert!(
            err.to_string().contains("needs capacityReservationId"),
            "{err}"
        );
    }
}
