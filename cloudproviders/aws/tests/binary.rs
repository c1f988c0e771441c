//! The `dra-provider-aws` binary as built (a debug build, as CI builds it): `--help` of every
//! command, and `print-nodegroups` against moto as an operator runs it — one bad Auto Scaling
//! group among good ones is skipped with a reason on stderr, a discovery that finds nothing
//! says so, and a missing region or missing credentials is one line naming the fix.
//!
//! moto must be installed (`pip install 'moto[server]'`); without it these tests fail.

use std::process::{Command, Output};

use dra_provider_aws::moto::{self, MotoServer};

const TAGS: &[(&str, &str)] = &[
    ("k8s.io/cluster-autoscaler/enabled", "true"),
    ("k8s.io/cluster-autoscaler/prod", "owned"),
];

/// The binary with an environment that reaches no real AWS: no shared config files, no
/// instance metadata, and (unless `credentials`) no credentials.
fn binary(credentials: bool) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dra-provider-aws"));
    for var in [
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "DRA_AWS_REGION",
        "DRA_AWS_CONFIG",
        "DRA_AWS_ENDPOINT_URL",
        // An operator who asks for backtraces gets them; the one line is what they see otherwise.
        "RUST_BACKTRACE",
        "RUST_LIB_BACKTRACE",
    ] {
        command.env_remove(var);
    }
    command
        .env("AWS_CONFIG_FILE", "/nonexistent/aws-config")
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/aws-credentials",
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("RUST_LOG", "error");
    if credentials {
        command
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing");
    }
    command
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(command: &mut Command) -> Output {
    command.output().expect("the binary runs")
}

#[test]
fn every_command_answers_help() {
    for args in [&[][..], &["serve"][..], &["print-nodegroups"][..]] {
        let out = run(binary(false).args(args).arg("--help"));
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("Usage: dra-provider-aws"),
            "{args:?}"
        );
    }
}

fn config(dir: &tempfile::TempDir, yaml: &str) -> std::path::PathBuf {
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, yaml).expect("config written");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_nodegroups_skips_a_bad_group_with_its_reason_and_prints_the_good_ones() {
    let moto = MotoServer::start().unwrap_or_else(|err| panic!("{err}"));
    let aws = moto.aws().await;
    let subnet = moto::subnet(&aws).await;
    moto::group(&aws, &subnet, "m5-a", "m5.xlarge", 4, TAGS).await;
    moto::group(&aws, &subnet, "m5-b", "m5.2xlarge", 4, TAGS).await;
    moto::group(&aws, &subnet, "p9", "p9.bogus", 4, TAGS).await;
    let dir = tempfile::tempdir().expect("dir");
    let path = config(&dir, "clusterName: prod\n");
    let out = run(binary(true)
        .arg("--config")
        .arg(&path)
        .args(["--region", "us-east-1", "--endpoint-url", &moto.endpoint])
        .arg("print-nodegroups"));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("name: "))
        .collect();
    assert_eq!(names, ["m5-a", "m5-b"], "{stdout}");
    let skipped: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("# skipped"))
        .collect();
    assert_eq!(skipped.len(), 1, "{stderr}");
    assert!(
        skipped[0].starts_with("# skipped p9: instance type p9.bogus"),
        "{stderr}"
    );

    // A cluster name no group is tagged with: nothing printed, and a warning saying where to
    // look.
    let path = config(&dir, "clusterName: staging\n");
    let out = run(binary(true)
        .arg("--config")
        .arg(&path)
        .args(["--region", "us-east-1", "--endpoint-url", &moto.endpoint])
        .arg("print-nodegroups"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).trim().is_empty(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("# warning: no usable node group found; check clusterName"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_region_and_no_credentials_are_one_line_each_naming_the_fix() {
    let moto = MotoServer::start().unwrap_or_else(|err| panic!("{err}"));
    let out = run(binary(true)
        .args(["--endpoint-url", &moto.endpoint])
        .arg("print-nodegroups"));
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("no AWS region")
            && lines[0].contains("--region")
            && lines[0].contains("AWS_REGION"),
        "{stderr}"
    );

    // With a cluster name, so discovery calls AWS (and needs credentials).
    let dir = tempfile::tempdir().expect("dir");
    let path = config(&dir, "clusterName: prod\n");
    let out = run(binary(false)
        .arg("--config")
        .arg(&path)
        .args(["--region", "us-east-1", "--endpoint-url", &moto.endpoint])
        .arg("print-nodegroups"));
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("no AWS credentials")
            && lines[0].contains("AWS_ACCESS_KEY_ID")
            && lines[0].contains("retrying will not help"),
        "{stderr}"
    );
}
