//! Whether what a node holds would also fit within another node's
//! allocatable. The planner fills a node of the largest template of a set of
//! node groups that differ only in size, then buys the cheapest of them that
//! holds the same pods: NodeResourcesFit passes on that smaller node for every
//! pod in turn exactly when the totals fit, because requests only add up.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::FilterState;
use super::requests::{ResourceVec, allocatable_list, pod_requests};

/// A node's allocatable, parsed once for repeated
/// [`FilterState::usage_fits`] questions.
#[derive(Debug, Clone)]
pub struct Allocatable {
    resources: ResourceVec,
    pods: i64,
}

impl Allocatable {
    /// Whether this is at least `other` in every resource and in pod slots.
    #[must_use]
    pub fn covers(&self, other: &Self) -> bool {
        let (a, b) = (&self.resources, &other.resources);
        self.pods >= other.pods
            && a.milli_cpu >= b.milli_cpu
            && a.memory >= b.memory
            && a.ephemeral_storage >= b.ephemeral_storage
            && b.scalars
                .iter()
                .enumerate()
                .all(|(id, &theirs)| theirs <= a.scalars.get(id).copied().unwrap_or(0))
    }

    /// CPU in millicores and memory in bytes, for ordering by size.
    #[must_use]
    pub fn cpu_memory(&self) -> (i64, i64) {
        (self.resources.milli_cpu, self.resources.memory)
    }
}

impl FilterState {
    /// An allocatable resource list (a node template's) in the form
    /// [`FilterState::usage_fits`] compares.
    pub fn allocatable_from(&mut self, list: &BTreeMap<String, Quantity>) -> Allocatable {
        let mut resources = ResourceVec::default();
        let pods = resources.add_list(&allocatable_list(Some(list)), &mut self.resources);
        Allocatable { resources, pods }
    }

    /// What `node_index` has left within `target`: CPU (millicores), memory
    /// (bytes) and pod slots, each possibly negative; `None` for an unknown
    /// node.
    #[must_use]
    pub fn room_within(&self, node_index: usize, target: &Allocatable) -> Option<(i64, i64, i64)> {
        let usage = self.usage.get(node_index)?;
        Some((
            target
                .resources
                .milli_cpu
                .saturating_sub(usage.requested.milli_cpu),
            target
                .resources
                .memory
                .saturating_sub(usage.requested.memory),
            target.pods.saturating_sub(usage.pod_count),
        ))
    }

    /// A pod's requests in the same form (one pod slot), or `None` when a
    /// request is not a quantity.
    pub fn requests_of(&mut self, pod: &Pod) -> Option<Allocatable> {
        let list = pod_requests(pod, true).ok()?;
        let mut resources = ResourceVec::default();
        resources.add_list(&list, &mut self.resources);
        Some(Allocatable { resources, pods: 1 })
    }

    /// Whether everything the pods on `node_index` request — plus `extra`
    /// (see [`FilterState::requests_of`]) when given — fits within `target`,
    /// pod slots included. An unknown node answers `false`.
    #[must_use]
    pub fn usage_fits(
        &self,
        node_index: usize,
        extra: Option<&Allocatable>,
        target: &Allocatable,
    ) -> bool {
        let Some(usage) = self.usage.get(node_index) else {
            return false;
        };
        let used = &usage.requested;
        let (add, add_pods) = match extra {
            Some(e) => (Some(&e.resources), e.pods),
            None => (None, 0),
        };
        let plus = |mine: i64, theirs: Option<i64>| mine.saturating_add(theirs.unwrap_or(0));
        let have = &target.resources;
        let scalars = used.scalars.len().max(add.map_or(0, |a| a.scalars.len()));
        usage.pod_count.saturating_add(add_pods) <= target.pods
            && plus(used.milli_cpu, add.map(|a| a.milli_cpu)) <= have.milli_cpu
            && plus(used.memory, add.map(|a| a.memory)) <= have.memory
            && plus(used.ephemeral_storage, add.map(|a| a.ephemeral_storage))
                <= have.ephemeral_storage
            && (0..scalars).all(|id| {
                let need = plus(
                    used.scalars.get(id).copied().unwrap_or(0),
                    add.and_then(|a| a.scalars.get(id).copied()),
                );
                need <= 0 || need <= have.scalars.get(id).copied().unwrap_or(0)
            })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(name: &str, cpu: &str, memory: &str, pods: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            status: Some(NodeStatus {
                allocatable: Some(
                    [
                        ("cpu".to_string(), Quantity(cpu.into())),
                        ("memory".to_string(), Quantity(memory.into())),
                        ("pods".to_string(), Quantity(pods.into())),
                    ]
                    .into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod(cpu: &str, memory: &str, extra: Option<(&str, &str)>) -> Pod {
        let mut requests: std::collections::BTreeMap<String, Quantity> = [
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(memory.into())),
        ]
        .into();
        if let Some((name, q)) = extra {
            requests.insert(name.into(), Quantity(q.into()));
        }
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some(requests),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn totals_decide_and_every_resource_counts() {
        let big = node("big", "8", "16Gi", "80");
        let mut state = FilterState::new(std::slice::from_ref(&big), &[], &[]);
        for _ in 0..3 {
            state.add_pod(&pod("1500m", "1Gi", None), 0);
        }
        // 4.5 CPU, 3Gi, 3 pods so far.
        let fits = |state: &mut FilterState, cpu, mem, pods, extra: Option<&Pod>| {
            let small = node("small", cpu, mem, pods);
            let target = state
                .allocatable_from(small.status.as_ref().unwrap().allocatable.as_ref().unwrap());
            let extra = extra.map(|p| state.requests_of(p).unwrap());
            state.usage_fits(0, extra.as_ref(), &target)
        };
        assert!(fits(&mut state, "5", "4Gi", "3", None));
        assert!(!fits(&mut state, "4", "4Gi", "3", None), "cpu short");
        assert!(!fits(&mut state, "5", "2Gi", "3", None), "memory short");
        assert!(!fits(&mut state, "5", "4Gi", "2", None), "pod slots short");
        let one_more = pod("500m", "1Gi", None);
        assert!(fits(&mut state, "5", "4Gi", "4", Some(&one_more)));
        assert!(
            !fits(&mut state, "5", "4Gi", "3", Some(&one_more)),
            "its slot counts"
        );
        let gpu = pod("100m", "1Mi", Some(("example.com/gpu", "1")));
        assert!(
            !fits(&mut state, "8", "8Gi", "8", Some(&gpu)),
            "no node has the resource"
        );
        assert!(state.requests_of(&pod("1", "bad", None)).is_none());
        let unknown =
            state.allocatable_from(big.status.as_ref().unwrap().allocatable.as_ref().unwrap());
        assert!(!state.usage_fits(7, None, &unknown), "unknown node");
    }
}
