//! One plan of Karpenter's benchmark workload, for profilers and for a quick
//! look at the plan: `cargo run --profile bench -p dra-benches --example
//! profile_karpenter -- 10000 [plain]` (`plain`: generic pods and one
//! offering per shape, the planner benchmark (a) shape). `REPS=n` plans n
//! times and prints the fastest and the median; `EXPANDER=least-waste` or
//! `priority` plans with another expander.

fn main() {
    dra_benches::on_planner_stack(run);
}

fn run() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000);
    let plain = std::env::args().nth(2).is_some_and(|a| a == "plain");
    let mut objects = dra_benches::karpenter::workload(n);
    if plain {
        objects.extra.retain(|g| {
            g.value
                .pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|n| n.ends_with("-test-zone-1-on-demand"))
        });
        objects.pods = dra_benches::karpenter::pods(5 * n)
            .into_iter()
            .take(n)
            .collect();
    }
    // `REPS=n` plans n times (input prepared afresh, untimed) and reports
    // the fastest and the median, for a quick look without divan.
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
        .max(1);
    // `EXPANDER=least-waste|priority` plans with another expander.
    let options = dra_plan::PlanOptions {
        expander: std::env::var("EXPANDER")
            .ok()
            .and_then(|e| e.parse().ok())
            .unwrap_or_default(),
        ..dra_plan::PlanOptions::default()
    };
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..reps {
        let prepared = dra_plan::prepare(objects.clone(), dra_sim::FeatureGates::default());
        let started = std::time::Instant::now();
        let (report, state) = prepared.run_keeping_state(&options);
        times.push(started.elapsed());
        drop(state);
        last = Some(report);
    }
    let Some(report) = last else { return };
    times.sort();
    let elapsed = times[times.len() / 2];
    eprintln!("fastest {:?}, median of {reps}:", times[0]);
    let nodes: usize = report.scale_ups.iter().map(|s| s.count).sum();
    let price: f64 = report.scale_ups.iter().map(|s| s.price_per_hour).sum();
    eprintln!(
        "{} pods planned in {elapsed:?}: {nodes} nodes, {price:.2}/h",
        report.pods.len()
    );
    if !plain {
        let (model_nodes, model_price) = dra_benches::karpenter::karpenter_model(&objects.pods);
        eprintln!(
            "lower bound {:.2}/h; model of Karpenter's packing: {model_nodes} nodes, {model_price:.2}/h",
            dra_benches::karpenter::price_lower_bound(&objects.pods)
        );
    }
    for s in report.scale_ups.iter().take(20) {
        eprintln!("  {} +{}", s.node_group, s.count);
    }
}
