use dra_sim::ClusterObjects;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const ZONES: usize = 10;

fn obj<T: DeserializeOwned>(value: Value) -> T {
    match serde_json::from_value(value) {
        Ok(v) => v,
        Err(e) => panic!("benchmark object does not parse: {e}"),
    }
}

/// The objects for `node_count` nodes and `pod_count` pending pods.
#[must_use]
pub fn cluster(node_count: usize, pod_count: usize) -> ClusterObjects {
    let nodes = (0..node_count)
        .map(|i| {
            let name = format!("node-{i:05}");
            obj(json!({
                "metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name,
                    "topology.kubernetes.io/zone": format!("zone-{}", i % ZONES),
                    "node.kubernetes.io/instance-type": if i % 5 == 0 { "gpu" } else { "cpu" }}},
                "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi", "pods": "110"}}
            }))
        })
        .collect();
    let resource_slices = (0..node_count)
        .filter(|i| i % 5 == 0)
        .map(|i| {
            let name = format!("node-{i:05}");
            obj(json!({
                "metadata": {"name": format!("{name}-gpus")},
                "spec": {"driver": "gpu.example.com", "nodeName": name,
                         "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                         "devices": (0..8).map(|d| json!({"name": format!("gpu-{d}")})).collect::<Vec<_>>()}
            }))
        })
        .collect();
    let pods = (0..pod_count)
        .map(|i| {
            let name = format!("pod-{i:05}");
            let container = |cpu: &str| json!([{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "2Gi"}}}]);
            let (labels, spec) = match i % 4 {
                0 => (json!({"app": "plain"}), json!({"containers": container("2")})),
                1 => {
                    let group = format!("spread-{}", i / 200);
                    (json!({"app": group}), json!({"containers": container("3"),
                        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": group}}}]}))
                }
                2 => {
                    let group = format!("anti-{}", i / 80);
                    (json!({"app": group}), json!({"containers": container("4"),
                        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"app": group}}, "topologyKey": "kubernetes.io/hostname"}]}}}))
                }
                _ => (json!({"app": "dra"}), json!({"containers": container("1"),
                    "nodeSelector": {"node.kubernetes.io/instance-type": "gpu"},
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]})),
            };
            obj(json!({"metadata": {"name": name, "namespace": "default", "labels": labels,
                "creationTimestamp": format!("2026-11-01T{:02}:{:02}:{:02}Z", i / 3600 % 24, i / 60 % 60, i % 60)},
                "spec": spec}))
        })
        .collect();
    ClusterObjects {
        nodes,
        pods,
        device_classes: vec![obj(json!({
            "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}
        }))],
        resource_slices,
        resource_claim_templates: vec![obj(json!({
            "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}]}}}
        }))],
        ..ClusterObjects::default()
    }
}
