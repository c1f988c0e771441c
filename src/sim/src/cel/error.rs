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
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CEL expression {expression:?}: {kind} error: {message}")]
pub struct CelError {
    /// The selector's source text.
    pub expression: String,
    /// Compile or runtime.
    pub kind: CelErrorKind,
    /// What went wrong, in upstream's words where upstream has them.
    pub message: String,
}

impl CelError {
    pub(crate) fn compile(expression: &str, message: impl Into<String>) -> Self {
        Self {
            expression: expression.to_string(),
            kind: CelErrorKind::Compile,
            message: message.into(),
        }
    }

    pub(crate) fn runtime(expression: &str, message: impl Into<String>) -> Self {
        Self {
            expression: expression.to_string(),
            kind: CelErrorKind::Runtime,
            message: message.into(),
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
