//! The co-located gang workload of the planner's domain-search benchmark: one
//! gang whose members all require pod affinity to each other on a placement
//! group key, and node groups that each make nodes of one placement group,
//! the cheapest of which cannot hold the whole gang.

use std::collections::BTreeMap;

use dra_api::{CapacityType, NodeGroupSpec, NodeTemplate};
use dra_sim::ClusterObjects;
use dra_sim::objects::{ExtraObject, Origin};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The topology key the gang shares.
pub const KEY: &str = "example.com/placement-group";

/// Members a 32-CPU node of the workload takes (4 CPU each).
pub const PER_NODE: usize = 8;

/// A gang of `members` pods (coscheduling `ml/colocated`, 4 CPU each, every
/// one with required affinity to `app=colocated` on [`KEY`]) and `domains`
/// node groups `pg-NN`, one placement group each, cheapest first. All but
/// the dearest have one node too few for the gang, so a plan must try every
/// domain and land in the last.
#[must_use]
pub fn workload(members: usize, domains: usize) -> ClusterObjects {
    let mut objects = ClusterObjects::default();
    objects.extra.push(ExtraObject {
        api_version: "scheduling.x-k8s.io/v1alpha1".into(),
        kind: "PodGroup".into(),
        origin: Origin::default(),
        value: serde_json::json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "colocated", "namespace": "ml"},
            "spec": {"minMember": members},
        }),
    });
    for p in 0..members {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": format!("colocated-{p:03}"),
                "namespace": "ml",
                "labels": {"app": "colocated", dra_plan::gang::COSCHEDULING_LABEL: "colocated"},
            },
            "spec": {
                "containers": [{"name": "main", "image": "trainer",
                                "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}],
                "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "colocated"}}, "topologyKey": KEY}
                ]}},
            },
        }))
        .unwrap_or_default();
        objects.pods.push(pod);
    }
    let needed = members.div_ceil(PER_NODE);
    for i in 0..domains {
        let name = format!("pg-{i:02}");
        let spec = NodeGroupSpec {
            provider: "fake".into(),
            provider_id: name.clone(),
            min_size: 0,
            max_size: i32::try_from(if i + 1 == domains { needed } else { needed - 1 })
                .unwrap_or(i32::MAX),
            capacity_type: CapacityType::OnDemand,
            reservation: None,
            price_per_hour: 1.0 + i as f64 / 64.0,
            priority: 0,
            topology_domain: None,
            scale_down: None,
            template: NodeTemplate {
                labels: BTreeMap::from([(KEY.to_string(), name.clone())]),
                taints: Vec::new(),
                capacity: [
                    ("cpu".to_string(), Quantity("32".into())),
                    ("memory".to_string(), Quantity("128Gi".into())),
                    ("pods".to_string(), Quantity("110".into())),
                ]
                .into(),
                allocatable: None,
                resource_slices: Vec::new(),
            },
        };
        objects.extra.push(crate::node_group_object(&name, &spec));
    }
    objects
}
