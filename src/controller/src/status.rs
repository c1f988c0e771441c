//! Writes NodeGroup status with optimistic concurrency, and remembers what it
//! wrote so the next loop does not plan from a watch cache that lags behind.
//!
//! Every write is a PUT of `/status` carrying the resourceVersion the decision
//! was made from: if anything changed the object since (another replica, a
//! user, our own earlier write the cache has not seen), the API server answers
//! 409 and nothing is written. That is what makes "record the upcoming nodes,
//! then call the provider" safe against double scale-ups.

use std::collections::{BTreeSet, HashMap};
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
