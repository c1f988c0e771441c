//! A cluster on the in-process fake API server, with NodeGroups and gangs, and
//! a controller wired to an in-memory provider.

#![allow(dead_code)] // each test file uses a different part of the harness

use std::sync::Arc;
use std::time::Duration;

use dra_api::{CapacityType, NodeGroup, NodeGroupSpec, NodeTemplate};
use dra_controller::autoscaler::{Autoscaler, LoopConfig, LoopSummary};
use dra_controller::backoff::BackoffPolicy;
use dra_controller::events::EventSink;
use dra_controller::executor::ScaleExecutor;
use dra_controller::metrics::Metrics;
use dra_controller::watch::{self, Watches};
use dra_fake_apiserver::FakeApiServer;
use dra_plan::PlanOptions;
use dra_sim::{FeatureGates, KubeVersion};
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;

/// The coscheduling PodGroup CRD's type.
pub fn pod_group_resource() -> ApiResource {
    ApiResource {
        group: "scheduling.x-k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "scheduling.x-k8s.io/v1alpha1".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    }
}

/// The Node a kubelet registers for machine `provider_id` of a group whose spec is `spec`:
/// the template `dra_api::new_node` builds (what the planner simulates) with
/// `spec.providerID`, and without the `dra-autoscaler.io/node-group` label, which no kubelet
/// sets by default: the controller must know it by its providerID.
pub fn kubelet_node(spec: &NodeGroupSpec, name: &str, provider_id: &str) -> Node {
    let mut node = dra_api::new_node("unused", spec, name).node;
    if let Some(labels) = node.metadata.labels.as_mut() {
        labels.remove(dra_api::NODE_GROUP_LABEL);
    }
    node.spec.get_or_insert_with(Default::default).provider_id = Some(provider_id.to_owned());
    node
}

/// Registers [`kubelet_node`] for each instance id, named by `name_of(index, id)`.
pub async fn register_kubelets(
    client: &Client,
    spec: &NodeGroupSpec,
    instances: &[String],
    name_of: impl Fn(usize, &str) -> String,
) -> Vec<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut names = Vec::new();
    for (i, id) in instances.iter().enumerate() {
        let name = name_of(i, id);
        nodes
            .create(&PostParams::default(), &kubelet_node(spec, &name, id))
            .await
            .expect("Node registered");
        names.push(name);
    }
    names
}

/// A fake API server serving NodeGroups and coscheduling PodGroups.
pub async fn cluster() -> FakeApiServer {
    FakeApiServer::builder()
        .resource(
            "dra-autoscaler.io",
            "v1alpha1",
            "nodegroups",
            "NodeGroup",
            false,
            true,
        )
        .resource(
            "scheduling.x-k8s.io",
            "v1alpha1",
            "podgroups",
            "PodGroup",
            true,
            true,
        )
        .start()
        .await
        .expect("fake API server starts")
}

/// An on-demand group of 4-CPU machines named `name`, at most `max` nodes,
/// known to the provider as `{name}-pool`.
pub async fn create_node_group(client: &Client, name: &str, max: i32) -> NodeGroup {
    create_node_group_with_id(client, name, &format!("{name}-pool"), max).await
}

/// As [`create_node_group`], with the provider's id of the group.
pub async fn create_node_group_with_id(
    client: &Client,
    name: &str,
    provider_id: &str,
    max: i32,
) -> NodeGroup {
    let group = NodeGroup::new(
        name,
        NodeGroupSpec {
            provider: "fake".into(),
            provider_id: provider_id.into(),
            min_size: 0,
            max_size: max,
            capacity_type: CapacityType::OnDemand,
            reservation: None,
            price_per_hour: 1.5,
            priority: 0,
            topology_domain: None,
            template: NodeTemplate {
                capacity: [
                    ("cpu".to_string(), Quantity("4".into())),
                    ("memory".to_string(), Quantity("16Gi".into())),
                    ("pods".to_string(), Quantity("110".into())),
                ]
                .into(),
                ..Default::default()
            },
            scale_down: None,
        },
    );
    Api::<NodeGroup>::all(client.clone())
        .create(&PostParams::default(), &group)
        .await
        .expect("NodeGroup created")
}

/// A NodeGroup stored from raw JSON, as `kubectl apply --validate=false`
/// would store it (it need not decode).
pub async fn create_node_group_json(client: &Client, object: serde_json::Value) {
    let object: DynamicObject = serde_json::from_value(object).expect("NodeGroup JSON");
    Api::<DynamicObject>::all_with(client.clone(), &ApiResource::erase::<NodeGroup>(&()))
        .create(&PostParams::default(), &object)
        .await
        .expect("NodeGroup stored");
}

/// A pod asking for `cpu` CPUs, in gang `gang` when given, that the scheduler
/// has marked unschedulable.
pub async fn create_unschedulable_pod(
    client: &Client,
    name: &str,
    cpu: &str,
    gang: Option<&str>,
) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: gang
                .map(|g| [("scheduling.x-k8s.io/pod-group".to_string(), g.to_string())].into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("trainer".into()),
                resources: Some(ResourceRequirements {
                    requests: Some([("cpu".to_string(), Quantity(cpu.into()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    let status = serde_json::json!({"status": {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/0 nodes are available"
    }]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pod marked unschedulable")
}

/// A coscheduling PodGroup `name` needing `min_member` pods, and its members.
pub async fn create_gang(client: &Client, name: &str, min_member: usize, cpu: &str) -> Vec<String> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &pod_group_resource());
    let group: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member}
    }))
    .expect("PodGroup JSON");
    api.create(&PostParams::default(), &group)
        .await
        .expect("PodGroup created");
    let mut members = Vec::new();
    for i in 0..min_member {
        let pod = format!("{name}-{i}");
        create_unschedulable_pod(client, &pod, cpu, Some(name)).await;
        members.push(pod);
    }
    members
}

/// The loop settings of the tests: the newest scheduler, no pod delay.
pub fn loop_config() -> LoopConfig {
    LoopConfig {
        gates: FeatureGates::for_version(KubeVersion::NEWEST),
        plan: PlanOptions::default(),
        new_pod_delay: SignedDuration::ZERO,
        expendable_cutoff: -10,
        max_node_provision_time: SignedDuration::from_mins(15),
        backoff: BackoffPolicy {
            initial: SignedDuration::from_mins(5),
            max: SignedDuration::from_mins(30),
        },
    }
}

/// Scale-down that acts at once: no unneeded or cooldown time, 50 % threshold.
pub fn quick_scale_down() -> dra_controller::scaledown::ScaleDownConfig {
    dra_controller::scaledown::ScaleDownConfig {
        defaults: dra_plan::scaledown::ScaleDownDefaults {
            enabled: true,
            utilization_threshold: 0.5,
            unneeded_time: SignedDuration::ZERO,
            empty_unneeded_time: SignedDuration::ZERO,
        },
        delay_after_add: SignedDuration::ZERO,
        max_parallelism: 10,
        max_graceful_termination: SignedDuration::from_secs(20),
        eviction_retry: Duration::from_millis(100),
        actuate: true,
    }
}

/// A controller process: its watches and its loop.
pub struct Controller {
    /// Running reflectors.
    pub watches: Watches,
    /// The loop.
    pub autoscaler: Autoscaler,
    /// Its metrics.
    pub metrics: Arc<Metrics>,
}

impl Controller {
    /// Starts watching and waits for the first lists, like a fresh process.
    pub async fn start(client: &Client, provider: Arc<dyn ScaleExecutor>) -> Self {
        Self::start_with(client, provider, None).await
    }

    /// [`Controller::start`], with scale-down on when `scale_down` is given (its settings,
    /// and the client its evictions go through).
    pub async fn start_with(
        client: &Client,
        provider: Arc<dyn ScaleExecutor>,
        scale_down: Option<(dra_controller::scaledown::ScaleDownConfig, Client)>,
    ) -> Self {
        let optional = watch::discover(client).await.expect("discovery");
        let watches = watch::start(client, &optional);
        tokio::time::timeout(Duration::from_secs(10), watches.stores.wait_ready())
            .await
            .expect("watches list within 10 s");
        let metrics = Arc::new(Metrics::new());
        let autoscaler = Autoscaler::new(
            client.clone(),
            provider.clone(),
            EventSink::new(
                client.clone(),
                "dra-autoscaler",
                "test",
                SignedDuration::from_mins(10),
            ),
            metrics.clone(),
            loop_config(),
            None,
        );
        let autoscaler = match scale_down {
            Some((config, evictions)) => {
                autoscaler.with_scale_down(dra_controller::scaledown::ScaleDowns::new(
                    client.clone(),
                    evictions,
                    provider,
                    EventSink::new(
                        client.clone(),
                        "dra-autoscaler",
                        "test",
                        SignedDuration::from_mins(10),
                    ),
                    metrics.clone(),
                    config,
                ))
            }
            None => autoscaler,
        };
        Self {
            watches,
            autoscaler,
            metrics,
        }
    }

    /// One loop at `now`.
    pub async fn run_once_at(&self, now: Timestamp) -> LoopSummary {
        self.autoscaler
            .run_once(&self.watches.stores.inputs(), now)
            .await
    }

    /// One loop now.
    pub async fn run_once(&self) -> LoopSummary {
        self.run_once_at(Timestamp::now()).await
    }

    /// Waits until the stores satisfy `check`.
    pub async fn wait_for(
        &self,
        what: &str,
        check: impl Fn(&dra_controller::snapshot::Inputs) -> bool,
    ) {
        eventually(what, || async { check(&self.watches.stores.inputs()) }).await;
    }
}

/// A client of `server` without kube's built-in retry of 429 answers (what evictions need).
pub fn no_retry_client(server: &FakeApiServer) -> Client {
    let mut config = kube::Config::new(server.url().parse().expect("server URL"));
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

/// Polls `check` every 20 ms for up to 10 s.
pub async fn eventually<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every event with `reason`, as (kind, name, type, note) of what it regards.
pub async fn events(client: &Client, reason: &str) -> Vec<(String, String, String, String)> {
    let api: Api<Event> = Api::all(client.clone());
    let mut out: Vec<_> = api
        .list(&Default::default())
        .await
        .expect("events listed")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| {
            let r = e.regarding.unwrap_or_default();
            (
                r.kind.unwrap_or_default(),
                r.name.unwrap_or_default(),
                e.type_.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The NodeGroup as the API server has it.
pub async fn node_group(client: &Client, name: &str) -> NodeGroup {
    Api::<NodeGroup>::all(client.clone())
        .get(name)
        .await
        .expect("NodeGroup read")
}

#[derive(Debug, clap::Parser)]
struct RunCli {
    #[command(flatten)]
    run: dra_controller::RunArgs,
}

/// `run`'s flags parsed as the binary parses them; `argv` starts with `run`.
pub fn run_args<I, T>(argv: I) -> dra_controller::RunArgs
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::Parser;
    RunCli::try_parse_from(argv).expect("run flags").run
}

/// A provider served over gRPC on a free local port, as its binary serves it.
pub struct ServedProvider {
    pub addr: std::net::SocketAddr,
    /// Sending (or dropping) stops the server.
    pub stop: tokio::sync::oneshot::Sender<()>,
    pub task: tokio::task::JoinHandle<Result<(), dra_provider::ServeError>>,
}

/// Serves `provider` the way `dra-provider-*` binaries do, on 127.0.0.1.
pub async fn serve_provider<P: dra_provider::CloudProvider>(provider: Arc<P>) -> ServedProvider {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(dra_provider::serve(
        provider,
        listener,
        dra_provider::ServeOptions::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    ServedProvider { addr, stop, task }
}

/// `run`'s own provider client for `--provider NAME=http://ADDR`.
pub async fn connect_provider(
    name: &str,
    addr: std::net::SocketAddr,
) -> Arc<dra_controller::executor::grpc::GrpcExecutor> {
    let args = run_args(["run", "--provider", &format!("{name}=http://{addr}")]);
    Arc::new(
        dra_controller::run::connect_providers(&args)
            .await
            .expect("provider client"),
    )
}

/// [`serve_provider`], then [`connect_provider`] to it as `NAME`.
pub async fn serve_and_connect<P: dra_provider::CloudProvider>(
    name: &str,
    provider: Arc<P>,
) -> (
    Arc<dra_controller::executor::grpc::GrpcExecutor>,
    ServedProvider,
) {
    let served = serve_provider(provider).await;
    (connect_provider(name, served.addr).await, served)
}
