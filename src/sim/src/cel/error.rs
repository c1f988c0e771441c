//! The one error type of the CEL module, worded like upstream's.

use std::fmt;

use kube_cel::cel::ExecutionError;

/// Upstream's hint for "no such key" runtime errors (`dra/cel/errors.go`).
pub const NO_SUCH_KEY_HINT: &str = "consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields";

/// Whether a selector failed to compile or failed on a particular device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CelErrorKind {
    /// Syntax error, undeclared reference, wrong argument count, or an
    /// expression that cannot evaluate to bool.
    Compile,
    /// Evaluation on one device failed: missing key, type error, non-bool
    /// result, bad semver in the device, cost limit.
    Runtime,
}

impl fmt::Display for CelErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CelErrorKind::Compile => "compile",
            CelErrorKind::Runtime => "runtime",
        })
    }
}

/// A selector that failed to compile or to evaluate.
///
/// Upstream aborts the whole allocation attempt on either kind; callers must
/// not treat it as "device does not match".
///
/// Its text is bounded: the expression is shown up to
/// [`MAX_EXPRESSION_SHOWN`] bytes and the message is cut at
/// [`MAX_MESSAGE_BYTES`], so one pathological selector cannot flood a report
/// (an error is printed once per pod and node it stops).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "CEL expression {:?}: {kind} error: {message}",
    shortened(expression, MAX_EXPRESSION_SHOWN)
)]
pub struct CelError {
    /// The selector's source text.
    pub expression: String,
    /// Compile or runtime.
    pub kind: CelErrorKind,
    /// What went wrong, in upstream's words where upstream has them.
    pub message: String,
}

/// Longest part of the expression an error shows.
pub const MAX_EXPRESSION_SHOWN: usize = 200;
/// Longest message an error carries.
pub const MAX_MESSAGE_BYTES: usize = 2048;
/// Longest text an error prints: the shown part of the expression is printed
/// escaped (`{:?}`), and escaping turns one character into at most ten
/// (`\u{10ffff}`); then the message, the cut markers and the fixed words.
pub const MAX_ERROR_TEXT_BYTES: usize = MAX_EXPRESSION_SHOWN * 10 + MAX_MESSAGE_BYTES + 200;

/// `text` cut to at most `max` bytes (at a character boundary), saying how
/// long it was when cut.
fn shortened(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}… ({} bytes in all)", &text[..end], text.len()))
}

impl CelError {
    pub(crate) fn compile(expression: &str, message: impl Into<String>) -> Self {
        Self::new(expression, CelErrorKind::Compile, message.into())
    }

    pub(crate) fn runtime(expression: &str, message: impl Into<String>) -> Self {
        Self::new(expression, CelErrorKind::Runtime, message.into())
    }

    fn new(expression: &str, kind: CelErrorKind, message: String) -> Self {
        Self {
            expression: expression.to_string(),
            kind,
            message: shortened(&message, MAX_MESSAGE_BYTES).into_owned(),
        }
    }
}

/// cel-rust's evaluation error in cel-go's wording, with upstream's hint
/// appended to "no such key".
pub(crate) fn runtime_message(err: &ExecutionError) -> String {
    match err {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}. {NO_SUCH_KEY_HINT}"),
        ExecutionError::NoSuchOverload => "no such overload".to_string(),
        ExecutionError::UndeclaredReference(name) => format!("undeclared reference to '{name}'"),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        other => {
            let text = other.to_string();
            let mut chars = text.chars();
            chars
                .next()
                .map(|c| c.to_ascii_lowercase().to_string() + chars.as_str())
                .unwrap_or_default()
        }
    }
}
