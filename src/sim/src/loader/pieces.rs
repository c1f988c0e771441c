//! A JSON `kind: List` read in pieces, never whole.
//!
//! `simulate` read a 100,000-node cluster's 650 MiB list into one string before the
//! first item was typed: 650 MiB of fresh memory for the kernel to zero, copied into,
//! and still resident (the allocator kept it) while the planner ran, which made it the
//! largest part of the peak after the objects themselves (issue #28). Read here, the
//! caller hands the text over a piece at a time ([`Pieces`]: the loader does no I/O) and
//! the buffer holds a piece and the item it ends in, once: each time a piece comes,
//! the buffer is read by the item-by-item reading of a whole text
//! ([`super::stream::read_object`], the same serde_json pass and the same rules), the
//! items it holds whole are typed, in order, as [`Loader::add_json`] types them, and
//! their text is dropped. So that the next reading sees a valid start of the same
//! document, the text before the first item stays at the buffer's start and one `0`
//! stands for all the items typed so far (that reading passes over it): `{"kind":"List",
//! "items":[0` followed by what was not read yet.
//!
//! Whether the text is a list read here is only known at its end (`kubectl` writes
//! `kind` after `items`). Whenever it is not plainly one (the text is not such a list, an
//! item does not load, the loader held objects already, or reading a piece failed) the
//! loader goes back to the fresh loader it was, and the caller loads the text whole, so
//! errors and results are those of [`Loader::add_json`].

use super::{Loaded, Loader, identities::Identities, stream};
use crate::objects::Origin;

/// A text handed over in pieces, from its start (a file's bytes, read by the caller).
pub trait Pieces {
    /// Appends the text's next bytes to `buffer`; `Ok(0)` at its end.
    ///
    /// # Errors
    /// The text cannot be read.
    fn read_more(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<usize>;
}

/// Most bytes before the first item (and of the first item) that are kept and read again
/// with every piece; past that the text is loaded whole. `kubectl` writes a few dozen.
const HEAD_LIMIT: usize = 16 << 20;

impl Loader {
    /// [`Loader::add_json`] of a text handed over in pieces, for a large file: the text
    /// is never held whole (see the module's header). `Ok(false)` when it was not loaded
    /// here, the loader untouched: the caller then reads the text whole and calls
    /// [`Loader::add_json`], which gives that text's result or error.
    ///
    /// # Errors
    /// Reading a piece failed (the loader is left as it was).
    pub fn add_json_in_pieces(
        &mut self,
        source: &str,
        pieces: &mut impl Pieces,
    ) -> std::io::Result<bool> {
        if !self.is_fresh() {
            return Ok(false);
        }
        let origin = Origin {
            source: source.to_string(),
            document: 0,
            item: None,
        };
        let loaded = read_in_pieces(self, &origin, pieces);
        if !matches!(loaded, Ok(true)) {
            // Back to the fresh loader this was, for the whole text's result.
            self.seen = Identities::default();
            self.loaded = Loaded::default();
        }
        loaded
    }

    /// Whether nothing was loaded yet (so going back to this state is starting over).
    fn is_fresh(&self) -> bool {
        let Loaded {
            objects,
            skipped,
            duplicates,
        } = &self.loaded;
        self.seen.is_empty()
            && skipped.is_empty()
            && duplicates.is_empty()
            && objects.nodes.is_empty()
            && objects.pods.is_empty()
            && objects.namespaces.is_empty()
            && objects.device_classes.is_empty()
            && objects.resource_slices.is_empty()
            && objects.resource_claims.is_empty()
            && objects.resource_claim_templates.is_empty()
            && objects.device_taint_rules.is_empty()
            && objects.extra.is_empty()
            && objects.pod_workload_refs.is_empty()
    }
}

/// Reads the text piece by piece into `loader`; `Ok(false)` as soon as it is not a list
/// read here (the caller then resets the loader).
fn read_in_pieces(
    loader: &mut Loader,
    origin: &Origin,
    pieces: &mut impl Pieces,
) -> std::io::Result<bool> {
    let mut buffer = Vec::new();
    // Once items were typed: where the `0` standing for them is (the text before the
    // first item comes before it).
    let mut placeholder: Option<usize> = None;
    let mut typed = 0;
    loop {
        // At least one more piece, and as many bytes as the last reading left unread: a
        // value longer than a piece is then read again a few times, not once per piece.
        let unread = buffer.len() - placeholder.map_or(0, |at| at + 1);
        let wanted = buffer.len() + unread;
        let mut end_of_text = false;
        loop {
            if pieces.read_more(&mut buffer)? == 0 {
                end_of_text = true;
                break;
            }
            if buffer.len() >= wanted {
                break;
            }
        }
        let upto = if end_of_text {
            buffer.len()
        } else {
            readable_start(&buffer)
        };
        // A text that is not UTF-8 is loaded whole, and refused there as before.
        let Ok(text) = std::str::from_utf8(&buffer[..upto]) else {
            return Ok(false);
        };
        let mut items = Vec::new();
        let read = stream::read_object(text, placeholder.is_some(), end_of_text, &mut items);
        if let Err(error) = &read
            && (end_of_text || !error.is_eof())
        {
            return Ok(false);
        }
        let done = match (items.first(), items.last()) {
            (Some(first), Some(last)) => {
                Some((offset(text, first), offset(text, last) + last.len()))
            }
            _ => None,
        };
        if stream::add_items(loader, origin, &items, typed).is_err() {
            return Ok(false);
        }
        typed += items.len();
        drop(items);
        if end_of_text {
            let is_list = read.is_ok_and(|shape| shape.is_list());
            if is_list {
                loader.keep_room();
            }
            return Ok(is_list);
        }
        match (done, placeholder) {
            (Some((first, last)), at) => {
                let at = at.unwrap_or(first);
                if at > HEAD_LIMIT {
                    return Ok(false);
                }
                buffer.splice(at..last, [b'0']);
                placeholder = Some(at);
            }
            (None, None) if buffer.len() > HEAD_LIMIT => return Ok(false),
            (None, _) => {}
        }
    }
}

/// Where `inner`, a part of `text`, starts in it.
fn offset(text: &str, inner: &str) -> usize {
    inner.as_ptr().addr() - text.as_ptr().addr()
}

/// How much of `bytes`, a start of the text, to read now: up to the last byte that
/// cannot be part of a number or of `true`, `false` or `null`. Cut inside one of those,
/// serde_json would call the text an invalid number rather than one that ends early
/// ([`serde_json::Error::is_eof`]); cut anywhere else it says it ended early. The cut is
/// never inside a UTF-8 sequence (those bytes are ASCII).
fn readable_start(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .rposition(|b| {
            matches!(
                b,
                b'"' | b',' | b':' | b'{' | b'}' | b'[' | b']' | b' ' | b'\t' | b'\n' | b'\r'
            )
        })
        .map_or(0, |at| at + 1)
}

#[cfg(test)]
mod tests;
