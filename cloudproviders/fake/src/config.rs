//! The fake provider's YAML: which NodeGroups it serves, fault injection, timings.
//!
//! Node groups come from two places. The `NodeGroup` objects in the API server whose
//! `spec.provider` is the fake's provider name (`fake` unless `providerName` says otherwise) are
//! served with the group id `spec.providerID`; their Nodes carry the NodeGroup's name in the
//! `dra-autoscaler.io/node-group` label. A `nodeGroups` entry of the file adds faults to the
//! group with that id, and may give the whole `spec` itself (the file form, for tests and for
//! clusters without the CRD): a file spec wins over a NodeGroup with the same id.
//!
//! ```yaml
//! sliceDelayMs: 500          # DRA slices appear this long after the Node
//! leaseRenewSeconds: 10
//! kubeletSyncMs: 500         # pods on fake nodes start, terminating ones go, devices attach
//! providerName: fake         # serve NodeGroups whose spec.provider is this
//! nodeGroups:
//!   - name: gpu              # the group id (a NodeGroup's spec.providerID)
//!     faults:
//!       startLatencyMs: 200      # every start waits this long
//!       outOfCapacityAfter: 3    # the cloud holds at most 3 instances of this group
//!       quotaLimit: 8            # quota allows at most 8
//!       partialFulfilment: 2     # an atomic request starts only 2, then has to roll back
//!       failKubernetesWrites: 1  # the first Kubernetes write of a start fails
//!   - name: cpu
//!     spec: { ...NodeGroup spec... }   # optional: the group without any NodeGroup object
//! ```

use std::path::Path;

use dra_api::{InvalidNodeGroup, NodeGroupSpec};
use dra_provider::config_file::{ConfigFileError, load, parse_yaml};
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
    /// How often the instances' kubelets and DRA driver act ([`crate::kubelet`]): report
    /// bound pods Running, remove terminating pods, set device binding conditions.
    #[serde(default = "default_kubelet_sync")]
    pub kubelet_sync_ms: u64,
    /// NodeGroups in the API server with this `spec.provider` are served.
    #[serde(default = "default_provider_name")]
    pub provider_name: String,
    /// Faults per group, and groups given in full (see the module documentation).
    #[serde(default)]
    pub node_groups: Vec<GroupEntry>,
}

fn default_lease_renew() -> u64 {
    10
}

fn default_kubelet_sync() -> u64 {
    500
}

fn default_provider_name() -> String {
    DEFAULT_PROVIDER_NAME.to_owned()
}

/// The `spec.provider` the fake serves unless the file says otherwise.
pub const DEFAULT_PROVIDER_NAME: &str = "fake";

/// One `nodeGroups` entry of the file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupEntry {
    /// Group id: the externalgrpc node group id, a NodeGroup's `spec.providerID`.
    pub name: String,
    /// The whole group, in the NodeGroup spec shape; absent when the NodeGroup object in the
    /// API server describes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<NodeGroupSpec>,
    /// Injected faults.
    #[serde(default)]
    pub faults: Faults,
}

/// A node group as the fake serves it, wherever its spec came from.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupConfig {
    /// Group id (the externalgrpc node group id, `spec.providerID`).
    pub name: String,
    /// The NodeGroup the machines belong to: the value of their `dra-autoscaler.io/node-group`
    /// label (the group id for groups given in full in the file).
    pub node_group: String,
    /// The group, in the NodeGroup spec shape.
    pub spec: NodeGroupSpec,
    /// Injected faults.
    pub faults: Faults,
}

impl GroupConfig {
    /// A group given in full in the file: its machines are labelled with its id.
    #[must_use]
    pub fn from_file(name: &str, spec: NodeGroupSpec, faults: Faults) -> Self {
        Self {
            name: name.to_owned(),
            node_group: name.to_owned(),
            spec,
            faults,
        }
    }
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
    /// The file cannot be read, or is not the expected YAML shape.
    #[error(transparent)]
    File(#[from] ConfigFileError),
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
        let config: Self = parse_yaml(text, origin)?;
        let mut seen = std::collections::BTreeSet::new();
        for group in &config.node_groups {
            if !seen.insert(group.name.as_str()) {
                return Err(ConfigError::Duplicate {
                    group: group.name.clone(),
                });
            }
            if let Some(spec) = &group.spec {
                spec.validate().map_err(|source| ConfigError::Invalid {
                    group: group.name.clone(),
                    source,
                })?;
            }
        }
        Ok(config)
    }

    /// The groups given in full in the file.
    #[must_use]
    pub fn file_groups(&self) -> Vec<GroupConfig> {
        self.node_groups
            .iter()
            .filter_map(|entry| {
                let spec = entry.spec.clone()?;
                Some(GroupConfig::from_file(
                    &entry.name,
                    spec,
                    entry.faults.clone(),
                ))
            })
            .collect()
    }

    /// The faults the file sets for group id `name` (none when it has no entry).
    #[must_use]
    pub fn faults_for(&self, name: &str) -> Faults {
        self.node_groups
            .iter()
            .find(|entry| entry.name == name)
            .map(|entry| entry.faults.clone())
            .unwrap_or_default()
    }

    /// Reads and validates a file.
    ///
    /// # Errors
    /// [`ConfigError`].
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        load(path, Self::parse)
    }
}
