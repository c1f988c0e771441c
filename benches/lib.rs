//! Workload generators shared by the benchmarks and the tests that check the
//! benchmarks' workloads are valid. Everything is built in memory as the same
//! Kubernetes objects a snapshot file would hold; building is never timed.

use std::collections::BTreeMap;

use dra_sim::ClusterObjects;
use k8s_openapi::api::core::v1::{
    Container, Node, NodeStatus, Pod, PodResourceClaim, PodSpec, ResourceRequirements,
};
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, Counter, CounterSet, Device, DeviceAttribute, DeviceCapacity, DeviceClaim,
    DeviceClass, DeviceClassSpec, DeviceCounterConsumption, DeviceRequest, DeviceSelector,
    ExactDeviceRequest, ResourceClaimSpec, ResourceClaimTemplate, ResourceClaimTemplateSpec,
    ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The driver of the generated GPUs.
pub const DRIVER: &str = "gpu.example.com";

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        ..Default::default()
    }
}

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

/// A node with generous CPU and memory.
#[must_use]
pub fn node(name: &str) -> Node {
    let resources: BTreeMap<String, Quantity> = [
        ("cpu".into(), q("128")),
        ("memory".into(), q("1Ti")),
        ("pods".into(), q("110")),
    ]
    .into();
    let mut metadata = meta(name, None);
    metadata.labels = Some([("kubernetes.io/hostname".to_string(), name.to_string())].into());
    Node {
        metadata,
        status: Some(NodeStatus {
            allocatable: Some(resources.clone()),
            capacity: Some(resources),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The GPU DeviceClass.
#[must_use]
pub fn gpu_class() -> DeviceClass {
    DeviceClass {
        metadata: meta(DRIVER, None),
        spec: DeviceClassSpec {
            selectors: Some(vec![cel(&format!("device.driver == \"{DRIVER}\""))]),
            ..Default::default()
        },
    }
}

fn cel(expression: &str) -> DeviceSelector {
    DeviceSelector {
        cel: Some(CELDeviceSelector {
            expression: expression.to_string(),
        }),
    }
}

/// The ResourceSlices of a node with `gpus` GPUs, each partitioned into
/// `partitions` MIG-like devices drawing on one counter set per GPU (1.35+
/// layout: counters in their own slice). With `partitions == 1` the devices
/// are whole GPUs with no counters.
#[must_use]
pub fn gpu_slices(node_name: &str, gpus: usize, partitions: usize) -> Vec<ResourceSlice> {
    let pool = ResourcePool {
        name: node_name.to_string(),
        generation: 1,
        resource_slice_count: if partitions > 1 { 2 } else { 1 },
    };
    let mut devices = Vec::new();
    let mut counter_sets = Vec::new();
    for g in 0..gpus {
        if partitions > 1 {
            counter_sets.push(CounterSet {
                name: format!("gpu-{g}"),
                counters: [
                    ("memory".to_string(), Counter { value: q("70Gi") }),
                    (
                        "slices".to_string(),
                        Counter {
                            value: q(&partitions.to_string()),
                        },
                    ),
                ]
                .into(),
            });
        }
        for p in 0..partitions {
            let memory = if partitions > 1 { "10Gi" } else { "80Gi" };
            devices.push(Device {
                name: if partitions > 1 {
                    format!("gpu-{g}-part-{p}")
                } else {
                    format!("gpu-{g}")
                },
                attributes: Some(
                    [
                        (
                            "model".to_string(),
                            DeviceAttribute {
                                string: Some("H100".into()),
                                ..Default::default()
                            },
                        ),
                        (
                            "index".to_string(),
                            DeviceAttribute {
                                int: Some(g as i64),
                                ..Default::default()
                            },
                        ),
                    ]
                    .into(),
                ),
                capacity: Some(
                    [(
                        "memory".to_string(),
                        DeviceCapacity {
                            value: q(memory),
                            request_policy: None,
                        },
                    )]
                    .into(),
                ),
                consumes_counters: (partitions > 1).then(|| {
                    vec![DeviceCounterConsumption {
                        counter_set: format!("gpu-{g}"),
                        counters: [
                            ("memory".to_string(), Counter { value: q("10Gi") }),
                            ("slices".to_string(), Counter { value: q("1") }),
                        ]
                        .into(),
                    }]
                }),
                ..Default::default()
            });
        }
    }
    let spec = |devices: Option<Vec<Device>>, shared_counters: Option<Vec<CounterSet>>| {
        ResourceSliceSpec {
            driver: DRIVER.to_string(),
            node_name: Some(node_name.to_string()),
            pool: pool.clone(),
            devices,
            shared_counters,
            ..Default::default()
        }
    };
    let mut slices = vec![ResourceSlice {
        metadata: meta(&format!("{node_name}-gpus"), None),
        spec: spec(Some(devices), None),
    }];
    if partitions > 1 {
        slices.push(ResourceSlice {
            metadata: meta(&format!("{node_name}-counters"), None),
            spec: spec(None, Some(counter_sets)),
        });
    }
    slices
}

/// A claim template asking for one GPU device with at least `min_memory`.
#[must_use]
pub fn gpu_template(namespace: &str, name: &str, min_memory: &str) -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        metadata: meta(name, Some(namespace)),
        spec: Some(ResourceClaimTemplateSpec {
            metadata: None,
            spec: Some(ResourceClaimSpec {
                devices: Some(DeviceClaim {
                    requests: Some(vec![DeviceRequest {
                        name: "gpu".into(),
                        exactly: Some(ExactDeviceRequest {
                            device_class_name: DRIVER.into(),
                            allocation_mode: Some("ExactCount".into()),
                            count: Some(1),
                            selectors: Some(vec![cel(&format!(
                                "device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"{min_memory}\")) >= 0"
                            ))]),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            }),
        }),
    }
}

/// A pending pod using a claim from `template`.
#[must_use]
pub fn gpu_pod(namespace: &str, name: &str, template: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            uid: Some(format!("uid-{name}")),
            ..meta(name, Some(namespace))
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(
                        [
                            ("cpu".to_string(), q("1")),
                            ("memory".to_string(), q("4Gi")),
                        ]
                        .into(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            resource_claims: Some(vec![PodResourceClaim {
                name: "gpu".into(),
                resource_claim_template_name: Some(template.into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// A GPU cluster: `nodes` nodes with `gpus` whole 80Gi GPUs each and `pods`
/// pending pods each asking for one GPU with ≥ 40Gi through a CEL selector.
#[must_use]
pub fn gpu_cluster(nodes: usize, gpus: usize, pods: usize) -> ClusterObjects {
    let mut objects = ClusterObjects::default();
    objects.device_classes.push(gpu_class());
    objects
        .resource_claim_templates
        .push(gpu_template("ml", "gpu", "40Gi"));
    for n in 0..nodes {
        let name = format!("node-{n:05}");
        objects.resource_slices.extend(gpu_slices(&name, gpus, 1));
        objects.nodes.push(node(&name));
    }
    for p in 0..pods {
        objects
            .pods
            .push(gpu_pod("ml", &format!("trainer-{p:05}"), "gpu"));
    }
    objects
}
