//! Claim constraints: `matchAttribute` and `distinctAttribute`, with
//! upstream's incremental add/remove bookkeeping: a match reference that only
//! resets when the set empties, and distinct values kept as a stack of every
//! device added (kubernetes#140600; before it, values were kept per request
//! name, so devices of one request were not compared with each other). With
//! list-type attributes on, values are compared as sets (the experimental
//! variant's semantics): match keeps the running intersection per device so
//! that backtracking restores it, distinct requires pairwise disjoint sets.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::DeviceAttribute;

/// Finds an attribute by fully qualified name; a name in the driver's own
/// domain may also be stored without its domain.
pub(crate) fn lookup_attribute<'d>(
    attributes: Option<&'d BTreeMap<String, DeviceAttribute>>,
    driver: &str,
    name: &str,
) -> Option<&'d DeviceAttribute> {
    let attributes = attributes?;
    if let Some(a) = attributes.get(name) {
        return Some(a);
    }
    let (domain, id) = name.split_once('/')?;
    if domain != driver {
        return None;
    }
    attributes.get(id)
}

/// A set view of an attribute: scalars become one-element sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AttrSet {
    Ints(BTreeSet<i64>),
    Bools(BTreeSet<bool>),
    Strings(BTreeSet<String>),
    Versions(BTreeSet<String>),
}

impl AttrSet {
    /// Upstream `attributeAsSet`: non-empty lists first, then scalars.
    fn of(a: &DeviceAttribute) -> Option<AttrSet> {
        fn list<T: Ord + Clone>(v: Option<&Vec<T>>) -> Option<BTreeSet<T>> {
            v.filter(|l| !l.is_empty())
                .map(|l| l.iter().cloned().collect())
        }
        if let Some(s) = list(a.ints.as_ref()) {
            return Some(AttrSet::Ints(s));
        }
        if let Some(s) = list(a.bools.as_ref()) {
            return Some(AttrSet::Bools(s));
        }
        if let Some(s) = list(a.strings.as_ref()) {
            return Some(AttrSet::Strings(s));
        }
        if let Some(s) = list(a.versions.as_ref()) {
            return Some(AttrSet::Versions(s));
        }
        if let Some(v) = a.int {
            return Some(AttrSet::Ints([v].into()));
        }
        if let Some(v) = a.bool {
            return Some(AttrSet::Bools([v].into()));
        }
        if let Some(v) = &a.string {
            return Some(AttrSet::Strings([v.clone()].into()));
        }
        if let Some(v) = &a.version {
            return Some(AttrSet::Versions([v.clone()].into()));
        }
        None
    }

    fn intersects(&self, other: &AttrSet) -> bool {
        match (self, other) {
            (AttrSet::Ints(a), AttrSet::Ints(b)) => !a.is_disjoint(b),
            (AttrSet::Bools(a), AttrSet::Bools(b)) => !a.is_disjoint(b),
            (AttrSet::Strings(a), AttrSet::Strings(b))
            | (AttrSet::Versions(a), AttrSet::Versions(b)) => !a.is_disjoint(b),
            _ => false,
        }
    }

    fn narrow(&mut self, other: &AttrSet) {
        match (self, other) {
            (AttrSet::Ints(a), AttrSet::Ints(b)) => a.retain(|v| b.contains(v)),
            (AttrSet::Bools(a), AttrSet::Bools(b)) => a.retain(|v| b.contains(v)),
            (AttrSet::Strings(a), AttrSet::Strings(b))
            | (AttrSet::Versions(a), AttrSet::Versions(b)) => {
                a.retain(|v| b.contains(v));
            }
            _ => {}
        }
    }
}

/// Scalar equality as upstream's `matchAttribute` checks it: the new value's
/// kind decides which field of the reference is compared.
fn scalar_equal(reference: &DeviceAttribute, new: &DeviceAttribute) -> bool {
    if let Some(s) = &new.string {
        return reference.string.as_ref() == Some(s);
    }
    if let Some(i) = new.int {
        return reference.int == Some(i);
    }
    if let Some(b) = new.bool {
        return reference.bool == Some(b);
    }
    if let Some(v) = &new.version {
        // Semver 2.0.0 strings are minimal, so string equality is exact.
        return reference.version.as_ref() == Some(v);
    }
    false
}

/// Scalar duplicate check of `distinctAttribute`: `Some(true)` for a
/// duplicate, `None` for an unknown kind (treated as a violation).
fn scalar_duplicate(held: &DeviceAttribute, new: &DeviceAttribute) -> Option<bool> {
    if let Some(s) = &new.string {
        return Some(held.string.as_ref() == Some(s));
    }
    if let Some(i) = new.int {
        return Some(held.int == Some(i));
    }
    if let Some(b) = new.bool {
        return Some(held.bool == Some(b));
    }
    if let Some(v) = &new.version {
        return Some(held.version.as_ref() == Some(v));
    }
    None
}

/// Which requests a constraint covers.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    requests: BTreeSet<String>,
}

impl Scope {
    fn applies(&self, request: &str, subrequest: Option<&str>) -> bool {
        if self.requests.is_empty() {
            return true;
        }
        match subrequest {
            None => self.requests.contains(request),
            Some(sub) => {
                self.requests.contains(request)
                    || self.requests.contains(&format!("{request}/{sub}"))
            }
        }
    }
}

/// One constraint of a claim, with its running state for the current search.
#[derive(Debug, Clone)]
pub(crate) enum Constraint {
    /// `matchAttribute`.
    Match {
        scope: Scope,
        attribute: String,
        list_mode: bool,
        /// Scalar mode: the first device's value, kept until the set empties.
        reference: Option<DeviceAttribute>,
        count: i64,
        /// List mode: the running intersection after each added device, so
        /// that removing a device restores the intersection before it.
        intersections: Vec<AttrSet>,
    },
    /// `distinctAttribute`.
    Distinct {
        scope: Scope,
        attribute: String,
        list_mode: bool,
        /// The values of every device added so far, in order; a new device
        /// must differ from all of them (kubernetes#140600).
        held: Vec<DeviceAttribute>,
    },
}

impl Constraint {
    /// A `matchAttribute` constraint over `requests` (empty: all).
    pub fn matching(requests: &[String], attribute: &str, list_mode: bool) -> Self {
        Constraint::Match {
            scope: Scope {
                requests: requests.iter().cloned().collect(),
            },
            attribute: attribute.to_string(),
            list_mode,
            reference: None,
            count: 0,
            intersections: Vec::new(),
        }
    }

    /// A `distinctAttribute` constraint over `requests` (empty: all).
    pub fn distinct(requests: &[String], attribute: &str, list_mode: bool) -> Self {
        Constraint::Distinct {
            scope: Scope {
                requests: requests.iter().cloned().collect(),
            },
            attribute: attribute.to_string(),
            list_mode,
            held: Vec::new(),
        }
    }

    /// The attribute name, for messages.
    pub fn attribute(&self) -> &str {
        match self {
            Constraint::Match { attribute, .. } | Constraint::Distinct { attribute, .. } => {
                attribute
            }
        }
    }

    /// Whether the constraint covers this (sub)request.
    pub fn applies(&self, request: &str, subrequest: Option<&str>) -> bool {
        match self {
            Constraint::Match { scope, .. } | Constraint::Distinct { scope, .. } => {
                scope.applies(request, subrequest)
            }
        }
    }

    /// Tries to add a device; `false` leaves the state unchanged.
    pub fn add(
        &mut self,
        request: &str,
        subrequest: Option<&str>,
        attributes: Option<&BTreeMap<String, DeviceAttribute>>,
        driver: &str,
    ) -> bool {
        if !self.applies(request, subrequest) {
            return true;
        }
        match self {
            Constraint::Match {
                attribute,
                list_mode,
                reference,
                count,
                intersections,
                ..
            } => {
                let Some(attr) = lookup_attribute(attributes, driver, attribute) else {
                    return false;
                };
                if *list_mode {
                    let Some(new) = AttrSet::of(attr) else {
                        return false;
                    };
                    let next = match intersections.last() {
                        None => new,
                        Some(current) => {
                            if !current.intersects(&new) {
                                return false;
                            }
                            let mut narrowed = current.clone();
                            narrowed.narrow(&new);
                            narrowed
                        }
                    };
                    intersections.push(next);
                    return true;
                }
                if *count == 0 {
                    *reference = Some(attr.clone());
                    *count = 1;
                    return true;
                }
                let Some(reference) = reference.as_ref() else {
                    return false;
                };
                if !scalar_equal(reference, attr) {
                    return false;
                }
                *count += 1;
                true
            }
            Constraint::Distinct {
                attribute,
                list_mode,
                held,
                ..
            } => {
                let Some(attr) = lookup_attribute(attributes, driver, attribute) else {
                    return false;
                };
                let distinct = if *list_mode {
                    // Pairwise disjoint sets; a value that is no set at all
                    // (an empty list) never qualifies.
                    match AttrSet::of(attr) {
                        None => false,
                        Some(new) => held
                            .iter()
                            .filter_map(AttrSet::of)
                            .all(|existing| !new.intersects(&existing)),
                    }
                } else {
                    held.iter()
                        .all(|h| scalar_duplicate(h, attr).is_some_and(|dup| !dup))
                };
                if !distinct {
                    return false;
                }
                held.push(attr.clone());
                true
            }
        }
    }

    /// Undoes the most recent successful [`Constraint::add`] with the same
    /// request names (the search removes devices in reverse order).
    pub fn remove(&mut self, request: &str, subrequest: Option<&str>) {
        if !self.applies(request, subrequest) {
            return;
        }
        match self {
            Constraint::Match {
                list_mode,
                count,
                intersections,
                ..
            } => {
                if *list_mode {
                    intersections.pop();
                } else {
                    *count -= 1;
                }
            }
            Constraint::Distinct { held, .. } => {
                held.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, DeviceAttribute)]) -> BTreeMap<String, DeviceAttribute> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.clone()))
            .collect()
    }

    fn s(v: &str) -> DeviceAttribute {
        DeviceAttribute {
            string: Some(v.into()),
            ..Default::default()
        }
    }

    fn strings(v: &[&str]) -> DeviceAttribute {
        DeviceAttribute {
            strings: Some(v.iter().map(|x| (*x).into()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn lookup_falls_back_to_bare_name_in_the_driver_domain() {
        let a = attrs(&[("model", s("x")), ("other.io/pci", s("p"))]);
        assert!(lookup_attribute(Some(&a), "drv.io", "drv.io/model").is_some());
        assert!(lookup_attribute(Some(&a), "drv.io", "else.io/model").is_none());
        assert!(lookup_attribute(Some(&a), "drv.io", "other.io/pci").is_some());
        assert!(
            lookup_attribute(Some(&a), "drv.io", "model").is_some(),
            "exact key wins"
        );
    }

    #[test]
    fn match_resets_only_when_empty() {
        let mut c = Constraint::matching(&[], "d/model", false);
        let x = attrs(&[("model", s("x"))]);
        let y = attrs(&[("model", s("y"))]);
        assert!(c.add("r", None, Some(&x), "d"));
        assert!(!c.add("r", None, Some(&y), "d"));
        assert!(c.add("r", None, Some(&x), "d"));
        c.remove("r", None);
        c.remove("r", None);
        assert!(
            c.add("r", None, Some(&y), "d"),
            "empty set accepts a new reference"
        );
    }

    #[test]
    fn distinct_compares_devices_of_the_same_request() {
        let mut c = Constraint::distinct(&[], "d/id", false);
        let a = attrs(&[("id", s("a"))]);
        let b = attrs(&[("id", s("b"))]);
        assert!(c.add("r", None, Some(&a), "d"));
        assert!(c.add("r", None, Some(&b), "d"));
        assert!(
            !c.add("r", None, Some(&a), "d"),
            "a is still held by the first device"
        );
        assert!(!c.add("other", None, Some(&a), "d"));
        c.remove("r", None);
        assert!(
            c.add("r", None, Some(&b), "d"),
            "removing the newest device frees its value"
        );
    }

    #[test]
    fn distinct_values_of_other_kinds_never_collide() {
        let mut c = Constraint::distinct(&[], "d/id", false);
        let int = DeviceAttribute {
            int: Some(1),
            ..Default::default()
        };
        assert!(c.add("r", None, Some(&attrs(&[("id", s("1"))])), "d"));
        assert!(c.add("r", None, Some(&attrs(&[("id", int.clone())])), "d"));
        assert!(!c.add("r", None, Some(&attrs(&[("id", int)])), "d"));
        assert!(
            !c.add(
                "r",
                None,
                Some(&attrs(&[("id", DeviceAttribute::default())])),
                "d"
            ),
            "a value of unknown kind cannot be shown distinct"
        );
    }

    #[test]
    fn list_mode_distinct_needs_pairwise_disjoint_sets() {
        let mut c = Constraint::distinct(&[], "d/n", true);
        assert!(c.add("r", None, Some(&attrs(&[("n", strings(&["a", "b"]))])), "d"));
        assert!(c.add("r", None, Some(&attrs(&[("n", strings(&["c"]))])), "d"));
        assert!(!c.add("r", None, Some(&attrs(&[("n", strings(&["b", "x"]))])), "d"));
        assert!(c.add("r", None, Some(&attrs(&[("n", s("x"))])), "d"));
        assert!(
            !c.add("r", None, Some(&attrs(&[("n", strings(&[]))])), "d"),
            "an empty list is no set"
        );
    }

    #[test]
    fn list_mode_match_restores_the_intersection_on_remove() {
        let mut c = Constraint::matching(&[], "d/n", true);
        assert!(c.add("r", None, Some(&attrs(&[("n", strings(&["a", "b"]))])), "d"));
        assert!(c.add("r", None, Some(&attrs(&[("n", s("a"))])), "d"));
        assert!(!c.add("r", None, Some(&attrs(&[("n", s("b"))])), "d"));
        c.remove("r", None);
        assert!(
            c.add("r", None, Some(&attrs(&[("n", s("b"))])), "d"),
            "the intersection is {{a, b}} again"
        );
    }

    #[test]
    fn list_mode_narrows_the_intersection() {
        let mut c = Constraint::matching(&[], "d/n", true);
        assert!(c.add("r", None, Some(&attrs(&[("n", strings(&["a", "b"]))])), "d"));
        assert!(c.add("r", None, Some(&attrs(&[("n", strings(&["b", "c"]))])), "d"));
        assert!(
            !c.add("r", None, Some(&attrs(&[("n", s("a"))])), "d"),
            "intersection is now {{b}}"
        );
        assert!(c.add("r", None, Some(&attrs(&[("n", s("b"))])), "d"));
    }

    #[test]
    fn scope_covers_parent_and_subrequest_names() {
        let c = Constraint::matching(&["r0".into(), "r1/s1".into()], "d/x", false);
        assert!(c.applies("r0", Some("s0")));
        assert!(c.applies("r1", Some("s1")));
        assert!(!c.applies("r1", Some("s0")));
        assert!(!c.applies("r2", None));
    }
}
