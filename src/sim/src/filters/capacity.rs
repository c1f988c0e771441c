//! Whether what a node holds would also fit within another node's
//! allocatable. The planner fills a node of the largest template of a set of
//! node groups that differ only in size, then buys the cheapest of them that
//! holds the same pods: NodeResourcesFit passes on that smaller node for every
//! pod in turn exactly when the totals fit, because requests only add up.

use k8s_openapi::api::core::v1::{Node, Pod};

use super::FilterState;
use super::requests::{ResourceVec, is_scalar, millis, node_allocatable, pod_requests, units};

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
    /// `node`'s allocatable in the form [`FilterState::usage_fits`] compares.
    pub fn allocatable_of(&mut self, node: &Node) -> Allocatable {
        let mut resources = ResourceVec::default();
        let pods = resources.add_list(&node_allocatable(node), &mut self.resources);
        Allocatable { resources, pods }
    }

    /// Whether everything the pods on `node_index` request — and `extra`, a
    /// pod not placed yet, when given — fits within `target`, pod count
    /// included. An unknown node or an unparsable request answers `false`.
    #[must_use]
    pub fn usage_fits(&self, node_index: usize, extra: Option<&Pod>, target: &Allocatable) -> bool {
        let Some(usage) = self.usage.get(node_index) else {
            return false;
        };
        let mut requested = usage.requested.clone();
        let mut pod_count = usage.pod_count;
        if let Some(pod) = extra {
            let Ok(list) = pod_requests(pod, true) else {
                return false;
            };
            pod_count += 1;
            for (name, nanos) in &list {
                match name.as_str() {
                    "cpu" => {
                        requested.milli_cpu = requested.milli_cpu.saturating_add(millis(*nanos))
                    }
                    "memory" => requested.memory = requested.memory.saturating_add(units(*nanos)),
                    "ephemeral-storage" => {
                        requested.ephemeral_storage =
                            requested.ephemeral_storage.saturating_add(units(*nanos));
                    }
                    other if is_scalar(other) => {
                        let quantity = units(*nanos);
                        match self.resources.get(other) {
                            Some(id) => {
                                let index = id as usize;
                                if requested.scalars.len() <= index {
                                    requested.scalars.resize(index + 1, 0);
                                }
                                requested.scalars[index] =
                                    requested.scalars[index].saturating_add(quantity);
                            }
                            // No node of the simulation has it, `target` included.
                            None if quantity > 0 => return false,
                            None => {}
                        }
                    }
                    _ => {}
                }
            }
        }
        let have = &target.resources;
        pod_count <= target.pods
            && requested.milli_cpu <= have.milli_cpu
            && requested.memory <= have.memory
            && requested.ephemeral_storage <= have.ephemeral_storage
            && requested
                .scalars
                .iter()
                .enumerate()
                .all(|(id, &used)| used <= 0 || used <= have.scalars.get(id).copied().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::api::core::v1::{Container, NodeStatus, PodSpec, ResourceRequirements};
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
            let target = state.allocatable_of(&node("small", cpu, mem, pods));
            state.usage_fits(0, extra, &target)
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
        assert!(!fits(
            &mut state,
            "8",
            "8Gi",
            "8",
            Some(&pod("1", "bad", None))
        ));
        let unknown = state.allocatable_of(&big);
        assert!(!state.usage_fits(7, None, &unknown), "unknown node");
    }
}
