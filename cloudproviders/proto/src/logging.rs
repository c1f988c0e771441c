//! Process logging shared by every binary of the project (the controller, the providers and the
//! test stand-ins), so they all log the same way: `info` unless `RUST_LOG` says otherwise, to
//! stderr, as text or one JSON object per line, and with ANSI colour only when stderr is a
//! terminal (log files and `kubectl logs` get plain text).
//!
//! ```no_run
//! use dra_provider::logging::{self, LogFormat};
//! logging::init(LogFormat::Text).expect("logging starts once");
//! tracing::info!(address = "127.0.0.1:8086", "serving");
//! ```

use std::io::IsTerminal;
use std::str::FromStr;

use tracing_subscriber::EnvFilter;

/// The level used when `RUST_LOG` is unset or empty.
pub const DEFAULT_FILTER: &str = "info";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines: time, level, target, message, fields.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields`, `target`, spans), for log
    /// collectors.
    Json,
}

impl LogFormat {
    /// The spelling used on the command line (`text`, `json`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Json => "json",
        }
    }
}

impl std::fmt::Display for LogFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--log-format` value that is neither `text` nor `json`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown log format {0:?}: expected text or json")]
pub struct UnknownLogFormat(pub String);

impl FromStr for LogFormat {
    type Err = UnknownLogFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            _ => Err(UnknownLogFormat(s.to_owned())),
        }
    }
}

/// Why logging could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// `RUST_LOG` is not a valid filter.
    #[error("RUST_LOG={value:?} is not a valid log filter")]
    Filter {
        /// The variable's value.
        value: String,
        /// The parser's complaint.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// Another subscriber was installed first (logging is set up once per process).
    #[error("logging was already set up in this process")]
    AlreadySet,
}

/// The filter from `RUST_LOG`, or `default` when it is unset or empty.
fn filter(default: &str) -> Result<EnvFilter, LoggingError> {
    match std::env::var("RUST_LOG") {
        Ok(value) if !value.trim().is_empty() => {
            EnvFilter::try_new(&value).map_err(|source| LoggingError::Filter { value, source })
        }
        _ => Ok(EnvFilter::new(default)),
    }
}

/// Sets up logging at [`DEFAULT_FILTER`] (`info`), overridable with `RUST_LOG`.
///
/// # Errors
/// [`LoggingError`] for a malformed `RUST_LOG` or a second call.
pub fn init(format: LogFormat) -> Result<(), LoggingError> {
    init_with_default(format, DEFAULT_FILTER)
}

/// Sets up logging with `default` as the filter when `RUST_LOG` is unset (commands whose stdout
/// is their output, such as `simulate`, pass `warn`).
///
/// # Errors
/// [`LoggingError`] for a malformed `RUST_LOG` or a second call.
pub fn init_with_default(format: LogFormat, default: &str) -> Result<(), LoggingError> {
    let filter = filter(default)?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    installed.map_err(|_| LoggingError::AlreadySet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_as_written_on_the_command_line() {
        assert_eq!("json".parse::<LogFormat>(), Ok(LogFormat::Json));
        assert_eq!("TEXT".parse::<LogFormat>(), Ok(LogFormat::Text));
        assert_eq!(
            "yaml".parse::<LogFormat>(),
            Err(UnknownLogFormat("yaml".into()))
        );
        assert_eq!(LogFormat::Json.to_string(), "json");
        assert_eq!(LogFormat::default(), LogFormat::Text);
    }

    #[test]
    fn malformed_filters_are_reported() {
        assert!(EnvFilter::try_new("info,[").is_err());
        assert!(filter("info").is_ok());
    }
}
