//! The fixed cases: every `testdata/<suite>/<case>/cluster.yaml` with its
//! `args`, and any loose snapshot file (`.yaml`/`.json`) whose header says
//! `--kubernetes-version`/`--feature-gates` on a `# Run:` or `# dra-autoscaler
//! simulate` line (as the shared divergence cases do).

use std::path::{Path, PathBuf};

use dra_sim::KubeVersion;

use crate::ours;
use crate::run::Case;

/// Why a fixed case could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FixedError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The snapshot or its flags are malformed.
    #[error("{path}: {message}")]
    Bad {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Flags of a fixed case that the comparison honours.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// `--kubernetes-version`.
    pub version: Option<String>,
    /// `--feature-gates`.
    pub feature_gates: String,
    /// Flags neither engine is given here (`--now`, `--expander`,
    /// `--dra-filter-timeout`), for the report.
    pub ignored: Vec<String>,
}

/// Reads `--flag=value` and `--flag value` tokens.
#[must_use]
pub fn parse_flags(text: &str) -> Flags {
    let mut flags = Flags::default();
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i];
        let (name, value) = match token.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (token, None),
        };
        let takes_value = value.is_none()
            && tokens
                .get(i + 1)
                .is_some_and(|next| !next.starts_with("--"));
        let value = value.or_else(|| takes_value.then(|| tokens[i + 1].to_string()));
        i += if takes_value { 2 } else { 1 };
        match (name, value) {
            ("--kubernetes-version", Some(v)) => flags.version = Some(v),
            ("--feature-gates", Some(v)) => {
                if !flags.feature_gates.is_empty() {
                    flags.feature_gates.push(',');
                }
                flags.feature_gates.push_str(&v);
            }
            (name, _) if name.starts_with("--") => flags.ignored.push(name.to_string()),
            _ => {}
        }
    }
    flags
}

/// Every fixed case under `root` (a suite folder of case folders, a case
/// folder, or a snapshot file), in name order.
///
/// # Errors
/// An unreadable file or malformed case.
pub fn cases(root: &Path) -> Result<Vec<(Case, Flags)>, FixedError> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|source| FixedError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let mut out = Vec::new();
    if root.is_file() {
        let text = read(root)?;
        let header: String = text
            .lines()
            .take_while(|l| l.starts_with('#') || l.trim().is_empty())
            .filter(|l| l.contains("--feature-gates") || l.contains("--kubernetes-version"))
            .collect::<Vec<_>>()
            .join(" ");
        out.push(case(root, &text, &parse_flags(&header))?);
        return Ok(out);
    }
    if root.join("cluster.yaml").is_file() {
        let text = read(&root.join("cluster.yaml"))?;
        let args_path = root.join("args");
        let args = if args_path.is_file() {
            read(&args_path)?
        } else {
            String::new()
        };
        out.push(case(
            &root.join("cluster.yaml"),
            &text,
            &parse_flags(&args),
        )?);
        return Ok(out);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(root)
        .map_err(|source| FixedError::Read {
            path: root.to_path_buf(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                || p.extension()
                    .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .collect();
    entries.sort();
    for entry in entries {
        out.extend(cases(&entry)?);
    }
    Ok(out)
}

fn case(path: &Path, text: &str, flags: &Flags) -> Result<(Case, Flags), FixedError> {
    let bad = |message: String| FixedError::Bad {
        path: path.to_path_buf(),
        message,
    };
    let objects = ours::parse_snapshot(&path.display().to_string(), text).map_err(bad)?;
    let version = match &flags.version {
        Some(v) => v.parse::<KubeVersion>().map_err(|e| bad(e.to_string()))?,
        None => KubeVersion::NEWEST,
    };
    Ok((
        Case {
            name: path.display().to_string(),
            version,
            feature_gates: flags.feature_gates.clone(),
            objects,
        },
        flags.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_in_both_spellings() {
        let f = parse_flags(
            "--kubernetes-version 1.35 --feature-gates=A=true,B=false --now none --expander=priority",
        );
        assert_eq!(f.version.as_deref(), Some("1.35"));
        assert_eq!(f.feature_gates, "A=true,B=false");
        assert_eq!(f.ignored, vec!["--now", "--expander"]);
        let header = parse_flags(
            "# Run: dra-autoscaler simulate -o json --feature-gates=X=true <this file>",
        );
        assert_eq!(header.feature_gates, "X=true");
    }
}
