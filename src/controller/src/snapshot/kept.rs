//! Copies of store objects kept between loops, each with the store entry it was made
//! from, so that a loop copies only the entries a watch event replaced.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// One kept copy's origin: the store's object (held, so that its address is not reused
/// by another object while the view compares addresses) and what else the copy was made
/// from (a node's group, which the copy carries as a label).
struct Origin<K> {
    object: Arc<K>,
    key: String,
    made_with: Option<String>,
    /// The update that last found it in the stores.
    seen: u64,
}

/// Copies of store objects, in the order the planner is given them, with where each came
/// from.
pub(super) struct Kept<K> {
    items: Vec<K>,
    origins: Vec<Origin<K>>,
    by_address: HashMap<usize, usize>,
    by_key: HashMap<String, usize>,
}

impl<K> Default for Kept<K> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            origins: Vec::new(),
            by_address: HashMap::new(),
            by_key: HashMap::new(),
        }
    }
}

fn address<K>(object: &Arc<K>) -> usize {
    Arc::as_ptr(object) as usize
}

impl<K> Kept<K> {
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// Keeps a copy of `object` made with `made_with`: the copy made before when both are
    /// unchanged (`false`), else a new one from `copy` (`true`).
    pub(super) fn keep(
        &mut self,
        object: &Arc<K>,
        made_with: Option<&str>,
        key: impl FnOnce() -> String,
        copy: impl FnOnce() -> K,
        seen: u64,
    ) -> bool {
        if let Some(&i) = self.by_address.get(&address(object)) {
            let origin = &mut self.origins[i];
            if origin.made_with.as_deref() == made_with {
                origin.seen = seen;
                return false;
            }
        }
        let key = key();
        let origin = Origin {
            object: object.clone(),
            key: key.clone(),
            made_with: made_with.map(str::to_owned),
            seen,
        };
        match self.by_key.get(&key) {
            Some(&i) => {
                self.by_address.remove(&address(&self.origins[i].object));
                self.items[i] = copy();
                self.origins[i] = origin;
                self.by_address.insert(address(object), i);
            }
            None => {
                let i = self.items.len();
                self.items.push(copy());
                self.origins.push(origin);
                self.by_address.insert(address(object), i);
                self.by_key.insert(key, i);
            }
        }
        true
    }

    /// Drops the copies of objects the update `seen` did not find; returns how many.
    pub(super) fn sweep(&mut self, seen: u64) -> usize {
        let mut dropped = 0;
        let mut i = 0;
        while i < self.origins.len() {
            if self.origins[i].seen == seen {
                i += 1;
                continue;
            }
            let gone = self.origins.swap_remove(i);
            self.items.swap_remove(i);
            self.by_address.remove(&address(&gone.object));
            self.by_key.remove(&gone.key);
            if let Some(moved) = self.origins.get(i) {
                self.by_address.insert(address(&moved.object), i);
                self.by_key.insert(moved.key.clone(), i);
            }
            dropped += 1;
        }
        dropped
    }

    /// The copies, lent out.
    pub(super) fn lend(&mut self) -> Vec<K> {
        std::mem::take(&mut self.items)
    }

    /// Takes back copies lent by [`Kept::lend`], in the order given (of the same kept
    /// objects, possibly reordered, with `extra` objects among them that are not kept).
    /// `false`, and nothing kept, when they are not the ones lent.
    pub(super) fn take_back(
        &mut self,
        items: Vec<K>,
        key_of: impl Fn(&K) -> String,
        extra: &BTreeSet<String>,
    ) -> bool {
        let mut origins: Vec<Option<Origin<K>>> = std::mem::take(&mut self.origins)
            .into_iter()
            .map(Some)
            .collect();
        let mut kept = Vec::with_capacity(origins.len());
        let mut kept_origins = Vec::with_capacity(origins.len());
        for item in items {
            let key = key_of(&item);
            if extra.contains(&key) {
                continue;
            }
            let Some(origin) = self
                .by_key
                .get(&key)
                .and_then(|&i| origins.get_mut(i)?.take())
            else {
                *self = Self::default();
                return false;
            };
            kept.push(item);
            kept_origins.push(origin);
        }
        if origins.iter().any(Option::is_some) {
            *self = Self::default();
            return false;
        }
        self.by_address = kept_origins
            .iter()
            .enumerate()
            .map(|(i, o)| (address(&o.object), i))
            .collect();
        self.by_key = kept_origins
            .iter()
            .enumerate()
            .map(|(i, o)| (o.key.clone(), i))
            .collect();
        self.items = kept;
        self.origins = kept_origins;
        true
    }
}
