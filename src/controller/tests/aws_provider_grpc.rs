//! End to end with the AWS provider against moto (the AWS API emulator), on a real cluster's
//! terms: machines register as an EKS kubelet registers them, with `spec.providerID`
//! (`aws:///<zone>/<id>`) and no `dra-autoscaler.io/node-group` label, so the controller knows
//! them only because the provider lists their instances.
//!
//! - a pending GPU gang grows the Auto Scaling group with one CreateFleet, its machines
//!   register and are counted, and once idle they are scaled down through the ASG;
//! - machines that never register are terminated by instance id after the provision time, the
//!   ASG's desired capacity goes back, the NodeGroup status agrees with it, and the gang is
//!   planned again;
//! - a gang split over two groups whose second group answers insufficient capacity (a proxy in
//!   front of moto plays EC2's ICE answer) leaves no machine running;
//! - an ASG whose instance type EC2 does not know is left out (with a reason on its NodeGroup)
//!   while the two good ones scale up and down.
//!
//! moto must be installed (`pip install 'moto[server]'`); without it these tests fail.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    Controller, cluster, create_unschedulable_pod, node_group, pod_group_resource,
    quick_scale_down, register_kubelets, serve_and_connect,
};
use dra_api::{NodeGroup, NodeGroupSpec};
use dra_provider::CloudProvider;
use dra_provider_aws::moto::{self, IceProxy, MotoServer};
use dra_provider_aws::{Aws, AwsProvider, Config};
use k8s_openapi::api::core::v1::ResourceClaim as ContainerClaim;
use k8s_openapi::api::core::v1::{Container, Pod, PodResourceClaim, PodSpec, ResourceRequirements};
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClaim, DeviceClass, DeviceClassSpec, DeviceRequest, DeviceSelector,
    ExactDeviceRequest, ResourceClaim, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};

const TAGS: &[(&str, &str)] = &[
    ("k8s.io/cluster-autoscaler/enabled", "true"),
    ("k8s.io/cluster-autoscaler/prod", "owned"),
];

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

async fn gang(client: &Client, name: &str, members: usize) -> Vec<String> {
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
    let mut names = Vec::new();
    for i in 0..members {
        let pod = format!("{name}-{i}");
        gpu_member(client, name, &pod).await;
        names.push(pod);
    }
    names
}

/// moto, a proxy in front of it that can answer CreateFleet with ICE, clients of moto for
/// the test's own reads, and the provider (talking through the proxy).
struct Cloud {
    _moto: MotoServer,
    proxy: IceProxy,
    aws: Aws,
    provider: AwsProvider,
}

/// Subnets in us-east-1a and us-east-1b, and the ASGs `(name, instance type, max, zone
/// index)`; the provider discovers them by cluster-autoscaler's tags with `config` added.
async fn aws_cloud(groups: &[(&str, &str, i32, usize)], config: &str) -> Cloud {
    let moto = MotoServer::start().unwrap_or_else(|err| panic!("{err}"));
    let aws = moto.aws().await;
    let subnets = moto::subnets(&aws, &["us-east-1a", "us-east-1b"]).await;
    for (name, instance_type, max, zone) in groups {
        moto::group(&aws, &subnets[*zone], name, instance_type, *max, TAGS).await;
    }
    let proxy = IceProxy::start(&moto).await.expect("proxy");
    let provider = AwsProvider::new(
        proxy.aws().await,
        Config::parse(
            &format!("clusterName: prod\nrefreshSeconds: 0\n{config}"),
            "test",
        )
        .expect("config"),
    )
    .with_attach_poll(Duration::from_millis(50));
    Cloud {
        _moto: moto,
        proxy,
        aws,
        provider,
    }
}

impl Cloud {
    /// The NodeGroup objects `print-nodegroups` would write, created in the cluster.
    async fn node_groups(
        &self,
        client: &Client,
    ) -> std::collections::BTreeMap<String, NodeGroupSpec> {
        let specs = self.provider.specs().await.expect("specs");
        for (name, spec) in &specs {
            Api::<NodeGroup>::all(client.clone())
                .create(&PostParams::default(), &NodeGroup::new(name, spec.clone()))
                .await
                .expect("NodeGroup created");
        }
        specs
    }

    /// (desired capacity, instances) of an ASG.
    async fn asg(&self, name: &str) -> (i32, usize) {
        let asg = self
            .aws
            .describe_groups(&[], &[name.to_owned()])
            .await
            .expect("describe");
        (asg[0].desired, asg[0].instances.len())
    }

    /// Waits until every launched instance is attached (or given up).
    async fn attached(&self) {
        for _ in 0..200 {
            if self.provider.pending_attach().await == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("instances not attached in 10 s");
    }

    /// EC2 states of the instances behind provider ids.
    async fn states(&self, ids: &[String]) -> Vec<String> {
        let instances: Vec<String> = ids
            .iter()
            .filter_map(|id| id.rsplit('/').next().map(ToOwned::to_owned))
            .collect();
        self.aws
            .instance_states(&instances)
            .await
            .expect("states")
            .into_values()
            .collect()
    }

    /// Every instance of the account that is running.
    async fn running(&self) -> usize {
        let reply = self
            .aws
            .ec2
            .describe_instances()
            .send()
            .await
            .expect("describe");
        reply
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter(|i| i.state().and_then(|s| s.name()).map(|n| n.as_str()) == Some("running"))
            .count()
    }
}

fn upcoming(status: &dra_api::NodeGroupStatus) -> Vec<String> {
    let mut names: Vec<String> = status
        .upcoming_nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_gang_grows_the_auto_scaling_group_registers_by_provider_id_and_scales_down() {
    let cloud = aws_cloud(
        &[("p5", "p5.48xlarge", 4, 0)],
        "nodeGroups: [{asg: p5, pricePerHour: 98.32}]",
    )
    .await;
    let server = cluster().await;
    let client = server.client();
    let specs = cloud.node_groups(&client).await;
    let spec = specs["p5"].clone();
    assert_eq!(spec.provider, "aws");
    gpu_class(&client).await;
    let members = gang(&client, "train", 2).await;

    let (executor, served) = serve_and_connect("aws", Arc::new(cloud.provider.clone())).await;
    let evictions = common::no_retry_client(&server);
    let controller =
        Controller::start_with(&client, executor, Some((quick_scale_down(), evictions))).await;

    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("p5"), Some(&2), "{summary:?}");
    let planned = upcoming(&node_group(&client, "p5").await.status.expect("status"));

    // The provider attaches the gang once it runs: the ASG now holds it.
    cloud.attached().await;
    assert_eq!(cloud.asg("p5").await, (2, 2));
    let mut instances: Vec<String> = cloud
        .provider
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

    // An EKS kubelet registers each instance: providerID, cloud labels, not ours.
    let names = register_kubelets(&client, &spec, &instances, |i, _| {
        format!("ip-10-0-0-{}.ec2.internal", i + 10)
    })
    .await;
    controller
        .wait_for("the registered Nodes", |inputs| inputs.nodes.len() == 2)
        .await;
    let t0 = Timestamp::now();
    let after = controller.run_once_at(t0).await;
    assert!(after.scaled_up.is_empty(), "{after:?}");
    let status = node_group(&client, "p5").await.status.expect("status");
    assert_eq!(
        (
            status.current_size,
            status.upcoming_size,
            status.target_size
        ),
        (2, 0, 2),
        "the nodes are counted by providerID"
    );

    // The gang finishes: its nodes are empty, scale-down gives them back through the ASG.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for member in &members {
        pods.delete(member, &DeleteParams::default())
            .await
            .expect("pod deleted");
    }
    controller
        .wait_for("the pods gone", |inputs| inputs.pods.is_empty())
        .await;
    let first = controller
        .run_once_at(t0 + SignedDuration::from_secs(1))
        .await;
    let unneeded = node_group(&client, "p5")
        .await
        .status
        .expect("status")
        .unneeded_nodes;
    assert_eq!(unneeded.len(), 2, "{first:?}");
    let second = controller
        .run_once_at(t0 + SignedDuration::from_secs(3))
        .await;
    let mut started = second.scale_down.expect("scale-down ran").started;
    started.sort();
    assert_eq!(started, names);
    assert!(
        controller
            .autoscaler
            .scale_downs()
            .expect("on")
            .settle(Duration::from_secs(20))
            .await
    );
    assert_eq!(
        cloud.asg("p5").await.0,
        0,
        "the ASG's desired capacity follows"
    );
    assert!(
        cloud
            .states(&instances)
            .await
            .iter()
            .all(|s| s != "running"),
        "{:?}",
        cloud.states(&instances).await
    );

    let _ = served.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machines_that_never_register_are_terminated_and_the_gang_is_planned_again() {
    let cloud = aws_cloud(
        &[("p5", "p5.48xlarge", 4, 0)],
        "nodeGroups: [{asg: p5, pricePerHour: 98.32}]",
    )
    .await;
    let server = cluster().await;
    let client = server.client();
    cloud.node_groups(&client).await;
    gpu_class(&client).await;
    gang(&client, "train", 2).await;
    let (executor, served) = serve_and_connect("aws", Arc::new(cloud.provider.clone())).await;
    let controller = Controller::start(&client, executor).await;

    let t0 = Timestamp::now();
    let summary = controller.run_once_at(t0).await;
    assert_eq!(summary.scaled_up.get("p5"), Some(&2), "{summary:?}");
    let planned = upcoming(&node_group(&client, "p5").await.status.expect("status"));
    cloud.attached().await;
    assert_eq!(cloud.asg("p5").await, (2, 2));
    assert_eq!(cloud.running().await, 2);

    // No Node ever registers. After the provision time the machines are deleted by id.
    controller
        .wait_for("the status in the store", |i| {
            i.node_groups
                .iter()
                .any(|g| g.status.as_ref().is_some_and(|s| s.upcoming_size == 2))
        })
        .await;
    let later = t0 + SignedDuration::from_mins(16);
    let timed_out = controller.run_once_at(later).await;
    assert_eq!(timed_out.timed_out.get("p5"), Some(&2), "{timed_out:?}");
    assert_eq!(cloud.running().await, 0, "no machine left running");
    assert!(
        cloud
            .states(&planned)
            .await
            .iter()
            .all(|s| s == "shutting-down" || s == "terminated"),
        "{:?}",
        cloud.states(&planned).await
    );
    let (desired, _) = cloud.asg("p5").await;
    assert_eq!(desired, 0, "the ASG's desired capacity is back");
    let status = node_group(&client, "p5").await.status.expect("status");
    assert_eq!(
        (
            status.current_size,
            status.upcoming_size,
            status.target_size
        ),
        (0, 0, desired),
        "the NodeGroup status agrees with the ASG"
    );
    assert!(status.backoff_until.is_some());

    // Once the backoff is over, the gang is planned again from scratch.
    let again = controller
        .run_once_at(later + SignedDuration::from_mins(6))
        .await;
    assert_eq!(again.scaled_up.get("p5"), Some(&2), "{again:?}");

    let _ = served.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_split_over_two_groups_with_ice_on_the_second_leaves_nothing_running() {
    // One machine each: the gang of two needs both groups, one per zone.
    let cloud = aws_cloud(
        &[("p5-a", "p5.48xlarge", 1, 0), ("p5-b", "p5.48xlarge", 1, 1)],
        "nodeGroups: [{asg: p5-a, pricePerHour: 98.32}, {asg: p5-b, pricePerHour: 98.32}]",
    )
    .await;
    let server = cluster().await;
    let client = server.client();
    let specs = cloud.node_groups(&client).await;
    let zone_b_subnet = cloud
        .aws
        .describe_groups(&[], &["p5-b".to_owned()])
        .await
        .expect("describe")[0]
        .subnets[0]
        .clone();
    cloud.proxy.out_of_capacity_in(&zone_b_subnet);
    assert_eq!(specs.len(), 2);
    gpu_class(&client).await;
    gang(&client, "train", 2).await;
    let (executor, served) = serve_and_connect("aws", Arc::new(cloud.provider.clone())).await;
    let controller = Controller::start(&client, executor).await;

    let summary = controller.run_once().await;
    let report = summary.report.as_ref().expect("planned");
    assert_eq!(report.scale_ups.len(), 2, "{report:?}");
    assert!(summary.scaled_up.is_empty(), "{summary:?}");
    assert!(
        summary.failed["p5-b"].contains("out of capacity")
            && summary.failed["p5-b"].contains("us-east-1b"),
        "{:?}",
        summary.failed
    );
    cloud.attached().await;
    assert_eq!(
        cloud.running().await,
        0,
        "the first group's machine was given back"
    );
    assert_eq!(cloud.asg("p5-a").await.0, 0);
    for name in ["p5-a", "p5-b"] {
        let status = node_group(&client, name).await.status.expect("status");
        assert_eq!((status.upcoming_size, status.target_size), (0, 0), "{name}");
    }

    let _ = served.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asg_with_an_unknown_instance_type_is_left_out_and_the_good_ones_scale_up_and_down() {
    let cloud = aws_cloud(
        &[
            ("m5-a", "m5.xlarge", 4, 0),
            ("m5-b", "m5.2xlarge", 4, 0),
            ("p9", "p9.bogus", 4, 0),
        ],
        "nodeGroups: [{asg: m5-a, pricePerHour: 0.192}, {asg: m5-b, pricePerHour: 0.384}]",
    )
    .await;
    // What print-nodegroups prints: the two good groups, and the bad one with its reason.
    let specs = cloud
        .provider
        .specs()
        .await
        .expect("specs: one bad group fails nothing");
    assert_eq!(specs.keys().collect::<Vec<_>>(), ["m5-a", "m5-b"]);
    let bad = cloud.provider.unusable_groups().await.expect("unusable");
    assert!(bad["p9"].contains("p9.bogus"), "{bad:?}");

    let server = cluster().await;
    let client = server.client();
    cloud.node_groups(&client).await;
    // A NodeGroup for the bad ASG (applied before it went bad) is left out with the reason.
    let mut p9 = specs["m5-a"].clone();
    p9.provider_id = "p9".into();
    Api::<NodeGroup>::all(client.clone())
        .create(&PostParams::default(), &NodeGroup::new("p9", p9))
        .await
        .expect("NodeGroup created");
    // 6 CPUs only fit an m5.2xlarge, 3 CPUs the cheaper m5.xlarge.
    create_unschedulable_pod(&client, "big", "6", None).await;
    create_unschedulable_pod(&client, "small", "3", None).await;
    let (executor, served) = serve_and_connect("aws", Arc::new(cloud.provider.clone())).await;
    let evictions = common::no_retry_client(&server);
    let controller =
        Controller::start_with(&client, executor, Some((quick_scale_down(), evictions))).await;

    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("m5-a"), Some(&1), "{summary:?}");
    assert_eq!(summary.scaled_up.get("m5-b"), Some(&1), "{summary:?}");
    let p9 = node_group(&client, "p9").await.status.unwrap_or_default();
    let valid = p9
        .conditions
        .iter()
        .find(|c| c.type_ == "Valid")
        .expect("Valid condition");
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "ProviderRefused")
    );
    assert!(valid.message.contains("p9.bogus"), "{}", valid.message);
    assert_eq!(cloud.asg("m5-a").await.0, 1);
    assert_eq!(cloud.asg("m5-b").await.0, 1);

    // The machines register by providerID; the pods go; both groups scale down.
    let mut registered = 0;
    for group in ["m5-a", "m5-b"] {
        let ids: Vec<String> = cloud
            .provider
            .nodes(group)
            .await
            .expect("instances")
            .into_iter()
            .map(|i| i.id)
            .collect();
        let spec = &specs[group];
        register_kubelets(&client, spec, &ids, |i, _| format!("{group}-node-{i}")).await;
        registered += ids.len();
    }
    assert_eq!(registered, 2);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for pod in ["big", "small"] {
        pods.delete(pod, &DeleteParams::default())
            .await
            .expect("deleted");
    }
    controller
        .wait_for("nodes registered, pods gone", |i| {
            i.nodes.len() == 2 && i.pods.is_empty()
        })
        .await;
    let t0 = Timestamp::now();
    controller.run_once_at(t0).await;
    let down = controller
        .run_once_at(t0 + SignedDuration::from_secs(2))
        .await;
    assert_eq!(down.scale_down.expect("ran").started.len(), 2);
    assert!(
        controller
            .autoscaler
            .scale_downs()
            .expect("on")
            .settle(Duration::from_secs(20))
            .await
    );
    assert_eq!(cloud.asg("m5-a").await.0, 0);
    assert_eq!(cloud.asg("m5-b").await.0, 0);

    let _ = served.stop.send(());
}
