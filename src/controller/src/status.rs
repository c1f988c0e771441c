//! Writes NodeGroup status with optimistic concurrency, and remembers what it
//! wrote so the next loop does not plan from a watch cache that lags behind.
//!
//! Every write is a server-side apply of the whole status to `/status` (field manager
//! [`FIELD_MANAGER`]) carrying the resourceVersion the decision was made from: if anything
//! changed the object since (another replica, a user, our own earlier write the cache has not
//! seen), the API server answers 409 and nothing is written. That is what makes "record the
//! upcoming nodes, then call the provider" safe against double scale-ups. Apply (rather than a
//! PUT of the object) sends only what this controller owns, and a field it stops setting
//! (a backoff that ended, the last upcoming node) is removed by the server, as kube-rs'
//! controller-rs and upstream controllers write status.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use dra_api::{NodeGroup, NodeGroupStatus};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};

/// The field manager of the controller's status writes.
pub const FIELD_MANAGER: &str = "dra-autoscaler";

/// A status write that failed.
#[derive(Debug, thiserror::Error)]
#[error("unable to write the status of NodeGroup {node_group:?}")]
pub struct StatusError {
    /// The NodeGroup.
    pub node_group: String,
    /// What the API server said.
    #[source]
    pub source: kube::Error,
}

impl StatusError {
    /// The object changed since it was read (409 Conflict). Any other failure (the API
    /// server unreachable, a 422 for a status the schema refuses, RBAC) is an error, not a
    /// lost race.
    #[must_use]
    pub fn is_conflict(&self) -> bool {
        matches!(&self.source, kube::Error::Api(s) if s.code == 409)
    }
}

/// What we wrote to one NodeGroup since the watch cache last caught up. A loop
/// writes a group up to three times, and the cache may show any of the
/// versions those writes replaced for a while.
struct Written {
    /// resourceVersions our writes replaced.
    superseded: BTreeSet<Option<String>>,
    /// The object as our last write left it.
    latest: NodeGroup,
}

/// See the module docs.
pub struct StatusWriter {
    api: Api<NodeGroup>,
    /// Our writes per NodeGroup name.
    written: Mutex<HashMap<String, Written>>,
}

impl std::fmt::Debug for StatusWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWriter").finish_non_exhaustive()
    }
}

impl StatusWriter {
    /// Writes through `client`.
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        Self {
            api: Api::all(client),
            written: Mutex::new(HashMap::new()),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Written>> {
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The newest version of `stored` we know: our own last write while the
    /// watch cache still shows a version one of our writes replaced.
    #[must_use]
    pub fn freshest(&self, stored: &NodeGroup) -> NodeGroup {
        let name = stored.metadata.name.clone().unwrap_or_default();
        let mut cache = self.cache();
        match cache.get(&name) {
            // A version our writes replaced, or our last write itself (a caller passing an
            // object this writer returned): ours is the newest.
            Some(w)
                if w.superseded.contains(&stored.metadata.resource_version)
                    || w.latest.metadata.resource_version == stored.metadata.resource_version =>
            {
                w.latest.clone()
            }
            Some(_) => {
                // The cache caught up with our writes, or someone wrote after us.
                cache.remove(&name);
                stored.clone()
            }
            None => stored.clone(),
        }
    }

    /// Applies `status` as the status of `current`, conditional on `current`'s
    /// resourceVersion. A status equal to the current one is not written. Returns the object
    /// as it now is.
    ///
    /// # Errors
    /// The API server refused the write; [`StatusError::is_conflict`] tells a
    /// lost race from other failures.
    pub async fn write(
        &self,
        current: &NodeGroup,
        status: NodeGroupStatus,
    ) -> Result<NodeGroup, StatusError> {
        if current.status.as_ref() == Some(&status) {
            return Ok(current.clone());
        }
        let name = current.metadata.name.clone().unwrap_or_default();
        let config = apply_config(&name, current.metadata.resource_version.as_deref(), &status);
        let written = self
            .api
            .patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&config),
            )
            .await
            .map_err(|source| StatusError {
                node_group: name.clone(),
                source,
            })?;
        let mut cache = self.cache();
        let entry = cache.entry(name).or_insert_with(|| Written {
            superseded: BTreeSet::new(),
            latest: written.clone(),
        });
        entry
            .superseded
            .insert(current.metadata.resource_version.clone());
        entry.latest = written.clone();
        Ok(written)
    }
}

/// The apply configuration of a status write: identity, the precondition and the status.
fn apply_config(
    name: &str,
    resource_version: Option<&str>,
    status: &NodeGroupStatus,
) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": NodeGroup::api_version(&()),
        "kind": NodeGroup::kind(&()),
        "metadata": {"name": name, "resourceVersion": resource_version},
        "status": status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_apply_configuration_carries_the_precondition_and_only_status() {
        let status = NodeGroupStatus {
            current_size: 2,
            ..NodeGroupStatus::default()
        };
        let config = apply_config("gpu", Some("42"), &status);
        assert_eq!(
            config,
            serde_json::json!({
                "apiVersion": "dra-autoscaler.io/v1alpha1",
                "kind": "NodeGroup",
                "metadata": {"name": "gpu", "resourceVersion": "42"},
                "status": {"currentSize": 2, "targetSize": 0, "upcomingSize": 0},
            })
        );
    }
}
