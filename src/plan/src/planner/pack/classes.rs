//! Size classes: node groups whose nodes look the same to the pods at hand
//! (same taints, same values for every label key a scheduling term or the
//! DRA allocator reads, no ResourceSlices) and so differ only in size and
//! price.

use std::collections::{BTreeMap, BTreeSet};

use dra_sim::filters::Allocatable;
use dra_sim::pods::{required_node_affinity, required_pod_affinity, required_pod_anti_affinity};
use k8s_openapi::api::core::v1::Pod;

use super::super::Planner;
use crate::groups::new_node_label;

/// The size classes of a plan and their members' allocatable, computed
/// once per plan.
#[derive(Debug, Default)]
pub(in crate::planner) struct SizeClasses {
    pub(super) classes: Vec<SizeClass>,
    /// Per member group: its template's allocatable.
    pub(super) allocatables: BTreeMap<usize, Allocatable>,
}

/// Node groups that differ only in size and price for the pods at hand.
#[derive(Debug, Clone)]
pub(super) struct SizeClass {
    /// Members by price, capacity type, then name: the first with room that
    /// holds a node's pods is bought.
    pub(super) members: Vec<usize>,
}

/// Label keys the filters read for any of `pods`: node selectors, required
/// node affinity, spread and pod (anti-)affinity topology keys.
fn keys_that_matter<'a>(pods: impl Iterator<Item = &'a Pod>) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for pod in pods {
        let Some(spec) = pod.spec.as_ref() else {
            continue;
        };
        keys.extend(spec.node_selector.iter().flat_map(|s| s.keys().cloned()));
        let node_terms = required_node_affinity(pod)
            .map(|r| r.node_selector_terms.as_slice())
            .unwrap_or_default();
        for term in node_terms {
            keys.extend(
                term.match_expressions
                    .iter()
                    .flatten()
                    .map(|e| e.key.clone()),
            );
        }
        let pod_terms = required_pod_affinity(pod)
            .iter()
            .chain(required_pod_anti_affinity(pod));
        keys.extend(pod_terms.map(|t| t.topology_key.clone()));
        keys.extend(
            spec.topology_spread_constraints
                .iter()
                .flatten()
                .map(|c| c.topology_key.clone()),
        );
    }
    keys
}

/// Node label keys the DRA allocator reads: the node selectors of claims
/// already allocated (a pod using one must land where it matches) and of
/// slices not tied to one node.
pub(in crate::planner) fn dra_label_keys(objects: &dra_sim::ClusterObjects) -> BTreeSet<String> {
    let selectors = objects
        .resource_claims
        .iter()
        .filter_map(|c| {
            c.status
                .as_ref()?
                .allocation
                .as_ref()?
                .node_selector
                .as_ref()
        })
        .chain(
            objects
                .resource_slices
                .iter()
                .filter_map(|s| s.spec.node_selector.as_ref()),
        );
    selectors
        .flat_map(|selector| selector.node_selector_terms.iter())
        .flat_map(|term| term.match_expressions.iter().flatten())
        .map(|e| e.key.clone())
        .collect()
}

impl Planner<'_> {
    /// The size classes of the groups, computed once per plan (which keys
    /// matter depends on all pods, known up front); the caller puts them
    /// back in `self.size_classes` when done.
    pub(super) fn size_classes(&mut self) -> SizeClasses {
        if let Some(known) = self.size_classes.take() {
            return known;
        }
        let mut keys = keys_that_matter(self.snapshot.pods().iter().chain(self.daemon_pods.iter()));
        keys.extend(self.dra_label_keys.iter().cloned());
        let mut by_look: BTreeMap<String, Vec<(usize, Allocatable)>> = BTreeMap::new();
        let mut allocatables = BTreeMap::new();
        for (g, group) in self.groups.iter().enumerate() {
            if !group.spec.template.resource_slices.is_empty() {
                continue;
            }
            // One name for all: the hostname label follows the node's name,
            // which says nothing about the group.
            let seen: Vec<(&String, Option<&str>)> = keys
                .iter()
                .map(|k| (k, new_node_label(group, k, "size-class")))
                .collect();
            let look =
                serde_json::to_string(&(seen, &group.spec.template.taints)).unwrap_or_default();
            let allocatable = self
                .snapshot
                .allocatable_from(group.spec.template.effective_allocatable());
            allocatables.insert(g, allocatable.clone());
            by_look.entry(look).or_default().push((g, allocatable));
        }
        let mut classes = Vec::new();
        for (_, mut members) in by_look {
            // Largest first; each class takes every remaining member its
            // largest covers, so a member never lands in a class whose nodes
            // it could not replace.
            members.sort_by_key(|(g, a)| (std::cmp::Reverse(a.cpu_memory()), *g));
            while let Some((_, big)) = members.first().cloned() {
                let (inside, rest): (Vec<_>, Vec<_>) =
                    members.into_iter().partition(|(_, a)| big.covers(a));
                members = rest;
                let mut ids: Vec<usize> = inside.into_iter().map(|(g, _)| g).collect();
                ids.sort_by(|&a, &b| self.cheaper(a, b));
                classes.push(SizeClass { members: ids });
            }
        }
        SizeClasses {
            classes,
            allocatables,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn dra_label_keys_come_from_allocated_claims_and_shared_slices() {
        let objects: dra_sim::ClusterObjects = dra_sim::ClusterObjects {
            resource_claims: vec![
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": "c", "namespace": "ns"},
                    "spec": {"devices": {}},
                    "status": {"allocation": {"nodeSelector": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}
                    ]}}}
                }))
                .unwrap(),
                // Not allocated: no selector to honour yet.
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": "d", "namespace": "ns"},
                    "spec": {"devices": {}}
                }))
                .unwrap(),
            ],
            resource_slices: vec![
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": "s"},
                    "spec": {"driver": "x", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                             "nodeSelector": {"nodeSelectorTerms": [
                                 {"matchExpressions": [{"key": "example.com/rack", "operator": "Exists"}]}
                             ]}}
                }))
                .unwrap(),
            ],
            ..Default::default()
        };
        let keys = dra_label_keys(&objects);
        assert_eq!(
            keys.into_iter().collect::<Vec<_>>(),
            vec![
                "example.com/rack".to_string(),
                "topology.kubernetes.io/zone".to_string()
            ]
        );
    }
}
