//! The controller at scale (issue #28): `dra-autoscaler run` against the API stand-in
//! (`dra-fake-apiserver`) and the fake provider (`dra-provider-fake`), as processes, with
//! 10,000 full CPU nodes, 100,000 running pods and then a burst of 250 gangs of 8 one-GPU
//! pods (DRA claims from a template), which only bought GPU machines can run.
//!
//! Measured: per gang, the time from its last member's creation (and Unschedulable mark, as
//! kube-scheduler would write it right after) to the fake provider's log line of the
//! `IncreaseSize` call that bought its machine (p50/p99/max); the controller's loop times
//! (its `loop finished` debug lines); its peak RSS (`VmHWM`) and CPU time.
//!
//! ```sh
//! cargo build --release -p dra-autoscaler -p dra-fake-apiserver -p dra-provider-fake
//! cargo bench -p dra-benches --bench controller
//! ```
//!
//! The binaries are taken from `$DRA_CTL_BIN`, else `$CARGO_TARGET_DIR/release`, else
//! `target/release`. Sizes: `DRA_CTL_NODES` (10000), `DRA_CTL_PODS` (100000), `DRA_CTL_GANGS` (250; 8 pods
//! each). `DRA_CTL_KEEP=1` keeps the working directory (logs) and prints its path.
//! Without the three release binaries next to this benchmark the run is skipped.

mod cluster;
mod measure;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::ApiResource;
use tokio::process::{Child, Command};

use measure::{Usage, gang_latencies, quantile};

/// Requests in flight while loading the cluster and the burst.
const IN_FLIGHT: usize = 32;
/// Pods per gang.
const GANG_SIZE: usize = 8;

fn env_size(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Where `cargo build --release` put the binaries: `$DRA_CTL_BIN`, else
/// `$CARGO_TARGET_DIR/release`, else the workspace's `target/release`.
fn release_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("DRA_CTL_BIN") {
        return dir.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    target.join("release")
}

/// A free port on 127.0.0.1 (bound and released: the child binds it again).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

fn spawn(bin: &Path, args: &[String], log: &Path, env: &[(&str, String)]) -> anyhow::Result<Child> {
    let file = std::fs::File::create(log)?;
    let mut command = Command::new(bin);
    command
        .args(args)
        .stdout(file.try_clone()?)
        .stderr(file)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    command
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// Creates `objects` through `api`, `IN_FLIGHT` at a time.
async fn create_all<K>(
    api: &Api<K>,
    objects: impl Iterator<Item = serde_json::Value>,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    futures::stream::iter(objects.map(|value| async move {
        let object: K = serde_json::from_value(value)?;
        api.create(&PostParams::default(), &object).await?;
        anyhow::Ok(())
    }))
    .buffer_unordered(IN_FLIGHT)
    .try_collect::<Vec<()>>()
    .await
    .map(drop)
}

async fn create_one(client: &kube::Client, value: serde_json::Value) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(value)?;
    let types = object
        .types
        .clone()
        .context("object without apiVersion/kind")?;
    let gvk = GroupVersionKind::try_from(&types)?;
    // Enough of English plurals for the kinds created here (DeviceClass, NodeGroup, ...).
    let kind = gvk.kind.to_lowercase();
    let plural = if kind.ends_with('s') {
        format!("{kind}es")
    } else {
        format!("{kind}s")
    };
    let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
    let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    api.create(&PostParams::default(), &object).await?;
    Ok(())
}

/// Samples the controller's memory and CPU every 100 ms until stopped.
fn sample(
    pid: u32,
) -> (
    tokio::sync::watch::Sender<bool>,
    tokio::task::JoinHandle<Usage>,
) {
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(async move {
        let mut last = Usage::default();
        loop {
            if let Some(u) = measure::usage(pid) {
                last = Usage {
                    rss_kib: u.rss_kib,
                    peak_kib: u.peak_kib.max(last.peak_kib),
                    cpu: u.cpu,
                };
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = stopped.changed() => break,
            }
        }
        last
    });
    (stop, task)
}

fn mib(kib: u64) -> u64 {
    kib / 1024
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing to run for.
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let nodes = env_size("DRA_CTL_NODES", 10_000);
    let pods = env_size("DRA_CTL_PODS", 100_000);
    let gangs = env_size("DRA_CTL_GANGS", 250);
    let bin = release_dir();
    let binaries = ["dra-fake-apiserver", "dra-provider-fake", "dra-autoscaler"];
    if let Some(missing) = binaries.iter().find(|b| !bin.join(b).exists()) {
        println!(
            "controller bench skipped: {} not built; run \
             `cargo build --release -p dra-autoscaler -p dra-fake-apiserver -p dra-provider-fake` first",
            bin.join(missing).display()
        );
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("dra-controller-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = run(&bin, &dir, nodes, pods, gangs).await;
    if std::env::var_os("DRA_CTL_KEEP").is_some() || result.is_err() {
        println!("logs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

async fn run(
    bin: &Path,
    dir: &Path,
    nodes: usize,
    pods: usize,
    gangs: usize,
) -> anyhow::Result<()> {
    println!(
        "controller at scale: {nodes} nodes, {pods} running pods, {gangs} gangs of {GANG_SIZE}"
    );
    let api_port = free_port()?;
    let kubeconfig = dir.join("kubeconfig");
    let rust_log = |filter: &str| ("RUST_LOG", filter.to_owned());
    let mut apiserver = spawn(
        &bin.join("dra-fake-apiserver"),
        &[
            "--port".into(),
            api_port.to_string(),
            "--kubeconfig-out".into(),
            kubeconfig.display().to_string(),
            "--log-format".into(),
            "json".into(),
        ],
        &dir.join("apiserver.log"),
        &[rust_log("warn")],
    )?;
    let url = format!("http://127.0.0.1:{api_port}");
    let client = kube::Client::try_from(kube::Config::new(url.parse()?))?;
    let mut answered = false;
    for _ in 0..100 {
        if client.apiserver_version().await.is_ok() {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !answered {
        bail!("the API stand-in did not answer");
    }

    // The cluster: CRD, DeviceClass, claim template, GPU NodeGroup, nodes, running pods.
    let loading = Instant::now();
    create_one(&client, serde_json::to_value(dra_api::crd())?).await?;
    // The CRD is served once the stand-in has registered it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    create_one(&client, cluster::device_class()).await?;
    create_one(&client, cluster::claim_template()).await?;
    create_one(&client, cluster::gpu_node_group(gangs.max(1) * 2)).await?;
    create_all(
        &Api::<Node>::all(client.clone()),
        (0..nodes).map(cluster::node),
    )
    .await?;
    let pod_api = Api::<Pod>::namespaced(client.clone(), cluster::NAMESPACE);
    create_all(&pod_api, (0..pods).map(|i| cluster::running_pod(i, nodes))).await?;
    let apiserver_usage = apiserver.id().and_then(measure::usage).unwrap_or_default();
    println!(
        "loaded the stand-in in {:.1} s (its RSS {} MiB)",
        loading.elapsed().as_secs_f64(),
        mib(apiserver_usage.rss_kib)
    );

    let provider_addr = format!("127.0.0.1:{}", free_port()?);
    let mut provider = spawn(
        &bin.join("dra-provider-fake"),
        &[
            "--listen".into(),
            provider_addr.clone(),
            "--log-format".into(),
            "json".into(),
        ],
        &dir.join("provider.log"),
        &[
            ("KUBECONFIG", kubeconfig.display().to_string()),
            rust_log("info"),
        ],
    )?;
    let health: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let started = Instant::now();
    let mut controller = spawn(
        &bin.join("dra-autoscaler"),
        &[
            "run".into(),
            "--provider".into(),
            format!("fake=http://{provider_addr}"),
            "--listen-address".into(),
            health.to_string(),
            "--scan-interval".into(),
            "10s".into(),
            "--log-format".into(),
            "json".into(),
        ],
        &dir.join("controller.log"),
        &[
            ("KUBECONFIG", kubeconfig.display().to_string()),
            rust_log("info,dra_controller::run=debug"),
        ],
    )?;
    let pid = controller.id().context("the controller exited at once")?;
    let (stop_sampling, sampler) = sample(pid);
    let ready = loop {
        if let Ok((200, _)) = measure::http_get(health, "/readyz").await {
            break started.elapsed();
        }
        if controller.try_wait()?.is_some() || started.elapsed() > Duration::from_secs(600) {
            bail!(
                "the controller never became ready (see {})",
                dir.join("controller.log").display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Two loops over the loaded cluster before the burst (the first runs once ready; the
    // second after one scan interval at most).
    let warm = Instant::now();
    while measure::loops(&dir.join("controller.log")).len() < 2
        && warm.elapsed() < Duration::from_secs(120)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let before_burst = measure::usage(pid).unwrap_or_default();
    println!(
        "controller ready (every watch listed) {:.1} s after start; RSS {} MiB, CPU {:.1} s before the burst",
        ready.as_secs_f64(),
        mib(before_burst.rss_kib),
        before_burst.cpu.as_secs_f64()
    );

    // The burst: each gang's members created (and marked Unschedulable) together, the gangs
    // one after another, `IN_FLIGHT` requests at a time.
    let burst_start = Timestamp::now();
    let burst = Instant::now();
    let status = PatchParams::default();
    let completed: Vec<Timestamp> = futures::stream::iter((0..gangs).map(|gang| {
        let pod_api = pod_api.clone();
        let status = status.clone();
        async move {
            futures::stream::iter((0..GANG_SIZE).map(|m| {
                let pod_api = pod_api.clone();
                let status = status.clone();
                async move {
                    let pod: Pod = serde_json::from_value(cluster::gang_pod(gang, m, GANG_SIZE))?;
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    pod_api.create(&PostParams::default(), &pod).await?;
                    pod_api
                        .patch_status(
                            &name,
                            &status,
                            &Patch::Merge(cluster::unschedulable_status()),
                        )
                        .await?;
                    anyhow::Ok(Timestamp::now())
                }
            }))
            .buffer_unordered(GANG_SIZE)
            .try_fold(Timestamp::MIN, |last, t| async move { Ok(last.max(t)) })
            .await
        }
    }))
    .buffered(IN_FLIGHT / GANG_SIZE)
    .try_collect()
    .await?;
    let burst_took = burst.elapsed();
    let mut completed = completed;
    completed.sort_unstable();

    // Until every gang has its machine, or a minute past the burst.
    let provider_log = dir.join("provider.log");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let bought: usize = measure::scale_ups(&provider_log)
            .iter()
            .filter(|b| b.at >= burst_start)
            .map(|b| b.count)
            .sum();
        if bought >= gangs || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The loop that bought the last machine finishes and is counted (its step timings are
    // in its `loop finished` line), within 30 s; then two seconds more, as before.
    let last_bought = measure::scale_ups(&provider_log)
        .iter()
        .map(|b| b.at)
        .max()
        .unwrap_or(burst_start);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline
        && !measure::loops(&dir.join("controller.log"))
            .iter()
            .any(|l| l.at >= last_bought)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = stop_sampling.send(true);
    let peak = sampler.await.unwrap_or_default();

    let bought = measure::scale_ups(&provider_log);
    let latencies = gang_latencies(&completed, &bought, burst_start);
    let loops = measure::loops(&dir.join("controller.log"));
    let loop_times: Vec<Duration> = loops.iter().map(|l| l.took).collect();
    let burst_loops: Vec<Duration> = loops
        .iter()
        .filter(|l| l.at >= burst_start && l.planned_for > 0)
        .map(|l| l.took)
        .collect();
    let calls = bought.iter().filter(|b| b.at >= burst_start).count();
    println!(
        "burst of {} pods created in {:.1} s; {} of {gangs} gangs got their machine in {calls} calls",
        gangs * GANG_SIZE,
        burst_took.as_secs_f64(),
        latencies.len()
    );
    println!(
        "gang -> IncreaseSize: p50 {:.3} s, p99 {:.3} s, max {:.3} s (target p99 <= 1 s)",
        quantile(&latencies, 0.5).as_secs_f64(),
        quantile(&latencies, 0.99).as_secs_f64(),
        quantile(&latencies, 1.0).as_secs_f64()
    );
    println!(
        "loop time: all {} loops p50 {:.3} s max {:.3} s; {} loops with pending pods p50 {:.3} s max {:.3} s (target <= 2 s)",
        loop_times.len(),
        quantile(&loop_times, 0.5).as_secs_f64(),
        quantile(&loop_times, 1.0).as_secs_f64(),
        burst_loops.len(),
        quantile(&burst_loops, 0.5).as_secs_f64(),
        quantile(&burst_loops, 1.0).as_secs_f64()
    );
    // Where the loops of the burst spent their time (the controller's own step timings).
    for l in loops.iter().filter(|l| l.at >= burst_start) {
        if let Some(phases) = l.phases {
            let steps: Vec<String> = measure::PHASES
                .iter()
                .zip(phases)
                .filter(|(_, ms)| *ms > 0)
                .map(|(name, ms)| format!("{} {ms}", name.trim_end_matches("_ms")))
                .collect();
            println!(
                "  loop {:.3} s, {} pending: {} (ms)",
                l.took.as_secs_f64(),
                l.planned_for,
                steps.join(", ")
            );
        }
    }
    println!(
        "controller: peak RSS {} MiB (target <= 2048), CPU {:.1} s in {:.1} s wall; the stand-in's RSS {} MiB",
        mib(peak.peak_kib),
        peak.cpu.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        mib(apiserver
            .id()
            .and_then(measure::usage)
            .unwrap_or_default()
            .peak_kib)
    );
    let _ = controller.kill().await;
    let _ = provider.kill().await;
    let _ = apiserver.kill().await;
    if latencies.len() < gangs {
        bail!("only {} of {gangs} gangs got a machine", latencies.len());
    }
    Ok(())
}
