//! The `dra-provider-gce` binary as built (a debug build, as CI builds it): it starts (clap
//! refuses a required global argument in debug builds, before `main`), answers `--help` of
//! every command, and `print-nodegroups` against the Compute Engine stand-in (its own binary,
//! `dra-gce-stand-in`) skips a MIG whose instance template is gone, with the reason on stderr,
//! and prints the good ones.

use std::process::{Command, Output};

fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dra-provider-gce"));
    // Backtraces only when asked for: the one line is what an operator sees otherwise.
    for var in [
        "DRA_GCE_CONFIG",
        "DRA_GCE_ENDPOINT",
        "DRA_GCE_ANONYMOUS",
        "RUST_BACKTRACE",
        "RUST_LIB_BACKTRACE",
    ] {
        command.env_remove(var);
    }
    command.env("RUST_LOG", "error");
    command
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(command: &mut Command) -> Output {
    command.output().expect("the binary runs")
}

#[test]
fn every_command_answers_help_and_a_missing_config_is_one_line() {
    for args in [&[][..], &["serve"][..], &["print-nodegroups"][..]] {
        let out = run(binary().args(args).arg("--help"));
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("Usage: dra-provider-gce"),
            "{args:?}"
        );
    }
    let out = run(Command::new(env!("CARGO_BIN_EXE_dra-gce-stand-in")).arg("--help"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Usage: dra-gce-stand-in"));

    let out = run(binary().arg("print-nodegroups"));
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("--config"), "{stderr}");
}

/// The stand-in binary serving `world` (YAML); killed on drop.
struct StandInProcess {
    child: std::process::Child,
    endpoint: String,
}

impl Drop for StandInProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stand_in(dir: &tempfile::TempDir, world: &str) -> StandInProcess {
    use std::io::BufRead;
    let path = dir.path().join("world.yaml");
    std::fs::write(&path, world).expect("world written");
    let mut child = Command::new(env!("CARGO_BIN_EXE_dra-gce-stand-in"))
        .arg("--world")
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the stand-in starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its endpoint");
    StandInProcess {
        child,
        endpoint: line.trim().to_owned(),
    }
}

#[test]
fn print_nodegroups_against_the_stand_in_skips_a_mig_whose_template_is_gone() {
    let dir = tempfile::tempdir().expect("dir");
    let stand_in = stand_in(
        &dir,
        "project: proj\n\
         machineTypes:\n\
         - {name: n2-standard-16, cpus: 16, memoryMb: 65536}\n\
         - {name: n2-standard-32, cpus: 32, memoryMb: 131072}\n\
         templates:\n\
         - {name: small, properties: {machineType: n2-standard-16}}\n\
         - {name: large, properties: {machineType: n2-standard-32}}\n\
         migs:\n\
         - {name: gke-prod-small, zone: us-central1-a, template: small}\n\
         - {name: gke-prod-large, zone: us-central1-b, template: large}\n\
         - {name: gke-prod-broken, zone: us-central1-a, template: deleted}\n",
    );
    assert!(
        stand_in.endpoint.starts_with("http://127.0.0.1:"),
        "{}",
        stand_in.endpoint
    );
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "project: proj\ndiscovery: [\"mig:namePrefix=gke-prod-,min=0,max=8\"]\n",
    )
    .expect("config");
    let out = run(binary().arg("--config").arg(&config).args([
        "--endpoint",
        &stand_in.endpoint,
        "--anonymous",
        "print-nodegroups",
    ]));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("name: "))
        .collect();
    assert_eq!(names.len(), 2, "the two good MIGs are printed: {stdout}");
    let skipped: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("# skipped"))
        .collect();
    assert_eq!(skipped.len(), 1, "{stderr}");
    assert!(
        skipped[0].starts_with("# skipped us-central1-a/gke-prod-broken: instance template"),
        "{stderr}"
    );

    // A prefix nothing matches: nothing printed, a warning on stderr.
    std::fs::write(
        &config,
        "project: proj\ndiscovery: [\"mig:namePrefix=gke-staging-,min=0,max=8\"]\n",
    )
    .expect("config");
    let out = run(binary().arg("--config").arg(&config).args([
        "--endpoint",
        &stand_in.endpoint,
        "--anonymous",
        "print-nodegroups",
    ]));
    assert!(out.status.success());
    assert!(text(&out.stdout).trim().is_empty());
    assert!(
        text(&out.stderr).contains("# warning: no usable node group found"),
        "{}",
        text(&out.stderr)
    );
}
