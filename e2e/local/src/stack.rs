//! The local stack in one process, for end-to-end tests: a cluster, the fake provider serving
//! the cluster's NodeGroups over gRPC (and playing the kubelet and DRA driver of its nodes),
//! and the controller (`dra-autoscaler run`'s loop), each started and stopped on its own so a
//! test can restart one of them or break the provider.
//!
//! The cluster is one of two [`Backend`]s with one interface:
//! - [`Backend::StandIn`]: the API stand-in and the scheduler stand-in, in-process — fast, and
//!   able to inject faults ([`Stack::api`]);
//! - [`Backend::Real`]: kube-apiserver, kube-scheduler and kube-controller-manager v1.37.2 as
//!   local processes ([`crate::real`]). The provider and the controller then act as the
//!   chart's ServiceAccounts, so the API server enforces the chart's RBAC on every write.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use dra_local_stack::{Stack, StackOptions};
//! let mut stack = Stack::start(StackOptions::default()).await?;
//! stack.apply_node_group_examples().await?;
//! stack.start_controller(&["--scan-interval", "1s"]).await?;
//! stack.apply_yaml(include_str!("../manifests/training-gang.yaml")).await?;
//! stack.wait_for_running_pods("default", 4, std::time::Duration::from_secs(60)).await?;
//! stack.shutdown().await;
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use dra_controller::RunArgs;
use dra_fake_apiserver::FakeApiServer;
use dra_provider::ServeOptions;
use dra_provider_fake::{Config, FakeProvider};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::apply;
use crate::real::{self, RealCluster};

/// The chart's ServiceAccount of the controller (release `dra-autoscaler`).
pub const CONTROLLER_ACCOUNT: &str = "dra-autoscaler";
/// The chart's ServiceAccount of the fake provider.
pub const FAKE_PROVIDER_ACCOUNT: &str = "dra-autoscaler-fake-provider";

/// A fresh directory for one real cluster: under `$DRA_E2E_DIR` or the system's temp dir,
/// unique per process and stack.
fn real_cluster_dir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = std::env::var_os("DRA_E2E_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    root.join(format!("dra-e2e-{}-{n}", std::process::id()))
}

/// The repository's example NodeGroups (`testdata/nodegroups/`).
#[must_use]
pub fn node_group_examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/nodegroups")
}

/// The local stack's example manifests (`e2e/local/manifests/`).
#[must_use]
pub fn manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

/// Which cluster the stack runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// The in-process API and scheduler stand-ins.
    #[default]
    StandIn,
    /// The real control plane built from Kubernetes v1.37.2 (`e2e/cluster`).
    Real,
}

impl Backend {
    /// `Real` when `DRA_E2E_BACKEND=real`, else `StandIn`: lets one test run on either.
    #[must_use]
    pub fn from_env() -> Self {
        match std::env::var("DRA_E2E_BACKEND").as_deref() {
            Ok("real") => Self::Real,
            _ => Self::StandIn,
        }
    }
}

/// How the stack is started.
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// The cluster to run against.
    pub backend: Backend,
    /// Feature gates added to every real component (e.g.
    /// `TopologyAwareWorkloadScheduling=true`); the stand-ins ignore it.
    pub feature_gates: String,
    /// The fake provider's YAML (faults, timings, groups given in full); `{}` serves the
    /// cluster's NodeGroups with no faults.
    pub provider_config: String,
    /// Time between the scheduler stand-in's cycles.
    pub scheduler_interval: Duration,
    /// Namespaces that exist at start.
    pub namespaces: Vec<String>,
    /// The fake provider's state file (survives a provider restart); none derives state
    /// from the Nodes.
    pub provider_state: Option<PathBuf>,
}

impl Default for StackOptions {
    fn default() -> Self {
        Self {
            backend: Backend::default(),
            feature_gates: String::new(),
            provider_config: "{}".into(),
            scheduler_interval: Duration::from_millis(200),
            namespaces: ["default", "kube-system", "kube-public", "kube-node-lease"]
                .map(str::to_owned)
                .to_vec(),
            provider_state: None,
        }
    }
}

struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Running {
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

struct Controller {
    shutdown: watch::Sender<bool>,
    task: JoinHandle<anyhow::Result<()>>,
}

/// The cluster under the stack.
enum Cluster {
    StandIn(FakeApiServer),
    Real(RealCluster),
}

/// A running local stack.
pub struct Stack {
    cluster: Cluster,
    /// cluster-admin: the test's own reads and writes.
    admin: Client,
    /// What the fake provider acts as (the chart's ServiceAccount on a real cluster).
    provider_client: Client,
    /// What the controller acts as (the chart's ServiceAccount on a real cluster).
    controller_client: Client,
    options: StackOptions,
    provider_addr: SocketAddr,
    provider: Option<Running>,
    scheduler: Option<Running>,
    controller: Option<Controller>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cluster = match &self.cluster {
            Cluster::StandIn(api) => api.url().to_owned(),
            Cluster::Real(real) => real.kubeconfig().display().to_string(),
        };
        f.debug_struct("Stack")
            .field("cluster", &cluster)
            .field("provider", &self.provider_addr)
            .field("controller", &self.controller.is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Parser)]
struct RunCommand {
    #[command(flatten)]
    run: RunArgs,
}

impl Stack {
    /// Starts the cluster (with the NodeGroup CRD applied), the fake provider and, on the
    /// stand-in backend, the scheduler stand-in. The controller starts with
    /// [`Stack::start_controller`].
    ///
    /// # Errors
    /// A component that cannot start.
    pub async fn start(options: StackOptions) -> anyhow::Result<Self> {
        let (cluster, admin, provider_client, controller_client) = match options.backend {
            Backend::StandIn => {
                let namespaces: Vec<&str> = options.namespaces.iter().map(String::as_str).collect();
                // As kube-apiserver: new Nodes are tainted not-ready until the scheduler
                // stand-in (playing KCM's node lifecycle controller) sees them Ready.
                let api = FakeApiServer::builder()
                    .namespaces(&namespaces)
                    .taint_new_nodes(true)
                    .start()
                    .await
                    .context("starting the API stand-in")?;
                let client = api.client();
                apply::apply_crd(&client).await?;
                (
                    Cluster::StandIn(api),
                    client.clone(),
                    client.clone(),
                    client,
                )
            }
            Backend::Real => {
                let dir = real_cluster_dir();
                let real = RealCluster::start(&dir, &options.feature_gates)
                    .await
                    .context("starting the real control plane")?;
                let admin = real.admin_client().await?;
                real.register_control_plane_node().await?;
                apply::apply_crd(&admin).await?;
                real.install_chart_rbac(&["fakeProvider.enabled=true"])
                    .await
                    .context("installing the chart's RBAC")?;
                let provider_client = real
                    .service_account_client(real::RELEASE_NAMESPACE, FAKE_PROVIDER_ACCOUNT)
                    .await?;
                let controller_client = real
                    .service_account_client(real::RELEASE_NAMESPACE, CONTROLLER_ACCOUNT)
                    .await?;
                (
                    Cluster::Real(real),
                    admin,
                    provider_client,
                    controller_client,
                )
            }
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let provider_addr = listener.local_addr()?;
        let backend = options.backend;
        let mut stack = Self {
            cluster,
            admin,
            provider_client,
            controller_client,
            options,
            provider_addr,
            provider: None,
            scheduler: None,
            controller: None,
        };
        stack.start_provider_on(listener).await?;
        if backend == Backend::StandIn {
            stack.start_scheduler();
        }
        Ok(stack)
    }

    /// The backend the stack runs on.
    #[must_use]
    pub fn backend(&self) -> Backend {
        self.options.backend
    }

    /// A cluster-admin client.
    #[must_use]
    pub fn client(&self) -> Client {
        self.admin.clone()
    }

    /// The API stand-in (request log, fault injection, watch hooks); `None` on the real
    /// control plane.
    #[must_use]
    pub fn api(&self) -> Option<&FakeApiServer> {
        match &self.cluster {
            Cluster::StandIn(api) => Some(api),
            Cluster::Real(_) => None,
        }
    }

    /// The real control plane (kubectl, logs); `None` on the stand-ins.
    #[must_use]
    pub fn real(&self) -> Option<&RealCluster> {
        match &self.cluster {
            Cluster::StandIn(_) => None,
            Cluster::Real(real) => Some(real),
        }
    }

    /// The fake provider's gRPC URL (`--provider fake=<this>`).
    #[must_use]
    pub fn provider_url(&self) -> String {
        format!("http://{}", self.provider_addr)
    }

    async fn start_provider_on(&mut self, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
        let config = Config::parse(&self.options.provider_config, "the stack's provider config")?;
        let kubelet_period = Duration::from_millis(config.kubelet_sync_ms.max(50));
        let provider = FakeProvider::new(
            config,
            self.provider_client.clone(),
            self.options.provider_state.clone(),
        )
        .await
        .context("starting the fake provider")?;
        let renewal = provider.spawn_lease_renewal();
        let kubelet = provider.spawn_kubelet(self.provider_client.clone(), kubelet_period);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = dra_provider::serve(provider, listener, ServeOptions::default(), async {
                let _ = stopped.await;
            })
            .await;
            renewal.abort();
            kubelet.abort();
            if let Err(err) = served {
                tracing::warn!(%err, "fake provider stopped with an error");
            }
        });
        self.provider = Some(Running {
            stop: Some(stop),
            task,
        });
        Ok(())
    }

    /// Stops the fake provider (calls to it fail until [`Stack::start_provider`]).
    pub async fn stop_provider(&mut self) {
        if let Some(provider) = self.provider.take() {
            provider.stop().await;
        }
    }

    /// Starts the fake provider again on the same address.
    ///
    /// # Errors
    /// The address cannot be bound again, or the provider cannot start.
    pub async fn start_provider(&mut self) -> anyhow::Result<()> {
        if self.provider.is_some() {
            return Ok(());
        }
        let listener = tokio::net::TcpListener::bind(self.provider_addr)
            .await
            .with_context(|| format!("binding {}", self.provider_addr))?;
        self.start_provider_on(listener).await
    }

    fn start_scheduler(&mut self) {
        let config = dra_fake_scheduler::Config {
            gates: dra_sim::FeatureGates::for_version(dra_sim::KubeVersion::NEWEST),
            interval: self.options.scheduler_interval,
            instance: "dra-fake-scheduler-0".into(),
        };
        let client = self.client();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            if let Err(err) = dra_fake_scheduler::run(client, config, async {
                let _ = stopped.await;
            })
            .await
            {
                tracing::warn!(%err, "scheduler stand-in stopped with an error");
            }
        });
        self.scheduler = Some(Running {
            stop: Some(stop),
            task,
        });
    }

    /// Starts the controller with `dra-autoscaler run`'s flags: the fake provider as
    /// `--provider fake=...`, health on an ephemeral port, then `extra` (later flags win).
    ///
    /// # Errors
    /// Flags that do not parse, or a provider client that cannot be built.
    pub async fn start_controller(&mut self, extra: &[&str]) -> anyhow::Result<()> {
        if self.controller.is_some() {
            bail!("the controller is already running");
        }
        let provider = format!("fake={}", self.provider_url());
        let mut argv = vec![
            "run",
            "--provider",
            provider.as_str(),
            "--listen-address",
            "127.0.0.1:0",
        ];
        if self.options.backend == Backend::Real {
            // Where the chart's Role lets the controller hold its Lease.
            argv.extend(["--lease-namespace", real::RELEASE_NAMESPACE]);
        }
        argv.extend_from_slice(extra);
        let args = RunCommand::try_parse_from(argv)
            .context("dra-autoscaler run flags")?
            .run;
        let executor = Arc::new(dra_controller::run::connect_providers(&args).await?);
        let (shutdown, shutdown_rx) = watch::channel(false);
        let client = self.controller_client.clone();
        let task = tokio::spawn(dra_controller::run_until(
            client,
            args,
            executor,
            shutdown_rx,
        ));
        self.controller = Some(Controller { shutdown, task });
        Ok(())
    }

    /// Stops the controller (it gives its Lease up, as on SIGTERM).
    ///
    /// # Errors
    /// The controller had failed.
    pub async fn stop_controller(&mut self) -> anyhow::Result<()> {
        let Some(controller) = self.controller.take() else {
            return Ok(());
        };
        let _ = controller.shutdown.send(true);
        controller.task.await.context("controller task")?
    }

    /// Kills the controller as a crash would: its work stops wherever it is (a status write or
    /// a provider call in flight is dropped, the client cancels the call), nothing is cleaned
    /// up. Tasks it spawned and does not own through its future (the Lease elector, the health
    /// listener) are left behind, so crash tests run with `--leader-elect=false`.
    pub async fn kill_controller(&mut self) {
        if let Some(controller) = self.controller.take() {
            controller.task.abort();
            let _ = controller.task.await;
        }
    }

    /// Applies the repository's example NodeGroups (`testdata/nodegroups/`).
    ///
    /// # Errors
    /// As [`apply::apply_path`].
    pub async fn apply_node_group_examples(&self) -> anyhow::Result<Vec<String>> {
        apply::apply_path(&self.client(), &node_group_examples()).await
    }

    /// Applies objects from YAML, as `kubectl apply -f` does.
    ///
    /// # Errors
    /// As [`apply::apply_objects`].
    pub async fn apply_yaml(&self, yaml: &str) -> anyhow::Result<Vec<String>> {
        let objects = apply::parse_objects(yaml, "YAML")?;
        apply::apply_objects(&self.client(), &objects).await
    }

    /// Waits until `count` pods of `namespace` are Running on a node; returns them.
    ///
    /// # Errors
    /// The time ran out (the error says what the pods were doing).
    pub async fn wait_for_running_pods(
        &self,
        namespace: &str,
        count: usize,
        timeout: Duration,
    ) -> anyhow::Result<Vec<Pod>> {
        let pods: Api<Pod> = Api::namespaced(self.client(), namespace);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let all = pods.list(&ListParams::default()).await?.items;
            let running: Vec<Pod> = all
                .iter()
                .filter(|p| {
                    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                        && p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
                })
                .cloned()
                .collect();
            if running.len() >= count {
                return Ok(running);
            }
            if tokio::time::Instant::now() > deadline {
                let states: Vec<String> = all
                    .iter()
                    .map(|p| {
                        let status = p.status.as_ref();
                        let waiting = status
                            .and_then(|s| s.conditions.as_ref())
                            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
                            .and_then(|c| c.message.clone())
                            .unwrap_or_default();
                        format!(
                            "{}: {} {waiting}",
                            p.metadata.name.clone().unwrap_or_default(),
                            status.and_then(|s| s.phase.clone()).unwrap_or_default()
                        )
                    })
                    .collect();
                bail!(
                    "{} of {count} pods Running after {timeout:?}: {states:?}",
                    running.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops everything: controller, scheduler, provider, cluster.
    pub async fn shutdown(mut self) {
        if let Err(err) = self.stop_controller().await {
            tracing::warn!(%err, "controller ended with an error");
        }
        if let Some(scheduler) = self.scheduler.take() {
            scheduler.stop().await;
        }
        self.stop_provider().await;
        match self.cluster {
            Cluster::StandIn(api) => api.shutdown().await,
            Cluster::Real(real) => real.stop(),
        }
    }
}
