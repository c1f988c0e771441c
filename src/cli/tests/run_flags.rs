//! `dra-autoscaler run` as an operator starts it: the log format flag, a bad flag value
//! refused before anything starts (exit 2, the flag named, as clap refuses values it cannot
//! parse), and the first log line, JSON when asked, with no colour codes in a pipe.

#![cfg(feature = "controller")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command as Process, Output};

use clap::Parser;
use dra_autoscaler::{Cli, Command, LogFormat};

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    let mut argv = vec!["dra-autoscaler"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv)
}

#[test]
fn log_format_is_text_by_default_json_on_request_and_nothing_else() {
    let cli = parse(&["run", "--dry-run"]).unwrap();
    assert_eq!(cli.log_format, LogFormat::Text);
    assert_eq!(cli.default_log_level(), "info", "run logs at info");
    // A global flag: before or after the subcommand.
    assert_eq!(
        parse(&["run", "--dry-run", "--log-format", "json"])
            .unwrap()
            .log_format,
        LogFormat::Json
    );
    assert_eq!(
        parse(&["--log-format", "json", "run", "--dry-run"])
            .unwrap()
            .log_format,
        LogFormat::Json
    );
    let simulate = parse(&["simulate", "x.yaml"]).unwrap();
    assert_eq!(simulate.default_log_level(), "warn", "stdout is the output");

    let refused = parse(&["run", "--dry-run", "--log-format", "yaml"]).unwrap_err();
    assert_eq!(refused.exit_code(), 2);
    let text = refused.to_string();
    assert!(
        text.contains("--log-format") && text.contains("yaml"),
        "{text}"
    );
}

#[test]
fn a_value_clap_parses_but_cannot_work_is_refused_with_exit_code_2() {
    let cli = parse(&["run", "--dry-run", "--scan-interval", "0s"]).unwrap();
    assert!(matches!(cli.command, Command::Run(_)));
    let refused = cli.check().unwrap_err();
    assert_eq!(refused.exit_code(), 2);
    let text = refused.to_string();
    assert!(
        text.contains("invalid --scan-interval: must be positive"),
        "{text}"
    );
    assert!(parse(&["run", "--dry-run"]).unwrap().check().is_ok());
}

/// The binary with no cluster to talk to: `KUBECONFIG` names a file that does not exist and
/// no in-cluster service account is there.
fn run_binary(args: &[&str]) -> Output {
    Process::new(env!("CARGO_BIN_EXE_dra-autoscaler"))
        .args(args)
        .env("KUBECONFIG", "/nonexistent/dra-autoscaler-test/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("RUST_LOG")
        .env_remove("DRA_AUTOSCALER_LOG_FORMAT")
        .output()
        .expect("the binary runs")
}

#[test]
fn the_binary_refuses_an_invalid_flag_before_connecting() {
    let out = run_binary(&["run", "--dry-run", "--renew-deadline", "20s"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid --renew-deadline") && stderr.contains("Usage: dra-autoscaler run"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("kubeconfig"),
        "nothing was started: {stderr}"
    );
}

#[test]
fn the_binary_logs_its_start_as_one_json_object_per_line_without_colour() {
    let out = run_binary(&[
        "run",
        "--dry-run",
        "--log-format",
        "json",
        "--scan-interval",
        "3s",
    ]);
    // No cluster: it stops after the first line.
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains('\u{1b}'),
        "no ANSI codes in a pipe: {stderr:?}"
    );
    let first = stderr.lines().next().expect("a log line");
    let line: serde_json::Value = serde_json::from_str(first).expect("JSON");
    assert_eq!(line["level"], "INFO", "{line}");
    assert_eq!(line["fields"]["message"], "starting dra-autoscaler run");
    assert_eq!(line["fields"]["version"], env!("CARGO_PKG_VERSION"));
    let flags = line["fields"]["flags"]
        .as_str()
        .expect("the effective flags");
    assert!(
        flags.contains("scan_interval: 3s") && flags.contains("dry_run: true"),
        "{flags}"
    );
    assert!(line["timestamp"].is_string(), "{line}");
    assert!(
        stderr.contains("unable to read the kubeconfig"),
        "then the failure: {stderr}"
    );

    let text = run_binary(&["run", "--dry-run"]);
    let stderr = String::from_utf8_lossy(&text.stderr);
    assert!(
        stderr.contains("INFO") && stderr.contains("starting dra-autoscaler run"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "no ANSI codes in a pipe: {stderr:?}"
    );
}
