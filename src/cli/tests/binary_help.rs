//! The binary as built (a debug build, as CI builds it) starts and answers `--help` for
//! itself and every subcommand: clap checks its whole command definition when the first
//! command line is parsed in a debug build, so a definition it refuses panics before `main`.

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dra-autoscaler"))
        .args(args)
        .arg("--help")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} --help: {stderr}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("Usage: dra-autoscaler"), "{args:?}: {text}");
    text
}

#[test]
fn every_command_answers_help() {
    let top = help(&[]);
    for command in ["simulate", "run", "crd"] {
        assert!(top.contains(command), "{top}");
        help(&[command]);
    }
    assert!(help(&["run"]).contains("--provider"));
}
