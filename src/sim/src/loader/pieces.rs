//! A JSON `kind: List` read in pieces, never whole.
//!
//! `simulate` read a 100,000-node cluster's 650 MiB list into one string before the
//! first item was typed: 650 MiB of fresh memory for the kernel to zero, copied into,
//! and still resident (the allocator kept it) while the planner ran, which made it the
//! largest part of the peak after the objects themselves (issue #28). Read here, the
//! text goes through a buffer of a few pieces, reused: the caller hands the pieces over
//! ([`Pieces`]: the loader does no I/O), twice. The first reading checks that the text
//! is a list the item-by-item path would take ([`super::stream::ListShape`]: one JSON
//! object, a list `kind`, one `items` array, nothing after it) and counts the items per
//! kind, so the vectors are reserved once; the second types the items, in order, as
//! [`Loader::add_json`] does. Whenever anything is not plainly so (the text is not such a
//! list, an item does not load, the loader holds objects already, or the text changed
//! between the readings) the loader is left as it was and the caller loads the text
//! whole, so errors and results are those of [`Loader::add_json`].

use serde_json::Value;

use super::{Loaded, Loader, identities::Identities, is_list_kind, scan};
use crate::objects::Origin;

/// A text handed over in pieces, from its start, as often as the loader asks (a file's
/// bytes, read by the caller).
pub trait Pieces {
    /// Starts again from the text's first byte.
    ///
    /// # Errors
    /// The text cannot be read again.
    fn rewind(&mut self) -> std::io::Result<()>;

    /// Appends the text's next bytes to `buffer`; `Ok(0)` at its end.
    ///
    /// # Errors
    /// The text cannot be read.
    fn read_more(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<usize>;
}

/// Most bytes one top-level member other than `items` may take (`metadata` is a few
/// bytes in a `kubectl` list); past that the text is loaded whole.
const MEMBER_LIMIT: usize = 64 << 20;

/// Where the scan is in the top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before its `{`.
    Open,
    /// Before a member (`first`: right after the `{`, where `}` may come).
    Member { first: bool },
    /// In `items`, before an element (`first`: right after the `[`).
    Item { first: bool },
    /// In `items`, after an element: `,` or `]`.
    AfterItem,
    /// After a member's value: `,` or `}`.
    AfterMember,
    /// After the closing `}`: whitespace only.
    Trailing,
}

/// Why a scan stopped early: the text is not a list read here, or an item did not load.
struct NotHere;

/// The top-level scan, fed a buffer at a time.
struct Scan {
    at: At,
    /// How many `items` members there were.
    items: usize,
    /// The last `kind` member's value.
    kind: Option<Value>,
    /// Elements of `items` passed so far.
    index: usize,
}

impl Scan {
    fn new() -> Self {
        Self {
            at: At::Open,
            items: 0,
            kind: None,
            index: 0,
        }
    }

    /// Reads what `bytes` holds complete, collecting the spans of the `items` elements
    /// in `spans`; returns where the first incomplete part starts (everything, at the
    /// text's end, `eof`).
    fn feed(
        &mut self,
        bytes: &[u8],
        eof: bool,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<usize, NotHere> {
        let mut i = 0;
        loop {
            let start = skip_ws(bytes, i);
            let Some(&byte) = bytes.get(start) else {
                return match (eof, self.at) {
                    (false, _) => Ok(start),
                    (true, At::Trailing) => Ok(start),
                    (true, _) => Err(NotHere),
                };
            };
            i = start;
            match (self.at, byte) {
                (At::Open, b'{') => {
                    self.at = At::Member { first: true };
                    i += 1;
                }
                (At::Member { first: true }, b'}') | (At::AfterMember, b'}') => {
                    self.at = At::Trailing;
                    i += 1;
                }
                (At::Member { .. }, b'"') => match self.member(bytes, i, eof)? {
                    Some(end) => i = end,
                    None => return Ok(i),
                },
                (At::Item { first: true }, b']') | (At::AfterItem, b']') => {
                    self.at = At::AfterMember;
                    i += 1;
                }
                (At::Item { .. }, _) => match value_end(bytes, i, eof)? {
                    Some(end) => {
                        spans.push((i, end));
                        self.index += 1;
                        self.at = At::AfterItem;
                        i = end;
                    }
                    None => return Ok(i),
                },
                (At::AfterItem, b',') => {
                    self.at = At::Item { first: false };
                    i += 1;
                }
                (At::AfterMember, b',') => {
                    self.at = At::Member { first: false };
                    i += 1;
                }
                _ => return Err(NotHere),
            }
        }
    }

    /// A member from its key at `i`: `items` up to its `[` (its elements come next), any
    /// other whole; `None` when the buffer ends first.
    fn member(&mut self, bytes: &[u8], i: usize, eof: bool) -> Result<Option<usize>, NotHere> {
        let Some(key_end) = scan::skip_string(bytes, i) else {
            return incomplete(eof);
        };
        // serde_json reads the key as the whole-document path would (escapes, control
        // characters, UTF-8).
        let key: String = serde_json::from_slice(&bytes[i..key_end]).map_err(|_| NotHere)?;
        let colon = skip_ws(bytes, key_end);
        match bytes.get(colon) {
            Some(b':') => {}
            Some(_) => return Err(NotHere),
            None => return incomplete(eof),
        }
        let value = skip_ws(bytes, colon + 1);
        if value >= bytes.len() {
            return incomplete(eof);
        }
        if key == "items" {
            // One `items`, an array: what the item-by-item path takes.
            if bytes[value] != b'[' || self.items > 0 {
                return Err(NotHere);
            }
            self.items += 1;
            self.at = At::Item { first: true };
            return Ok(Some(value + 1));
        }
        let Some(end) = value_end(bytes, value, eof)? else {
            if bytes.len() - i > MEMBER_LIMIT {
                return Err(NotHere);
            }
            return Ok(None);
        };
        let parsed: Value = serde_json::from_slice(&bytes[value..end]).map_err(|_| NotHere)?;
        if key == "kind" {
            self.kind = Some(parsed);
        }
        self.at = At::AfterMember;
        Ok(Some(end))
    }

    /// Whether the whole text was a list the item-by-item path takes.
    fn is_list(&self) -> bool {
        let kind = self.kind.as_ref().and_then(Value::as_str).unwrap_or("");
        self.at == At::Trailing && self.items == 1 && is_list_kind(kind, true)
    }
}

/// `Ok(None)` (wait for more) before the text's end, [`NotHere`] at it.
fn incomplete<T>(eof: bool) -> Result<Option<T>, NotHere> {
    if eof { Err(NotHere) } else { Ok(None) }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(i) {
        i += 1;
    }
    i
}

/// The end of the value at `i`, `None` when the buffer ends inside it (a number or
/// literal is only complete once a delimiter or the text's end follows).
fn value_end(bytes: &[u8], i: usize, eof: bool) -> Result<Option<usize>, NotHere> {
    match scan::skip_value(bytes, i) {
        Some(end) if end == i => Err(NotHere),
        Some(end) if end == bytes.len() && !eof && !matches!(bytes[i], b'"' | b'{' | b'[') => {
            Ok(None)
        }
        Some(end) => Ok(Some(end)),
        None => incomplete(eof),
    }
}

/// Runs `scan` over the whole text, handing each buffer's complete `items` elements to
/// `batch` (the buffer's text from the first to the last, their spans in it, and the
/// index of the first in the list). `Ok(None)`: not a list read here, or `batch` stopped.
fn read_through(
    pieces: &mut impl Pieces,
    mut batch: impl FnMut(&str, &[(usize, usize)], usize) -> Result<(), NotHere>,
) -> std::io::Result<Option<Scan>> {
    let mut scan = Scan::new();
    let mut buffer = Vec::new();
    let mut spans = Vec::new();
    loop {
        let read = pieces.read_more(&mut buffer)?;
        let eof = read == 0;
        spans.clear();
        let first_index = scan.index;
        let Ok(consumed) = scan.feed(&buffer, eof, &mut spans) else {
            return Ok(None);
        };
        if let (Some(&(first, _)), Some(&(_, last))) = (spans.first(), spans.last()) {
            // Between elements there is only JSON whitespace and commas (ASCII), so the
            // run is UTF-8 when each element is; a text that is not is loaded whole, and
            // refused there as before.
            let Ok(text) = std::str::from_utf8(&buffer[first..last]) else {
                return Ok(None);
            };
            for span in &mut spans {
                *span = (span.0 - first, span.1 - first);
            }
            if batch(text, &spans, first_index).is_err() {
                return Ok(None);
            }
        }
        if eof {
            return Ok(Some(scan));
        }
        buffer.drain(..consumed);
    }
}

impl Loader {
    /// [`Loader::add_json`] of a text handed over in pieces, for a large file: the text
    /// is never held whole (see the module's header). `Ok(false)` when it was not loaded
    /// here, the loader untouched: the caller then reads the text whole and calls
    /// [`Loader::add_json`], which gives that text's result or error.
    ///
    /// # Errors
    /// Reading a piece failed.
    pub fn add_json_in_pieces(
        &mut self,
        source: &str,
        pieces: &mut impl Pieces,
    ) -> std::io::Result<bool> {
        if !self.is_fresh() {
            return Ok(false);
        }
        // First reading: the shape, and the items per kind for the vectors' room.
        let mut counts = [0usize; 4];
        let survey = read_through(pieces, |text, spans, _| {
            for &(start, end) in spans {
                let item = text.get(start..end).unwrap_or_default();
                if let Some(kind) = super::direct::counted_kind(item) {
                    counts[kind] += 1;
                }
            }
            Ok(())
        })?;
        if !survey.is_some_and(|s| s.is_list()) {
            return Ok(false);
        }
        pieces.rewind()?;
        self.reserve_counts(counts);
        let origin = Origin {
            source: source.to_string(),
            document: 0,
            item: None,
        };
        let threads = self.threads;
        let loaded = read_through(pieces, |text, spans, first_index| {
            let threads = if super::parallel::worth_it(threads, spans.len()) {
                threads
            } else {
                1
            };
            super::parallel::add_items(self, &origin, text, spans, threads, first_index)
                .map_err(|_| NotHere)
        })?;
        if loaded.is_some_and(|s| s.is_list()) {
            return Ok(true);
        }
        // An item that does not load, or a text changed since the first reading: back to
        // the fresh loader this was, for the whole text's result.
        self.seen = Identities::default();
        self.loaded = Loaded::default();
        Ok(false)
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

#[cfg(test)]
mod tests;
