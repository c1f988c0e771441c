//! `dra-provider-aws`: serves Auto Scaling groups over externalgrpc + NodeGroupExtensions, or
//! prints the `NodeGroup` objects the controller needs for them.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use dra_provider::ServeArgs;
use dra_provider::cli::{parse_with, print_nodegroups};
use dra_provider::logging::{self, LogFormat};
use dra_provider_aws::{Aws, AwsProvider, Config};

/// AWS cloud provider: Auto Scaling groups as node groups, gangs started whole with EC2 Fleet.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Provider configuration (YAML).
    #[arg(long, env = "DRA_AWS_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Region; the SDK's default chain (AWS_REGION, profile, IMDS) when absent.
    #[arg(long, env = "DRA_AWS_REGION", global = true)]
    region: Option<String>,
    /// Endpoint of EC2 and Auto Scaling, for an emulator; AWS's own when absent.
    #[arg(long, env = "DRA_AWS_ENDPOINT_URL", global = true)]
    endpoint_url: Option<String>,
    /// Log format: text or json (level: RUST_LOG, default info).
    #[arg(
        long,
        env = "DRA_AWS_LOG_FORMAT",
        default_value = "text",
        global = true
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the provider over gRPC.
    Serve(ServeArgs),
    /// Print the NodeGroup objects (YAML) of every usable group, for `kubectl apply -f -`.
    PrintNodegroups,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = parse_with(Args::command().mut_subcommand("serve", |serve| {
        ServeArgs::with_env(serve, "DRA_AWS", "0.0.0.0:8086")
    }));
    logging::init(args.log_format)?;
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let aws = Aws::from_env(args.region.clone(), args.endpoint_url.clone()).await?;
    let provider = AwsProvider::new(aws, config);
    match args.command {
        Command::PrintNodegroups => {
            let specs = provider.specs().await?;
            print_nodegroups(
                specs.iter().map(|(asg, spec)| (asg.clone(), spec)),
                &provider.unusable_groups().await?,
                "check clusterName / discoveryTags (ASGs must carry k8s.io/cluster-autoscaler/enabled and k8s.io/cluster-autoscaler/<clusterName>), nodeGroups and --region",
            )
            .context("printing NodeGroups")?;
        }
        Command::Serve(serve) => serve.serve(Arc::new(provider)).await?,
    }
    Ok(())
}
