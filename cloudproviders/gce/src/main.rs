//! `dra-provider-gce`: serves managed instance groups over externalgrpc + NodeGroupExtensions,
//! or prints the `NodeGroup` objects the controller needs for them.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use dra_provider::{ServeOptions, ServerTls};
use dra_provider_gce::{Config, Connection, Gce, GceProvider};

/// GCE cloud provider: managed instance groups as node groups, gangs started whole with MIG
/// resize requests or bulkInsert.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Provider configuration (YAML).
    #[arg(long, env = "DRA_GCE_CONFIG", global = true)]
    config: PathBuf,
    /// Compute Engine endpoint, for a stand-in; Google's own when absent.
    #[arg(long, env = "DRA_GCE_ENDPOINT", global = true)]
    endpoint: Option<String>,
    /// Send no credentials (only for a local stand-in).
    #[arg(long, env = "DRA_GCE_ANONYMOUS", global = true)]
    anonymous: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the provider over gRPC.
    Serve {
        /// Address to serve gRPC on.
        #[arg(long, env = "DRA_GCE_LISTEN", default_value = "0.0.0.0:8086")]
        listen: SocketAddr,
        /// Server certificate (PEM); enables TLS.
        #[arg(long, env = "DRA_GCE_TLS_CERT", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// Server key (PEM).
        #[arg(long, env = "DRA_GCE_TLS_KEY", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// CA for client certificates (PEM); enables mTLS.
        #[arg(long, env = "DRA_GCE_TLS_CLIENT_CA", requires = "tls_cert")]
        tls_client_ca: Option<PathBuf>,
        /// Also fill the fields cluster-autoscaler <= 1.34 reads.
        #[arg(long, env = "DRA_GCE_LEGACY_FIELDS")]
        legacy_fields: bool,
    },
    /// Print the NodeGroup objects (YAML) of every usable group, for `kubectl apply -f -`.
    PrintNodegroups,
}

fn nodegroups_yaml(
    specs: &std::collections::BTreeMap<String, dra_api::NodeGroupSpec>,
) -> anyhow::Result<String> {
    let mut out = String::new();
    for (id, spec) in specs {
        let object =
            dra_api::NodeGroup::new(&dra_provider_gce::groups::object_name(id), spec.clone());
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&object).context("rendering NodeGroup YAML")?);
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let config = Config::load(&args.config)?;
    let connection = Connection {
        endpoint: args.endpoint.clone(),
        anonymous: args.anonymous,
        ..Connection::default()
    };
    let gce = Gce::connect(&config.project, connection).await?;
    let provider = GceProvider::new(gce, config);
    match args.command {
        Command::PrintNodegroups => {
            let specs = provider.specs().await?;
            for (group, reason) in provider.unusable_groups().await? {
                eprintln!("# skipped {group}: {reason}");
            }
            print!("{}", nodegroups_yaml(&specs)?);
        }
        Command::Serve {
            listen,
            tls_cert,
            tls_key,
            tls_client_ca,
            legacy_fields,
        } => {
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
                std::sync::Arc::new(provider),
                listener,
                ServeOptions { tls, legacy_fields },
                shutdown,
            )
            .await?;
        }
    }
    Ok(())
}
