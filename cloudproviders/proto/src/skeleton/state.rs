//! The state a provider keeps between calls: its node groups as last read from the cloud, and
//! the machines of failed scale-ups it reports until they are deleted.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};

use crate::error::ProviderError;
use crate::groups::GroupCatalog;
use crate::model::InstanceDetails;

/// Node groups as last read, read again when older than their maximum age.
#[derive(Debug)]
pub struct GroupCache<G> {
    catalog: Mutex<GroupCatalog<G>>,
    max_age: Duration,
    /// What one group is in the cloud's words ("Auto Scaling group"), for the logs.
    kind: &'static str,
}

impl<G: Clone> GroupCache<G> {
    /// An empty cache (the first call reads) of groups that stay `max_age`, each a `kind`.
    #[must_use]
    pub fn new(max_age: Duration, kind: &'static str) -> Self {
        Self {
            catalog: Mutex::new(GroupCatalog::default()),
            max_age,
            kind,
        }
    }

    /// The groups, read with `read` first when `force`d or too old; each unusable group is
    /// logged with its reason at every read.
    ///
    /// # Errors
    /// Those of `read`; the groups read before stay then.
    pub async fn ensure<F, Fut>(
        &self,
        force: bool,
        read: F,
    ) -> Result<MutexGuard<'_, GroupCatalog<G>>, ProviderError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<GroupCatalog<G>, ProviderError>>,
    {
        let mut groups = self.catalog.lock().await;
        if force || !groups.is_fresh(self.max_age) {
            *groups = read().await?;
            for (name, reason) in &groups.bad {
                tracing::warn!(group = name, reason, "{} is not usable", self.kind);
            }
        }
        Ok(groups)
    }

    /// The groups as they are, not read again (a caller that ensured them just before).
    pub async fn current(&self) -> MutexGuard<'_, GroupCatalog<G>> {
        self.catalog.lock().await
    }

    /// Makes the next call read the groups again (after a change of sizes).
    pub async fn invalidate(&self) {
        self.catalog.lock().await.read_at = None;
    }
}

/// Machines of scale-ups that failed after the cloud accepted them, by group id, reported with
/// their error (`InstanceStatuses`, `NodeGroupNodes`) until the controller deletes them.
#[derive(Debug, Default)]
pub struct Failures {
    by_group: Mutex<BTreeMap<String, Vec<InstanceDetails>>>,
}

impl Failures {
    /// The failed machines of group `id`.
    pub async fn of(&self, id: &str) -> Vec<InstanceDetails> {
        self.by_group
            .lock()
            .await
            .get(id)
            .cloned()
            .unwrap_or_default()
    }

    /// Adds failed machines of group `id`.
    pub async fn add(&self, id: &str, failed: impl IntoIterator<Item = InstanceDetails>) {
        self.by_group
            .lock()
            .await
            .entry(id.to_owned())
            .or_default()
            .extend(failed);
    }

    /// Forgets the failed machines of group `id` named by `provider_ids` (they were deleted).
    pub async fn forget<'a>(&self, id: &str, provider_ids: impl IntoIterator<Item = &'a str>) {
        let gone: Vec<&str> = provider_ids.into_iter().collect();
        if let Some(list) = self.by_group.lock().await.get_mut(id) {
            list.retain(|f| !gone.contains(&f.id.as_str()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::model::InstanceState;

    async fn read(reads: &AtomicU32) -> Result<GroupCatalog<u32>, ProviderError> {
        let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(GroupCatalog::read_now(
            BTreeMap::from([("a".to_owned(), n)]),
            BTreeMap::new(),
        ))
    }

    /// What group "a" holds after `ensure(force)`: the number of the read that found it.
    async fn read_number(cache: &GroupCache<u32>, force: bool, reads: &AtomicU32) -> u32 {
        let groups = cache.ensure(force, || read(reads)).await.expect("a read");
        *groups.get("a").expect("group a")
    }

    #[tokio::test]
    async fn groups_are_read_once_until_forced_or_invalidated() {
        let cache = GroupCache::new(Duration::from_secs(60), "test group");
        let reads = AtomicU32::new(0);
        assert_eq!(read_number(&cache, false, &reads).await, 1);
        assert_eq!(read_number(&cache, false, &reads).await, 1);
        assert_eq!(read_number(&cache, true, &reads).await, 2);
        cache.invalidate().await;
        assert_eq!(read_number(&cache, false, &reads).await, 3);
        assert_eq!(reads.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_failed_read_keeps_the_groups_read_before() {
        let cache = GroupCache::new(Duration::ZERO, "test group");
        let reads = AtomicU32::new(0);
        assert!(cache.ensure(false, || read(&reads)).await.is_ok());
        let failed = cache
            .ensure(false, || async {
                Err::<GroupCatalog<u32>, _>(ProviderError::Unavailable {
                    message: "cloud down".into(),
                })
            })
            .await;
        assert!(failed.is_err());
        assert_eq!(cache.current().await.get("a"), Ok(&1));
    }

    #[tokio::test]
    async fn failures_are_kept_per_group_until_forgotten() {
        let failures = Failures::default();
        let failed = |id: &str| InstanceDetails {
            id: id.to_owned(),
            node_name: String::new(),
            state: InstanceState::Deleting,
            error: None,
            reservation_id: None,
            requested_at: None,
        };
        failures.add("g", [failed("x://1"), failed("x://2")]).await;
        assert_eq!(failures.of("g").await.len(), 2);
        assert!(failures.of("other").await.is_empty());
        failures.forget("g", ["x://1"]).await;
        assert_eq!(failures.of("g").await, vec![failed("x://2")]);
    }
}
