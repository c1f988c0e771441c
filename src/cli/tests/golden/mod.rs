//! The golden-file runner both suites use: a case is a directory under
//! `testdata/<suite>/` with `cluster.yaml`, the `expected.json` that the
//! rules under test imply, and optionally `args` (extra `simulate` flags on
//! one line). Each suite brings its own comparison rules.

use std::path::{Path, PathBuf};

use clap::Parser;
use dra_autoscaler::{Cli, Command};
use serde_json::Value;

/// `dra-autoscaler simulate -o json [args] cluster.yaml` on one case, as
/// the user would run it.
pub fn simulate(dir: &Path) -> Result<Value, String> {
    simulate_as(dir, "json").and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
}

/// The report of one case as `simulate -o FORMAT` prints it.
pub fn simulate_as(dir: &Path, format: &str) -> Result<String, String> {
    let mut argv = vec![
        "dra-autoscaler".to_string(),
        "simulate".into(),
        "-o".into(),
        format.into(),
    ];
    if let Ok(extra) = std::fs::read_to_string(dir.join("args")) {
        argv.extend(extra.split_whitespace().map(str::to_string));
    }
    argv.push(dir.join("cluster.yaml").display().to_string());
    let cli = Cli::try_parse_from(&argv).map_err(|e| format!("bad args {argv:?}: {e}"))?;
    let Command::Simulate(args) = cli.command else {
        return Err("not a simulate command".into());
    };
    let (output, _) = args
        .simulate()
        .map_err(|e| format!("simulate failed: {e:#}"))?;
    match format {
        "json" => output
            .to_json()
            .map(|v| v.to_string())
            .map_err(|e| e.to_string()),
        _ => Ok(output.to_text()),
    }
}

/// The case directories of `testdata/<suite>/`, in name order.
pub fn case_dirs(suite: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(suite);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("cluster.yaml").exists())
        .collect();
    dirs.sort();
    dirs
}

/// Runs every case of `testdata/<suite>/` (at least `at_least` of them) and
/// fails with every case whose output `compare` finds problems in.
///
/// An `expected.json` of the form `{"loadError": "…"}` expects loading to
/// fail with a message containing that text (the API server would have
/// refused an object of the file).
pub fn run_suite(suite: &str, at_least: usize, compare: fn(&Value, &Value) -> Vec<String>) {
    let dirs = case_dirs(suite);
    assert!(
        dirs.len() >= at_least,
        "testdata/{suite} has {} cases, the suite promises at least {at_least}",
        dirs.len()
    );
    let mut failures = Vec::new();
    for dir in &dirs {
        let case = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        let expected: Value = match std::fs::read_to_string(dir.join("expected.json"))
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{case}: expected.json: {e}"));
                continue;
            }
        };
        if let Some(want) = expected.get("loadError").and_then(Value::as_str) {
            match simulate(dir) {
                Err(e) if e.contains(want) => {}
                Err(e) => failures.push(format!("{case}: error {e:?} lacks {want:?}")),
                Ok(_) => failures.push(format!("{case}: loaded, expected error {want:?}")),
            }
            continue;
        }
        match simulate(dir) {
            Ok(actual) => {
                let problems = compare(&expected, &actual);
                if !problems.is_empty() {
                    failures.push(format!(
                        "{case}:\n  {}\n  actual: {}",
                        problems.join("\n  "),
                        serde_json::to_string(&actual).unwrap_or_default()
                    ));
                }
            }
            Err(e) => failures.push(format!("{case}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases of testdata/{suite} failed:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}

/// The reasons of a report entry (`reasons`, strings only).
pub fn reasons(entry: &Value) -> Vec<&str> {
    entry
        .get("reasons")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// Problems when some expected reason is not a substring of any actual
/// reason (our wording may add detail to what the rules imply).
pub fn missing_reasons(what: &str, expected: &Value, actual: &Value) -> Vec<String> {
    let actual = reasons(actual);
    reasons(expected)
        .into_iter()
        .filter(|r| !actual.iter().any(|a| a.contains(r)))
        .map(|r| format!("{what}: no reason contains {r:?}; reasons: {actual:?}"))
        .collect()
}

/// The entries under `key` (an array), or none.
pub fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Problems with the `pods` lists: their lengths, and per pod in order the
/// fields `pod`, `outcome`, `node` and `nodeGroup`, which must be equal
/// (absent on both sides counts as equal).
pub fn pod_fields(expected: &Value, actual: &Value) -> Vec<String> {
    let (ep, ap) = (list(expected, "pods"), list(actual, "pods"));
    let mut problems = Vec::new();
    if ep.len() != ap.len() {
        problems.push(format!("expected {} pods, got {}", ep.len(), ap.len()));
    }
    for (e, a) in ep.iter().zip(ap) {
        let name = e["pod"].as_str().unwrap_or("?");
        for field in ["pod", "outcome", "node", "nodeGroup"] {
            if e.get(field) != a.get(field) {
                problems.push(format!(
                    "pod {name}: {field} expected {} got {}",
                    e.get(field).unwrap_or(&Value::Null),
                    a.get(field).unwrap_or(&Value::Null)
                ));
            }
        }
    }
    problems
}
