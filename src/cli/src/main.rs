//! The `dra-autoscaler` command.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = dra_autoscaler::Cli::parse();
    dra_autoscaler::init_tracing();
    match cli.run() {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`dra-autoscaler crd | head -1`): nothing is
        // wrong with the work, and nobody is left to tell.
        Err(error) if dra_autoscaler::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
