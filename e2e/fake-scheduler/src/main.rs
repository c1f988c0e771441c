//! `dra-fake-scheduler`: the scheduler stand-in as a process (see the library documentation).

use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use dra_fake_scheduler::Config;
use dra_provider::logging::{self, LogFormat};
use dra_sim::{FeatureGates, KubeVersion};

/// Places pending pods as kube-scheduler would (dra-sim's filters and DRA allocator), binds
/// them, allocates their claims and marks them Running; tells the others why they wait.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Kubernetes version whose scheduler is modelled (1.34 to 1.37).
    #[arg(
        long,
        env = "DRA_FAKE_SCHEDULER_KUBERNETES_VERSION",
        default_value = "1.37"
    )]
    kubernetes_version: String,
    /// Feature gates on top of the version's defaults (`Name=bool,...`).
    #[arg(long, env = "DRA_FAKE_SCHEDULER_FEATURE_GATES", default_value = "")]
    feature_gates: String,
    /// Time between scheduling cycles, in milliseconds.
    #[arg(long, env = "DRA_FAKE_SCHEDULER_INTERVAL_MS", default_value_t = 500)]
    interval_ms: u64,
    /// Log format: text or json (level: RUST_LOG, default info).
    #[arg(long, env = "DRA_FAKE_SCHEDULER_LOG_FORMAT", default_value = "text")]
    log_format: LogFormat,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    logging::init(args.log_format)?;
    let version: KubeVersion = args
        .kubernetes_version
        .parse()
        .context("--kubernetes-version")?;
    let mut gates = FeatureGates::for_version(version);
    gates
        .apply_flag(&args.feature_gates)
        .context("--feature-gates")?;
    let client = kube::Client::try_default()
        .await
        .context("unable to build a Kubernetes client from KUBECONFIG or the service account")?;
    tracing::info!(kubernetes = %version, "starting dra-fake-scheduler");
    let config = Config {
        gates,
        interval: Duration::from_millis(args.interval_ms.max(10)),
        instance: format!("dra-fake-scheduler-{}", std::process::id()),
    };
    dra_fake_scheduler::run(client, config, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}
