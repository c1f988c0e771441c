//! Delayed ResourceSlice publication, as a node's DRA driver does some time after the kubelet
//! registered the Node, and its cancellation.
//!
//! A rollback or a deletion must not race a pending publication: if the slices were created
//! after the rollback listed them for deletion, they would stay behind with no Node. So every
//! publication is tracked per node; [`Publishers::stop`] tells it to stop and waits until it has
//! (a create already sent completes first), and only then does the caller delete the slices.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::GroupConfig;
use crate::kube_writer::KubeWriter;

struct Pending {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// The slice publications started and not yet stopped, by node name.
#[derive(Default)]
pub struct Publishers {
    pending: Mutex<BTreeMap<String, Pending>>,
}

impl std::fmt::Debug for Publishers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.lock().keys().cloned().collect();
        f.debug_struct("Publishers")
            .field("pending", &names)
            .finish()
    }
}

impl Publishers {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Pending>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publishes `group`'s slices for node `name` (uid `uid`) after `delay`, unless stopped first.
    pub fn start(
        &self,
        kube: KubeWriter,
        group: GroupConfig,
        name: String,
        uid: String,
        delay: Duration,
    ) {
        let (stop, mut stopped) = watch::channel(false);
        let node = name.clone();
        let task = tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                _ = stopped.wait_for(|stop| *stop) => return,
            }
            let keep_going = || !*stopped.borrow();
            match kube.publish_slices(&group, &node, &uid, keep_going).await {
                Ok(0) => {}
                Ok(created) => {
                    tracing::info!(node = %node, slices = created, "published ResourceSlices");
                }
                Err(err) => {
                    tracing::warn!(node = %node, %err, "unable to publish ResourceSlices");
                }
            }
        });
        // A node name is never reused, so an older entry can only be a finished publication.
        self.lock().insert(name, Pending { stop, task });
    }

    /// Stops the publication for node `name`, if any, and waits until it has stopped: after
    /// this returns, no slice of the node is created any more.
    pub async fn stop(&self, name: &str) {
        let pending = self.lock().remove(name);
        if let Some(pending) = pending {
            let _ = pending.stop.send(true);
            if let Err(err) = pending.task.await
                && err.is_panic()
            {
                tracing::warn!(node = name, "slice publication panicked");
            }
        }
    }
}

impl Drop for Publishers {
    fn drop(&mut self) {
        for pending in self.lock().values() {
            pending.task.abort();
        }
    }
}
