//! Watches on the store: the events they carry, where they start (now, or replaying the
//! history after a resourceVersion, 410 Gone when it was compacted), and the test hooks
//! that expire or close every open watch.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{broadcast, watch};

use super::Store;
use crate::{error::ApiError, resource::ResourceDef};

/// The type of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl ChangeKind {
    /// Wire name of the event type.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed write, as recorded in the history and sent to watches.
#[derive(Debug)]
pub struct Change {
    /// resourceVersion stamped by this write.
    pub rv: u64,
    /// Event type.
    pub kind: ChangeKind,
    /// The object after the write (for deletes: its last state, with the delete's rv).
    pub object: Value,
    /// The object before the write, for `Modified` (lets selector-filtered watches turn
    /// a change into ADDED/DELETED when the object enters or leaves the selection).
    pub previous: Option<Value>,
}

/// Signals from test hooks to every open watch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchControl {
    /// Bumped by `expire_watches`: watches send a 410 and close.
    pub expire_epoch: u64,
    /// Bumped by `close_watches` and shutdown: watches close cleanly.
    pub close_epoch: u64,
}

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFrom {
    /// Now; with `initial`, first a synthetic ADDED for every current object.
    Now {
        /// Whether to send the current objects first.
        initial: bool,
    },
    /// Replay every event after this resourceVersion, then stream.
    After(u64),
}

/// What a new watch needs: its first events and its live feeds.
pub struct WatchStart {
    /// Current objects to send as ADDED first.
    pub initial: Vec<Value>,
    /// Recorded events to replay before the live feed.
    pub backlog: Vec<Arc<Change>>,
    /// Live events of this resource.
    pub events: broadcast::Receiver<Arc<Change>>,
    /// Test-hook signals.
    pub control: watch::Receiver<WatchControl>,
    /// The signal epochs when the watch was opened; a later change is meant for it.
    pub epochs: WatchControl,
    /// The store's resourceVersion when the watch was opened.
    pub rv: u64,
    /// Live events at or below this resourceVersion are not for this watch (a watch from a
    /// resourceVersion the store has not reached yet starts after it, as upstream's).
    pub after: u64,
}

impl Store {
    /// Opens a watch on one resource (all namespaces; the caller filters).
    pub fn open_watch(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        from: WatchFrom,
    ) -> Result<WatchStart, ApiError> {
        let control = self.control.subscribe();
        let epochs = *control.borrow();
        let rv = self.rv;
        let col = self.collection(def);
        let after = match from {
            WatchFrom::Now { .. } => rv,
            WatchFrom::After(from_rv) => from_rv,
        };
        let (initial, backlog) = match from {
            WatchFrom::Now { initial } => {
                let objects = if initial {
                    col.objects
                        .candidates(namespace, &crate::selector::FieldSelector::default())
                        .cloned()
                        .collect()
                } else {
                    Vec::new()
                };
                (objects, Vec::new())
            }
            WatchFrom::After(from_rv) => {
                if from_rv < col.compacted_rv {
                    return Err(ApiError::Expired(format!(
                        "too old resource version: {from_rv} ({})",
                        col.compacted_rv + 1
                    )));
                }
                let backlog = col
                    .history
                    .iter()
                    .filter(|c| c.rv > from_rv)
                    .cloned()
                    .collect();
                (Vec::new(), backlog)
            }
        };
        Ok(WatchStart {
            initial,
            backlog,
            events: col.events.subscribe(),
            control,
            epochs,
            rv,
            after,
        })
    }

    /// Forgets all history (as an etcd compaction would) and tells every open watch to
    /// fail with 410 Expired.
    pub fn expire_watches(&mut self) {
        let rv = self.rv;
        for col in self.collections.values_mut() {
            col.history.clear();
            col.compacted_rv = rv;
        }
        self.control.send_modify(|c| c.expire_epoch += 1);
    }

    /// Tells every open watch to end its stream cleanly.
    pub fn close_watches(&mut self) {
        self.control.send_modify(|c| c.close_epoch += 1);
    }
}
