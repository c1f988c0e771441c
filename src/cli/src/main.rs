//! The `dra-autoscaler` command.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = dra_autoscaler::Cli::parse_checked();
    if let Err(error) = cli.init_logging() {
        eprintln!("error: {error}");
        return ExitCode::from(2);
    }
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
