//! Our version tables against the real 1.37.2 binaries: the feature-gate defaults that
//! `--kubernetes-version 1.37` assumes must be the ones kube-scheduler 1.37.2 starts with, and
//! every gate we let users switch must exist in that scheduler. The binary is the oracle: its
//! `--help` lists every gate that is not GA (with its default); a GA gate is probed by starting
//! the scheduler with the gate switched off, which it refuses for a gate locked on and for a
//! gate it does not know.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use dra_sim::{FeatureGates, KubeVersion};

/// The bin directory `e2e/cluster/build.sh` builds (warm: it only prints it).
fn binaries() -> PathBuf {
    let script = dra_local_stack::real::cluster_scripts().join("build.sh");
    let out = Command::new("bash").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// What the 1.37 binary says of one gate.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Upstream {
    /// Listed by `--help` with this default (alpha, beta or deprecated).
    Listed(bool),
    /// GA and locked on.
    LockedOn,
    /// GA, on, and still switchable.
    Ga,
    /// Not a gate of this release.
    Unknown,
}

/// `kube:Name=true|false (STAGE - default=X)` lines of `kube-scheduler --help`; the default
/// is the first one given (the line may add another for a newer compatibility version).
fn listed(help: &str) -> BTreeMap<String, bool> {
    help.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("kube:")?;
            let (name, rest) = rest.split_once("=true|false (")?;
            let default = rest.split("default=").nth(1)?;
            Some((name.to_owned(), default.starts_with("true")))
        })
        .collect()
}

/// Starts the scheduler with `gate=false` just far enough to see whether the gate parses.
fn probe(bin: &Path, gate: &str) -> Upstream {
    let out = Command::new(bin.join("kube-scheduler"))
        .arg(format!("--feature-gates={gate}=false"))
        .arg("--kubeconfig=/nonexistent/kubeconfig")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    if text.contains(&format!("unrecognized feature gate: {gate}")) {
        Upstream::Unknown
    } else if text.contains(&format!(
        "cannot set feature gate {gate} to false, feature is locked to true"
    )) {
        Upstream::LockedOn
    } else if text.contains("setting GA feature gate") {
        Upstream::Ga
    } else {
        panic!("kube-scheduler said nothing we can read of {gate}:\n{text}")
    }
}

#[test]
#[ignore = "needs the real binaries: e2e/cluster/test.sh"]
fn our_1_37_gate_defaults_are_kube_scheduler_1_37_2s() {
    let bin = binaries();
    let help = Command::new(bin.join("kube-scheduler"))
        .arg("--help")
        .output()
        .unwrap();
    let listed = listed(&String::from_utf8_lossy(&help.stdout));
    assert!(listed.len() > 50, "--help listed too few gates: {listed:?}");
    let ours = FeatureGates::for_version(KubeVersion { minor: 37 });
    let mut differences = Vec::new();
    for &name in FeatureGates::NAMES {
        let upstream = match listed.get(name) {
            Some(default) => Upstream::Listed(*default),
            None => probe(&bin, name),
        };
        let our_default = ours.get(name).unwrap();
        let agrees = match upstream {
            Upstream::Listed(default) => default == our_default,
            Upstream::LockedOn | Upstream::Ga => our_default,
            // A gate 1.37 does not have is not ours to default either.
            Upstream::Unknown => !FeatureGates::exists_in(name, KubeVersion { minor: 37 }),
        };
        println!("{name}: ours {our_default}, kube-scheduler 1.37.2 {upstream:?}");
        if !agrees {
            differences.push(format!("{name}: ours {our_default}, upstream {upstream:?}"));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}
