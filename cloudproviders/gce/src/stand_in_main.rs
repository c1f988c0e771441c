//! `dra-gce-stand-in`: the Compute Engine stand-in as a process, serving a world read from a
//! YAML file (see `stand_in::WorldFile`), so `dra-provider-gce --endpoint … --anonymous` can
//! be tried without a Google Cloud project.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use dra_provider::logging::{self, LogFormat};
use dra_provider_gce::stand_in::{StandIn, WorldFile};

/// Local stand-in for the Compute Engine endpoints dra-provider-gce calls.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The world to serve (YAML: project, machine types, templates, MIGs, reservations).
    #[arg(long, env = "DRA_GCE_STAND_IN_WORLD")]
    world: PathBuf,
    /// Address to serve on.
    #[arg(
        long,
        env = "DRA_GCE_STAND_IN_LISTEN",
        default_value = "127.0.0.1:8090"
    )]
    listen: SocketAddr,
    /// Log format: text or json (level: RUST_LOG, default info).
    #[arg(long, default_value = "text")]
    log_format: LogFormat,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    logging::init(args.log_format)?;
    let world = WorldFile::load(&args.world)?.world();
    let stand_in = StandIn::start_on(world, args.listen).await?;
    // The first line is the endpoint, for scripts.
    println!("{}", stand_in.endpoint);
    tracing::info!(endpoint = %stand_in.endpoint, "serving the Compute Engine stand-in");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
