//! `dra-fake-apiserver`: runs the fake Kubernetes API server as a process, for the local
//! stack and shell e2e scripts. Prints the URL on stdout and optionally writes a kubeconfig.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Parser;
use dra_fake_apiserver::FakeApiServer;
use dra_provider::logging::{self, LogFormat};

/// Runs an in-memory Kubernetes API server stand-in on 127.0.0.1.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Port to listen on; 0 picks a free one (printed on stdout).
    #[arg(long, env = "DRA_FAKE_APISERVER_PORT", default_value_t = 0)]
    port: u16,
    /// Extra resource to serve, as group/version/plural/Kind/(Namespaced|Cluster),
    /// e.g. dra-autoscaler.io/v1alpha1/nodegroups/NodeGroup/Cluster. It gets a
    /// /status subresource, as most CRDs have; append /nostatus to leave it out
    /// (then writes to the resource change .status too). Repeatable.
    #[arg(long = "crd", env = "DRA_FAKE_APISERVER_CRDS", value_delimiter = ',')]
    crds: Vec<String>,
    /// Write a kubeconfig for the server to this path.
    #[arg(long, env = "DRA_FAKE_APISERVER_KUBECONFIG_OUT")]
    kubeconfig_out: Option<std::path::PathBuf>,
    /// Kubernetes version reported by /version.
    #[arg(long, default_value = "1.37.0")]
    kube_version: String,
    /// Keep every object in this file and read it back at start (a restart keeps the cluster;
    /// clients resuming an older watch get 410 Gone and relist).
    #[arg(long, env = "DRA_FAKE_APISERVER_STATE_FILE")]
    state_file: Option<PathBuf>,
    /// The resourceVersion to start counting from when no state is restored: a number, or
    /// `auto` (the clock in milliseconds, so a restarted server never hands out a
    /// resourceVersion an earlier one did: clients relist instead of keeping stale caches).
    #[arg(long, default_value = "auto")]
    initial_resource_version: String,
    /// Log format: text or json (level: RUST_LOG, default info; every request at debug).
    #[arg(long, env = "DRA_FAKE_APISERVER_LOG_FORMAT", default_value = "text")]
    log_format: LogFormat,
    /// Give every new Node `node.kubernetes.io/not-ready:NoSchedule`, as kube-apiserver's
    /// TaintNodesByCondition admission does (something must then lift it once the node is
    /// Ready, as KCM does: dra-fake-scheduler does).
    #[arg(long, env = "DRA_FAKE_APISERVER_TAINT_NEW_NODES")]
    taint_new_nodes: bool,
}

/// The `--initial-resource-version` value.
fn initial_resource_version(value: &str) -> anyhow::Result<u64> {
    if value == "auto" {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        return Ok(u64::try_from(millis).unwrap_or(u64::MAX / 2));
    }
    value
        .parse()
        .with_context(|| format!("--initial-resource-version {value:?}: expected auto or a number"))
}

/// One `--crd` value.
fn parse_crd(spec: &str) -> anyhow::Result<(String, String, String, String, bool, bool)> {
    let parts: Vec<&str> = spec.split('/').collect();
    let (group, version, plural, kind, scope, status) = match parts.as_slice() {
        [g, v, p, k, s] | [g, v, p, k, s, "status"] => (g, v, p, k, s, true),
        [g, v, p, k, s, "nostatus"] => (g, v, p, k, s, false),
        _ => bail!(
            "--crd {spec:?}: expected group/version/plural/Kind/(Namespaced|Cluster)[/status|/nostatus]"
        ),
    };
    let namespaced = match *scope {
        "Namespaced" => true,
        "Cluster" => false,
        other => bail!("--crd {spec:?}: scope {other:?} must be Namespaced or Cluster"),
    };
    if [group, version, plural, kind].iter().any(|p| p.is_empty()) {
        bail!("--crd {spec:?}: group, version, plural and Kind must be non-empty");
    }
    Ok((
        (*group).into(),
        (*version).into(),
        (*plural).into(),
        (*kind).into(),
        namespaced,
        status,
    ))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Args {
        port,
        crds,
        kubeconfig_out,
        kube_version,
        state_file,
        initial_resource_version: initial_rv,
        log_format,
        taint_new_nodes,
    } = Args::parse();
    logging::init(log_format)?;
    let mut builder = FakeApiServer::builder()
        .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .version(&kube_version)
        .initial_resource_version(initial_resource_version(&initial_rv)?)
        .taint_new_nodes(taint_new_nodes);
    if let Some(path) = state_file {
        builder = builder.state_file(path);
    }
    for spec in &crds {
        let (g, v, p, k, namespaced, status) = parse_crd(spec)?;
        builder = builder.resource(&g, &v, &p, &k, namespaced, status);
    }
    let server = builder
        .start()
        .await
        .context("unable to start the fake API server")?;
    if let Some(path) = &kubeconfig_out {
        std::fs::write(path, server.kubeconfig_yaml())
            .with_context(|| format!("unable to write the kubeconfig to {}", path.display()))?;
        tracing::info!(path = %path.display(), "wrote the kubeconfig");
    }
    println!("{}", server.url());
    server
        .serve_until_ctrl_c()
        .await
        .context("unable to wait for Ctrl-C")
}

#[cfg(test)]
mod tests {
    use super::parse_crd;

    #[test]
    fn crd_specs_default_to_a_status_subresource() {
        let (g, v, p, k, namespaced, status) =
            parse_crd("dra-autoscaler.io/v1alpha1/nodegroups/NodeGroup/Cluster").expect("valid");
        assert_eq!(
            (g.as_str(), v.as_str(), p.as_str(), k.as_str()),
            ("dra-autoscaler.io", "v1alpha1", "nodegroups", "NodeGroup")
        );
        assert!(!namespaced);
        assert!(status);
        let (.., namespaced, status) =
            parse_crd("scheduling.k8s.io/v1alpha3/workloads/Workload/Namespaced/nostatus")
                .expect("valid");
        assert!(namespaced);
        assert!(!status);
    }

    #[test]
    fn initial_resource_versions_are_numbers_or_the_clock() {
        assert_eq!(super::initial_resource_version("42").expect("number"), 42);
        let auto = super::initial_resource_version("auto").expect("auto");
        assert!(auto > 1_700_000_000_000, "milliseconds since 1970: {auto}");
        assert!(super::initial_resource_version("soon").is_err());
    }

    #[test]
    fn malformed_crd_specs_are_rejected() {
        assert!(parse_crd("x.io/v1/things/Thing").is_err());
        assert!(parse_crd("x.io/v1/things/Thing/Global").is_err());
        assert!(parse_crd("x.io/v1//Thing/Cluster").is_err());
        assert!(parse_crd("x.io/v1/things/Thing/Cluster/scale").is_err());
    }
}
