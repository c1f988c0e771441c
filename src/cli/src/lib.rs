//! The `dra-autoscaler` command line: a thin shell over the pure simulator and
//! planner (`dra-sim`, `dra-plan`) and the controller (`dra-controller`).

pub mod input;
pub mod reference;
pub mod simulate_cmd;

use std::io::Write;

use anyhow::Context;
use clap::{Parser, Subcommand};
pub use dra_logging::LogFormat;

pub use simulate_cmd::SimulateArgs;

/// Cluster autoscaler for AI clusters: DRA, topology and gang aware.
#[derive(Debug, Parser)]
#[command(name = "dra-autoscaler", version, about)]
pub struct Cli {
    /// Log format on stderr: text or json, one object per line (level: RUST_LOG; default
    /// info for `run`, warn for the commands whose output is on stdout).
    #[arg(
        long,
        global = true,
        env = "DRA_AUTOSCALER_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,
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
    /// Parses the command line and checks every flag, so that nothing starts (no watch, no
    /// listener, no provider connection) with a value that cannot work. A bad value exits 2
    /// with a message naming the flag, as clap does for values it cannot parse.
    #[must_use]
    pub fn parse_checked() -> Self {
        let cli = Self::parse();
        if let Err(error) = cli.check() {
            error.exit();
        }
        cli
    }

    /// The checks clap cannot make alone (bounds, relations between flags, syntax of values
    /// read later), as a clap error of the subcommand: exit code 2, usage of that subcommand.
    ///
    /// # Errors
    /// The first flag with an unusable value.
    pub fn check(&self) -> Result<(), clap::Error> {
        #[cfg(feature = "controller")]
        if let Command::Run(args) = &self.command {
            args.validate().map_err(|invalid| {
                let mut command = <Self as clap::CommandFactory>::command();
                command.build();
                let kind = clap::error::ErrorKind::ValueValidation;
                let message = invalid.to_string();
                match command.find_subcommand_mut("run") {
                    Some(run) => run.error(kind, message),
                    None => command.error(kind, message),
                }
            })?;
        }
        Ok(())
    }

    /// The level logs start at unless `RUST_LOG` says otherwise: `info` for `run` (a
    /// long-running process whose logs are what operators read), `warn` for the commands
    /// whose output is on stdout.
    #[must_use]
    pub fn default_log_level(&self) -> &'static str {
        match self.command {
            Command::Run(_) => dra_logging::DEFAULT_FILTER,
            Command::Simulate(_) | Command::Crd => "warn",
        }
    }

    /// Sets up logging once for this process (see [`dra_logging`]).
    ///
    /// # Errors
    /// A malformed `RUST_LOG`.
    pub fn init_logging(&self) -> Result<(), dra_logging::LoggingError> {
        dra_logging::init_with_default(self.log_format, self.default_log_level())
    }

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

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::Cli;

    #[test]
    fn simulate_and_run_take_the_shared_flags_alike() {
        let cli = Cli::command();
        let flag = |command: &str, id: &str| {
            let sub = cli
                .find_subcommand(command)
                .unwrap_or_else(|| panic!("no {command}"));
            let arg = sub
                .get_arguments()
                .find(|a| a.get_id() == id)
                .unwrap_or_else(|| panic!("{command} has no {id}"));
            (
                arg.get_long().map(str::to_string),
                arg.get_env().map(|e| e.to_string_lossy().into_owned()),
                arg.get_possible_values()
                    .iter()
                    .map(|v| v.get_name().to_string())
                    .collect::<Vec<_>>(),
            )
        };
        for id in [
            "kubernetes_version",
            "feature_gates",
            "dra_filter_timeout",
            "expander",
            "min_reservation_left",
        ] {
            assert_eq!(flag("simulate", id), flag("run", id), "{id}");
        }
        assert_eq!(
            flag("run", "expander").2,
            ["least-cost", "priority", "least-waste"]
        );
    }

    #[test]
    fn bad_shared_flag_values_are_refused_before_anything_runs() {
        for bad in [
            ["--expander", "cheapest"],
            ["--feature-gates", "DRAMagic=true"],
            ["--kubernetes-version", "1.20"],
            ["--min-reservation-left", "soon"],
            ["--dra-filter-timeout", "-1s"],
        ] {
            let argv = ["dra-autoscaler", "simulate", bad[0], bad[1], "cluster.yaml"];
            let error = Cli::try_parse_from(argv).expect_err("refused");
            assert!(
                matches!(
                    error.kind(),
                    clap::error::ErrorKind::InvalidValue | clap::error::ErrorKind::ValueValidation
                ),
                "{bad:?}: {error}"
            );
        }
    }
}
