//! `dra-autoscaler run`: wires watches, leader election, the loop, providers
//! and the health listener together, and shuts them down in order.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use dra_plan::gang_apis::GangApisFound;
use dra_provider::{ClientConfig, ClientTls, ProviderClient};
use dra_sim::{FeatureGates, KubeVersion};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tokio::sync::watch;

use crate::args::RunArgs;
use crate::autoscaler::{Autoscaler, LoopConfig, Trigger, millis};
use crate::backoff::BackoffPolicy;
use crate::events::EventSink;
use crate::executor::ScaleExecutor;
use crate::executor::grpc::GrpcExecutor;
use crate::executor::memory::InMemoryProvider;
use crate::health::{self, Health};
use crate::lease::{LeaderElector, LeaseConfig};
use crate::metrics::Metrics;
use crate::scaledown::{ScaleDownConfig, ScaleDowns};
use crate::watch::{self as watches, OptionalApis};
use dra_plan::scaledown::ScaleDownDefaults;

/// The name events and the lease report as.
pub const CONTROLLER_NAME: &str = "dra-autoscaler";

/// Runs the controller in the cluster of the ambient kubeconfig or service
/// account until SIGTERM or Ctrl-C.
///
/// # Errors
/// Invalid flags, no API server, unusable provider settings, or a listener
/// that cannot bind.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    args.validate()?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        flags = ?args,
        "starting dra-autoscaler run"
    );
    let config = kube::Config::infer()
        .await
        .context("unable to read the kubeconfig or service account")?;
    let client = kube::Client::try_from(config.clone())
        .context("unable to build a Kubernetes client from the kubeconfig or service account")?;
    // Evictions answer 429 when a PodDisruptionBudget says no; the drain retries those on
    // its own clock, so its client must not retry them for minutes first.
    let mut no_retry = config;
    no_retry.default_retry = false;
    let evictions = kube::Client::try_from(no_retry)
        .context("unable to build the Kubernetes client for evictions")?;
    let executor: Arc<dyn ScaleExecutor> = if args.dry_run {
        tracing::warn!("--dry-run: scale-ups go to an in-memory provider, no machine is started");
        Arc::new(InMemoryProvider::new())
    } else {
        Arc::new(connect_providers(&args).await?)
    };
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        let _ = shutdown_tx.send(true);
    });
    run_with_clients(client, evictions, args, executor, shutdown_rx).await
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn std_duration(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

/// One gRPC client per `--provider NAME=URL`.
///
/// # Errors
/// A TLS file cannot be read or an endpoint is malformed.
pub async fn connect_providers(args: &RunArgs) -> anyhow::Result<GrpcExecutor> {
    let mut clients = BTreeMap::new();
    for endpoint in &args.providers {
        let mut config = ClientConfig::new(endpoint.url.clone());
        config.call_timeout = std_duration(args.provider_timeout);
        if let Some(ca) = &args.provider_ca_cert {
            config.tls = Some(ClientTls {
                ca: ca.clone(),
                cert: args.provider_client_cert.clone(),
                key: args.provider_client_key.clone(),
                domain: args.provider_tls_server_name.clone(),
            });
        }
        let client = ProviderClient::connect(config)
            .await
            .with_context(|| format!("provider {:?} at {}", endpoint.name, endpoint.url))?;
        clients.insert(endpoint.name.clone(), client);
    }
    Ok(GrpcExecutor::new(clients))
}

/// The scheduler features to model: the flag's version (or the API server's),
/// the gang gates a cluster serving the upstream gang API runs, then
/// `--feature-gates`. Logs which gang APIs were found and used.
async fn resolve_gates(
    client: &kube::Client,
    args: &RunArgs,
    optional: &OptionalApis,
) -> anyhow::Result<FeatureGates> {
    let version = match args.plan.kubernetes_version {
        Some(v) => v,
        None => {
            let info = client
                .apiserver_version()
                .await
                .context("unable to read the API server's version")?;
            let minor: String = info
                .minor
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let text = format!("{}.{minor}", info.major);
            match text.parse::<KubeVersion>() {
                Ok(v) => v,
                Err(error) => {
                    // A newer cluster is closest to our newest model; an older one
                    // to our oldest. Say so: the operator may want to pin it.
                    let fallback = if minor.parse::<u32>().unwrap_or(0) > KubeVersion::NEWEST.minor
                    {
                        KubeVersion::NEWEST
                    } else {
                        KubeVersion::OLDEST
                    };
                    tracing::warn!(%error, model = %fallback, "modelling the nearest supported scheduler");
                    fallback
                }
            }
        }
    };
    let found = GangApisFound::served(
        optional
            .gangs
            .iter()
            .map(|ar| (ar.api_version.as_str(), ar.kind.as_str())),
    );
    for dropped in args.plan.dropped_gates(version) {
        tracing::warn!(gate = %dropped.gate, "{dropped}");
    }
    let resolved = args
        .plan
        .planning_gates(version, &found)
        .context("--feature-gates, --dra-filter-timeout")?;
    tracing::info!(kubernetes = %version, "modelling kube-scheduler");
    if let Some(summary) = &resolved.summary {
        tracing::info!(turned_on = ?resolved.turned_on, "{summary}");
    }
    Ok(resolved.gates)
}

/// Scale-down settings from the flags. A dry run analyses and reports but removes nothing.
#[must_use]
pub fn scale_down_config(args: &RunArgs) -> ScaleDownConfig {
    ScaleDownConfig {
        defaults: ScaleDownDefaults {
            enabled: args.scale_down_enabled,
            utilization_threshold: args.scale_down_utilization_threshold,
            unneeded_time: args.scale_down_unneeded_time,
            empty_unneeded_time: args.scale_down_empty_unneeded_time,
        },
        delay_after_add: args.scale_down_delay_after_add,
        max_parallelism: args.max_scale_down_parallelism,
        max_graceful_termination: args.max_graceful_termination,
        eviction_retry: Duration::from_secs(5),
        actuate: !args.dry_run,
    }
}

fn identity(args: &RunArgs) -> String {
    args.identity
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| format!("{CONTROLLER_NAME}-{}", std::process::id()))
}

/// Runs the controller with `client` and `executor` until `shutdown` turns
/// true. This is [`run`] without the process concerns, for tests and embedding.
///
/// # Errors
/// Discovery, gate resolution or the health listener failed.
pub async fn run_until(
    client: kube::Client,
    args: RunArgs,
    executor: Arc<dyn ScaleExecutor>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    run_with_clients(client.clone(), client, args, executor, shutdown).await
}

/// [`run_until`], with `evictions` (a client that does not retry 429s) for scale-down's
/// evictions.
///
/// # Errors
/// As [`run_until`].
pub async fn run_with_clients(
    client: kube::Client,
    evictions: kube::Client,
    args: RunArgs,
    executor: Arc<dyn ScaleExecutor>,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let identity = identity(&args);
    let optional = watches::discover(&client).await?;
    tracing::info!(
        gang_apis = ?optional.gangs.iter().map(|a| format!("{}/{}", a.api_version, a.kind)).collect::<Vec<_>>(),
        device_taint_rules = optional.device_taint_rules,
        provisioning_apis = ?optional.stand_ins.iter().map(|a| format!("{}/{}", a.api_version, a.kind)).collect::<Vec<_>>(),
        "discovered optional APIs"
    );
    let gates = resolve_gates(&client, &args, &optional).await?;
    let metrics = Arc::new(Metrics::new());
    let scan = std_duration(args.scan_interval);
    let health =
        Health::new(i64::try_from(scan.as_secs().saturating_mul(6).max(60)).unwrap_or(i64::MAX));

    let mut stop = shutdown.clone();
    let (health_addr, health_task) = health::serve(
        args.listen_address,
        health::router(health.clone(), metrics.clone()),
        async move {
            let _ = stop.wait_for(|s| *s).await;
        },
    )
    .await?;
    tracing::info!(%health_addr, "serving /metrics, /healthz and /readyz");

    let mut running = watches::start(&client, &optional);
    let stores = running.stores.clone();
    let ready_health = health.clone();
    let ready_stores = stores.clone();
    let ready_task = tokio::spawn(async move {
        ready_stores.wait_ready().await;
        ready_health.set_ready(true);
    });

    if !args.leader_elect {
        tracing::info!(%identity, "leader election off (--leader-elect=false): this replica acts alone");
    }
    let (leading_tx, leading_rx) = watch::channel(!args.leader_elect);
    let elector_task = args.leader_elect.then(|| {
        let elector = LeaderElector::new(
            client.clone(),
            LeaseConfig {
                name: args.lease_name.clone(),
                namespace: args.lease_namespace.clone(),
                identity: identity.clone(),
                lease_duration: args.lease_duration,
                renew_deadline: args.renew_deadline,
                retry_period: args.retry_period,
            },
        );
        tokio::spawn(elector.run(leading_tx, shutdown.clone()))
    });

    // The gauge follows leadership as it changes, not only at loop ticks.
    let gauge = metrics.clone();
    let mut leading_changes = leading_rx.clone();
    let leader_gauge_task = tokio::spawn(async move {
        loop {
            gauge
                .leader
                .set(i64::from(*leading_changes.borrow_and_update()));
            if leading_changes.changed().await.is_err() {
                break;
            }
        }
    });

    let scale_downs = args.scale_down_enabled.then(|| {
        ScaleDowns::new(
            client.clone(),
            evictions.clone(),
            executor.clone(),
            EventSink::new(
                client.clone(),
                CONTROLLER_NAME,
                &identity,
                args.event_dedup_window,
            ),
            metrics.clone(),
            scale_down_config(&args),
        )
    });
    let mut autoscaler = Autoscaler::new(
        client.clone(),
        executor,
        EventSink::new(
            client.clone(),
            CONTROLLER_NAME,
            &identity,
            args.event_dedup_window,
        ),
        metrics.clone(),
        LoopConfig {
            gates,
            plan: args.plan.plan_options(None),
            new_pod_delay: args.new_pod_scale_up_delay,
            expendable_cutoff: args.expendable_pods_priority_cutoff,
            max_node_provision_time: args.max_node_provision_time,
            backoff: BackoffPolicy {
                initial: args.initial_backoff,
                max: args.max_backoff,
            },
        },
        Some(leading_rx.clone()),
    );
    if let Some(scale_downs) = scale_downs {
        autoscaler = autoscaler.with_scale_down(scale_downs);
    }

    let mut next_wait = scan;
    // Optional APIs installed after the start are watched once found (crate::rediscovery);
    // Events about them go out only from the leader.
    let discovery_events = EventSink::new(
        client.clone(),
        CONTROLLER_NAME,
        &identity,
        args.event_dedup_window,
    );
    let mut next_discovery = tokio::time::Instant::now() + crate::rediscovery::INTERVAL;
    loop {
        // The settling wait runs after the select: awaiting inside a branch would keep
        // the shutdown branch's watch guard (not Send) alive across the await.
        let triggered = tokio::select! {
            () = running.trigger.raised() => true,
            () = tokio::time::sleep(next_wait) => false,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        if triggered {
            running.trigger.settle(SETTLE_QUIET, SETTLE_MAX).await;
        }
        let now = Timestamp::now();
        let leading = *leading_rx.borrow();
        if tokio::time::Instant::now() >= next_discovery {
            next_discovery = tokio::time::Instant::now() + crate::rediscovery::INTERVAL;
            let events = leading.then_some(&discovery_events);
            crate::rediscovery::rediscover(&client, &mut running, events, now).await;
        }
        metrics.leader.set(i64::from(leading));
        if !leading {
            // A standby is alive as long as its loop ticks.
            health.beat(now);
            continue;
        }
        // A leader is alive only while loops complete: one whose watches never
        // list (or whose loop hangs) fails /healthz, is restarted and so gives
        // the lease to a replica that can act.
        if !stores.is_ready() {
            continue;
        }
        let loop_started = std::time::Instant::now();
        let inputs = stores.inputs();
        let read_stores = loop_started.elapsed();
        // A loop a pending pod started evaluates scale-down at most once per scan interval
        // (`autoscaler::Trigger`): the gangs arriving meanwhile do not wait for it.
        let trigger = if triggered {
            Trigger::PendingPod {
                every: args.scan_interval,
            }
        } else {
            Trigger::Timer
        };
        let summary = autoscaler.run_once_for(&inputs, now, trigger).await;
        drop(inputs);
        // Per loop, for the controller benchmark and for operators timing loops without
        // a metrics scraper (the histogram has the same figure in buckets).
        let copies = autoscaler.view_counts();
        let phases = summary.phases;
        tracing::debug!(
            seconds = loop_started.elapsed().as_secs_f64(),
            planned_for = summary.planned_for,
            copied = copies.copied,
            dropped = copies.dropped,
            rebuilds = copies.rebuilds,
            indexed = copies.indexed,
            triggered,
            scale_down_evaluated = summary.scale_down.is_some(),
            reconcile_ms = millis(phases.reconcile),
            view_ms = millis(phases.view),
            plan_ms = millis(phases.plan),
            scale_ups_ms = millis(phases.scale_ups),
            notices_ms = millis(phases.notices),
            scale_down_analysis_ms = millis(phases.scale_down_analysis),
            scale_down_writes_ms = millis(phases.scale_down_writes),
            hand_back_ms = millis(phases.hand_back),
            read_stores_ms = millis(read_stores),
            "loop finished"
        );
        health.beat(Timestamp::now());
        next_wait = if summary.retry_soon {
            retry_wait(scan)
        } else {
            scan
        };
        if !summary.scaled_up.is_empty()
            || !summary.failed.is_empty()
            || !summary.timed_out.is_empty()
        {
            tracing::info!(
                planned_for = summary.planned_for,
                scaled_up = ?summary.scaled_up,
                failed = ?summary.failed,
                timed_out = ?summary.timed_out,
                "loop"
            );
        }
    }

    // Stop acting first, then give the lease up, then stop serving.
    ready_task.abort();
    leader_gauge_task.abort();
    if let Some(task) = elector_task {
        let _ = task.await;
    }
    drop(running);
    let _ = health_task.await;
    Ok(())
}

/// How long the pod watch must have been quiet after a pod became unschedulable before the
/// loop starts (see [`crate::signal`]).
const SETTLE_QUIET: Duration = Duration::from_millis(100);

/// The longest the loop waits for the pod watch to be quiet: under a steady stream of new
/// pods it starts anyway, so a burst delays no gang by more than this.
const SETTLE_MAX: Duration = Duration::from_millis(300);

/// How soon to try again after a scale-up that never reached its provider:
/// a second or two, jittered so that controllers retrying a provider that just
/// came back do not arrive together, and never later than the scan interval.
fn retry_wait(scan: std::time::Duration) -> std::time::Duration {
    let jittered = std::time::Duration::from_millis(1000 + fastrand::u64(0..2000));
    jittered.min(scan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_retry_after_a_call_never_sent_comes_in_one_to_three_seconds_jittered() {
        let waits: std::collections::BTreeSet<Duration> = (0..50)
            .map(|_| retry_wait(Duration::from_secs(10)))
            .collect();
        assert!(
            waits
                .iter()
                .all(|w| (Duration::from_secs(1)..Duration::from_secs(3)).contains(w)),
            "{waits:?}"
        );
        assert!(waits.len() > 1, "jittered: {waits:?}");
        assert_eq!(
            retry_wait(Duration::from_millis(500)),
            Duration::from_millis(500),
            "never later than the scan interval"
        );
    }
}
