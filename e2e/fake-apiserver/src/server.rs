//! The builder and the handle of a running fake API server.

use std::{
    net::{Ipv4Addr, SocketAddr},
    path::PathBuf,
    sync::{Arc, Mutex, RwLock},
    time::Duration,
};

use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

use crate::{
    discovery,
    faults::{Faults, RequestRecord, Verb},
    http, lock, persist,
    request::App,
    resource::{Registry, ResourceDef},
    store::Store,
    verbs,
};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The listening socket could not be bound.
    #[error("unable to bind the fake API server to {addr}")]
    Bind {
        /// Address we tried to bind.
        addr: std::net::SocketAddr,
        /// Underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bound socket has no local address (should not happen on TCP).
    #[error("unable to read the local address of the fake API server socket")]
    LocalAddr(#[source] std::io::Error),
    /// The server URL is not a valid URI (should not happen for a socket address).
    #[error("invalid fake API server URL {url}")]
    Url {
        /// The URL.
        url: String,
        /// Parse error.
        #[source]
        source: ::http::uri::InvalidUri,
    },
    /// The server URL could not be turned into a kube client.
    #[error("unable to build a kube client for {url}")]
    Client {
        /// Server URL.
        url: String,
        /// Underlying kube error.
        #[source]
        source: kube::Error,
    },
    /// The state file exists but cannot be read.
    #[error("unable to restore the state")]
    State(#[from] persist::StateError),
    /// A version string passed to the builder was not `MAJOR.MINOR.PATCH`.
    #[error("invalid Kubernetes version {0:?}: expected MAJOR.MINOR.PATCH, e.g. 1.37.0")]
    Version(String),
}

/// Default number of events kept per resource for watch resumption.
pub const DEFAULT_HISTORY_LIMIT: usize = 1000;

/// How long a read of a resourceVersion the server has not reached waits (upstream's watch
/// cache `blockTimeout`).
pub const DEFAULT_TOO_LARGE_WAIT: Duration = Duration::from_secs(3);

/// How often a changed store is written to the state file.
const SAVE_INTERVAL: Duration = Duration::from_millis(100);

/// Configures a [`FakeApiServer`] before it starts.
#[derive(Clone, Debug)]
pub struct FakeApiServerBuilder {
    registry: Registry,
    version: String,
    history_limit: usize,
    bookmark_interval: Duration,
    bind: SocketAddr,
    namespaces: Vec<String>,
    state_file: Option<PathBuf>,
    initial_resource_version: u64,
    too_large_wait: Duration,
    taint_new_nodes: bool,
}

impl Default for FakeApiServerBuilder {
    fn default() -> Self {
        Self {
            registry: Registry::builtins(),
            version: "1.37.0".into(),
            history_limit: DEFAULT_HISTORY_LIMIT,
            bookmark_interval: Duration::from_secs(5),
            bind: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            namespaces: ["default", "kube-system", "kube-public", "kube-node-lease"]
                .map(str::to_owned)
                .to_vec(),
            state_file: None,
            initial_resource_version: 0,
            too_large_wait: DEFAULT_TOO_LARGE_WAIT,
            taint_new_nodes: false,
        }
    }
}

impl FakeApiServerBuilder {
    /// Serves an extra resource, typically a CRD such as
    /// `.resource("dra-autoscaler.io", "v1alpha1", "nodegroups", "NodeGroup", false, true)`.
    ///
    /// Registering an existing (group, version, plural) replaces it.
    #[must_use]
    pub fn resource(
        self,
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        with_status: bool,
    ) -> Self {
        self.resource_def(ResourceDef::new(
            group,
            version,
            plural,
            kind,
            namespaced,
            with_status,
        ))
    }

    /// Serves a resource described in full (status-on-create policy, binding).
    #[must_use]
    pub fn resource_def(mut self, def: ResourceDef) -> Self {
        self.registry.insert(def);
        self
    }

    /// The Kubernetes version `/version` reports, as `MAJOR.MINOR.PATCH` (default 1.37.0).
    #[must_use]
    pub fn version(mut self, version: &str) -> Self {
        version.clone_into(&mut self.version);
        self
    }

    /// Events kept per resource; a watch from an older resourceVersion gets 410 Expired.
    #[must_use]
    pub fn history_limit(mut self, events: usize) -> Self {
        self.history_limit = events;
        self
    }

    /// How often watches that allow bookmarks receive one (default 5 s).
    #[must_use]
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// The address to listen on (default `127.0.0.1:0`, an ephemeral port).
    #[must_use]
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = addr;
        self
    }

    /// Runs kube-apiserver's `TaintNodesByCondition` admission: every Node is created with
    /// `node.kubernetes.io/not-ready:NoSchedule`, as on a real server (default off: then
    /// something must lift it as KCM's node lifecycle controller does, which the scheduler
    /// stand-in does in the local stack; tests without it would never see a usable node).
    #[must_use]
    pub fn taint_new_nodes(mut self, on: bool) -> Self {
        self.taint_new_nodes = on;
        self
    }

    /// Namespaces that exist at start (default: `default`, `kube-system`,
    /// `kube-public`, `kube-node-lease`, as in a fresh cluster).
    #[must_use]
    pub fn namespaces(mut self, names: &[&str]) -> Self {
        self.namespaces = names.iter().map(|n| (*n).to_owned()).collect();
        self
    }

    /// Keeps every object and the resourceVersion in `path`: read at start when it exists
    /// (a restart on the same data: no watch history, so older resourceVersions get 410 and
    /// clients relist), written shortly after every change and, marked clean, on shutdown.
    #[must_use]
    pub fn state_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.state_file = Some(path.into());
        self
    }

    /// Starts the resourceVersion counter at `rv` with everything at or below it compacted,
    /// like an etcd restored with `--bump-revision rv --mark-compacted`: a client that kept a
    /// resourceVersion from an earlier server gets 410 Gone and relists instead of waiting for
    /// a resourceVersion this server has not reached. Ignored when a state file is read.
    #[must_use]
    pub fn initial_resource_version(mut self, rv: u64) -> Self {
        self.initial_resource_version = rv;
        self
    }

    /// How long a read of a resourceVersion the server has not reached waits before the 504
    /// `Too large resource version` (default 3 s, as upstream).
    #[must_use]
    pub fn too_large_wait(mut self, wait: Duration) -> Self {
        self.too_large_wait = wait;
        self
    }

    /// Binds the socket, seeds the namespaces and starts serving in the background.
    ///
    /// Must be called inside a Tokio runtime; the server runs on it until
    /// [`FakeApiServer::shutdown`] or until the handle is dropped.
    pub async fn start(self) -> Result<FakeApiServer, StartError> {
        let info = parse_version(&self.version)?;
        let listener = TcpListener::bind(self.bind)
            .await
            .map_err(|source| StartError::Bind {
                addr: self.bind,
                source,
            })?;
        let addr = listener.local_addr().map_err(StartError::LocalAddr)?;
        let url = format!("http://{addr}");
        let client = client_for(&url)?;

        let restored = match &self.state_file {
            Some(path) => persist::load(path)?,
            None => None,
        };
        let store = match restored {
            Some((snapshot, clean)) => {
                let bump = if clean { 0 } else { persist::UNCLEAN_BUMP };
                let store = Store::restore(self.history_limit, snapshot, bump);
                tracing::info!(
                    resource_version = store.current_rv(),
                    clean,
                    "restored objects from the state file"
                );
                store
            }
            None => {
                let mut store =
                    Store::starting_at(self.history_limit, self.initial_resource_version);
                if let Some(ns_def) = self.registry.get("", "v1", "namespaces") {
                    for name in &self.namespaces {
                        let body = serde_json::json!({"metadata": {"name": name}});
                        // A seed name that fails validation is skipped, like a rejected create.
                        if let Err(err) = store.create(ns_def, None, body, false) {
                            tracing::warn!(namespace = %name, error = %err, "not seeding namespace");
                        }
                    }
                }
                store
            }
        };
        let app = Arc::new(App {
            registry: RwLock::new(self.registry),
            store: Arc::new(Mutex::new(store)),
            faults: Mutex::new(Faults::default()),
            log: Mutex::new(Vec::new()),
            version: info,
            addr,
            bookmark_interval: self.bookmark_interval,
            too_large_wait: self.too_large_wait,
            taint_new_nodes: self.taint_new_nodes,
        });
        verbs::register_stored_crds(&app);
        let saver = self
            .state_file
            .clone()
            .map(|path| tokio::spawn(save_changes(Arc::clone(&app), path)));
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let router = http::router(Arc::clone(&app));
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    // A dropped sender also means stop.
                    let _ = stop_rx.await;
                })
                .await;
            if let Err(err) = served {
                tracing::error!(error = %err, "fake apiserver stopped with an error");
            }
        });
        tracing::info!(%url, "serving the Kubernetes API stand-in");
        Ok(FakeApiServer {
            app,
            addr,
            url,
            client,
            stop_tx: Some(stop_tx),
            task: Some(task),
            saver,
            state_file: self.state_file,
        })
    }
}

/// Writes the store to `path` whenever it changed (not marked clean: only shutdown does that).
async fn save_changes(app: Arc<App>, path: PathBuf) {
    let mut saved = None;
    loop {
        let snapshot = {
            let store = lock(&app.store);
            (saved != Some(store.current_rv())).then(|| store.snapshot())
        };
        if let Some(snapshot) = snapshot {
            let rv = snapshot.resource_version;
            match persist::save(&path, snapshot, false) {
                Ok(()) => saved = Some(rv),
                Err(err) => tracing::warn!(%err, "unable to write the state file"),
            }
        }
        tokio::time::sleep(SAVE_INTERVAL).await;
    }
}

fn parse_version(
    version: &str,
) -> Result<k8s_openapi::apimachinery::pkg::version::Info, StartError> {
    let trimmed = version.trim_start_matches('v');
    let parts: Vec<&str> = trimmed.split('.').collect();
    match parts.as_slice() {
        [major, minor, patch]
            if parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) =>
        {
            Ok(discovery::version_info(major, minor, patch))
        }
        _ => Err(StartError::Version(version.to_owned())),
    }
}

fn client_for(url: &str) -> Result<kube::Client, StartError> {
    let uri = url
        .parse::<::http::Uri>()
        .map_err(|source| StartError::Url {
            url: url.to_owned(),
            source,
        })?;
    kube::Client::try_from(kube::Config::new(uri)).map_err(|source| StartError::Client {
        url: url.to_owned(),
        source,
    })
}

/// A running fake API server. Dropping the handle stops it.
pub struct FakeApiServer {
    app: Arc<App>,
    addr: SocketAddr,
    url: String,
    client: kube::Client,
    stop_tx: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    saver: Option<JoinHandle<()>>,
    state_file: Option<PathBuf>,
}

impl std::fmt::Debug for FakeApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeApiServer")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl FakeApiServer {
    /// Starts configuring a server with the built-in resources registered.
    pub fn builder() -> FakeApiServerBuilder {
        FakeApiServerBuilder::default()
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kube client for this server: plain HTTP, no auth, default namespace `default`.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A kubeconfig pointing at this server, for binaries under test
    /// (write it to a file and pass `--kubeconfig` or set `KUBECONFIG`).
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig_yaml(&self.url)
    }

    /// Makes the next `n` requests with this verb on this resource fail with `code`
    /// (a `Status` with the matching reason, e.g. 500 InternalError).
    ///
    /// `resource` is the plural (`nodes`), or `plural/subresource` (`nodegroups/status`)
    /// to fail only subresource requests. Rules are consumed in the order added.
    pub fn fail_next(&self, verb: Verb, resource: &str, n: usize, code: u16) {
        lock(&self.app.faults).add(verb, resource, n, code);
    }

    /// Drops all pending injected failures.
    pub fn clear_faults(&self) {
        lock(&self.app.faults).clear();
    }

    /// Simulates an etcd compaction: every open watch receives an ERROR event with a
    /// 410 Expired Status and closes, and resuming from any earlier resourceVersion is
    /// refused with 410, so clients must relist.
    pub fn expire_watches(&self) {
        lock(&self.app.store).expire_watches();
    }

    /// Ends every open watch stream cleanly, as an apiserver restart or a load
    /// balancer timeout would; clients resume from their last resourceVersion.
    pub fn close_watches(&self) {
        lock(&self.app.store).close_watches();
    }

    /// Every request answered so far, oldest first.
    pub fn request_log(&self) -> Vec<RequestRecord> {
        lock(&self.app.log).clone()
    }

    /// Empties the request log.
    pub fn clear_request_log(&self) {
        lock(&self.app.log).clear();
    }

    /// The latest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        lock(&self.app.store).current_rv()
    }

    /// Stops serving: ends open watches, stops accepting connections and waits
    /// (up to 5 s) for in-flight requests.
    pub async fn shutdown(mut self) {
        self.stop().await;
    }

    async fn stop(&mut self) {
        lock(&self.app.store).close_watches();
        if let Some(stop) = self.stop_tx.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
        self.save_clean();
    }

    /// Stops the periodic saver and writes the state file marked clean.
    fn save_clean(&mut self) {
        if let Some(saver) = self.saver.take() {
            saver.abort();
        }
        if let Some(path) = &self.state_file {
            let snapshot = lock(&self.app.store).snapshot();
            match persist::save(path, snapshot, true) {
                Ok(()) => tracing::info!(path = %path.display(), "state saved"),
                Err(err) => tracing::warn!(%err, "unable to write the state file"),
            }
        }
    }

    /// Stops serving without saving a clean state, as a killed process would: the state file
    /// keeps the last periodic save, and a server started on it bumps the resourceVersion.
    pub async fn kill(mut self) {
        if let Some(saver) = self.saver.take() {
            saver.abort();
        }
        self.state_file = None;
        self.stop().await;
    }

    /// Serves until the process is interrupted (Ctrl-C / SIGINT), then shuts down.
    pub async fn serve_until_ctrl_c(mut self) -> std::io::Result<()> {
        let result = tokio::signal::ctrl_c().await;
        self.stop().await;
        result
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Ok(mut store) = self.app.store.lock() {
            store.close_watches();
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(saver) = self.saver.take() {
            saver.abort();
        }
    }
}

/// A kubeconfig with one cluster, user and context for `url`.
pub fn kubeconfig_yaml(url: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: dra-fake-apiserver
  cluster:
    server: {url}
users:
- name: dra-fake-apiserver
  user: {{}}
contexts:
- name: dra-fake-apiserver
  context:
    cluster: dra-fake-apiserver
    user: dra-fake-apiserver
    namespace: default
current-context: dra-fake-apiserver
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_must_be_major_minor_patch() {
        let info = parse_version("1.36.2").expect("valid");
        assert_eq!(info.git_version, "v1.36.2");
        assert_eq!(info.minor, "36");
        assert!(parse_version("1.36").is_err());
        assert!(parse_version("1.x.0").is_err());
    }

    #[test]
    fn kubeconfig_parses_with_kube() {
        let yaml = kubeconfig_yaml("http://127.0.0.1:1234");
        let cfg = kube::config::Kubeconfig::from_yaml(&yaml).expect("kube parses it");
        assert_eq!(cfg.current_context.as_deref(), Some("dra-fake-apiserver"));
        let server = cfg.clusters[0]
            .cluster
            .as_ref()
            .and_then(|c| c.server.clone());
        assert_eq!(server.as_deref(), Some("http://127.0.0.1:1234"));
    }
}
