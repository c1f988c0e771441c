//! The first-fit scan memo: pods with the same scheduling signature are
//! refused by the same full nodes, so a scan can start where the last one
//! found room (cursors are undone by rollback).

use super::{Snapshot, Undo};

impl Snapshot {
    /// A hash of everything about a pod that decides where it fits, when that
    /// only gets worse as pods are placed (monotonic): pods with the same
    /// signature are refused by the same full nodes, so a scan can start
    /// where the last one found room. Pods with topology spread or required
    /// pod affinity get `None`: placing pods can make nodes fit them again.
    pub fn signature(&mut self, pod_index: usize) -> Option<u64> {
        use std::hash::Hasher;
        if self.signatures.len() < self.pods.len() {
            self.signatures.resize(self.pods.len(), None);
        }
        if let Some(known) = self.signatures[pod_index] {
            return known;
        }
        let pod = &self.pods[pod_index];
        let labels_matter = self.labels_matter;
        let computed = pod.spec.as_ref().and_then(|spec| {
            let non_monotonic = spec
                .topology_spread_constraints
                .as_ref()
                .is_some_and(|c| !c.is_empty())
                || spec
                    .affinity
                    .as_ref()
                    .and_then(|a| a.pod_affinity.as_ref())
                    .is_some();
            if non_monotonic {
                return None;
            }
            // The node name is where a pod went, not what it needs; pending
            // pods have none, so only bound ones pay for a copy without it.
            let unbound;
            let spec = if spec.node_name.is_some() {
                let mut copy = spec.clone();
                copy.node_name = None;
                unbound = copy;
                &unbound
            } else {
                spec
            };
            let labels = if labels_matter {
                pod.metadata.labels.as_ref()
            } else {
                None
            };
            // Serialised into one reused buffer, hashed in one call.
            let buffer = &mut self.signature_buffer;
            buffer.clear();
            serde_json::to_writer(&mut *buffer, &(&pod.metadata.namespace, labels, spec)).ok()?;
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            hasher.write(buffer);
            Some(hasher.finish())
        });
        self.signatures[pod_index] = Some(computed);
        computed
    }

    /// Whether any pod has required anti-affinity, so that a pod's labels (and
    /// not just its spec) decide where it fits.
    #[must_use]
    pub fn labels_matter(&self) -> bool {
        self.labels_matter
    }

    /// Where a first-fit scan for a pod of `signature` may start.
    #[must_use]
    pub fn scan_start(&self, signature: Option<u64>) -> usize {
        signature
            .and_then(|s| self.cursors.get(&s).copied())
            .unwrap_or(0)
    }

    /// Records that every node before `node_index` refused a pod of
    /// `signature` (undone by rollback).
    pub fn refused_before(&mut self, signature: Option<u64>, node_index: usize) {
        let Some(signature) = signature else {
            return;
        };
        let previous = self.cursors.get(&signature).copied();
        if previous.is_some_and(|p| p >= node_index) {
            return;
        }
        self.cursors.insert(signature, node_index);
        self.undo.push(Undo::Cursor {
            signature,
            previous,
        });
    }
}
