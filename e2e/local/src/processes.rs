//! `dra-local-stack up`: the stack as the four processes an operator would run, each with its
//! own log file, started in order (API stand-in, NodeGroup CRD and examples, fake provider,
//! scheduler stand-in, `dra-autoscaler run`), supervised one at a time (see
//! [`crate::supervise`]: one that dies leaves the others running, and each can be stopped,
//! started or restarted alone) and stopped together on Ctrl-C.
//!
//! With `--real`, the API and scheduler stand-ins give way to the real control plane
//! (`e2e/cluster/up.sh`: etcd, kube-apiserver, kube-scheduler, kube-controller-manager), and
//! the fake provider and `dra-autoscaler run` act as the chart's ServiceAccounts (supervised
//! the same way; the control plane is `e2e/cluster`'s).

use anyhow::Context;

pub use crate::process::Layout;
use crate::process::{spawn, spawn_with, wait_ready};
use crate::real::{self, RealCluster};
use crate::{apply, stack};

/// Starts the stack, prints how to use it, and runs until Ctrl-C (or until a process dies).
///
/// # Errors
/// A process that cannot start, or an API stand-in that never answers.
pub async fn up(layout: &Layout) -> anyhow::Result<()> {
    std::fs::create_dir_all(layout.dir.join("logs"))
        .with_context(|| format!("creating {}", layout.dir.display()))?;
    if layout.real {
        return up_real(layout).await;
    }
    let url = format!("http://127.0.0.1:{}", layout.api_port);
    let mut processes = Vec::new();
    processes.push(spawn(
        layout,
        "apiserver",
        "dra-fake-apiserver",
        &[
            "--port".into(),
            layout.api_port.to_string(),
            "--kubeconfig-out".into(),
            layout.kubeconfig().display().to_string(),
            "--state-file".into(),
            layout
                .dir
                .join("apiserver-state.json")
                .display()
                .to_string(),
            "--log-format".into(),
            layout.log_format.clone(),
            "--taint-new-nodes".into(),
        ],
    )?);
    wait_ready(&url).await?;
    let client = kube::Client::try_from(kube::Config::new(url.parse()?))?;
    apply::apply_crd(&client).await?;
    let applied = apply::apply_path(&client, &stack::node_group_examples()).await?;
    let applied_manifests =
        apply::apply_path(&client, &stack::manifests().join("deviceclass.yaml")).await?;
    tracing::info!(objects = ?applied.iter().chain(&applied_manifests).collect::<Vec<_>>(), "applied the NodeGroup CRD, the example NodeGroups and the DeviceClass");
    processes.push(spawn(
        layout,
        "provider",
        "dra-provider-fake",
        &provider_args(layout),
    )?);
    processes.push(spawn(
        layout,
        "scheduler",
        "dra-fake-scheduler",
        &["--log-format".into(), layout.log_format.clone()],
    )?);
    processes.push(spawn(
        layout,
        "autoscaler",
        "dra-autoscaler",
        &controller_args(layout, &[]),
    )?);
    println!(
        "\nThe local stack is up. Logs: {logs}/{{apiserver,provider,scheduler,autoscaler}}.log\n\n  \
         export KUBECONFIG={kubeconfig}\n  \
         kubectl get nodegroups\n  \
         kubectl apply -f {manifests}/training-gang.yaml\n  \
         kubectl get pods -o wide -w\n  \
         kubectl describe pod llm-train-0\n\n\
         Metrics and health of dra-autoscaler: http://{health}/metrics\n\
         One process at a time (the others keep running; one that dies is reported):\n  \
         dra-local-stack restart controller      (or stop/start; apiserver, provider, scheduler)\n  \
         kill -9 $(cat {dir}/pids/autoscaler.pid) (a controller crash)\n  \
         dra-local-stack status\n\
         Ctrl-C stops everything (the API stand-in keeps its objects in {dir}).",
        logs = layout.dir.join("logs").display(),
        kubeconfig = layout.kubeconfig().display(),
        manifests = stack::manifests().display(),
        health = layout.autoscaler_health,
        dir = layout.dir.display(),
    );
    crate::supervise::run(layout, processes, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}

/// `up --real`: the real control plane, then the fake provider and `dra-autoscaler run` as the
/// chart's ServiceAccounts.
async fn up_real(layout: &Layout) -> anyhow::Result<()> {
    let cluster_dir = layout.dir.join("cluster");
    tracing::info!(dir = %cluster_dir.display(), "starting the real control plane (e2e/cluster/up.sh; the first run builds Kubernetes, ~10 minutes)");
    let cluster = RealCluster::start(&cluster_dir, "").await?;
    let admin = cluster.admin_client().await?;
    cluster.register_control_plane_node().await?;
    apply::apply_crd(&admin).await?;
    cluster
        .install_chart_rbac(&["fakeProvider.enabled=true"])
        .await
        .context("installing the chart's RBAC")?;
    let applied = apply::apply_path(&admin, &stack::node_group_examples()).await?;
    let applied_manifests =
        apply::apply_path(&admin, &stack::manifests().join("deviceclass.yaml")).await?;
    tracing::info!(objects = ?applied.iter().chain(&applied_manifests).collect::<Vec<_>>(), "applied the NodeGroup CRD, the chart's RBAC, the example NodeGroups and the DeviceClass");
    let provider_kubeconfig = layout.dir.join("provider.kubeconfig");
    cluster
        .write_service_account_kubeconfig(
            real::RELEASE_NAMESPACE,
            stack::FAKE_PROVIDER_ACCOUNT,
            &provider_kubeconfig,
        )
        .await?;
    let controller_kubeconfig = layout.dir.join("autoscaler.kubeconfig");
    cluster
        .write_service_account_kubeconfig(
            real::RELEASE_NAMESPACE,
            stack::CONTROLLER_ACCOUNT,
            &controller_kubeconfig,
        )
        .await?;
    let processes = vec![
        spawn_with(
            layout,
            "provider",
            "dra-provider-fake",
            &provider_args(layout),
            &provider_kubeconfig,
        )?,
        spawn_with(
            layout,
            "autoscaler",
            "dra-autoscaler",
            &controller_args(
                layout,
                &["--lease-namespace".into(), real::RELEASE_NAMESPACE.into()],
            ),
            &controller_kubeconfig,
        )?,
    ];
    println!(
        "\nThe local stack is up on the real control plane (kube-apiserver, kube-scheduler and \
         kube-controller-manager v1.37.2).\nLogs: {logs}/{{provider,autoscaler}}.log and \
         {cluster_logs}/\n\n  \
         export KUBECONFIG={kubeconfig}\n  \
         kubectl get nodegroups\n  \
         kubectl apply -f {manifests}/training-gang.yaml\n  \
         kubectl get pods -o wide -w\n  \
         kubectl get events --sort-by=.metadata.creationTimestamp\n\n\
         Metrics and health of dra-autoscaler: http://{health}/metrics\n\
         One process at a time (the others keep running; one that dies is reported):\n  \
         dra-local-stack restart controller      (or stop/start; provider)\n  \
         kill -9 $(cat {dir}/pids/autoscaler.pid) (a controller crash)\n  \
         dra-local-stack status\n\
         Ctrl-C stops everything.",
        dir = layout.dir.display(),
        logs = layout.dir.join("logs").display(),
        cluster_logs = cluster.dir().join("logs").display(),
        kubeconfig = cluster.kubeconfig().display(),
        manifests = stack::manifests().display(),
        health = layout.autoscaler_health,
    );
    let supervised = crate::supervise::run(layout, processes, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    cluster.stop();
    supervised
}

/// The fake provider's arguments.
fn provider_args(layout: &Layout) -> Vec<String> {
    let mut args = vec![
        "--listen".into(),
        layout.provider.to_string(),
        "--state-file".into(),
        layout.dir.join("provider-state.json").display().to_string(),
        "--log-format".into(),
        layout.log_format.clone(),
    ];
    if let Some(config) = &layout.provider_config {
        args.extend(["--config".into(), config.display().to_string()]);
    }
    args
}

/// `dra-autoscaler run`'s arguments: the stack's, `backend`'s, then the operator's. A
/// single-value flag the operator gives replaces the stack's (`run` refuses a flag given
/// twice, so appending it would stop the controller at once); `--provider` adds up.
fn controller_args(layout: &Layout, backend: &[String]) -> Vec<String> {
    let given = |flag: &str| {
        layout
            .controller_args
            .iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    };
    let mut args = vec![
        "run".into(),
        "--provider".into(),
        format!("fake=http://{}", layout.provider),
    ];
    for (flag, value) in [
        ("--listen-address", layout.autoscaler_health.to_string()),
        ("--scan-interval", layout.scan_interval.clone()),
        ("--log-format", layout.log_format.clone()),
    ] {
        if !given(flag) {
            args.extend([flag.to_owned(), value]);
        }
    }
    args.extend(backend.iter().cloned());
    args.extend(layout.controller_args.iter().cloned());
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(operator: &[&str]) -> Layout {
        Layout {
            dir: "/tmp/stack".into(),
            bin: "/bin".into(),
            api_port: 1,
            provider: "127.0.0.1:2".parse().expect("address"),
            autoscaler_health: "127.0.0.1:3".parse().expect("address"),
            scan_interval: "10s".into(),
            log_format: "text".into(),
            controller_args: operator.iter().map(|a| (*a).to_owned()).collect(),
            provider_config: None,
            real: false,
        }
    }

    fn count(args: &[String], flag: &str) -> usize {
        args.iter()
            .filter(|a| *a == flag || a.starts_with(&format!("{flag}=")))
            .count()
    }

    #[test]
    fn an_operators_single_value_flag_replaces_the_stacks_and_is_given_once() {
        for operator in [
            &["--scan-interval", "3s"][..],
            &["--scan-interval=3s"],
            &["--log-format", "json", "--listen-address", "127.0.0.1:9"],
        ] {
            let args = controller_args(&layout(operator), &[]);
            for flag in ["--scan-interval", "--log-format", "--listen-address"] {
                assert_eq!(count(&args, flag), 1, "{flag} once in {args:?}");
            }
            assert!(
                args.ends_with(&layout(operator).controller_args),
                "{args:?}"
            );
        }
        let args = controller_args(&layout(&["--scale-down-delay-after-add", "1m"]), &[]);
        assert_eq!(
            args[args
                .iter()
                .position(|a| a == "--scan-interval")
                .expect("kept")
                + 1],
            "10s"
        );
        let args = controller_args(&layout(&["--provider", "aws=http://127.0.0.1:4"]), &[]);
        assert_eq!(count(&args, "--provider"), 2, "providers add up: {args:?}");
    }
}
