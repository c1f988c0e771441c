//! The binary as built (a debug build, as CI builds it) answers `--help` for itself and `up`:
//! clap checks its command definition when it first parses, so a definition it refuses
//! panics before `main`.

use std::process::Command;

#[test]
fn the_binary_answers_help() {
    for args in [&[][..], &["up"][..]] {
        let out = Command::new(env!("CARGO_BIN_EXE_dra-local-stack"))
            .args(args)
            .arg("--help")
            .output()
            .expect("the binary runs");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: dra-local-stack"));
    }
}
