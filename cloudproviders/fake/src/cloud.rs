//! The in-memory cloud: which instances exist per group, the target sizes, the idempotency
//! tokens of atomic requests, and how many instances fit before a capacity or quota fault.
//! Pure bookkeeping; the Kubernetes side is in [`crate::kube_writer`].

use std::collections::BTreeMap;
use std::path::Path;

use dra_api::CapacityType;
use serde::{Deserialize, Serialize};

use crate::config::GroupConfig;

/// One started instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceRecord {
    /// Node name.
    pub name: String,
    /// Reservation it landed in.
    #[serde(default)]
    pub reservation_id: Option<String>,
    /// Unix seconds of the request.
    pub requested_at: i64,
}

impl InstanceRecord {
    /// `spec.providerID` of the Node (and the externalgrpc instance id).
    #[must_use]
    pub fn provider_id(&self) -> String {
        format!("fake://{}", self.name)
    }
}

/// Per-group state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupState {
    /// Instances by node name.
    pub instances: BTreeMap<String, InstanceRecord>,
    /// Instances requested with `IncreaseSize` but not (yet) started; shrinks with
    /// `DecreaseTargetSize`.
    #[serde(default)]
    pub pending: i32,
    /// Answers to atomic requests, by request id.
    #[serde(default)]
    pub requests: BTreeMap<String, Vec<String>>,
}

/// The whole cloud, as kept in the state file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloudState {
    /// Groups by name.
    pub groups: BTreeMap<String, GroupState>,
    /// Counter for node names; never reused, so a restarted fake never repeats a name.
    pub next_index: u64,
}

/// Why fewer instances fit than asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The group's maxSize.
    MaxSize,
    /// The injected (or reservation) capacity limit.
    Capacity,
    /// The injected quota.
    Quota,
}

/// Failure to persist state.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// I/O on the state file.
    #[error("unable to access state file {path}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The state file is not ours.
    #[error("state file {path} is not valid JSON state")]
    Json {
        /// The path.
        path: String,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
}

impl CloudState {
    /// Loads the state file, or `None` when it does not exist.
    ///
    /// # Errors
    /// [`StateError`] when it exists but cannot be read or parsed.
    pub fn load(path: &Path) -> Result<Option<Self>, StateError> {
        match std::fs::read(path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|source| StateError::Json {
                        path: path.display().to_string(),
                        source,
                    })
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StateError::Io {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Writes the state atomically (temp file + rename), so a kill never leaves half a file.
    ///
    /// # Errors
    /// [`StateError`].
    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        let io = |source| StateError::Io {
            path: path.display().to_string(),
            source,
        };
        let bytes = serde_json::to_vec_pretty(self).map_err(|source| StateError::Json {
            path: path.display().to_string(),
            source,
        })?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, bytes).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// The state of a group (empty if never touched).
    pub fn group_mut(&mut self, name: &str) -> &mut GroupState {
        self.groups.entry(name.to_owned()).or_default()
    }

    /// Instances of a group.
    #[must_use]
    pub fn size(&self, name: &str) -> i32 {
        self.groups
            .get(name)
            .map_or(0, |g| i32::try_from(g.instances.len()).unwrap_or(i32::MAX))
    }

    /// Target size: running instances plus pending ones.
    #[must_use]
    pub fn target(&self, name: &str) -> i32 {
        self.size(name) + self.groups.get(name).map_or(0, |g| g.pending)
    }

    /// How many more instances of `group` can start now, and what limits it.
    #[must_use]
    pub fn headroom(&self, group: &GroupConfig) -> (i32, Limit) {
        let size = self.size(&group.name);
        let mut best = (
            group.spec.max_size - self.target(&group.name),
            Limit::MaxSize,
        );
        let mut capacity = group.faults.out_of_capacity_after;
        if group.spec.capacity_type == CapacityType::Reserved {
            let total = group.spec.reservation.as_ref().map_or(0, |r| r.total);
            capacity = Some(capacity.map_or(total, |c| c.min(total)));
        }
        for (limit, kind) in [
            (capacity, Limit::Capacity),
            (group.faults.quota_limit, Limit::Quota),
        ] {
            if let Some(limit) = limit
                && limit - size < best.0
            {
                best = (limit - size, kind);
            }
        }
        (best.0.max(0), best.1)
    }

    /// Records new instances; names are `<group>-<index>`.
    pub fn add_instances(
        &mut self,
        group: &GroupConfig,
        count: i32,
        now: i64,
    ) -> Vec<InstanceRecord> {
        let reservation = group.spec.reservation.as_ref().map(|r| r.id.clone());
        let mut added = Vec::new();
        for _ in 0..count {
            self.next_index += 1;
            let record = InstanceRecord {
                name: format!("{}-{}", group.name, self.next_index),
                reservation_id: reservation.clone(),
                requested_at: now,
            };
            self.group_mut(&group.name)
                .instances
                .insert(record.name.clone(), record.clone());
            added.push(record);
        }
        added
    }

    /// Forgets instances (after deletion or rollback).
    pub fn remove_instances(&mut self, group: &str, names: &[String]) {
        let state = self.group_mut(group);
        for name in names {
            state.instances.remove(name);
        }
    }
}
