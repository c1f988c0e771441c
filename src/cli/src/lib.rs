//! The `dra-autoscaler` command line: a thin shell over the pure simulator and
//! planner (`dra-sim`, `dra-plan`) and, later, the controller.

pub mod input;
pub mod simulate_cmd;

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
    Run(Box<dra_controller::RunArgs>),
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
            Command::Simulate(args) => args.run(),
            Command::Run(args) => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(dra_controller::run(*args))
            }
            Command::Crd => {
                let yaml = dra_api::crd_yaml()?;
                print!("{yaml}");
                Ok(())
            }
        }
    }
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
