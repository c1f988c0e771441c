//! `simulate -o json` of one file, phase by phase, for memory profilers (heaptrack, massif,
//! dhat: this binary uses the system allocator, which they intercept, where the CLI uses
//! mimalloc): prints after each phase the process' resident set and its peak so far
//! (`VmRSS`, `VmHWM` of `/proc/self/status`) and the phase's time.
//!
//! `cargo run --release -p dra-benches --example simulate_phases -- internet-10000.json`
//! (a file of `gen_internet`).

use std::time::Instant;

use dra_plan::gang_apis::GangApisFound;
use dra_plan::{PlanOptions, simulate};
use dra_sim::FeatureGates;

fn main() {
    dra_benches::on_planner_stack(run);
}

/// `VmRSS` and `VmHWM` in MiB (zero where /proc is not there).
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb / 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn phase(name: &str, started: &mut Instant) {
    let (now, peak) = rss();
    eprintln!(
        "{name:<12} {:>8.2} s  RSS {now:>6} MiB  peak {peak:>6} MiB",
        started.elapsed().as_secs_f64()
    );
    *started = Instant::now();
}

fn run() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: simulate_phases FILE.json");
        return;
    };
    let mut clock = Instant::now();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("{path}: {e}");
            return;
        }
    };
    phase("read", &mut clock);
    let mut loader = simulate::loader();
    // As `simulate` types a list's items (`DRA_THREADS` to choose).
    let threads = std::env::var("DRA_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(8)));
    loader.type_on_threads(threads);
    if let Err(e) = loader.add_json(&path, &text) {
        eprintln!("{e}");
        return;
    }
    phase("load", &mut clock);
    drop(text);
    let objects = loader.finish().objects;
    phase("drop text", &mut clock);
    let gates =
        GangApisFound::in_objects(&objects.extra, &objects.pods, &objects.pod_workload_refs)
            .resolve_gates(FeatureGates::default(), "")
            .map(|r| r.gates)
            .unwrap_or_default();
    let options = PlanOptions {
        now: None,
        ..PlanOptions::default()
    };
    let (plan, objects) = dra_plan::handback::plan_handing_back(objects, gates, &options);
    phase("plan", &mut clock);
    let scale_down_options = dra_plan::scaledown::ScaleDownOptions {
        now: options.now,
        ..dra_plan::scaledown::ScaleDownOptions::default()
    };
    // The nodes and pods are kept, as `simulate` keeps the analysis' snapshot to its end.
    let (scale_down, _nodes, _pods) =
        dra_plan::handback::analyse_handing_back(objects, gates, &plan, &scale_down_options);
    phase("scale-down", &mut clock);
    // The report as `simulate -o json` writes it: the plan's keys and the analysis'.
    let mut value = serde_json::to_value(&plan).unwrap_or_default();
    if let (Some(map), Ok(serde_json::Value::Object(more))) =
        (value.as_object_mut(), serde_json::to_value(&scale_down))
    {
        map.extend(more);
    }
    let json = serde_json::to_string_pretty(&value).unwrap_or_default() + "\n";
    phase("report", &mut clock);
    eprintln!(
        "{} bytes of report, {} pods planned",
        json.len(),
        plan.pods.len()
    );
}
