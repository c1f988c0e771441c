//! The state file: every object and the resourceVersion, so a restarted server comes back with
//! its data, as a real API server does over etcd.
//!
//! It is written shortly after every change and once more on shutdown, marked `clean` only by
//! the latter. A restart from a clean file continues the resourceVersion where it stopped; from
//! an unclean one (the process was killed, the last writes may be missing) the resourceVersion
//! jumps by [`UNCLEAN_BUMP`], as etcd is restored with `--bump-revision --mark-compacted`, so no
//! resourceVersion a client has already seen is handed out again and every client relists.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::store::Snapshot;

/// How far the resourceVersion jumps after an unclean stop (far more writes than a server can
/// make between two saves).
pub const UNCLEAN_BUMP: u64 = 1_000_000;

#[derive(Serialize, Deserialize)]
struct StateFile {
    clean: bool,
    #[serde(flatten)]
    snapshot: Snapshot,
}

/// A state file that cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// I/O on the file.
    #[error("unable to access the state file {path}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Not a state file of this server.
    #[error("the state file {path} is not valid")]
    Json {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
}

/// The snapshot in `path` and whether it was written by a clean shutdown; `None` when the file
/// does not exist.
///
/// # Errors
/// [`StateError`] when it exists but cannot be read.
pub fn load(path: &Path) -> Result<Option<(Snapshot, bool)>, StateError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StateError::Io {
                path: path.display().to_string(),
                source,
            });
        }
    };
    let file: StateFile = serde_json::from_slice(&bytes).map_err(|source| StateError::Json {
        path: path.display().to_string(),
        source,
    })?;
    Ok(Some((file.snapshot, file.clean)))
}

/// Writes `snapshot` atomically (temporary file, then rename).
///
/// # Errors
/// [`StateError`] on I/O failure.
pub fn save(path: &Path, snapshot: Snapshot, clean: bool) -> Result<(), StateError> {
    let io = |source| StateError::Io {
        path: path.display().to_string(),
        source,
    };
    let bytes =
        serde_json::to_vec(&StateFile { clean, snapshot }).map_err(|source| StateError::Json {
            path: path.display().to_string(),
            source,
        })?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn snapshots_round_trip_with_their_clean_mark() {
        let dir = std::env::temp_dir().join(format!("fake-apiserver-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("state.json");
        assert!(load(&path).expect("readable").is_none());
        let mut snapshot = Snapshot {
            resource_version: 42,
            ..Snapshot::default()
        };
        snapshot.collections.insert(
            "v1/configmaps".into(),
            vec![json!({"metadata": {"name": "a"}})],
        );
        save(&path, snapshot.clone(), false).expect("saved");
        let (back, clean) = load(&path).expect("readable").expect("exists");
        assert_eq!(back, snapshot);
        assert!(!clean);
        std::fs::remove_dir_all(&dir).ok();
    }
}
