//! `dra-differential`: runs generated clusters and fixed cases through our
//! `simulate` and through kube-scheduler v1.37.2 (`e2e/oracle`), and fails on
//! any disagreement. See docs/testing.md ("The upstream oracle").

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use dra_differential::oracle::Oracle;
use dra_differential::run::{Case, Verdict, judge, record};
use dra_differential::{fixed, generate};
use dra_sim::report::Outcome;
use dra_sim::{FeatureGates, KubeVersion};

/// Differential test of our DRA allocator against kube-scheduler's.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The oracle program (`e2e/oracle/build.sh` prints its path).
    #[arg(long, env = "DRA_ORACLE")]
    oracle: PathBuf,

    /// Seed of the generated clusters.
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// How many generated clusters to compare.
    #[arg(long, default_value_t = 0)]
    clusters: u64,

    /// Index of the first generated cluster (to resume a long run, or to
    /// replay one cluster: `--start I --clusters 1`).
    #[arg(long, default_value_t = 0)]
    start: u64,

    /// Fixed cases: a suite folder (`testdata/simulate`), a case folder, or a
    /// snapshot file. Repeatable.
    #[arg(long)]
    fixed: Vec<PathBuf>,

    /// Where disagreements are written (one folder each).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../oracle/disagreements"))]
    out: PathBuf,

    /// Oracle calls allowed for shrinking one disagreement.
    #[arg(long, default_value_t = 400)]
    shrink_budget: usize,

    /// Disagreements written down at most (the rest are only counted).
    #[arg(long, default_value_t = 20)]
    max_recorded: usize,

    /// Print a progress line every this many generated clusters.
    #[arg(long, default_value_t = 1000)]
    progress: u64,

    /// Print one generated cluster (`--start`) as YAML with its flags and exit.
    #[arg(long)]
    show: bool,
}

#[derive(Debug, Default)]
struct Tally {
    agree: u64,
    disagree: u64,
    ours_refused: u64,
    not_judged: u64,
    search_bound: u64,
    /// Agreed only after asking kube-scheduler again (stable allocator).
    reasked: u64,
    recorded: usize,
    outcomes: BTreeMap<&'static str, u64>,
    emulated_elsewhere: u64,
    ours_seconds: f64,
    wait_seconds: f64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // The simulator wants a big stack for deep CEL (dra_sim::STACK_BUDGET).
    let worker = std::thread::Builder::new()
        .stack_size(dra_sim::STACK_BUDGET)
        .spawn(move || run(&args))
        .context("starting the worker thread")?;
    let failed = worker
        .join()
        .map_err(|_| anyhow::anyhow!("the worker thread panicked"))??;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

fn run(args: &Args) -> anyhow::Result<bool> {
    if args.show {
        let g = generate::cluster(args.seed, args.start);
        let case = Case {
            name: format!("seed {} cluster {}", g.seed, g.index),
            version: g.version,
            feature_gates: g.feature_gates,
            objects: g.objects,
        };
        println!("# {}\n# {}", case.name, case.args());
        println!("---\n{}", serde_saphyr::to_string_multiple(&case.objects)?);
        return Ok(false);
    }
    let mut oracle = Oracle::start(&args.oracle)?;
    let mut failed = check_gate_defaults(&mut oracle)?;
    let started = Instant::now();
    let mut tally = Tally::default();

    let mut fixed_cases = Vec::new();
    for root in &args.fixed {
        fixed_cases.extend(fixed::cases(root)?);
    }
    let mut fixed_tally = Tally::default();
    for (case, flags) in &fixed_cases {
        let label = format!(
            "fixed-{}",
            case.name
                .trim_end_matches("/cluster.yaml")
                .replace(['/', '.'], "_")
                .trim_start_matches('_')
        );
        let note = if flags.ignored.is_empty() {
            String::new()
        } else {
            format!(" (flags not compared: {})", flags.ignored.join(" "))
        };
        if compare_one(
            &mut oracle,
            args,
            case,
            &label,
            &mut fixed_tally,
            true,
            &note,
        )? {
            failed = true;
        }
    }
    if !fixed_cases.is_empty() {
        summary(
            "fixed cases",
            &fixed_tally,
            started.elapsed().as_secs_f64(),
            fixed_cases.len() as u64,
        );
    }

    let generated_start = Instant::now();
    for index in args.start..args.start + args.clusters {
        let g = generate::cluster(args.seed, index);
        let case = Case {
            name: format!("seed {} cluster {}", g.seed, g.index),
            version: g.version,
            feature_gates: g.feature_gates,
            objects: g.objects,
        };
        let label = format!("seed-{}-cluster-{}", g.seed, g.index);
        if compare_one(&mut oracle, args, &case, &label, &mut tally, false, "")? {
            failed = true;
        }
        let done = index - args.start + 1;
        if args.progress > 0 && done.is_multiple_of(args.progress) && done < args.clusters {
            summary(
                "generated (so far)",
                &tally,
                generated_start.elapsed().as_secs_f64(),
                done,
            );
        }
    }
    if args.clusters > 0 {
        summary(
            "generated clusters",
            &tally,
            generated_start.elapsed().as_secs_f64(),
            args.clusters,
        );
    }
    println!(
        "{}",
        if failed {
            "FAILED: see the disagreements above"
        } else {
            "OK: no disagreement"
        }
    );
    Ok(failed)
}

/// Compares one case; returns whether it failed the run.
fn compare_one(
    oracle: &mut Oracle,
    args: &Args,
    case: &Case,
    label: &str,
    tally: &mut Tally,
    is_fixed: bool,
    note: &str,
) -> anyhow::Result<bool> {
    let outcome = judge(oracle, case, &case.objects)?;
    tally.ours_seconds += outcome.ours_seconds;
    tally.wait_seconds += outcome.wait_seconds;
    if let Some(emulated) = outcome
        .theirs
        .gates
        .as_ref()
        .and_then(|g| g.get("emulated"))
        .and_then(|v| v.as_str())
        && emulated != case.version.to_string()
    {
        tally.emulated_elsewhere += 1;
    }
    match &outcome.verdict {
        Verdict::Agree => {
            tally.agree += 1;
            if outcome.reasks > 0 {
                tally.reasked += 1;
            }
            // Ours: when asked again, kube-scheduler's first answer may be
            // another of its possible ones.
            let pods = outcome
                .ours
                .as_ref()
                .map_or(&outcome.theirs.pods, |r| &r.pods);
            for pod in pods {
                *tally
                    .outcomes
                    .entry(match pod.outcome {
                        Outcome::Fits | Outcome::FitsNewNode => "fits",
                        Outcome::Unschedulable => "unschedulable",
                        Outcome::Error => "error",
                    })
                    .or_default() += 1;
            }
            Ok(false)
        }
        Verdict::SearchBound(found) => {
            tally.search_bound += 1;
            if is_fixed {
                println!(
                    "not compared, a device search reached its bound: {}: {}",
                    case.name,
                    found.join("; ")
                );
            }
            Ok(false)
        }
        Verdict::NotJudged(why) => {
            tally.not_judged += 1;
            if is_fixed {
                println!("not judged by kube-scheduler: {}{note}: {why}", case.name);
            }
            Ok(false)
        }
        Verdict::OursRefused(why) => {
            tally.ours_refused += 1;
            if is_fixed {
                println!("refused by our loader: {}: {why}", case.name);
                Ok(false)
            } else {
                // A generated cluster is valid by construction: a refusal is a
                // bug in the generator or in our loader.
                println!(
                    "REFUSED by our loader: {} ({}): {why}",
                    case.name,
                    case.args()
                );
                Ok(true)
            }
        }
        Verdict::Disagree(found) => {
            tally.disagree += 1;
            println!("DISAGREE: {} ({}){note}", case.name, case.args());
            for d in found {
                println!("  - {d}");
            }
            if tally.recorded < args.max_recorded {
                tally.recorded += 1;
                let folder = record(oracle, &args.out, label, case, &outcome, args.shrink_budget)?;
                println!("  written to {}", folder.display());
            }
            Ok(true)
        }
    }
}

fn summary(what: &str, t: &Tally, seconds: f64, count: u64) {
    #[allow(clippy::cast_precision_loss)] // a rate for people
    let rate = count as f64 / seconds.max(1e-9);
    println!(
        "{what}: {count} in {seconds:.1} s ({rate:.1}/s; {:.1} s in our engine, {:.1} s more waiting for kube-scheduler): {} agree ({} of them on asking again: the stable allocator's pool order), {} disagree, {} refused by our loader, {} not judged by kube-scheduler, {} not compared (a search reached its bound), {} judged at another emulated version; pod outcomes where they agree: {:?}",
        t.ours_seconds,
        t.wait_seconds,
        t.agree,
        t.reasked,
        t.disagree,
        t.ours_refused,
        t.not_judged,
        t.search_bound,
        t.emulated_elsewhere,
        t.outcomes
    );
}

/// Our per-version gate defaults against kube-scheduler's (the gates both
/// know). Returns whether any differs.
fn check_gate_defaults(oracle: &mut Oracle) -> anyhow::Result<bool> {
    let mut failed = false;
    for minor in KubeVersion::OLDEST.minor..=KubeVersion::NEWEST.minor {
        let version = KubeVersion { minor };
        let upstream = oracle.defaults(&version.to_string())?;
        let ours = FeatureGates::for_version(version);
        for name in FeatureGates::NAMES {
            let (Some(theirs), Some(mine)) = (upstream.get(*name), ours.get(name)) else {
                continue;
            };
            if *theirs != mine {
                failed = true;
                println!(
                    "GATE DEFAULT: {name} at {version} is {mine} here, {theirs} in kube-scheduler"
                );
            }
        }
    }
    Ok(failed)
}
