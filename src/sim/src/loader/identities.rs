//! The identities (group, kind, namespace, name) of the objects read so far, to name a
//! duplicate.
//!
//! A cluster's objects share a handful of groups, kinds and namespaces, so those are
//! numbered once and each object costs one copy of its name. An ordered set of four
//! strings per object was a tenth of `simulate`'s time at 100,000 nodes (issue #28):
//! 271,000 entries of four allocations each, compared string by string on insertion.

use std::collections::{HashMap, HashSet};

/// The identities seen so far.
#[derive(Debug, Default)]
pub(super) struct Identities {
    /// Group, kind and namespace names, numbered in order of first sight.
    numbers: HashMap<Box<str>, u32>,
    seen: HashSet<(u32, u32, u32, Box<str>)>,
}

impl Identities {
    /// Records an identity; `false` when it was recorded before.
    pub(super) fn insert(&mut self, group: &str, kind: &str, namespace: &str, name: &str) -> bool {
        let key = (
            self.number(group),
            self.number(kind),
            self.number(namespace),
            Box::from(name),
        );
        self.seen.insert(key)
    }

    /// Whether none was recorded.
    pub(super) fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    fn number(&mut self, text: &str) -> u32 {
        if let Some(&number) = self.numbers.get(text) {
            return number;
        }
        // Far fewer than 2^32 distinct group, kind and namespace names fit in memory; past
        // that the number would saturate and two names could share it.
        let number = u32::try_from(self.numbers.len()).unwrap_or(u32::MAX);
        self.numbers.insert(Box::from(text), number);
        number
    }
}

#[cfg(test)]
mod tests {
    use super::Identities;

    #[test]
    fn the_same_identity_twice_is_a_duplicate_and_any_differing_part_is_not() {
        let mut seen = Identities::default();
        assert!(seen.insert("", "Pod", "default", "a"));
        assert!(!seen.insert("", "Pod", "default", "a"));
        assert!(seen.insert("", "Pod", "other", "a"));
        assert!(seen.insert("", "Node", "default", "a"));
        assert!(seen.insert("x.io", "Pod", "default", "a"));
        assert!(seen.insert("", "Pod", "default", "b"));
        // A name equal to a kind or namespace is still a name.
        assert!(seen.insert("", "Pod", "default", "Pod"));
        assert!(!seen.insert("", "Pod", "other", "a"));
    }

    #[test]
    fn parts_are_not_confused_across_positions() {
        let mut seen = Identities::default();
        assert!(seen.insert("a", "b", "c", "d"));
        assert!(seen.insert("b", "a", "c", "d"));
        assert!(seen.insert("a", "c", "b", "d"));
    }
}
