//! Node groups as a provider last read them from its cloud: the usable ones by id, and the
//! ones it found but cannot serve, with the reason. One lookup for every provider, so an
//! unknown id and an unusable one get the same answers everywhere.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::error::ProviderError;

/// The error for a node group id the provider does not serve (gRPC NOT_FOUND).
#[must_use]
pub fn unknown_group(id: &str) -> ProviderError {
    ProviderError::NotFound {
        what: format!("node group {id:?}"),
    }
}

/// The groups of one read of the cloud.
#[derive(Debug)]
pub struct GroupCatalog<G> {
    /// When they were read; `None` forces the next read.
    pub read_at: Option<Instant>,
    /// The groups served, by id.
    pub good: BTreeMap<String, G>,
    /// Groups that could not be used, with the reason (logged, not served).
    pub bad: BTreeMap<String, String>,
}

impl<G> Default for GroupCatalog<G> {
    fn default() -> Self {
        Self {
            read_at: None,
            good: BTreeMap::new(),
            bad: BTreeMap::new(),
        }
    }
}

impl<G> GroupCatalog<G> {
    /// The result of a read that finished now.
    #[must_use]
    pub fn read_now(good: BTreeMap<String, G>, bad: BTreeMap<String, String>) -> Self {
        Self {
            read_at: Some(Instant::now()),
            good,
            bad,
        }
    }

    /// Whether the read is younger than `max_age`.
    #[must_use]
    pub fn is_fresh(&self, max_age: Duration) -> bool {
        self.read_at.is_some_and(|at| at.elapsed() < max_age)
    }

    /// The usable group `id`.
    ///
    /// # Errors
    /// [`ProviderError::InvalidArgument`] with the reason for a group found but not usable,
    /// [`ProviderError::NotFound`] for an id the cloud does not have.
    pub fn get(&self, id: &str) -> Result<&G, ProviderError> {
        if let Some(group) = self.good.get(id) {
            return Ok(group);
        }
        Err(match self.bad.get(id) {
            Some(reason) => ProviderError::InvalidArgument {
                message: format!("node group {id:?} is not usable: {reason}"),
            },
            None => unknown_group(id),
        })
    }

    /// The usable groups named in `ids`, in that order; all of them when `ids` is empty (what
    /// `NodeGroupInfos` asks).
    ///
    /// # Errors
    /// [`ProviderError::NotFound`] for the first id that is not a usable group.
    pub fn select(&self, ids: &[String]) -> Result<Vec<&G>, ProviderError> {
        if ids.is_empty() {
            return Ok(self.good.values().collect());
        }
        ids.iter()
            .map(|id| self.good.get(id).ok_or_else(|| unknown_group(id)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> GroupCatalog<u32> {
        GroupCatalog::read_now(
            BTreeMap::from([("a".to_owned(), 1), ("b".to_owned(), 2)]),
            BTreeMap::from([("broken".to_owned(), "no template".to_owned())]),
        )
    }

    #[test]
    fn lookup_tells_unknown_from_unusable() {
        let groups = catalog();
        assert_eq!(groups.get("a"), Ok(&1));
        assert_eq!(
            groups.get("broken"),
            Err(ProviderError::InvalidArgument {
                message: "node group \"broken\" is not usable: no template".into()
            })
        );
        assert_eq!(groups.get("zzz"), Err(unknown_group("zzz")));
        assert_eq!(
            unknown_group("zzz").to_string(),
            "node group \"zzz\" not found"
        );
    }

    #[test]
    fn selection_is_all_or_the_named_ones_in_order() {
        let groups = catalog();
        assert_eq!(groups.select(&[]), Ok(vec![&1, &2]));
        assert_eq!(groups.select(&["b".into(), "a".into()]), Ok(vec![&2, &1]));
        // An unusable group is not served, so it is not found either.
        assert_eq!(
            groups.select(&["a".into(), "broken".into()]),
            Err(unknown_group("broken"))
        );
    }

    #[test]
    fn freshness_follows_the_read_time() {
        let groups = catalog();
        assert!(groups.is_fresh(Duration::from_secs(60)));
        assert!(!groups.is_fresh(Duration::ZERO));
        assert!(!GroupCatalog::<u32>::default().is_fresh(Duration::from_secs(60)));
    }
}
