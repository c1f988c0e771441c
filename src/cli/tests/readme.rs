//! The README and the book say what the binary does: the README's first command plans the
//! scale-up it promises, every gate the simulator knows is listed in the `simulate` guide and
//! in `--help`, and the guide's usage line names every flag.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::CommandFactory;
use dra_autoscaler::Cli;
use dra_sim::FeatureGates;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The page of the book that documents `simulate` (moved there from the README).
const SIMULATE_GUIDE: &str = "docs/guide/simulate.md";

fn simulate_help() -> String {
    let mut cli = Cli::command();
    let simulate = cli
        .find_subcommand_mut("simulate")
        .expect("simulate subcommand");
    simulate.render_long_help().to_string()
}

#[test]
fn every_gate_is_in_the_guide_and_in_help() {
    let (guide, help) = (read(SIMULATE_GUIDE), simulate_help());
    for gate in FeatureGates::NAMES {
        assert!(
            guide.contains(&format!("`{gate}`")),
            "{SIMULATE_GUIDE} lacks {gate}"
        );
        assert!(help.contains(gate), "simulate --help lacks {gate}");
    }
}

#[test]
fn the_simulate_usage_line_names_every_flag() {
    let guide = read(SIMULATE_GUIDE);
    let usage = guide
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

/// The README's first command: the first `cargo run` line of its first `sh` block.
fn first_command() -> String {
    let readme = read("README.md");
    let block = readme
        .split("```sh\n")
        .nth(1)
        .expect("README has a ```sh block");
    block
        .lines()
        .take_while(|l| !l.starts_with("```"))
        .find(|l| l.starts_with("cargo run "))
        .expect("the first sh block has a `cargo run` line")
        .to_owned()
}

/// The arguments the README's first command gives the binary (what follows ` -- `).
fn first_command_args() -> Vec<String> {
    let command = first_command();
    let (cargo, args) = command.split_once(" -- ").expect("`cargo run ... -- ARGS`");
    // Quick from a cold checkout: the simulate-only build, as docs/benchmarks.md measures.
    assert!(
        cargo.contains("-p dra-autoscaler") && cargo.contains("--no-default-features"),
        "{command}"
    );
    // A comment may follow on the line; the args have no quoting.
    let args = args.split(" #").next().unwrap_or(args);
    args.split_whitespace().map(str::to_owned).collect()
}

fn run_binary(args: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dra-autoscaler"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The first command plans a scale-up of a GPU gang over a reserved and an on-demand group.
///
/// Expected, derived by hand from `testdata/examples/gpu-gang-scale-up.yaml`:
/// - the gang `ml/llama-finetune` has minCount 6; each pod asks for 4 GPUs (ResourceClaimTemplate
///   `four-h200`), so the gang needs 6 × 4 = 24 GPUs at once;
/// - the existing nodes hold none: `system-a1b2c` has no GPUs and the 8 GPUs of `h200-r-7d9k2`
///   are allocated to the running pod `inference/serving-0`;
/// - a machine of either group has 8 GPUs (and 191450m CPU, 2000Gi memory, far above two pods'
///   64 CPU and 512Gi), so 2 pods fit on one machine: 24 / 8 = 3 new machines;
/// - the reservation `cr-0a1b2c3d4e5f60718` holds 3 machines and `h200-r-7d9k2` is one of them
///   (its node-group label), so `h200-reserved` can add 3 − 1 = 2 machines, at price 0;
/// - the least-cost expander (the default) takes those 2 first (4 pods), and the third machine
///   (2 pods) comes from `h200-on-demand` at 84.80/h.
///
/// So: `h200-reserved +2`, `h200-on-demand +1`, and the gang lands.
#[test]
fn the_first_command_plans_the_scale_up_of_a_gpu_gang() {
    let args = first_command_args();
    assert_eq!(
        args.first().map(String::as_str),
        Some("simulate"),
        "{args:?}"
    );
    let text = run_binary(&args);

    let scale_ups: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "SCALE-UPS")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    // Each scale-up line is followed by its reasons, `- ...`.
    let (why, scale_ups): (Vec<&str>, Vec<&str>) =
        scale_ups.into_iter().partition(|l| l.starts_with("- "));
    assert_eq!(scale_ups.len(), 2, "two groups grow:\n{text}");
    // Why the third machine is on demand: the reservation holds 3, one is
    // running, the plan takes the other 2; and the reserved group, free,
    // comes first for the gang.
    let used_up = "reservation cr-0a1b2c3d4e5f60718 is used up: 3 of 3 instances in use or planned";
    assert!(
        why.contains(&format!("- no room for more: {used_up}").as_str()),
        "the reserved group says its reservation is used up:\n{text}"
    );
    assert!(
        why.contains(
            &format!("- h200-reserved comes first for ml/llama-finetune but has no room for more: {used_up}")
                .as_str()
        ),
        "the on-demand group says why it is used:\n{text}"
    );
    assert!(
        scale_ups
            .iter()
            .any(|l| l.starts_with("h200-reserved +2 (reserved")
                && l.ends_with("for ml/llama-finetune")),
        "2 reserved machines:\n{text}"
    );
    assert!(
        scale_ups
            .iter()
            .any(|l| l.starts_with("h200-on-demand +1 (on-demand, 84.80/h)")
                && l.ends_with("for ml/llama-finetune")),
        "1 on-demand machine:\n{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("ml/llama-finetune (") && l.ends_with(": lands")),
        "the gang lands:\n{text}"
    );

    // The same plan as the JSON contract states it, exactly.
    let mut json_args = args.clone();
    json_args.extend(["-o".to_owned(), "json".to_owned()]);
    let report: serde_json::Value =
        serde_json::from_str(&run_binary(&json_args)).expect("JSON report");
    let mut bought: Vec<(String, i64, String)> = report["scaleUps"]
        .as_array()
        .expect("scaleUps")
        .iter()
        .map(|s| {
            (
                s["nodeGroup"].as_str().unwrap_or_default().to_owned(),
                s["count"].as_i64().unwrap_or_default(),
                s["capacityType"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    bought.sort();
    assert_eq!(
        bought,
        vec![
            ("h200-on-demand".to_owned(), 1, "on-demand".to_owned()),
            ("h200-reserved".to_owned(), 2, "reserved".to_owned()),
        ]
    );
    let pods = report["pods"].as_array().expect("pods");
    assert_eq!(pods.len(), 6, "{report}");
    assert!(
        pods.iter().all(|p| p["outcome"] == "fits-new-node"),
        "every member on a new node: {report}"
    );
}
