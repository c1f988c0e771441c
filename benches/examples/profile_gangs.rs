//! One plan of the GPU-gang workload, for profilers (`valgrind --tool=callgrind`,
//! `perf record`): `cargo run --release -p dra-benches --example profile_gangs -- 1250 5000 50`.

fn main() {
    dra_benches::on_planner_stack(run);
}

fn run() {
    let arg = |i: usize, default: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let objects = dra_benches::gangs::workload(arg(1, 1_250), 8, arg(2, 5_000), arg(3, 50));
    let started = std::time::Instant::now();
    let report = dra_plan::plan(
        objects,
        dra_sim::FeatureGates::default(),
        &dra_plan::PlanOptions::default(),
    );
    eprintln!(
        "{} pods planned in {:?}",
        report.pods.len(),
        started.elapsed()
    );
}
