//! `dra-provider-fake`: serves the fake cloud over externalgrpc + NodeGroupExtensions.

use std::path::PathBuf;

use anyhow::Context;
use clap::{CommandFactory, Parser};
use dra_provider::ServeArgs;
use dra_provider::cli::{LogArgs, parse_with};
use dra_provider::logging;
use dra_provider_fake::{Config, FakeProvider};

/// Fake cloud provider: serves the NodeGroups of the cluster (and node groups from YAML);
/// instances become kubelet-less Nodes and DRA ResourceSlices in the cluster given by the
/// kubeconfig.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Faults, timings and node groups not described by NodeGroup objects (YAML). Without it,
    /// the NodeGroups whose spec.provider is `fake` are served with no faults.
    #[arg(long, env = "DRA_FAKE_CONFIG")]
    config: Option<PathBuf>,
    /// Kubeconfig of the cluster to write Nodes and slices into; in-cluster config when absent.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    // --listen, --tls-*, --legacy-fields (DRA_FAKE_*).
    #[command(flatten)]
    serve: ServeArgs,
    /// Where to keep state across restarts; without it, state is derived from the Nodes.
    #[arg(long, env = "DRA_FAKE_STATE_FILE")]
    state_file: Option<PathBuf>,
    #[command(flatten)]
    log: LogArgs,
}

async fn kube_client(kubeconfig: Option<PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(&path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Args {
        config: config_path,
        kubeconfig,
        serve,
        state_file,
        log,
    } = parse_with(LogArgs::with_env(
        ServeArgs::with_env(Args::command(), "DRA_FAKE", "127.0.0.1:8086"),
        "DRA_FAKE",
    ));
    logging::init(log.log_format)?;
    let config = match &config_path {
        Some(path) => Config::load(path)?,
        None => Config::parse("{}", "the defaults")?,
    };
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        config = ?config_path.as_ref().map(|p| p.display().to_string()),
        provider_name = %config.provider_name,
        "starting dra-provider-fake"
    );
    let client = kube_client(kubeconfig).await?;
    let kubelet_period = std::time::Duration::from_millis(config.kubelet_sync_ms.max(50));
    let provider = FakeProvider::new(config, client.clone(), state_file).await?;
    let _renewal = provider.spawn_lease_renewal();
    let _kubelet = provider.spawn_kubelet(client, kubelet_period);
    serve.serve(provider).await?;
    Ok(())
}
