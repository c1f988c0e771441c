//! The `dra-autoscaler` command.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = dra_autoscaler::Cli::parse();
    dra_autoscaler::init_tracing();
    match cli.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
