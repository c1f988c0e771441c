//! `dra-local-stack up`: the stack as the four processes an operator would run, each with its
//! own log file, started in order (API stand-in, NodeGroup CRD and examples, fake provider,
//! scheduler stand-in, `dra-autoscaler run`) and stopped together on Ctrl-C.
//!
//! With `--real`, the API and scheduler stand-ins give way to the real control plane
//! (`e2e/cluster/up.sh`: etcd, kube-apiserver, kube-scheduler, kube-controller-manager), and
//! the fake provider and `dra-autoscaler run` act as the chart's ServiceAccounts.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

use crate::real::{self, RealCluster};
use crate::{apply, stack};

/// Where the processes listen and write.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Working directory: kubeconfig, state files, `logs/`.
    pub dir: PathBuf,
    /// Directory of the binaries (`dra-fake-apiserver`, ...).
    pub bin: PathBuf,
    /// API stand-in port.
    pub api_port: u16,
    /// Fake provider address.
    pub provider: SocketAddr,
    /// `dra-autoscaler run`'s metrics and health address.
    pub autoscaler_health: SocketAddr,
    /// `dra-autoscaler run`'s scan interval.
    pub scan_interval: String,
    /// `--log-format` of every process.
    pub log_format: String,
    /// Run on the real control plane instead of the API and scheduler stand-ins.
    pub real: bool,
}

impl Layout {
    /// The kubeconfig the stack writes.
    #[must_use]
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{name}.log"))
    }
}

/// One started process.
struct Process {
    name: &'static str,
    child: Child,
}

fn spawn(
    layout: &Layout,
    name: &'static str,
    binary: &str,
    args: &[String],
) -> anyhow::Result<Process> {
    spawn_with(layout, name, binary, args, &layout.kubeconfig())
}

fn spawn_with(
    layout: &Layout,
    name: &'static str,
    binary: &str,
    args: &[String],
    kubeconfig: &Path,
) -> anyhow::Result<Process> {
    let path = layout.bin.join(binary);
    if !path.exists() {
        bail!(
            "{} not found: build it first (e2e/local/run.sh builds every binary)",
            path.display()
        );
    }
    let log = std::fs::File::create(layout.log(name))
        .with_context(|| format!("creating {}", layout.log(name).display()))?;
    let child = Command::new(&path)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdout(log.try_clone()?)
        .stderr(log)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", path.display()))?;
    tracing::info!(process = name, pid = child.id(), log = %layout.log(name).display(), "started");
    Ok(Process { name, child })
}

async fn wait_ready(url: &str) -> anyhow::Result<()> {
    let config = kube::Config::new(url.parse()?);
    let client = kube::Client::try_from(config)?;
    for _ in 0..100 {
        if client.apiserver_version().await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the API stand-in at {url} did not answer")
}

/// Asks a process to stop as Ctrl-C would (SIGINT), then kills it after 5 s.
async fn stop(process: &mut Process) {
    if let Some(pid) = process.child.id() {
        let _ = Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .await;
    }
    if tokio::time::timeout(Duration::from_secs(5), process.child.wait())
        .await
        .is_err()
    {
        let _ = process.child.kill().await;
    }
    tracing::info!(process = process.name, "stopped");
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Starts the stack, prints how to use it, and runs until Ctrl-C (or until a process dies).
///
/// # Errors
/// A process that cannot start, or an API stand-in that never answers.
pub async fn up(layout: &Layout) -> anyhow::Result<()> {
    std::fs::create_dir_all(layout.dir.join("logs"))
        .with_context(|| format!("creating {}", layout.dir.display()))?;
    if layout.real {
        return up_real(layout).await;
    }
    let url = format!("http://127.0.0.1:{}", layout.api_port);
    let mut processes = Vec::new();
    processes.push(spawn(
        layout,
        "apiserver",
        "dra-fake-apiserver",
        &[
            "--port".into(),
            layout.api_port.to_string(),
            "--kubeconfig-out".into(),
            layout.kubeconfig().display().to_string(),
            "--state-file".into(),
            layout
                .dir
                .join("apiserver-state.json")
                .display()
                .to_string(),
            "--log-format".into(),
            layout.log_format.clone(),
            "--taint-new-nodes".into(),
        ],
    )?);
    wait_ready(&url).await?;
    let client = kube::Client::try_from(kube::Config::new(url.parse()?))?;
    apply::apply_crd(&client).await?;
    let applied = apply::apply_path(&client, &stack::node_group_examples()).await?;
    let applied_manifests =
        apply::apply_path(&client, &stack::manifests().join("deviceclass.yaml")).await?;
    tracing::info!(objects = ?applied.iter().chain(&applied_manifests).collect::<Vec<_>>(), "applied the NodeGroup CRD, the example NodeGroups and the DeviceClass");
    processes.push(spawn(
        layout,
        "provider",
        "dra-provider-fake",
        &[
            "--listen".into(),
            layout.provider.to_string(),
            "--state-file".into(),
            layout.dir.join("provider-state.json").display().to_string(),
            "--log-format".into(),
            layout.log_format.clone(),
        ],
    )?);
    processes.push(spawn(
        layout,
        "scheduler",
        "dra-fake-scheduler",
        &["--log-format".into(), layout.log_format.clone()],
    )?);
    processes.push(spawn(
        layout,
        "autoscaler",
        "dra-autoscaler",
        &[
            "run".into(),
            "--provider".into(),
            format!("fake=http://{}", layout.provider),
            "--listen-address".into(),
            layout.autoscaler_health.to_string(),
            "--scan-interval".into(),
            layout.scan_interval.clone(),
            "--log-format".into(),
            layout.log_format.clone(),
        ],
    )?);
    println!(
        "\nThe local stack is up. Logs: {logs}/{{apiserver,provider,scheduler,autoscaler}}.log\n\n  \
         export KUBECONFIG={kubeconfig}\n  \
         kubectl get nodegroups\n  \
         kubectl apply -f {manifests}/training-gang.yaml\n  \
         kubectl get pods -o wide -w\n  \
         kubectl describe pod llm-train-0\n\n\
         Metrics and health of dra-autoscaler: http://{health}/metrics\n\
         Ctrl-C stops everything (the API stand-in keeps its objects in {dir}).",
        logs = layout.dir.join("logs").display(),
        kubeconfig = layout.kubeconfig().display(),
        manifests = stack::manifests().display(),
        health = layout.autoscaler_health,
        dir = layout.dir.display(),
    );
    let died = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break None,
            () = tokio::time::sleep(Duration::from_millis(500)) => {
                let mut died = None;
                for p in &mut processes {
                    if let Ok(Some(status)) = p.child.try_wait() {
                        died = Some((p.name, status));
                    }
                }
                if died.is_some() {
                    break died;
                }
            }
        }
    };
    if let Some((name, status)) = died {
        eprintln!(
            "{name} exited ({status}); last lines of its log:\n{}",
            tail(&layout.log(name), 20)
        );
    }
    for process in processes.iter_mut().rev() {
        stop(process).await;
    }
    Ok(())
}

/// `up --real`: the real control plane, then the fake provider and `dra-autoscaler run` as the
/// chart's ServiceAccounts.
async fn up_real(layout: &Layout) -> anyhow::Result<()> {
    let cluster_dir = layout.dir.join("cluster");
    tracing::info!(dir = %cluster_dir.display(), "starting the real control plane (e2e/cluster/up.sh; the first run builds Kubernetes, ~10 minutes)");
    let cluster = RealCluster::start(&cluster_dir, "").await?;
    let admin = cluster.admin_client().await?;
    cluster.register_control_plane_node().await?;
    apply::apply_crd(&admin).await?;
    cluster
        .install_chart_rbac(&["fakeProvider.enabled=true"])
        .await
        .context("installing the chart's RBAC")?;
    let applied = apply::apply_path(&admin, &stack::node_group_examples()).await?;
    let applied_manifests =
        apply::apply_path(&admin, &stack::manifests().join("deviceclass.yaml")).await?;
    tracing::info!(objects = ?applied.iter().chain(&applied_manifests).collect::<Vec<_>>(), "applied the NodeGroup CRD, the chart's RBAC, the example NodeGroups and the DeviceClass");
    let provider_kubeconfig = layout.dir.join("provider.kubeconfig");
    cluster
        .write_service_account_kubeconfig(
            real::RELEASE_NAMESPACE,
            stack::FAKE_PROVIDER_ACCOUNT,
            &provider_kubeconfig,
        )
        .await?;
    let controller_kubeconfig = layout.dir.join("autoscaler.kubeconfig");
    cluster
        .write_service_account_kubeconfig(
            real::RELEASE_NAMESPACE,
            stack::CONTROLLER_ACCOUNT,
            &controller_kubeconfig,
        )
        .await?;
    let mut processes = vec![
        spawn_with(
            layout,
            "provider",
            "dra-provider-fake",
            &[
                "--listen".into(),
                layout.provider.to_string(),
                "--state-file".into(),
                layout.dir.join("provider-state.json").display().to_string(),
                "--log-format".into(),
                layout.log_format.clone(),
            ],
            &provider_kubeconfig,
        )?,
        spawn_with(
            layout,
            "autoscaler",
            "dra-autoscaler",
            &[
                "run".into(),
                "--provider".into(),
                format!("fake=http://{}", layout.provider),
                "--listen-address".into(),
                layout.autoscaler_health.to_string(),
                "--scan-interval".into(),
                layout.scan_interval.clone(),
                "--lease-namespace".into(),
                real::RELEASE_NAMESPACE.into(),
                "--log-format".into(),
                layout.log_format.clone(),
            ],
            &controller_kubeconfig,
        )?,
    ];
    println!(
        "\nThe local stack is up on the real control plane (kube-apiserver, kube-scheduler and \
         kube-controller-manager v1.37.2).\nLogs: {logs}/{{provider,autoscaler}}.log and \
         {cluster_logs}/\n\n  \
         export KUBECONFIG={kubeconfig}\n  \
         kubectl get nodegroups\n  \
         kubectl apply -f {manifests}/training-gang.yaml\n  \
         kubectl get pods -o wide -w\n  \
         kubectl get events --sort-by=.metadata.creationTimestamp\n\n\
         Metrics and health of dra-autoscaler: http://{health}/metrics\n\
         Ctrl-C stops everything.",
        logs = layout.dir.join("logs").display(),
        cluster_logs = cluster.dir().join("logs").display(),
        kubeconfig = cluster.kubeconfig().display(),
        manifests = stack::manifests().display(),
        health = layout.autoscaler_health,
    );
    let died = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break None,
            () = tokio::time::sleep(Duration::from_millis(500)) => {
                let mut died = None;
                for p in &mut processes {
                    if let Ok(Some(status)) = p.child.try_wait() {
                        died = Some((p.name, status));
                    }
                }
                if died.is_some() {
                    break died;
                }
            }
        }
    };
    if let Some((name, status)) = died {
        eprintln!(
            "{name} exited ({status}); last lines of its log:\n{}",
            tail(&layout.log(name), 20)
        );
    }
    for process in processes.iter_mut().rev() {
        stop(process).await;
    }
    cluster.stop();
    Ok(())
}
