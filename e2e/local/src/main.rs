//! `dra-local-stack`: runs the local stack (see the library documentation).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use dra_local_stack::processes::{self, Layout};
use dra_local_stack::supervise::{self, Action};
use dra_provider::logging::{self, LogFormat};

/// The local stack: API stand-in, scheduler stand-in, fake provider and dra-autoscaler.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start the stack as processes and run until Ctrl-C.
    Up {
        /// Working directory (kubeconfig, state files, logs).
        #[arg(
            long,
            env = "DRA_LOCAL_STACK_DIR",
            default_value = "/tmp/dra-local-stack"
        )]
        dir: PathBuf,
        /// Directory of the binaries; default: this binary's.
        #[arg(long)]
        bin: Option<PathBuf>,
        /// Port of the API stand-in.
        #[arg(long, default_value_t = 16443)]
        api_port: u16,
        /// Address of the fake provider.
        #[arg(long, default_value = "127.0.0.1:18086")]
        provider: SocketAddr,
        /// Metrics and health address of dra-autoscaler.
        #[arg(long, default_value = "127.0.0.1:18080")]
        autoscaler_health: SocketAddr,
        /// dra-autoscaler's scan interval.
        #[arg(long, default_value = "5s")]
        scan_interval: String,
        /// Log format of every process: text or json.
        #[arg(long, default_value = "text")]
        log_format: LogFormat,
        /// Run on the real control plane (kube-apiserver, kube-scheduler and
        /// kube-controller-manager v1.37.2 built from Go modules by e2e/cluster/build.sh)
        /// instead of the API and scheduler stand-ins.
        #[arg(long)]
        real: bool,
        /// The fake provider's config file (faults, timings such as `sliceDelayMs`).
        #[arg(long)]
        provider_config: Option<PathBuf>,
        /// Flags for `dra-autoscaler run`, after `--` (e.g. `-- --scale-down-delay-after-add 0s`);
        /// one the stack sets too (`--scan-interval`, `--log-format`, `--listen-address`)
        /// replaces the stack's.
        #[arg(last = true)]
        controller_args: Vec<String>,
    },
    /// Stop one process of a running stack; the others keep running.
    Stop {
        /// apiserver, provider, scheduler or controller.
        name: String,
        /// Working directory of the running stack.
        #[arg(
            long,
            env = "DRA_LOCAL_STACK_DIR",
            default_value = "/tmp/dra-local-stack"
        )]
        dir: PathBuf,
    },
    /// Start one stopped (or dead) process of a running stack with its first arguments.
    Start {
        /// apiserver, provider, scheduler or controller.
        name: String,
        /// Working directory of the running stack.
        #[arg(
            long,
            env = "DRA_LOCAL_STACK_DIR",
            default_value = "/tmp/dra-local-stack"
        )]
        dir: PathBuf,
    },
    /// Restart one process of a running stack; the others keep running.
    Restart {
        /// apiserver, provider, scheduler or controller.
        name: String,
        /// Working directory of the running stack.
        #[arg(
            long,
            env = "DRA_LOCAL_STACK_DIR",
            default_value = "/tmp/dra-local-stack"
        )]
        dir: PathBuf,
    },
    /// Whether each process of a running stack runs, and its pid.
    Status {
        /// Working directory of the running stack.
        #[arg(
            long,
            env = "DRA_LOCAL_STACK_DIR",
            default_value = "/tmp/dra-local-stack"
        )]
        dir: PathBuf,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Cli { command } = Cli::parse();
    match command {
        Command::Up {
            dir,
            bin,
            api_port,
            provider,
            autoscaler_health,
            scan_interval,
            log_format,
            provider_config,
            controller_args,
            real,
        } => {
            logging::init(log_format)?;
            let bin = match bin {
                Some(bin) => bin,
                None => std::env::current_exe()?
                    .parent()
                    .context("this binary has no directory")?
                    .to_path_buf(),
            };
            let layout = Layout {
                dir,
                bin,
                api_port,
                provider,
                autoscaler_health,
                scan_interval,
                log_format: log_format.to_string(),
                controller_args,
                provider_config,
                real,
            };
            processes::up(&layout).await
        }
        Command::Stop { name, dir } => supervise::request(&dir, Action::Stop, &name).await,
        Command::Start { name, dir } => supervise::request(&dir, Action::Start, &name).await,
        Command::Restart { name, dir } => supervise::request(&dir, Action::Restart, &name).await,
        Command::Status { dir } => {
            supervise::status(&dir);
            Ok(())
        }
    }
}
