//! CEL for DRA device selectors: the `device` variable and the Kubernetes
//! library functions, with upstream's error behaviour.
//!
//! CONTRACT (the allocator depends on exactly this surface):
//! - [`SelectorCompiler::new`] builds the environment for a set of feature gates.
//! - [`SelectorCompiler::compile`] compiles one expression, cached per compiler
//!   (one compiler lives for one snapshot).
//! - [`CelDevice::new`] converts a device into the value bound to `device`;
//!   built once per device and reused for every selector.
//! - [`CompiledSelector::matches`] evaluates; any runtime error (missing key,
//!   non-bool result, cost exceeded, bad semver) is an `Err`, never `false`.
//!
//! # What upstream does, and how this module gets there
//!
//! Upstream (`dynamic-resource-allocation/cel/compile.go`, 1.37) compiles
//! every selector in the apiserver's *StoredExpressions* environment, which
//! ignores feature gates: the newest `device` declaration is always used.
//! `device` carries `driver`, `attributes[domain][id]`, `capacity[domain][id]`
//! (a `kubernetes.Quantity`) and `allowMultipleAllocations` (false when
//! unset). Names split at the first `/`; bare names belong to the driver's
//! domain. An unknown domain reads as an empty map, an unknown id inside a
//! domain is a "no such key" runtime error. Attribute values are int, bool,
//! string, semver, or lists of those.
//!
//! The interpreter is cel-rust (through kube-cel), which only parses: there
//! is no type checker and no cost accounting. `checker` supplies the
//! compile-time errors upstream's checker raises and rewrites the tree so the
//! interpreter's answers match; `library` holds the functions, with exact
//! replacements for kube-cel's quantity and semver types (`quantity`,
//! `semver`); `device` builds the per-device scope once. String and bytes
//! literals are decoded by `literals` as cel-go decodes them and reach
//! cel-rust's parser only as placeholders, hexadecimal ints as decimal ones
//! (it reads some differently; C5 in `docs/divergences.md`, now matched).
//!
//! # Limits
//!
//! What upstream bounds, bounded the same way (module `shape` says how):
//! expressions longer than `CELSelectorExpressionMaxLength` (10 KiB) are
//! refused with the API server's message; the grammar's nesting and operator
//! chains are held to cel-go's parser limits (250, same messages); the cost of
//! an evaluation to `CELSelectorExpressionMaxCost` (1,000,000, approximately,
//! see C1 below). Compilation and evaluation recurse only as deep as those
//! limits allow, on a stack segment big enough for it ([`crate::STACK_BUDGET`]).
//! Error messages are cut at [`MAX_MESSAGE_BYTES`] and show at most
//! [`MAX_EXPRESSION_SHOWN`] bytes of the expression.
//!
//! # Known divergences from upstream
//!
//! Each is an entry of `docs/divergences.md` (C1–C12) with the test that
//! pins it; cel-spec's conformance cases we fail are listed, with the entry
//! that explains them, in the `conformance` test module.
//!
//! - **C1 Cost limit is approximate.** cel-rust cannot measure CEL cost. A
//!   per-evaluation budget of 1,000,000 units is charged one unit per
//!   comprehension iteration plus the size of the accumulator, the size of
//!   every `cel.bind` value, and the output size of `+` on strings, lists and
//!   bytes, `replace`, `join`, `format` and `lists.range` — before
//!   allocating. Exhausting it is the runtime error "operation cancelled:
//!   actual cost limit exceeded". Upstream charges more finely, so an
//!   expression costing a little over 1e6 upstream may still evaluate here.
//!   Expressions whose cost comes from deep nesting of other functions (for
//!   example repeated `strings.quote()`) are not charged.
//! - **C2 Static type checking is partial.** Undeclared variables,
//!   functions, `device` fields, wrong argument counts, field selection on
//!   values known to be scalars and results known not to be bool are compile
//!   errors as upstream. Type errors that need full inference (`1 + "a"`,
//!   `quantity(1)`) are runtime errors here instead of compile errors.
//! - **C3 Missing pieces of cel-go**: `sortBy`, `type()` and `dyn()` are
//!   compile errors here; `math.*`, `base64.*` and `jsonpatch.*` are
//!   deliberately undeclared because the Kubernetes base environment lacks
//!   them too.
//! - **C4 Trees deeper than 250 levels after macro expansion** are a compile
//!   error ("expression is nested more than 250 levels deep"), also where
//!   cel-go's parser limits (250 per rule) would accept them, e.g. 60 nested
//!   `exists()` macros. cel-go has no such check after parsing.
//! - **C6–C10**: heterogeneous numeric equality inside lists and maps (C6),
//!   `bool()`, `string(bytes)` and `bytes(bytes)` conversions (C7), optional chaining beyond `.?`, `[?]`, `orValue`, `or`
//!   (C8), two-variable comprehensions (C9), and error absorption in
//!   `all()`/`exists()` (C10: cel-go ignores an error in one element when
//!   another decides the result; cel-rust stops at the first error, which
//!   aborts allocation).
//! - **C11 Syntax error wording.** A malformed expression longer than 256
//!   bytes, or whose brackets nest more than 12 deep, gets our own one-line
//!   message (its position, "unexpected input") instead of cel-rust's list,
//!   which could repeat the whole expression once per error and whose error
//!   recovery grows faster than the text; at most five parse errors are
//!   listed, and cel-rust parses a smaller one only up to one token past
//!   where it breaks.
//! - **C12 `device.allowMultipleAllocations` and the gate** (matches
//!   upstream). Upstream's scheduler compiles in StoredExpressions, which
//!   ignores gates, so the field always compiles there; only the apiserver's
//!   NewExpressions environment refuses it. [`SelectorCompiler::new`] follows
//!   the scheduler; [`CelEnvironment::NewExpressions`] gives the other.
//! - **Internal panics** of the generated parser or of cel-rust are caught
//!   and reported as compile or runtime errors instead of unwinding into the
//!   caller.
//!
//! Older schedulers: [`SelectorCompiler::with_environment`] models 1.34–1.36
//! (no `includes()` before 1.36; devices with list attributes fail every
//! selector while DRAListTypeAttributes is off) and the apiserver's
//! NewExpressions environment (gated declarations follow the gates).

mod check_error;
mod checker;
mod compiler;
mod device;
mod error;
mod lexer;
mod library;
mod literals;
mod quantity;
mod semver;
mod shape;
mod static_types;

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod robustness_tests;
#[cfg(test)]
mod tests;

pub use compiler::{
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH, CelEnvironment, CompiledSelector, SelectorCompiler,
};
pub use device::CelDevice;
pub use error::{
    CelError, CelErrorKind, MAX_ERROR_TEXT_BYTES, MAX_EXPRESSION_SHOWN, MAX_MESSAGE_BYTES,
    NO_SUCH_KEY_HINT,
};
