//! `dra-provider-gce`: serves managed instance groups over externalgrpc + NodeGroupExtensions,
//! or prints the `NodeGroup` objects the controller needs for them.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{CommandFactory, Parser};
use dra_provider::cli::{CloudCommand, LogArgs, parse_with, print_nodegroups};
use dra_provider::logging;
use dra_provider_gce::groups::object_name;
use dra_provider_gce::{Config, Connection, Gce, GceProvider};

/// GCE cloud provider: managed instance groups as node groups, gangs started whole with MIG
/// resize requests or bulkInsert.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Provider configuration (YAML); required. Optional to clap only: a global argument
    /// cannot be required (clap refuses it in debug builds, before `main`), so its absence is
    /// reported by `main`.
    #[arg(long, env = "DRA_GCE_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Compute Engine endpoint, for a stand-in; Google's own when absent.
    #[arg(long, env = "DRA_GCE_ENDPOINT", global = true)]
    endpoint: Option<String>,
    /// Send no credentials (only for a local stand-in).
    #[arg(long, env = "DRA_GCE_ANONYMOUS", global = true)]
    anonymous: bool,
    #[command(flatten)]
    log: LogArgs,
    #[command(subcommand)]
    command: CloudCommand,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = parse_with(CloudCommand::with_env(
        Args::command(),
        "DRA_GCE",
        "0.0.0.0:8086",
    ));
    logging::init(args.log.log_format)?;
    let Some(path) = &args.config else {
        anyhow::bail!(
            "no provider configuration: pass --config FILE (or set DRA_GCE_CONFIG); it names the project and the groups"
        );
    };
    let config = Config::load(path)?;
    let connection = Connection {
        endpoint: args.endpoint.clone(),
        anonymous: args.anonymous,
        ..Connection::default()
    };
    let gce = Gce::connect(&config.project, connection).await?;
    let provider = GceProvider::new(gce, config);
    match args.command {
        CloudCommand::PrintNodegroups => {
            let specs = provider.specs().await?;
            print_nodegroups(
                specs.iter().map(|(id, spec)| (object_name(id), spec)),
                &provider.unusable_groups().await?,
                "check project, discovery (mig:namePrefix=...), templateLabels and nodeGroups",
            )
            .context("printing NodeGroups")?;
        }
        CloudCommand::Serve(serve) => serve.serve(Arc::new(provider)).await?,
    }
    Ok(())
}
