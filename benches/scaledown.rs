//! The scale-down workload: a busy cluster with a tail of underused nodes.
//!
//! `nodes` nodes in two NodeGroups: every fifth a GPU node (8 GPUs published through DRA,
//! 64 CPUs), the rest CPU nodes (16 CPUs). Six pods per node on average, bound, each of a
//! ReplicaSet; on GPU nodes each pod holds one GPU through an allocated claim. Nine nodes in
//! ten are busy (six or seven pods: 75–88% of GPUs or CPUs); the tenth is underused — one pod
//! (12.5% of GPUs or CPUs) or none — and its pods can move to the busy nodes' free room, so the
//! analysis has hundreds of candidates to drain, as a cluster after a burst has. At 5,000
//! nodes: 1,000 GPU nodes, 30,000 pods, 500 candidates (250 of them empty).

use dra_sim::ClusterObjects;
use dra_sim::objects::{ExtraObject, Origin};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use serde_json::json;

use super::gpu_class;

fn typed<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("bench object: {e}"))
}

fn group(name: &str, cpu: &str, gpus: usize) -> ExtraObject {
    let devices: Vec<_> = (0..gpus)
        .map(|i| json!({"name": format!("gpu-{i}")}))
        .collect();
    let slices = if gpus == 0 {
        json!([])
    } else {
        json!([{"driver": "gpu.example.com", "pool": {"name": "", "generation": 1, "resourceSliceCount": 1},
                "devices": devices}])
    };
    ExtraObject {
        api_version: "dra-autoscaler.io/v1alpha1".into(),
        kind: "NodeGroup".into(),
        origin: Origin::default(),
        value: json!({
            "apiVersion": "dra-autoscaler.io/v1alpha1", "kind": "NodeGroup",
            "metadata": {"name": name},
            "spec": {"provider": "fake", "providerID": name, "minSize": 0, "maxSize": 100_000,
                "capacityType": "on-demand", "pricePerHour": if gpus > 0 { 8.0 } else { 0.5 },
                "template": {"capacity": {"cpu": cpu, "memory": "256Gi", "pods": "110"},
                             "resourceSlices": slices}}
        }),
    }
}

fn node(name: &str, group: &str, cpu: &str) -> Node {
    typed(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
            "dra-autoscaler.io/node-group": group}},
        "status": {"capacity": {"cpu": cpu, "memory": "256Gi", "pods": "110"},
                   "allocatable": {"cpu": cpu, "memory": "256Gi", "pods": "110"}}
    }))
}

fn slice(node: &str) -> ResourceSlice {
    let devices: Vec<_> = (0..8)
        .map(|i| json!({"name": format!("gpu-{i}")}))
        .collect();
    typed(json!({
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {"driver": "gpu.example.com", "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices}
    }))
}

fn pod(name: &str, node: &str, cpu: &str, gpu: bool) -> Pod {
    let uid = format!("uid-{name}");
    let mut value = json!({
        "metadata": {"name": name, "namespace": "apps", "uid": uid, "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                 "uid": "rs", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "main",
            "resources": {"requests": {"cpu": cpu, "memory": "4Gi"}}}]},
        "status": {"phase": "Running"}
    });
    if gpu {
        value["spec"]["resourceClaims"] =
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]);
        value["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
        value["status"]["resourceClaimStatuses"] =
            json!([{"name": "gpu", "resourceClaimName": format!("{name}-gpu")}]);
    }
    typed(value)
}

fn claim(pod: &str, node: &str, device: usize) -> ResourceClaim {
    typed(json!({
        "metadata": {"name": format!("{pod}-gpu"), "namespace": "apps",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": format!("uid-{pod}"), "controller": true}]},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": node,
                                         "device": format!("gpu-{device}")}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": format!("uid-{pod}")}]
        }
    }))
}

/// Builds the workload over `nodes` nodes (see the module docs).
#[must_use]
pub fn workload(nodes: usize) -> ClusterObjects {
    let mut objects = ClusterObjects::default();
    objects.device_classes.push(gpu_class());
    objects.resource_claim_templates.push(typed(json!({
        "metadata": {"name": "one-gpu", "namespace": "apps"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
    })));
    objects.extra.push(group("cpu", "16", 0));
    objects.extra.push(group("gpu", "64", 8));
    // One node in ten is underused (every twentieth GPU node and CPU node alike), holding 0
    // or 1 pod alternately; busy nodes hold 6 pods, and the first ones 7, so that the
    // cluster averages 6 pods per node.
    let underused = |n: usize| n % 20 == 19 || n % 20 == 10;
    let underused_count = (0..nodes).filter(|&n| underused(n)).count();
    let mut extra_pods = underused_count * 6 - underused_count / 2;
    for n in 0..nodes {
        let gpu = n % 5 == 0;
        let name = format!("node-{n:05}");
        let pods = if underused(n) {
            (n / 20) % 2
        } else if extra_pods > 0 {
            extra_pods -= 1;
            7
        } else {
            6
        };
        if gpu {
            objects.nodes.push(node(&name, "gpu", "64"));
            objects.resource_slices.push(slice(&name));
        } else {
            objects.nodes.push(node(&name, "cpu", "16"));
        }
        for p in 0..pods {
            let pod_name = format!("{name}-{p}");
            objects.pods.push(pod(&pod_name, &name, "2", gpu));
            if gpu {
                objects.resource_claims.push(claim(&pod_name, &name, p));
            }
        }
    }
    objects
}
