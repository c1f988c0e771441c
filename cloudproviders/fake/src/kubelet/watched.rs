//! One informer of the fake kubelet: a watch whose objects are kept in memory, as a real
//! kubelet's informers keep theirs, so a pass reads them without asking the API server.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

/// Objects of one watch, kept current by a background task that stops when this is dropped.
pub(super) struct Watched<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    /// Whether the watch's last attempt failed (it retries with backoff meanwhile).
    failing: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl<K> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Lists and then watches `api` with `config`, retrying with backoff on errors; `what`
    /// names the watch in logs.
    pub(super) fn start(api: Api<K>, config: watcher::Config, what: String) -> Self {
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
        let failing = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&failing);
        let task = tokio::spawn(async move {
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                // Log the first error of a run of them: the watch retries on its own.
                let was_failing = flag.swap(event.is_err(), Ordering::Relaxed);
                if let Err(err) = event
                    && !was_failing
                {
                    tracing::warn!(watch = %what, %err, "kubelet watch failed; retrying");
                }
            }
        });
        Self {
            store,
            failing,
            task,
        }
    }

    /// Whether the watch's last attempt failed (forbidden, server away, ...).
    pub(super) fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    /// The objects as last seen (none before the first list completed).
    pub(super) fn objects(&self) -> Vec<Arc<K>> {
        self.store.state()
    }
}

impl<K: Resource<DynamicType = ()> + 'static> Drop for Watched<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}
