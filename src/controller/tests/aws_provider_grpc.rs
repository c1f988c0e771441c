//! End to end with the AWS provider against moto (the AWS API emulator): a pending gang of two
//! pods, each claiming all eight GPUs of a p5.48xlarge through DRA, makes the controller ask the
//! AWS provider over gRPC for an atomic increase; the provider starts the gang with CreateFleet
//! and attaches it to the Auto Scaling group. The test plays the kubelet: it registers a Node
//! per instance, built by `dra_api::new_node` from the group's spec as the provider serves it,
//! and the controller sees exactly the machines it asked for register.
//!
//! moto must be installed (`pip install 'moto[server]'`); without it this test fails.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Controller, cluster, node_group, pod_group_resource, serve_and_connect};
use dra_api::NodeGroup;
use dra_provider::CloudProvider;
use dra_provider_aws::moto::{self, MotoServer};
use dra_provider_aws::{AwsProvider, Config};
use k8s_openapi::api::core::v1::ResourceClaim as ContainerClaim;
use k8s_openapi::api::core::v1::{
    Container, Node, Pod, PodResourceClaim, PodSpec, ResourceRequirements,
};
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClaim, DeviceClass, DeviceClassSpec, DeviceRequest, DeviceSelector,
    ExactDeviceRequest, ResourceClaim, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};

async fn gpu_class(client: &Client) {
    let class = DeviceClass {
        metadata: ObjectMeta {
            name: Some("gpu.nvidia.com".into()),
            ..Default::default()
        },
        spec: Some(DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector {
                    expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'".into(),
                }),
            }]),
            ..Default::default()
        }),
    };
    Api::<DeviceClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("DeviceClass created");
}

/// A gang member claiming all eight GPUs of one machine, marked unschedulable.
async fn gpu_member(client: &Client, gang: &str, name: &str) {
    let claim = ResourceClaim {
        metadata: ObjectMeta {
            name: Some(format!("{name}-gpus")),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![DeviceRequest {
                    name: "gpus".into(),
                    exactly: Some(ExactDeviceRequest {
                        device_class_name: "gpu.nvidia.com".into(),
                        count: Some(8),
                        allocation_mode: Some("ExactCount".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }),
        status: None,
    };
    Api::<ResourceClaim>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &claim)
        .await
        .expect("ResourceClaim created");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some(
                [(
                    "scheduling.x-k8s.io/pod-group".to_string(),
                    gang.to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "trainer".into(),
                image: Some("trainer".into()),
                resources: Some(ResourceRequirements {
                    claims: Some(vec![ContainerClaim {
                        name: "gpus".into(),
                        ..Default::default()
                    }]),
                    requests: Some(
                        [(
                            "cpu".to_string(),
                            k8s_openapi::apimachinery::pkg::api::resource::Quantity("96".into()),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            resource_claims: Some(vec![PodResourceClaim {
                name: "gpus".into(),
                resource_claim_name: Some(format!("{name}-gpus")),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    };
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    let status = serde_json::json!({"status": {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/0 nodes are available: 2 Insufficient gpu.nvidia.com"
    }]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pod marked unschedulable");
}

async fn gang(client: &Client, name: &str, members: usize) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &pod_group_resource());
    let group: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": members}
    }))
    .expect("PodGroup JSON");
    api.create(&PostParams::default(), &group)
        .await
        .expect("PodGroup created");
    for i in 0..members {
        gpu_member(client, name, &format!("{name}-{i}")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_gang_grows_the_auto_scaling_group_and_the_planned_nodes_register() {
    let moto = MotoServer::start().unwrap_or_else(|err| panic!("{err}"));
    let aws = moto.aws().await;
    let subnet = moto::subnet(&aws).await;
    moto::group(
        &aws,
        &subnet,
        "p5",
        "p5.48xlarge",
        4,
        &[
            ("k8s.io/cluster-autoscaler/enabled", "true"),
            ("k8s.io/cluster-autoscaler/prod", "owned"),
        ],
    )
    .await;
    let provider = AwsProvider::new(
        aws.clone(),
        Config::parse(
            "clusterName: prod\nrefreshSeconds: 0\nnodeGroups: [{asg: p5, pricePerHour: 98.32}]",
            "test",
        )
        .expect("config"),
    )
    .with_attach_poll(Duration::from_millis(50));

    // The NodeGroup is the one the provider describes (what `dra-provider-aws
    // print-nodegroups` writes).
    let spec = provider.specs().await.expect("specs")["p5"].clone();
    assert_eq!(spec.provider, "aws");
    let server = cluster().await;
    let client = server.client();
    Api::<NodeGroup>::all(client.clone())
        .create(&PostParams::default(), &NodeGroup::new("p5", spec.clone()))
        .await
        .expect("NodeGroup created");
    gpu_class(&client).await;
    gang(&client, "train", 2).await;

    let (executor, served) = serve_and_connect("aws", Arc::new(provider.clone())).await;
    let (stop, grpc) = (served.stop, served.task);
    let controller = Controller::start(&client, executor).await;

    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("p5"), Some(&2), "{summary:?}");
    let status = node_group(&client, "p5").await.status.expect("status");
    assert_eq!(status.upcoming_size, 2);
    let mut planned: Vec<String> = status
        .upcoming_nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    planned.sort();

    // The provider attaches the gang once it runs: the ASG now holds it.
    for _ in 0..200 {
        if provider.pending_attach().await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asg = aws
        .describe_groups(&[], &["p5".to_owned()])
        .await
        .expect("describe");
    assert_eq!((asg[0].desired, asg[0].instances.len()), (2, 2));
    let mut instances: Vec<String> = provider
        .nodes("p5")
        .await
        .expect("instances")
        .into_iter()
        .map(|i| i.id)
        .collect();
    instances.sort();
    assert_eq!(
        instances, planned,
        "the group's instances are the planned machines"
    );

    // Play the kubelet: each instance registers as the Node the group's spec describes.
    let nodes: Api<Node> = Api::all(client.clone());
    for (i, id) in instances.iter().enumerate() {
        let name = format!("ip-10-0-0-{}.ec2.internal", i + 10);
        let mut node = dra_api::new_node("p5", &spec, &name).node;
        if let Some(s) = node.spec.as_mut() {
            s.provider_id = Some(id.clone());
        }
        nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("Node registered");
    }
    controller
        .wait_for("the registered Nodes", |inputs| {
            inputs
                .nodes
                .iter()
                .filter(|n| {
                    n.spec
                        .as_ref()
                        .and_then(|s| s.provider_id.as_ref())
                        .is_some()
                })
                .count()
                == 2
        })
        .await;
    let after = controller.run_once().await;
    assert!(after.scaled_up.is_empty(), "{after:?}");
    let status = node_group(&client, "p5").await.status.expect("status");
    assert_eq!(
        (
            status.current_size,
            status.upcoming_size,
            status.target_size
        ),
        (2, 0, 2)
    );

    let _ = stop.send(());
    grpc.await
        .expect("server task")
        .expect("server stops cleanly");
}
