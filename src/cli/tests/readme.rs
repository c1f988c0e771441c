//! The README says what `--help` says: every gate the simulator knows is
//! listed in both, and the `simulate` usage line names every flag.

use clap::CommandFactory;
use dra_autoscaler::Cli;
use dra_sim::FeatureGates;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md")
}

fn simulate_help() -> String {
    let mut cli = Cli::command();
    let simulate = cli
        .find_subcommand_mut("simulate")
        .expect("simulate subcommand");
    simulate.render_long_help().to_string()
}

#[test]
fn every_gate_is_in_the_readme_and_in_help() {
    let (readme, help) = (readme(), simulate_help());
    for gate in FeatureGates::NAMES {
        assert!(readme.contains(&format!("`{gate}`")), "README lacks {gate}");
        assert!(help.contains(gate), "simulate --help lacks {gate}");
    }
}

#[test]
fn the_simulate_usage_line_names_every_flag() {
    let readme = readme();
    let usage = readme
        .lines()
        .find(|l| l.starts_with("dra-autoscaler simulate "))
        .expect("a usage line");
    let cli = Cli::command();
    let simulate = cli.find_subcommand("simulate").expect("simulate");
    for arg in simulate.get_arguments() {
        if let Some(long) = arg.get_long()
            && long != "help"
        {
            assert!(
                usage.contains(&format!("--{long}")),
                "usage line lacks --{long}"
            );
        }
    }
}

#[test]
fn the_first_command_is_the_one_ci_measures() {
    assert!(readme().contains(
        "cargo run -p dra-autoscaler --no-default-features -- simulate testdata/examples/gpu-cluster.yaml"
    ));
}
