//! One process of the local stack: where the stack's processes listen and log
//! ([`Layout`]), how one is started, started again and stopped, and the tail of its log.
//! Shared by bringing the stack up ([`crate::processes`]) and supervising it
//! ([`crate::supervise`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

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
    /// Flags added to `dra-autoscaler run`'s (one the stack sets too replaces the stack's).
    pub controller_args: Vec<String>,
    /// The fake provider's config file (faults, timings such as `sliceDelayMs`), if any.
    pub provider_config: Option<PathBuf>,
    /// Run on the real control plane instead of the API and scheduler stand-ins.
    pub real: bool,
}

impl Layout {
    /// The kubeconfig the stack writes.
    #[must_use]
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    pub(crate) fn log(&self, name: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{name}.log"))
    }
}

/// How a process is started: its name, binary, arguments and kubeconfig.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    binary: &'static str,
    args: Vec<String>,
    /// The kubeconfig it gets (`KUBECONFIG`): the stack's, or a ServiceAccount's on the real
    /// control plane.
    kubeconfig: PathBuf,
}

/// One started process.
pub(crate) struct Process {
    pub(crate) name: &'static str,
    pub(crate) child: Child,
    /// How it was started.
    pub(crate) spec: Spec,
}

/// Starts a process of the stack with the stack's kubeconfig and a fresh log file.
pub(crate) fn spawn(
    layout: &Layout,
    name: &'static str,
    binary: &'static str,
    args: &[String],
) -> anyhow::Result<Process> {
    spawn_with(layout, name, binary, args, &layout.kubeconfig())
}

/// Starts a process of the stack with `kubeconfig` and a fresh log file.
pub(crate) fn spawn_with(
    layout: &Layout,
    name: &'static str,
    binary: &'static str,
    args: &[String],
    kubeconfig: &Path,
) -> anyhow::Result<Process> {
    std::fs::File::create(layout.log(name))
        .with_context(|| format!("creating {}", layout.log(name).display()))?;
    respawn(
        layout,
        &Spec {
            name,
            binary,
            args: args.to_vec(),
            kubeconfig: kubeconfig.to_path_buf(),
        },
    )
}

/// Starts `spec` (again), appending to its log.
pub(crate) fn respawn(layout: &Layout, spec: &Spec) -> anyhow::Result<Process> {
    let name = spec.name;
    let path = layout.bin.join(spec.binary);
    if !path.exists() {
        bail!(
            "{} not found: build it first (e2e/local/run.sh builds every binary)",
            path.display()
        );
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(layout.log(name))
        .with_context(|| format!("opening {}", layout.log(name).display()))?;
    let child = Command::new(&path)
        .args(&spec.args)
        .env("KUBECONFIG", &spec.kubeconfig)
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
    Ok(Process {
        name,
        child,
        spec: spec.clone(),
    })
}

pub(crate) async fn wait_ready(url: &str) -> anyhow::Result<()> {
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
pub(crate) async fn stop_process(process: &mut Process) {
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

pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
