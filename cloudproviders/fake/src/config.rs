//! The fake provider's YAML: node groups in the NodeGroup spec shape, plus fault injection.
//!
//! ```yaml
//! sliceDelayMs: 500          # DRA slices appear this long after the Node
//! leaseRenewSeconds: 10
//! nodeGroups:
//!   - name: gpu
//!     spec: { ...NodeGroup spec... }
//!     faults:
//!       startLatencyMs: 200      # every start waits this long
//!       outOfCapacityAfter: 3    # the cloud holds at most 3 instances of this group
//!       quotaLimit: 8            # quota allows at most 8
//!       partialFulfilment: 2     # an atomic request starts only 2, then has to roll back
//!       failKubernetesWrites: 1  # the first Kubernetes write of a start fails
//! ```

use std::path::Path;

use dra_api::{InvalidNodeGroup, NodeGroupSpec};
use serde::{Deserialize, Serialize};

/// Whole configuration file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// Delay between creating a Node and publishing its ResourceSlices.
    #[serde(default)]
    pub slice_delay_ms: u64,
    /// How often Leases are renewed (kubelet: every 10 s for a 40 s lease).
    #[serde(default = "default_lease_renew")]
    pub lease_renew_seconds: u64,
    /// The node groups.
    pub node_groups: Vec<GroupConfig>,
}

fn default_lease_renew() -> u64 {
    10
}

/// One node group.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupConfig {
    /// Group id (the externalgrpc node group id and the node-group label value).
    pub name: String,
    /// The group, in the NodeGroup spec shape.
    pub spec: NodeGroupSpec,
    /// Injected faults.
    #[serde(default)]
    pub faults: Faults,
}

/// Fault injection for one group.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Faults {
    /// Each start waits this long before creating anything.
    #[serde(default)]
    pub start_latency_ms: u64,
    /// The cloud has capacity for at most this many instances of the group.
    #[serde(default)]
    pub out_of_capacity_after: Option<i32>,
    /// The quota allows at most this many instances of the group.
    #[serde(default)]
    pub quota_limit: Option<i32>,
    /// An atomic request starts only this many instances, then must roll back.
    #[serde(default)]
    pub partial_fulfilment: Option<i32>,
    /// The first N Kubernetes writes for this group fail.
    #[serde(default)]
    pub fail_kubernetes_writes: u32,
}

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Unreadable file.
    #[error("unable to read config file {path}")]
    Read {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Not the expected YAML shape.
    #[error("config file {path} is not valid: {message}")]
    Parse {
        /// The path.
        path: String,
        /// Parser message with location.
        message: String,
    },
    /// A group's spec breaks a NodeGroup rule.
    #[error("node group {group:?} in the config is invalid")]
    Invalid {
        /// The group.
        group: String,
        /// The rules broken.
        #[source]
        source: InvalidNodeGroup,
    },
    /// Two groups share a name.
    #[error("node group name {group:?} appears twice in the config")]
    Duplicate {
        /// The name.
        group: String,
    },
}

impl Config {
    /// Parses and validates YAML text; `origin` names it in errors.
    ///
    /// # Errors
    /// [`ConfigError`] for bad YAML, invalid specs or duplicate names.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: Self = serde_saphyr::from_str(text).map_err(|err| ConfigError::Parse {
            path: origin.to_owned(),
            message: err.to_string(),
        })?;
        let mut seen = std::collections::BTreeSet::new();
        for group in &config.node_groups {
            if !seen.insert(group.name.as_str()) {
                return Err(ConfigError::Duplicate {
                    group: group.name.clone(),
                });
            }
            group
                .spec
                .validate()
                .map_err(|source| ConfigError::Invalid {
                    group: group.name.clone(),
                    source,
                })?;
        }
        Ok(config)
    }

    /// Reads and validates a file.
    ///
    /// # Errors
    /// [`ConfigError`].
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }
}
