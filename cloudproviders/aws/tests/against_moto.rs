//! The provider against moto (the AWS API emulator): discovery by cluster-autoscaler's tags,
//! SetDesiredCapacity, TerminateInstanceInAutoScalingGroup, a gang through CreateFleet and
//! AttachInstances, and templates from DescribeInstanceTypes' real data for p5, g6 and trn1.
//!
//! moto must be installed (`pip install 'moto[server]'`); without it these tests fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dra_provider::{AtomicIncrease, CloudProvider, NodeRef};
use dra_provider_aws::moto::{self, MotoServer};
use dra_provider_aws::{AwsProvider, Config};

const ENABLED: (&str, &str) = ("k8s.io/cluster-autoscaler/enabled", "true");
const PROD: (&str, &str) = ("k8s.io/cluster-autoscaler/prod", "owned");

fn moto_server() -> MotoServer {
    MotoServer::start().unwrap_or_else(|err| panic!("{err}"))
}

fn config(text: &str) -> Config {
    Config::parse(text, "test").unwrap()
}

async fn asg_state(aws: &dra_provider_aws::Aws, name: &str) -> (i32, usize) {
    let groups = aws.describe_groups(&[], &[name.to_owned()]).await.unwrap();
    (groups[0].desired, groups[0].instances.len())
}

#[tokio::test]
async fn groups_are_discovered_by_cluster_autoscaler_tags() {
    let moto = moto_server();
    let aws = moto.aws().await;
    let subnet = moto::subnet(&aws).await;
    moto::group(&aws, &subnet, "prod-gpu", "g6.xlarge", 4, &[ENABLED, PROD]).await;
    moto::group(&aws, &subnet, "prod-cpu", "m5.large", 4, &[ENABLED, PROD]).await;
    moto::group(
        &aws,
        &subnet,
        "other-cluster",
        "m5.large",
        4,
        &[ENABLED, ("k8s.io/cluster-autoscaler/other", "owned")],
    )
    .await;
    moto::group(&aws, &subnet, "disabled", "m5.large", 4, &[PROD]).await;
    moto::group(&aws, &subnet, "listed", "m5.large", 4, &[]).await;

    let provider = AwsProvider::new(
        aws,
        config("clusterName: prod\nnodeGroups: [{asg: listed, maxSize: 2, pricePerHour: 0.1}]"),
    );
    let mut ids: Vec<String> = provider
        .node_groups()
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.id)
        .collect();
    ids.sort();
    assert_eq!(ids, ["listed", "prod-cpu", "prod-gpu"]);
    let listed = provider
        .node_groups()
        .await
        .unwrap()
        .into_iter()
        .find(|g| g.id == "listed")
        .unwrap();
    assert_eq!(
        (listed.min_size, listed.max_size),
        (0, 2),
        "config overrides the ASG's max"
    );
}

#[tokio::test]
async fn set_desired_grows_the_group_and_terminate_shrinks_it() {
    let moto = moto_server();
    let aws = moto.aws().await;
    let subnet = moto::subnet(&aws).await;
    moto::group(&aws, &subnet, "workers", "m5.large", 3, &[ENABLED, PROD]).await;
    let provider = AwsProvider::new(aws.clone(), config("clusterName: prod\nrefreshSeconds: 0"));

    provider.increase_size("workers", 2).await.unwrap();
    assert_eq!(
        asg_state(&aws, "workers").await,
        (2, 2),
        "moto launches what is desired"
    );
    assert_eq!(provider.target_size("workers").await.unwrap(), 2);
    let err = provider.increase_size("workers", 2).await.unwrap_err();
    assert!(err.to_string().contains("maxSize 3"), "{err}");

    let instances = provider.nodes("workers").await.unwrap();
    assert_eq!(instances.len(), 2);
    assert!(
        instances
            .iter()
            .all(|i| i.id.starts_with("aws:///us-east-1a/i-")),
        "{instances:?}"
    );
    let victim = NodeRef {
        provider_id: instances[0].id.clone(),
        name: "ip-10-0-0-1.ec2.internal".into(),
        ..NodeRef::default()
    };
    let owner = provider.node_group_for_node(&victim).await.unwrap();
    assert_eq!(owner.map(|g| g.id).as_deref(), Some("workers"));
    provider.delete_nodes("workers", &[victim]).await.unwrap();
    assert_eq!(
        asg_state(&aws, "workers").await.0,
        1,
        "desired is decremented"
    );

    let stranger = NodeRef {
        provider_id: "aws:///us-east-1a/i-0000000000000000".into(),
        ..NodeRef::default()
    };
    assert!(provider.delete_nodes("workers", &[stranger]).await.is_err());
}

#[tokio::test]
async fn a_gang_is_launched_with_create_fleet_and_attached_to_the_group() {
    let moto = moto_server();
    let aws = moto.aws().await;
    let subnet = moto::subnet(&aws).await;
    moto::group(&aws, &subnet, "gpu", "p5.48xlarge", 8, &[ENABLED, PROD]).await;
    let provider = AwsProvider::new(aws.clone(), config("clusterName: prod\nrefreshSeconds: 0"))
        .with_attach_poll(Duration::from_millis(50));

    let ids = provider
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 4,
            min_count: 4,
            request_id: "gang-1".into(),
        })
        .await
        .unwrap();
    assert_eq!(ids.len(), 4);
    assert!(
        ids.iter().all(|i| i.starts_with("aws:///us-east-1a/i-")),
        "{ids:?}"
    );
    assert_eq!(
        provider.target_size("gpu").await.unwrap(),
        4,
        "counted while attaching"
    );

    for _ in 0..200 {
        if provider.pending_attach().await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(provider.pending_attach().await, 0, "attached");
    assert_eq!(asg_state(&aws, "gpu").await, (4, 4));
    let mut attached: Vec<String> = provider
        .nodes("gpu")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    attached.sort();
    let mut launched = ids.clone();
    launched.sort();
    assert_eq!(attached, launched, "the group's instances are the gang");

    let again = provider
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 4,
            min_count: 4,
            request_id: "gang-1".into(),
        })
        .await
        .unwrap();
    assert_eq!(again, ids, "a retried request does not start a second gang");
    assert_eq!(asg_state(&aws, "gpu").await, (4, 4));

    let err = provider
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 5,
            min_count: 5,
            request_id: "gang-2".into(),
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("maxSize 8"), "{err}");
}

fn quantity(t: &dra_provider::TemplateNode, key: &str) -> String {
    t.node.status.as_ref().unwrap().capacity.as_ref().unwrap()[key]
        .0
        .clone()
}

#[tokio::test]
async fn templates_come_from_describe_instance_types() {
    let moto = moto_server();
    let aws = moto.aws().await;
    let subnet = moto::subnet(&aws).await;
    moto::group(&aws, &subnet, "p5", "p5.48xlarge", 8, &[ENABLED, PROD]).await;
    moto::group(&aws, &subnet, "g6", "g6.xlarge", 8, &[ENABLED, PROD]).await;
    moto::group(
        &aws,
        &subnet,
        "trn1",
        "trn1.32xlarge",
        8,
        &[
            ENABLED,
            PROD,
            (
                "k8s.io/cluster-autoscaler/node-template/taint/aws.amazon.com/neuron",
                "true:NoSchedule",
            ),
        ],
    )
    .await;
    let provider = AwsProvider::new(
        aws,
        config("clusterName: prod\nnodeGroups: [{asg: p5, template: {gpu: {mig: true}}}]"),
    );

    // p5.48xlarge: 192 vCPUs, 8 × H100 with 81,920 MiB each, 32 EFA interfaces, 100 pods
    // (2 ENIs × 49 + 2), MIG on: one counter slice and one device slice per GPU.
    let p5 = provider.template_node("p5").await.unwrap();
    let labels = p5.node.metadata.labels.clone().unwrap();
    assert_eq!(labels["node.kubernetes.io/instance-type"], "p5.48xlarge");
    assert_eq!(labels["topology.kubernetes.io/zone"], "us-east-1a");
    assert_eq!(labels["topology.kubernetes.io/region"], "us-east-1");
    assert_eq!(labels["dra-autoscaler.io/node-group"], "p5");
    assert_eq!(quantity(&p5, "cpu"), "192");
    assert_eq!(quantity(&p5, "pods"), "100");
    assert_eq!(quantity(&p5, "vpc.amazonaws.com/efa"), "32");
    assert_eq!(
        quantity(&p5, "ephemeral-storage"),
        format!("{}Ki", 100u64 << 20)
    );
    assert_eq!(p5.resource_slices.len(), 9);
    assert!(p5.resource_slices[0].spec.shared_counters.is_some());
    let gpu0 = &p5.resource_slices[1].spec.devices.as_ref().unwrap()[0];
    assert_eq!(gpu0.name, "gpu-0");
    assert_eq!(
        gpu0.attributes.as_ref().unwrap()["productName"]
            .string
            .as_deref(),
        Some("NVIDIA H100 80GB HBM3")
    );

    // g6.xlarge: 4 vCPUs, 1 × L4 with 22,888 MiB, 58 pods (4 ENIs × 14 + 2), no MIG.
    let g6 = provider.template_node("g6").await.unwrap();
    assert_eq!(quantity(&g6, "cpu"), "4");
    assert_eq!(quantity(&g6, "pods"), "58");
    assert_eq!(g6.resource_slices.len(), 1);
    let l4 = &g6.resource_slices[0].spec.devices.as_ref().unwrap()[0];
    assert_eq!(
        l4.attributes.as_ref().unwrap()["productName"]
            .string
            .as_deref(),
        Some("NVIDIA L4")
    );
    assert_eq!(
        l4.capacity.as_ref().unwrap()["memory"].value.0,
        (22888u64 << 20).to_string()
    );

    // trn1.32xlarge: 16 Trainium devices × 2 cores, 8 EFA interfaces, 247 pods; no GPU slices.
    let trn = provider.template_node("trn1").await.unwrap();
    assert_eq!(quantity(&trn, "aws.amazon.com/neuron"), "16");
    assert_eq!(quantity(&trn, "aws.amazon.com/neuroncore"), "32");
    assert_eq!(quantity(&trn, "pods"), "247");
    assert!(trn.resource_slices.is_empty());
    let taints = trn.node.spec.as_ref().unwrap().taints.clone().unwrap();
    assert_eq!(taints[0].key, "aws.amazon.com/neuron");
    assert_eq!(taints[0].effect, "NoSchedule");
}
