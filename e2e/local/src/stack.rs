//! The local stack in one process, for end-to-end tests: the API stand-in, the scheduler
//! stand-in, the fake provider serving the cluster's NodeGroups over gRPC, and the controller
//! (`dra-autoscaler run`'s loop), each started and stopped on its own so a test can restart
//! one of them or break the provider.
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

/// How the stack is started.
#[derive(Debug, Clone)]
pub struct StackOptions {
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

/// A running local stack.
pub struct Stack {
    api: FakeApiServer,
    options: StackOptions,
    provider_addr: SocketAddr,
    provider: Option<Running>,
    scheduler: Option<Running>,
    controller: Option<Controller>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("api", &self.api.url())
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
    /// Starts the API stand-in (with the NodeGroup CRD applied), the fake provider and the
    /// scheduler stand-in. The controller starts with [`Stack::start_controller`].
    ///
    /// # Errors
    /// A component that cannot start.
    pub async fn start(options: StackOptions) -> anyhow::Result<Self> {
        let namespaces: Vec<&str> = options.namespaces.iter().map(String::as_str).collect();
        let api = FakeApiServer::builder()
            .namespaces(&namespaces)
            .start()
            .await
            .context("starting the API stand-in")?;
        apply::apply_crd(&api.client()).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let provider_addr = listener.local_addr()?;
        let mut stack = Self {
            api,
            options,
            provider_addr,
            provider: None,
            scheduler: None,
            controller: None,
        };
        stack.start_provider_on(listener).await?;
        stack.start_scheduler();
        Ok(stack)
    }

    /// A client of the API stand-in.
    #[must_use]
    pub fn client(&self) -> Client {
        self.api.client()
    }

    /// The API stand-in (request log, fault injection, watch hooks).
    #[must_use]
    pub fn api(&self) -> &FakeApiServer {
        &self.api
    }

    /// The fake provider's gRPC URL (`--provider fake=<this>`).
    #[must_use]
    pub fn provider_url(&self) -> String {
        format!("http://{}", self.provider_addr)
    }

    async fn start_provider_on(&mut self, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
        let config = Config::parse(&self.options.provider_config, "the stack's provider config")?;
        let provider =
            FakeProvider::new(config, self.client(), self.options.provider_state.clone())
                .await
                .context("starting the fake provider")?;
        let renewal = provider.spawn_lease_renewal();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = dra_provider::serve(provider, listener, ServeOptions::default(), async {
                let _ = stopped.await;
            })
            .await;
            renewal.abort();
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
        argv.extend_from_slice(extra);
        let args = RunCommand::try_parse_from(argv)
            .context("dra-autoscaler run flags")?
            .run;
        let executor = Arc::new(dra_controller::run::connect_providers(&args).await?);
        let (shutdown, shutdown_rx) = watch::channel(false);
        let client = self.client();
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

    /// Stops everything: controller, scheduler, provider, API stand-in.
    pub async fn shutdown(mut self) {
        if let Err(err) = self.stop_controller().await {
            tracing::warn!(%err, "controller ended with an error");
        }
        if let Some(scheduler) = self.scheduler.take() {
            scheduler.stop().await;
        }
        self.stop_provider().await;
        self.api.shutdown().await;
    }
}
