//! Writes NodeGroup status with optimistic concurrency, and remembers what it
//! wrote so the next loop does not plan from a watch cache that lags behind.
//!
//! Every write is a PUT of `/status` carrying the resourceVersion the decision
//! was made from: if anything changed the object since (another replica, a
//! user, our own earlier write the cache has not seen), the API server answers
//! 409 and nothing is written. That is what makes "record the upcoming nodes,
//! then call the provider" safe against double scale-ups.

use std::collections::HashMap;
use std::sync::Mutex;

use dra_api::{NodeGroup, NodeGroupStatus};
use kube::api::{Api, PostParams};

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
    /// The object changed since it was read (409 Conflict).
    #[must_use]
    pub fn is_conflict(&self) -> bool {
        matches!(&self.source, kube::Error::Api(s) if s.code == 409)
    }
}

/// See the module docs.
pub struct StatusWriter {
    api: Api<NodeGroup>,
    /// name → (resourceVersion the write was based on, the object written).
    written: Mutex<HashMap<String, (Option<String>, NodeGroup)>>,
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

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Option<String>, NodeGroup)>> {
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The newest version of `stored` we know: our own write when the watch
    /// cache still shows the version that write replaced.
    #[must_use]
    pub fn freshest(&self, stored: &NodeGroup) -> NodeGroup {
        let name = stored.metadata.name.clone().unwrap_or_default();
        let mut cache = self.cache();
        match cache.get(&name) {
            Some((before, written)) if *before == stored.metadata.resource_version => {
                written.clone()
            }
            Some(_) => {
                // The cache caught up with our write, or someone wrote after us.
                cache.remove(&name);
                stored.clone()
            }
            None => stored.clone(),
        }
    }

    /// Replaces the status of `current` with `status`, conditional on
    /// `current`'s resourceVersion. A status equal to the current one is not
    /// written. Returns the object as it now is.
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
        let mut desired = current.clone();
        desired.status = Some(status);
        desired.metadata.managed_fields = None;
        let written = self
            .api
            .replace_status(&name, &PostParams::default(), &desired)
            .await
            .map_err(|source| StatusError {
                node_group: name.clone(),
                source,
            })?;
        self.cache().insert(
            name,
            (current.metadata.resource_version.clone(), written.clone()),
        );
        Ok(written)
    }
}
