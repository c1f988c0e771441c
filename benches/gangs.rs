use std::collections::BTreeMap;

use dra_api::{CapacityType, NodeGroupSpec, NodeTemplate};
use dra_sim::ClusterObjects;
use dra_sim::objects::{ExtraObject, Origin};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{gpu_class, gpu_pod, gpu_slices, gpu_template, node};

/// Builds the workload: `gangs` gangs of `size` pods, `nodes` existing
/// nodes, `groups` node groups.
#[must_use]
pub fn workload(gangs: usize, size: usize, nodes: usize, groups: usize) -> ClusterObjects {
    let mut objects = ClusterObjects::default();
    objects.device_classes.push(gpu_class());
    objects
        .resource_claim_templates
        .push(gpu_template("ml", "partition", "5Gi"));
    for n in 0..nodes {
        let name = format!("node-{n:05}");
        if n % 10 == 0 {
            objects.resource_slices.extend(gpu_slices(&name, 1, 7));
        }
        objects.nodes.push(node(&name));
    }
    for g in 0..gangs {
        let group = format!("gang-{g:04}");
        objects.extra.push(ExtraObject {
            api_version: "scheduling.x-k8s.io/v1alpha1".into(),
            kind: "PodGroup".into(),
            origin: Origin::default(),
            value: serde_json::json!({
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": group, "namespace": "ml"},
                "spec": {"minMember": size},
            }),
        });
        for p in 0..size {
            let mut pod = gpu_pod("ml", &format!("{group}-{p}"), "partition");
            pod.metadata.labels = Some(
                [(
                    dra_plan::gang::COSCHEDULING_LABEL.to_string(),
                    group.clone(),
                )]
                .into(),
            );
            objects.pods.push(pod);
        }
    }
    for i in 0..groups {
        let gpus = 1 + i % 8;
        let name = format!("gpu-{gpus}x-{i:02}");
        let capacity: BTreeMap<String, Quantity> = [
            ("cpu".to_string(), Quantity("128".into())),
            ("memory".to_string(), Quantity("1Ti".into())),
            ("pods".to_string(), Quantity("110".into())),
        ]
        .into();
        let spec = NodeGroupSpec {
            provider: "fake".into(),
            provider_id: name.clone(),
            min_size: 0,
            max_size: 10_000,
            capacity_type: CapacityType::OnDemand,
            reservation: None,
            price_per_hour: 3.0 * gpus as f64 * (1.0 + (i % 5) as f64 * 0.1),
            priority: 0,
            topology_domain: None,
            template: NodeTemplate {
                labels: BTreeMap::new(),
                taints: Vec::new(),
                capacity,
                allocatable: None,
                resource_slices: gpu_slices("template", gpus, 7)
                    .into_iter()
                    .map(|s| s.spec)
                    .collect(),
            },
            scale_down: None,
        };
        objects.extra.push(super::node_group_object(&name, &spec));
    }
    objects
}
