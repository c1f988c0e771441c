//! The namespaces pods live in, with their labels, for namespace selectors.
//! (Label selectors themselves live in [`crate::selectors`].)

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;

use crate::selectors::{Labels, Selector};

/// One shared copy of each namespace name and label set the filter state records pods
/// with. Hashed with foldhash rather than std's SipHash: every bound pod's label set is
/// hashed each time a snapshot is indexed. Anyone who may create pods chooses their labels,
/// so the hasher is seeded per process (`RandomState`), as std's is, not fixed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Interned {
    namespaces: HashSet<Arc<str>, foldhash::fast::RandomState>,
    labels: HashSet<Arc<Labels>, foldhash::fast::RandomState>,
}

impl Interned {
    /// The shared copy of `name`, and whether this is the first time it was asked for.
    pub(crate) fn namespace(&mut self, name: &str) -> (Arc<str>, bool) {
        if let Some(shared) = self.namespaces.get(name) {
            return (Arc::clone(shared), false);
        }
        let shared: Arc<str> = name.into();
        self.namespaces.insert(Arc::clone(&shared));
        (shared, true)
    }

    /// Forgets the namespaces and label sets no record shares any more (only this set
    /// holds them), so a state kept from one snapshot to the next does not pile up the
    /// label sets of every pod it ever counted.
    pub(crate) fn forget_unshared(&mut self) {
        self.namespaces.retain(|n| Arc::strong_count(n) > 1);
        self.labels.retain(|l| Arc::strong_count(l) > 1);
    }

    /// The namespaces interned.
    pub(crate) fn namespace_names(&self) -> impl Iterator<Item = &str> {
        self.namespaces.iter().map(|n| &**n)
    }

    /// The shared copy of `labels`.
    pub(crate) fn labels(&mut self, labels: &Labels) -> Arc<Labels> {
        if let Some(shared) = self.labels.get(labels) {
            return Arc::clone(shared);
        }
        let shared = Arc::new(labels.clone());
        self.labels.insert(Arc::clone(&shared));
        shared
    }
}

/// Every namespace the simulation knows, with its labels.
///
/// Namespaces that pods live in but that the snapshot does not list are
/// known with no labels: the API server would hold them, so a namespace
/// selector `{}` must still see them.
#[derive(Debug, Clone, Default)]
pub(crate) struct NamespaceRegistry {
    labels: BTreeMap<String, Labels>,
}

impl NamespaceRegistry {
    pub(crate) fn new(namespaces: &[Namespace]) -> Self {
        let mut registry = Self::default();
        for namespace in namespaces {
            if let Some(name) = namespace.metadata.name.as_deref() {
                registry.labels.insert(
                    name.to_string(),
                    namespace.metadata.labels.clone().unwrap_or_default(),
                );
            }
        }
        registry
    }

    /// Records a namespace seen on a pod, keeping labels already known.
    pub(crate) fn note(&mut self, name: &str) {
        if !self.labels.contains_key(name) {
            self.labels.insert(name.to_string(), Labels::new());
        }
    }

    /// Every namespace known, with its labels, in name order.
    pub(crate) fn entries(&self) -> Vec<(String, Labels)> {
        self.labels
            .iter()
            .map(|(name, labels)| (name.clone(), labels.clone()))
            .collect()
    }

    /// The labels of a namespace, `None` when it is unknown.
    pub(crate) fn labels(&self, name: &str) -> Option<&Labels> {
        self.labels.get(name)
    }

    /// Names of the namespaces whose labels the selector matches, plus `extra`
    /// (the incoming pod's own namespace, which exists even if unlisted).
    pub(crate) fn matching(&self, selector: &Selector, extra: &str) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self
            .labels
            .iter()
            .filter(|(_, labels)| selector.matches(Some(labels)))
            .map(|(name, _)| name.clone())
            .collect();
        if !self.labels.contains_key(extra) && selector.matches(None) {
            names.insert(extra.to_string());
        }
        names
    }
}
