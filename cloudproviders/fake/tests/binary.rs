//! The binary as built (a debug build, as CI builds it) answers `--help`: clap checks its
//! command definition when it first parses, so a definition it refuses panics before `main`.

use std::process::Command;

#[test]
fn the_binary_answers_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_dra-provider-fake"))
        .arg("--help")
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Usage: dra-provider-fake"), "{text}");
    assert!(text.contains("--kubeconfig"), "{text}");
}
