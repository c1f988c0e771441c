//! `dra-provider-aws`: serves Auto Scaling groups over externalgrpc + NodeGroupExtensions, or
//! prints the `NodeGroup` objects the controller needs for them.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{CommandFactory, Parser};
use dra_provider::cli::{CloudCommand, LogArgs, parse_with, print_nodegroups};
use dra_provider::logging;
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
    #[command(flatten)]
    log: LogArgs,
    #[command(subcommand)]
    command: CloudCommand,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = parse_with(CloudCommand::with_env(
        Args::command(),
        "DRA_AWS",
        "0.0.0.0:8086",
    ));
    logging::init(args.log.log_format)?;
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let aws = Aws::from_env(args.region.clone(), args.endpoint_url.clone()).await?;
    let provider = AwsProvider::new(aws, config);
    match args.command {
        CloudCommand::PrintNodegroups => {
            let specs = provider.specs().await?;
            print_nodegroups(
                specs.iter().map(|(asg, spec)| (asg.clone(), spec)),
                &provider.unusable_groups().await?,
                "check clusterName / discoveryTags (ASGs must carry k8s.io/cluster-autoscaler/enabled and k8s.io/cluster-autoscaler/<clusterName>), nodeGroups and --region",
            )
            .context("printing NodeGroups")?;
        }
        CloudCommand::Serve(serve) => serve.serve(Arc::new(provider)).await?,
    }
    Ok(())
}
