//! `dra-provider-fake`: serves the fake cloud over externalgrpc + NodeGroupExtensions.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use dra_provider::logging::{self, LogFormat};
use dra_provider::{ServeOptions, ServerTls};
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
    /// Address to serve gRPC on.
    #[arg(long, env = "DRA_FAKE_LISTEN", default_value = "127.0.0.1:8086")]
    listen: SocketAddr,
    /// Server certificate (PEM); enables TLS.
    #[arg(long, env = "DRA_FAKE_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Server key (PEM).
    #[arg(long, env = "DRA_FAKE_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// CA for client certificates (PEM); enables mTLS.
    #[arg(long, env = "DRA_FAKE_TLS_CLIENT_CA", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Where to keep state across restarts; without it, state is derived from the Nodes.
    #[arg(long, env = "DRA_FAKE_STATE_FILE")]
    state_file: Option<PathBuf>,
    /// Also fill the fields cluster-autoscaler <= 1.34 reads.
    #[arg(long, env = "DRA_FAKE_LEGACY_FIELDS")]
    legacy_fields: bool,
    /// Log format: text or json (level: RUST_LOG, default info).
    #[arg(long, env = "DRA_FAKE_LOG_FORMAT", default_value = "text")]
    log_format: LogFormat,
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
        listen,
        tls_cert,
        tls_key,
        tls_client_ca,
        state_file,
        legacy_fields,
        log_format,
    } = Args::parse();
    logging::init(log_format)?;
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
    let provider = FakeProvider::new(config, kube_client(kubeconfig).await?, state_file).await?;
    let _renewal = provider.spawn_lease_renewal();
    let tls = tls_cert.zip(tls_key).map(|(cert, key)| ServerTls {
        cert,
        key,
        client_ca: tls_client_ca,
    });
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    dra_provider::serve(
        provider,
        listener,
        ServeOptions { tls, legacy_fields },
        shutdown,
    )
    .await?;
    Ok(())
}
