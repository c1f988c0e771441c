//! Device compatibility groups (KEP-5963, `DRADeviceCompatibilityGroups`):
//! devices drawing from the same counter set may only be co-allocated when
//! the `compatibilityGroups` they declare on it intersect. A device that
//! declares none is compatible only with other devices that declare none, so
//! "every member declared none" is tracked apart from the running
//! intersection (an empty intersection would wrongly reject a second
//! group-less device).
//!
//! Upstream enforces this in its experimental allocator only. Allocated peers
//! are read from the pool's slices here: the 1.37 API carries no snapshot of
//! the groups in the claim status.

use std::collections::BTreeSet;

/// The running state of one counter set (upstream
/// `compatibilityGroupIntersection`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GroupState {
    /// A device was placed on the counter set.
    has_members: bool,
    /// Every device placed so far declared no groups.
    all_empty: bool,
    /// The intersection of the groups declared so far (when not `all_empty`).
    groups: BTreeSet<String>,
}

impl GroupState {
    /// Whether a device declaring `groups` may join the counter set.
    pub fn admits(&self, groups: &[String]) -> bool {
        if !self.has_members {
            return true;
        }
        if groups.is_empty() {
            return self.all_empty;
        }
        if self.all_empty {
            return false;
        }
        groups.iter().any(|g| self.groups.contains(g))
    }

    /// Folds a device's groups into the state; callers check
    /// [`GroupState::admits`] first.
    pub fn add(&mut self, groups: &[String]) {
        if !self.has_members {
            self.has_members = true;
            self.all_empty = groups.is_empty();
            self.groups = groups.iter().cloned().collect();
            return;
        }
        if self.all_empty || groups.is_empty() {
            return;
        }
        self.groups.retain(|g| groups.contains(g));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn first_device_is_always_admitted() {
        let s = GroupState::default();
        assert!(s.admits(&[]));
        assert!(s.admits(&g(&["a"])));
    }

    #[test]
    fn group_less_devices_only_join_group_less_devices() {
        let mut s = GroupState::default();
        s.add(&[]);
        assert!(s.admits(&[]));
        assert!(!s.admits(&g(&["a"])));
        let mut t = GroupState::default();
        t.add(&g(&["a"]));
        assert!(!t.admits(&[]));
    }

    #[test]
    fn groups_narrow_to_their_intersection() {
        let mut s = GroupState::default();
        s.add(&g(&["a", "b"]));
        assert!(s.admits(&g(&["b", "c"])));
        s.add(&g(&["b", "c"]));
        assert!(!s.admits(&g(&["a"])), "the intersection is now {{b}}");
        assert!(s.admits(&g(&["b"])));
        assert!(!s.admits(&g(&["c"])));
    }
}
