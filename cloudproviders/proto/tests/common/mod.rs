//! A scripted in-memory provider and helpers to serve it on a loopback port.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use dra_provider::{
    AtomicIncrease, AutoscalingOptions, CapacityType, CloudProvider, ErrorClass, Instance,
    InstanceDetails, InstanceError, InstanceState, NodeGroupDetails, NodeGroupRef, NodeRef,
    ProviderError, ReservationStatus, ServeOptions, TemplateNode,
};
use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::api::resource::v1::{Device, ResourcePool, ResourceSlice, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// Records calls so tests can see what reached the provider.
#[derive(Default)]
pub struct Scripted {
    pub calls: Mutex<Vec<String>>,
    pub target: Mutex<BTreeMap<String, i32>>,
    /// Number of times `nodes` fails with UNAVAILABLE before succeeding.
    pub flaky_nodes: Mutex<u32>,
}

pub fn template_node() -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("gpu-template".into()),
            labels: Some(BTreeMap::from([(
                "dra-autoscaler.io/node-group".into(),
                "gpu".into(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some("fake://gpu-template".into()),
            taints: Some(vec![Taint {
                key: "gpu".into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            }]),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(BTreeMap::from([
                ("cpu".into(), Quantity("8".into())),
                ("pods".into(), Quantity("110".into())),
            ])),
            ..NodeStatus::default()
        }),
    }
}

pub fn template_slice() -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some("gpu-template-gpu.example.com".into()),
            ..ObjectMeta::default()
        },
        spec: ResourceSliceSpec {
            driver: "gpu.example.com".into(),
            node_name: Some("gpu-template".into()),
            pool: ResourcePool {
                name: "gpu-template".into(),
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(vec![Device {
                name: "gpu-0".into(),
                ..Device::default()
            }]),
            ..ResourceSliceSpec::default()
        },
    }
}

pub fn group() -> NodeGroupRef {
    NodeGroupRef {
        id: "gpu".into(),
        min_size: 0,
        max_size: 4,
        debug: "gpu group".into(),
    }
}

pub const END: Duration = Duration::from_secs(1_900_000_000);

fn unknown(id: &str) -> ProviderError {
    ProviderError::NotFound {
        what: format!("node group {id:?}"),
    }
}

impl Scripted {
    fn record(&self, call: impl Into<String>) {
        self.calls.lock().unwrap().push(call.into());
    }

    fn check(id: &str) -> Result<(), ProviderError> {
        if id == "gpu" {
            Ok(())
        } else {
            Err(unknown(id))
        }
    }
}

#[tonic::async_trait]
impl CloudProvider for Scripted {
    async fn node_groups(&self) -> Result<Vec<NodeGroupRef>, ProviderError> {
        self.record("node_groups");
        Ok(vec![group()])
    }

    async fn node_group_for_node(
        &self,
        node: &NodeRef,
    ) -> Result<Option<NodeGroupRef>, ProviderError> {
        self.record(format!("node_group_for_node {}", node.name));
        Ok(node.provider_id.starts_with("fake://gpu-").then(group))
    }

    async fn node_price(
        &self,
        node: &NodeRef,
        start: SystemTime,
        end: SystemTime,
    ) -> Result<f64, ProviderError> {
        let hours = end.duration_since(start).unwrap_or_default().as_secs_f64() / 3600.0;
        self.record(format!("node_price {}", node.name));
        Ok(2.5 * hours)
    }

    async fn pod_price(
        &self,
        pod_bytes: &[u8],
        _: SystemTime,
        _: SystemTime,
    ) -> Result<f64, ProviderError> {
        Ok(pod_bytes.len() as f64)
    }

    async fn gpu_label(&self) -> Result<String, ProviderError> {
        Ok("nvidia.com/gpu.product".into())
    }

    async fn available_gpu_types(&self) -> Result<Vec<String>, ProviderError> {
        Ok(vec!["nvidia-h200".into(), "nvidia-b200".into()])
    }

    async fn cleanup(&self) -> Result<(), ProviderError> {
        self.record("cleanup");
        Ok(())
    }

    async fn refresh(&self) -> Result<(), ProviderError> {
        self.record("refresh");
        Ok(())
    }

    async fn target_size(&self, id: &str) -> Result<i32, ProviderError> {
        Self::check(id)?;
        Ok(*self.target.lock().unwrap().get(id).unwrap_or(&0))
    }

    async fn increase_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        Self::check(id)?;
        self.record(format!("increase_size {delta}"));
        let mut target = self.target.lock().unwrap();
        let size = target.entry(id.to_owned()).or_default();
        if *size + delta > group().max_size {
            return Err(ProviderError::InvalidArgument {
                message: "above maxSize".into(),
            });
        }
        *size += delta;
        Ok(())
    }

    async fn delete_nodes(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ProviderError> {
        Self::check(id)?;
        self.record(format!(
            "delete_nodes {}",
            nodes
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        ));
        Ok(())
    }

    async fn decrease_target_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        Self::check(id)?;
        self.record(format!("decrease_target_size {delta}"));
        Ok(())
    }

    async fn nodes(&self, id: &str) -> Result<Vec<Instance>, ProviderError> {
        Self::check(id)?;
        self.record("nodes");
        {
            let mut flaky = self.flaky_nodes.lock().unwrap();
            if *flaky > 0 {
                *flaky -= 1;
                return Err(ProviderError::Unavailable {
                    message: "cloud API throttled".into(),
                });
            }
        }
        Ok(vec![
            Instance {
                id: "fake://gpu-a".into(),
                state: InstanceState::Running,
                error: None,
            },
            Instance {
                id: "fake://gpu-b".into(),
                state: InstanceState::Creating,
                error: Some(InstanceError {
                    class: ErrorClass::OutOfCapacity,
                    code: "InsufficientInstanceCapacity".into(),
                    message: "no H200 in us-east-1a".into(),
                }),
            },
        ])
    }

    async fn template_node(&self, id: &str) -> Result<TemplateNode, ProviderError> {
        Self::check(id)?;
        Ok(TemplateNode {
            node: template_node(),
            resource_slices: vec![template_slice()],
        })
    }

    async fn options(
        &self,
        id: &str,
        defaults: &AutoscalingOptions,
    ) -> Result<Option<AutoscalingOptions>, ProviderError> {
        Self::check(id)?;
        let mut options = defaults.clone();
        options.zero_or_max_node_scaling = true;
        options.max_node_provision = Some(Duration::from_secs(900));
        Ok(Some(options))
    }

    async fn node_group_details(
        &self,
        ids: &[String],
    ) -> Result<Vec<NodeGroupDetails>, ProviderError> {
        if let Some(id) = ids.iter().find(|id| *id != "gpu") {
            return Err(unknown(id));
        }
        Ok(vec![NodeGroupDetails {
            id: "gpu".into(),
            template: TemplateNode {
                node: template_node(),
                resource_slices: vec![template_slice()],
            },
            capacity_type: CapacityType::Reserved,
            reservation: Some(ReservationStatus {
                id: "cr-1".into(),
                total: 4,
                in_use: 1,
                end_time: Some(SystemTime::UNIX_EPOCH + END),
            }),
            price_per_hour: 12.5,
            topology_domain: Some(("topology.kubernetes.io/zone".into(), "zone-a".into())),
            priority: 7,
        }])
    }

    async fn atomic_increase_size(
        &self,
        request: &AtomicIncrease,
    ) -> Result<Vec<String>, ProviderError> {
        Self::check(&request.id)?;
        self.record(format!(
            "atomic {} {} {}",
            request.count, request.min_count, request.request_id
        ));
        match request.count {
            c if c <= 2 => Ok((0..c).map(|i| format!("fake://gpu-{i}")).collect()),
            3 => Err(ProviderError::Quota {
                code: "QUOTA_EXCEEDED".into(),
                message: "GPUS_ALL_REGIONS".into(),
            }),
            _ => Err(ProviderError::OutOfCapacity {
                code: "InsufficientInstanceCapacity".into(),
                message: "only 2 left".into(),
                rolled_back: 2,
            }),
        }
    }

    async fn instance_details(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError> {
        Self::check(id)?;
        Ok(vec![InstanceDetails {
            id: "fake://gpu-a".into(),
            node_name: "gpu-a".into(),
            state: InstanceState::Running,
            error: None,
            reservation_id: Some("cr-1".into()),
            requested_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
        }])
    }
}

/// A running server; dropping the sender stops it.
pub struct Running {
    pub addr: SocketAddr,
    pub stop: Option<oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<Result<(), dra_provider::ServeError>>,
}

impl Running {
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.unwrap().unwrap();
    }
}

pub async fn start<P: CloudProvider>(provider: Arc<P>, options: ServeOptions) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(dra_provider::serve(
        provider,
        listener,
        options,
        async move {
            let _ = stopped.await;
        },
    ));
    Running {
        addr,
        stop: Some(stop),
        task,
    }
}
