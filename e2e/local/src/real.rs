//! The real control plane for the stack: etcd, kube-apiserver, kube-scheduler and
//! kube-controller-manager v1.37.2 as local processes (`e2e/cluster/up.sh`), and what a test
//! needs of them: an admin client, clients that hold only a ServiceAccount's rights (the
//! chart's ClusterRoles and Roles, applied as a Helm install would), and kubectl.
//!
//! Each [`RealCluster`] is a fresh cluster in its own directory, stopped by
//! [`RealCluster::stop`] (and, as a safety net, when dropped).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::Value;

use crate::apply;

/// The repository's `e2e/cluster` directory (build and start scripts).
#[must_use]
pub fn cluster_scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cluster")
}

/// The repository's Helm chart.
#[must_use]
pub fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/dra-autoscaler")
}

/// The namespace the chart is "installed" into.
pub const RELEASE_NAMESPACE: &str = "dra-autoscaler";
/// The Helm release name (the chart's objects are named after it).
pub const RELEASE: &str = "dra-autoscaler";

/// A running real control plane.
#[derive(Debug)]
pub struct RealCluster {
    dir: PathBuf,
    kubeconfig: PathBuf,
    bin: PathBuf,
    server: String,
    ca: Vec<u8>,
    stopped: bool,
}

fn env_file(dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(dir.join("env"))
        .with_context(|| format!("reading {}", dir.join("env").display()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}

impl RealCluster {
    /// Starts a fresh cluster in `dir` (building the binaries first if this machine has not
    /// yet: see `e2e/cluster/build.sh`). `feature_gates` are added to every component's
    /// (`GenericWorkload=true` is always on).
    ///
    /// # Errors
    /// The build or a component fails; the error carries the script's output.
    pub async fn start(dir: &Path, feature_gates: &str) -> anyhow::Result<Self> {
        let script = cluster_scripts().join("up.sh");
        let mut command = tokio::process::Command::new("bash");
        command.arg(&script).arg("--dir").arg(dir);
        if !feature_gates.is_empty() {
            command.arg("--feature-gates").arg(feature_gates);
        }
        let output = command
            .output()
            .await
            .with_context(|| format!("running {}", script.display()))?;
        if !output.status.success() {
            bail!(
                "{} failed ({}):\n{}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let values = env_file(dir)?;
        let get = |key: &str| {
            values
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .with_context(|| format!("{key} missing from {}", dir.join("env").display()))
        };
        let ca_path = PathBuf::from(get("E2E_CLUSTER_CA")?);
        Ok(Self {
            dir: dir.to_path_buf(),
            kubeconfig: PathBuf::from(get("KUBECONFIG")?),
            bin: PathBuf::from(get("E2E_CLUSTER_BIN")?),
            server: get("E2E_CLUSTER_SERVER")?,
            ca: std::fs::read(&ca_path)
                .with_context(|| format!("reading {}", ca_path.display()))?,
            stopped: false,
        })
    }

    /// The admin kubeconfig (`system:masters`).
    #[must_use]
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The cluster's directory (logs in `logs/`).
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A cluster-admin client (for the test's own reads and writes).
    ///
    /// # Errors
    /// The kubeconfig cannot be read.
    pub async fn admin_client(&self) -> anyhow::Result<Client> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
    }

    /// A client that authenticates as ServiceAccount `namespace/name` with a token from the
    /// TokenRequest API, so the API server grants it exactly what RBAC binds to that account.
    ///
    /// # Errors
    /// The token cannot be issued.
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<Client> {
        let token = self.service_account_token(namespace, name).await?;
        let kubeconfig = self.token_kubeconfig(&token);
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
    }

    /// Writes a kubeconfig for ServiceAccount `namespace/name` to `path` (for processes).
    ///
    /// # Errors
    /// The token cannot be issued or the file written.
    pub async fn write_service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        path: &Path,
    ) -> anyhow::Result<()> {
        let token = self.service_account_token(namespace, name).await?;
        let text = serde_json::to_string_pretty(&self.token_kubeconfig(&token))?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }

    async fn service_account_token(&self, namespace: &str, name: &str) -> anyhow::Result<String> {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.admin_client().await?, namespace);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: None,
                expiration_seconds: Some(24 * 3600),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let issued = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .with_context(|| format!("requesting a token for ServiceAccount {namespace}/{name}"))?;
        issued
            .status
            .and_then(|s| s.token)
            .with_context(|| format!("no token issued for ServiceAccount {namespace}/{name}"))
    }

    fn token_kubeconfig(&self, token: &str) -> Kubeconfig {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca);
        let value = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "dra-e2e", "cluster": {
                "server": self.server, "certificate-authority-data": ca}}],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "dra-e2e", "user": "sa"}}],
            "current-context": "sa",
        });
        serde_json::from_value(value).unwrap_or_default()
    }

    /// Runs the cluster's kubectl with the admin kubeconfig; returns stdout.
    ///
    /// # Errors
    /// kubectl fails (its stderr in the error).
    pub fn kubectl(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = Command::new(self.bin.join("kubectl"))
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .context("running kubectl")?;
        if !output.status.success() {
            bail!(
                "kubectl {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Applies the RBAC of the Helm chart, rendered with `values` (`--set` pairs), as `helm
    /// install` into [`RELEASE_NAMESPACE`] would: the namespace, ServiceAccounts,
    /// ClusterRoles, Roles and their bindings (the Deployments are not run: the test runs the
    /// same programs in-process or as local processes).
    ///
    /// # Errors
    /// helm is missing or fails, or a write is refused.
    pub async fn install_chart_rbac(&self, values: &[&str]) -> anyhow::Result<Vec<String>> {
        let rendered = render_chart(values)?;
        let mut objects = vec![serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NAMESPACE}})];
        objects.extend(
            apply::parse_objects(&rendered, "the rendered chart")?
                .into_iter()
                .filter(|o| {
                    matches!(
                        o.get("kind").and_then(Value::as_str),
                        Some(
                            "ServiceAccount"
                                | "ClusterRole"
                                | "ClusterRoleBinding"
                                | "Role"
                                | "RoleBinding"
                        )
                    )
                }),
        );
        // A server that just became ready may still be publishing its API groups: retry a
        // few times, saying what went wrong each time.
        let client = self.admin_client().await?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match apply::apply_objects(&client, &objects).await {
                Ok(applied) => return Ok(applied),
                Err(err) if attempt < 10 => {
                    tracing::warn!(attempt, error = ?err, "applying the chart's RBAC failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Registers the control-plane Node every real cluster has (what kubeadm and kind create:
    /// the `node-role.kubernetes.io/control-plane` label and `NoSchedule` taint, so workloads
    /// never land there). kube-scheduler 1.37.2 needs at least one Node to judge a gang with
    /// DRA claims: on a cluster with none, its DynamicResources PodGroupPostFilter fails with
    /// "not found" and the pods get `SchedulerError` instead of `Unschedulable`, which no
    /// autoscaler acts on (docs/divergences.md, "Upstream behaviours we met").
    ///
    /// # Errors
    /// The API server refuses the Node.
    pub async fn register_control_plane_node(&self) -> anyhow::Result<()> {
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "control-plane",
                "labels": {
                    "kubernetes.io/hostname": "control-plane",
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "node-role.kubernetes.io/control-plane": "",
                },
            },
            "spec": {"taints": [{
                "key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "registered by the e2e harness"}],
            },
        }))?;
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.admin_client().await?);
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(()),
            Err(err) => Err(err).context("registering the control-plane Node"),
        }
    }

    /// Stops every process of the cluster.
    pub fn stop(mut self) {
        self.stop_processes();
    }

    fn stop_processes(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let status = Command::new("bash")
            .arg(cluster_scripts().join("up.sh"))
            .arg("down")
            .arg("--dir")
            .arg(&self.dir)
            .status();
        if !status.is_ok_and(|s| s.success()) {
            tracing::warn!(dir = %self.dir.display(), "stopping the real cluster failed");
        }
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        self.stop_processes();
    }
}

/// The helm binary: `$HELM`, `helm` on `PATH`, or the one `charts/dra-autoscaler/ci/install-helm.sh`
/// installs from the npm registry.
///
/// # Errors
/// None of them works.
pub fn helm() -> anyhow::Result<PathBuf> {
    if let Some(helm) = std::env::var_os("HELM") {
        return Ok(PathBuf::from(helm));
    }
    if Command::new("helm")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Ok(PathBuf::from("helm"));
    }
    let out = Command::new("bash")
        .arg(chart_dir().join("ci/install-helm.sh"))
        .output()
        .context("running ci/install-helm.sh")?;
    if !out.status.success() {
        bail!(
            "helm is not installed and ci/install-helm.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    ))
}

/// `helm template` of the chart into [`RELEASE_NAMESPACE`] with `--set` `values`.
///
/// # Errors
/// helm is missing or refuses the values.
pub fn render_chart(values: &[&str]) -> anyhow::Result<String> {
    let mut command = Command::new(helm()?);
    command
        .arg("template")
        .arg(RELEASE)
        .arg(chart_dir())
        .arg("--namespace")
        .arg(RELEASE_NAMESPACE);
    for value in values {
        command.arg("--set").arg(value);
    }
    let out = command.output().context("running helm template")?;
    if !out.status.success() {
        bail!(
            "helm template failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
