//! Reading a provider's YAML configuration file: the errors every provider reports the same
//! way (the file cannot be read, or is not the expected shape), before its own checks.

use std::path::Path;

use serde::de::DeserializeOwned;

/// A configuration file that could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// Unreadable file.
    #[error("unable to read config file {path}")]
    Read {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Not the expected YAML shape.
    #[error("config file {path} is not valid: {message}")]
    Parse {
        /// The path (or what the text came from).
        path: String,
        /// Parser message with location.
        message: String,
    },
}

/// Parses YAML `text` into `T`; `origin` names it in errors.
///
/// # Errors
/// [`ConfigFileError::Parse`] with the parser's message and location.
pub fn parse_yaml<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, ConfigFileError> {
    serde_saphyr::from_str(text).map_err(|err| ConfigFileError::Parse {
        path: origin.to_owned(),
        message: err.to_string(),
    })
}

/// Reads the file at `path` and hands its text and its name (for errors) to `parse`, a
/// provider's own `Config::parse`.
///
/// # Errors
/// [`ConfigFileError::Read`] (converted into `E`) when the file cannot be read; whatever
/// `parse` returns.
pub fn load<T, E: From<ConfigFileError>>(
    path: &Path,
    parse: impl FnOnce(&str, &str) -> Result<T, E>,
) -> Result<T, E> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: origin.clone(),
        source,
    })?;
    parse(&text, &origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Sample {
        size: u32,
    }

    #[test]
    fn errors_name_the_file_and_what_is_wrong() {
        let err = parse_yaml::<Sample>("size: many", "groups.yaml").expect_err("not a number");
        let text = err.to_string();
        assert!(
            text.starts_with("config file groups.yaml is not valid: "),
            "{text}"
        );
        assert!(text.contains("size") || text.contains("line 1"), "{text}");

        let missing = Path::new("/nonexistent/dra-provider/config.yaml");
        let err = load(missing, parse_yaml::<Sample>).expect_err("no such file");
        assert_eq!(
            err.to_string(),
            "unable to read config file /nonexistent/dra-provider/config.yaml"
        );
        assert!(matches!(err, ConfigFileError::Read { .. }));
    }

    #[test]
    fn a_readable_file_is_parsed_with_its_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, "size: 3\n").expect("write");
        let sample: Sample = load(&path, parse_yaml).expect("valid");
        assert_eq!(sample.size, 3);
        let seen = load(&path, |_: &str, origin: &str| {
            Ok::<_, ConfigFileError>(origin.to_owned())
        })
        .expect("origin");
        assert_eq!(seen, path.display().to_string());
    }
}
