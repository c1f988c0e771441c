//! A `kind: List`'s items typed on several threads, recorded in order.
//!
//! Typing the items (deserializing, defaults, trimming: [`super::direct::type_text`])
//! was most of loading a 100,000-node cluster and reads nothing but each item's text,
//! so it can run on every core (issue #28). Recording (duplicates, the per-kind vectors,
//! the general path of the items that do not type cleanly) stays on the caller's thread,
//! in the list's order, so the outcome is the one of reading the items one by one: the
//! same objects, in the same order, and the same first error.
//!
//! The items go in chunks, dealt round-robin: chunk `i` is typed by thread `i % threads`
//! (thread 0 being the caller's), and each helper hands its chunks over through a
//! channel that holds two, so at most a few chunks wait typed at any time. Pure CPU
//! work on scoped threads: no I/O, no clock; the caller chooses the number of threads
//! ([`super::Loader::type_on_threads`]).

use std::sync::mpsc::{Receiver, sync_channel};

use serde_json::Value;

use super::direct::{TypedItem, type_text};
use super::{LoadError, Loader};
use crate::objects::Origin;

/// Items per chunk: enough that handing a chunk over costs little against typing it,
/// few enough that the chunks waiting typed hold little memory (a typed Pod is a few
/// kilobytes).
const CHUNK: usize = 256;

/// Whether `items` items are worth typing on `threads` threads.
pub(super) fn worth_it(threads: usize, items: usize) -> bool {
    threads > 1 && items >= 2 * CHUNK
}

/// Each item of `chunk` typed, or `None` where it takes the general path.
fn type_chunk(chunk: &[&str], trim: bool) -> Vec<Option<TypedItem>> {
    chunk.iter().map(|item| type_text(item, trim)).collect()
}

/// Adds the list's `items` (their texts) to `loader`, typing them on `threads` threads
/// (the caller's and `threads - 1` helpers), recording them in order; the first is the
/// list's item `first_index` (a list read in pieces comes a run at a time).
///
/// # Errors
/// The first item (in the list's order) that is not a valid object.
pub(super) fn add_items(
    loader: &mut Loader,
    origin: &Origin,
    items: &[&str],
    threads: usize,
    first_index: usize,
) -> Result<(), LoadError> {
    let trim = loader.trim;
    let chunks: Vec<&[&str]> = items.chunks(CHUNK).collect();
    let chunks = chunks.as_slice();
    std::thread::scope(|scope| {
        // One receiver per helper; a helper that could not be started (or stopped) leaves
        // a closed channel, and its chunks are typed here instead.
        let helpers: Vec<Receiver<Vec<Option<TypedItem>>>> = (1..threads)
            .map(|helper| {
                let (sender, receiver) = sync_channel(2);
                let work = move || {
                    for chunk in chunks.iter().skip(helper).step_by(threads) {
                        // A closed channel: the caller stopped at an invalid item.
                        if sender.send(type_chunk(chunk, trim)).is_err() {
                            return;
                        }
                    }
                };
                // Typing recurses as deep as the JSON nests (serde_json stops at 128
                // levels): the planner's stack budget is ample.
                let started = std::thread::Builder::new()
                    .name(format!("load-{helper}"))
                    .stack_size(crate::STACK_BUDGET)
                    .spawn_scoped(scope, work);
                drop(started);
                receiver
            })
            .collect();
        let mut index = first_index;
        for (i, chunk) in chunks.iter().enumerate() {
            let helper = i % threads;
            let typed = match helper.checked_sub(1).and_then(|h| helpers.get(h)) {
                Some(receiver) => receiver.recv().unwrap_or_else(|_| type_chunk(chunk, trim)),
                None => type_chunk(chunk, trim),
            };
            for (item, text) in typed.into_iter().zip(chunk.iter()) {
                match item {
                    Some(item) => loader.record(item),
                    None => add_general(loader, origin, index, text)?,
                }
                index += 1;
            }
        }
        // Returning drops the receivers, so helpers still typing stop at their next
        // chunk; the scope then waits for them.
        Ok(())
    })
}

/// The `index`th item through the general path (a [`Value`] of the item), as the
/// sequential reading takes it.
fn add_general(
    loader: &mut Loader,
    origin: &Origin,
    index: usize,
    item: &str,
) -> Result<(), LoadError> {
    let value: Value = serde_json::from_str(item).map_err(|e| LoadError {
        origin: origin.clone(),
        object: None,
        field: None,
        message: format!("not valid JSON: {e}"),
    })?;
    loader.add_item(origin, index, value)
}
