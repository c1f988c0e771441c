//! The `dra-autoscaler` command line: a thin shell over the pure simulator and
//! planner (`dra-sim`, `dra-plan`) and the controller (`dra-controller`).

pub mod input;
pub mod simulate_cmd;

use std::io::Write;

use anyhow::Context;
use clap::{Parser, Subcommand};

pub use simulate_cmd::SimulateArgs;

/// Cluster autoscaler for AI clusters: DRA, topology and gang aware.
#[derive(Debug, Parser)]
#[command(name = "dra-autoscaler", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// What-if: place the pending pods of a snapshot (YAML/JSON files or
    /// directories, e.g. `kubectl get -A -o yaml` output) onto its nodes as
    /// kube-scheduler would, and explain every refusal.
    Simulate(SimulateArgs),
    /// Run the autoscaler against a cluster: watch, plan, scale through the
    /// configured providers, and report through Events, status and metrics.
    #[cfg(feature = "controller")]
    Run(Box<dra_controller::RunArgs>),
    /// Run the autoscaler against a cluster (not in this build: it was built
    /// without the `controller` feature).
    #[cfg(not(feature = "controller"))]
    Run(NoController),
    /// Print the NodeGroup CustomResourceDefinition (YAML), generated from the
    /// Rust types: `dra-autoscaler crd | kubectl apply -f -`.
    Crd,
}

impl Cli {
    /// Runs the chosen subcommand.
    ///
    /// # Errors
    /// Unreadable or invalid input, or a failure to write the output.
    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            // The simulator's stack budget, whatever the main thread got.
            Command::Simulate(args) => std::thread::Builder::new()
                .name("simulate".into())
                .stack_size(dra_sim::STACK_BUDGET)
                .spawn(move || args.run())
                .context("starting the simulation thread")?
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            #[cfg(not(feature = "controller"))]
            Command::Run(_) => anyhow::bail!(
                "this dra-autoscaler was built without the controller; build it with the default features (cargo build --release -p dra-autoscaler) to get `run`"
            ),
            #[cfg(feature = "controller")]
            Command::Run(args) => {
                // Planning runs on the blocking pool of this runtime.
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .thread_stack_size(dra_sim::STACK_BUDGET)
                    .build()?;
                runtime.block_on(dra_controller::run(*args))
            }
            Command::Crd => {
                let yaml = dra_api::crd_yaml()?;
                // Not `print!`, which panics when stdout is a closed pipe.
                std::io::stdout()
                    .lock()
                    .write_all(yaml.as_bytes())
                    .context("writing the CRD")?;
                Ok(())
            }
        }
    }
}

/// The arguments of `run` in a build without the controller: accepted and
/// refused with a message that says how to get it.
#[cfg(not(feature = "controller"))]
#[derive(Debug, Clone, clap::Args)]
pub struct NoController {
    /// Whatever `run` would take.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<String>,
}

/// Whether `error` comes from writing to a pipe whose reader has gone.
#[must_use]
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Structured logs to stderr; `RUST_LOG` sets the level (default `warn`, so
/// that command output on stdout stays clean).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
