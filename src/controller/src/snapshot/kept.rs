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
///
/// The indexes are looked up for every node and pod of the cluster every loop (110,000 at
/// the scale of issue #28), so they hash with foldhash rather than SipHash, seeded per
/// process as std's is: their keys are addresses and object names, which whoever creates
/// the objects chooses.
pub(super) struct Kept<K> {
    items: Vec<K>,
    origins: Vec<Origin<K>>,
    by_address: Index<usize>,
    by_key: Index<String>,
}

type Index<T> = HashMap<T, usize, foldhash::fast::RandomState>;

/// What keeping an object did to its copy.
#[derive(Debug)]
pub(super) enum Change<K> {
    /// The copy made before stands.
    Same,
    /// A first copy was made.
    Added,
    /// A new copy replaced this one.
    Replaced(K),
}

impl<K> Change<K> {
    /// A copy was made.
    pub(super) fn copied(&self) -> bool {
        !matches!(self, Change::Same)
    }
}

/// `made_with` of a copy made by the caller ([`Kept::keep_made`]), which no group name
/// (a DNS name) can be.
const MADE: &str = "\u{0}made";

impl<K> Default for Kept<K> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            origins: Vec::new(),
            by_address: Index::default(),
            by_key: Index::default(),
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
    /// unchanged, else a new one from `copy`. Returns what it did, and the copy's place
    /// (until the next [`Kept::sweep`]).
    pub(super) fn keep(
        &mut self,
        object: &Arc<K>,
        made_with: Option<&str>,
        key: impl FnOnce() -> String,
        copy: impl FnOnce() -> K,
        seen: u64,
    ) -> (Change<K>, usize) {
        if let Some(&i) = self.by_address.get(&address(object)) {
            let origin = &mut self.origins[i];
            if origin.made_with.as_deref() == made_with {
                origin.seen = seen;
                return (Change::Same, i);
            }
        }
        let key = key();
        self.put(object, key, made_with, copy(), seen)
    }

    /// Keeps `made`, a copy the caller made from `object` (a booting node's template): the
    /// copy kept before when it is equal, else `made`.
    pub(super) fn keep_made(
        &mut self,
        object: &Arc<K>,
        key: String,
        made: K,
        seen: u64,
    ) -> (Change<K>, usize)
    where
        K: PartialEq,
    {
        if let Some(&i) = self.by_key.get(&key)
            && self.origins[i].made_with.as_deref() == Some(MADE)
            && self.items.get(i) == Some(&made)
        {
            self.by_address.remove(&address(&self.origins[i].object));
            self.by_address.insert(address(object), i);
            let origin = &mut self.origins[i];
            origin.object = object.clone();
            origin.seen = seen;
            return (Change::Same, i);
        }
        self.put(object, key, Some(MADE), made, seen)
    }

    fn put(
        &mut self,
        object: &Arc<K>,
        key: String,
        made_with: Option<&str>,
        copy: K,
        seen: u64,
    ) -> (Change<K>, usize) {
        let origin = Origin {
            object: object.clone(),
            key: key.clone(),
            made_with: made_with.map(str::to_owned),
            seen,
        };
        match self.by_key.get(&key) {
            Some(&i) => {
                self.by_address.remove(&address(&self.origins[i].object));
                let old = std::mem::replace(&mut self.items[i], copy);
                self.origins[i] = origin;
                self.by_address.insert(address(object), i);
                (Change::Replaced(old), i)
            }
            None => {
                let i = self.items.len();
                self.items.push(copy);
                self.origins.push(origin);
                self.by_address.insert(address(object), i);
                self.by_key.insert(key, i);
                (Change::Added, i)
            }
        }
    }

    /// The copy at `i`.
    pub(super) fn get(&self, i: usize) -> Option<&K> {
        self.items.get(i)
    }

    /// The copies (not lent).
    pub(super) fn items(&self) -> &[K] {
        &self.items
    }

    /// Drops the copies of objects the update `seen` did not find, and returns them.
    pub(super) fn sweep(&mut self, seen: u64) -> Vec<K> {
        let mut dropped = Vec::new();
        let mut i = 0;
        while i < self.origins.len() {
            if self.origins[i].seen == seen {
                i += 1;
                continue;
            }
            let gone = self.origins.swap_remove(i);
            dropped.push(self.items.swap_remove(i));
            self.by_address.remove(&address(&gone.object));
            self.by_key.remove(&gone.key);
            if let Some(moved) = self.origins.get(i) {
                self.by_address.insert(address(&moved.object), i);
                self.by_key.insert(moved.key.clone(), i);
            }
        }
        dropped
    }

    /// The copies, lent out.
    pub(super) fn lend(&mut self) -> Vec<K> {
        std::mem::take(&mut self.items)
    }

    /// Takes back copies lent by [`Kept::lend`], in the order given (of the same kept
    /// objects, possibly reordered, with `extra` objects among them that are not kept).
    /// `false`, and nothing kept, when they are not the ones lent. `is` says whether an
    /// item has a key, without making the key.
    pub(super) fn take_back(
        &mut self,
        items: Vec<K>,
        key_of: impl Fn(&K) -> String,
        is: impl Fn(&K, &str) -> bool,
        extra: &BTreeSet<String>,
    ) -> bool {
        if let Some(keep) = self.in_lent_order(&items, &key_of, &is, extra) {
            // In place: the loop's own objects are mostly at the end (pending pods follow
            // the kept ones), so nothing before them moves, where collecting into a new
            // vector moved every kept pod (2.4 KB each) into freshly zeroed pages.
            let mut items = items;
            let mut keep = keep.into_iter();
            items.retain(|_| keep.next().unwrap_or(false));
            self.items = items;
            return true;
        }
        self.reorder_back(items, key_of, extra)
    }

    /// Which of `items` to keep when they come back in the order they were lent, with only
    /// `extra` objects among them: then the origins and their indexes stand as they are. The
    /// planner and the scale-down analysis hand pods back in the order given and nodes in
    /// name order, which is the kept order once a loop has taken them back; so this is the
    /// common case, and it makes no key and rebuilds no index (at 100,000 pods, rebuilding
    /// took a loop 0.2-1.2 s; issue #28).
    fn in_lent_order(
        &self,
        items: &[K],
        key_of: impl Fn(&K) -> String,
        is: impl Fn(&K, &str) -> bool,
        extra: &BTreeSet<String>,
    ) -> Option<Vec<bool>> {
        let mut next = self.origins.iter().peekable();
        let mut keep = Vec::with_capacity(items.len());
        for item in items {
            if next.peek().is_some_and(|origin| is(item, &origin.key)) {
                next.next();
                keep.push(true);
            } else if extra.contains(&key_of(item)) {
                keep.push(false);
            } else {
                return None;
            }
        }
        next.peek().is_none().then_some(keep)
    }

    /// [`Kept::take_back`] for items in another order: the origins follow the items.
    fn reorder_back(
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

#[cfg(test)]
mod tests {
    // The key functions take `&K`, and `K` is `String` here.
    #![allow(clippy::ptr_arg)]

    use super::*;

    fn key(item: &String) -> String {
        item.clone()
    }

    fn is(item: &String, key: &str) -> bool {
        item == key
    }

    /// `names` kept, each from its own store entry; returns the entries.
    fn kept(names: &[&str]) -> (Kept<String>, Vec<Arc<String>>) {
        let mut kept = Kept::default();
        let entries: Vec<Arc<String>> = names.iter().map(|n| Arc::new((*n).to_owned())).collect();
        for entry in &entries {
            let (change, _) = kept.keep(entry, None, || entry.to_string(), || entry.to_string(), 1);
            assert!(matches!(change, Change::Added));
        }
        (kept, entries)
    }

    /// Whether every entry is kept as it was: keeping it again copies nothing.
    fn still_kept(kept: &mut Kept<String>, entries: &[Arc<String>]) -> bool {
        entries.iter().all(|e| {
            !kept
                .keep(e, None, || e.to_string(), || e.to_string(), 2)
                .0
                .copied()
        })
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn copies_back_in_their_order_with_the_loops_own_among_them_are_kept() {
        let (mut kept, entries) = kept(&["a", "c", "d"]);
        let lent = kept.lend();
        assert_eq!(lent, strings(&["a", "c", "d"]));
        let extra: BTreeSet<String> = ["b".to_owned(), "e".to_owned()].into();
        assert!(kept.take_back(strings(&["a", "b", "c", "d", "e"]), key, is, &extra));
        assert_eq!(
            kept.lend(),
            strings(&["a", "c", "d"]),
            "the loop's own left out"
        );
        assert!(still_kept(&mut kept, &entries));
    }

    #[test]
    fn copies_back_in_another_order_are_kept_in_that_order() {
        let (mut kept, entries) = kept(&["d", "a", "c"]);
        let _ = kept.lend();
        let extra: BTreeSet<String> = ["b".to_owned()].into();
        assert!(kept.take_back(strings(&["a", "b", "c", "d"]), key, is, &extra));
        assert_eq!(kept.lend(), strings(&["a", "c", "d"]));
        assert!(still_kept(&mut kept, &entries));
        // Now in the order they come back in: the next hand-back in that order is kept too.
        assert!(kept.take_back(strings(&["a", "c", "d"]), key, is, &BTreeSet::new()));
        assert!(still_kept(&mut kept, &entries));
    }

    #[test]
    fn copies_back_short_of_one_or_with_a_stranger_keep_nothing() {
        let (mut kept, entries) = kept(&["a", "b", "c"]);
        let _ = kept.lend();
        assert!(!kept.take_back(strings(&["a", "c"]), key, is, &BTreeSet::new()));
        assert!(!still_kept(&mut kept, &entries), "copied again");

        let (mut kept, entries) = self::kept(&["a", "b", "c"]);
        let _ = kept.lend();
        assert!(!kept.take_back(strings(&["a", "x", "b", "c"]), key, is, &BTreeSet::new()));
        assert!(!still_kept(&mut kept, &entries), "copied again");
    }
}
