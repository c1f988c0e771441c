//! Reads snapshot files and directories into the pure loader.

use std::io::Read;
use std::path::{Path, PathBuf};

use dra_sim::{Loaded, Loader};

/// Why input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A path could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A document is not a valid object.
    #[error(transparent)]
    Load(#[from] dra_sim::LoadError),
    /// No input files were found.
    #[error("no .yaml, .yml or .json files found in {0}")]
    Empty(String),
}

/// Every `.yaml`, `.yml` and `.json` file under `paths` (directories are walked
/// recursively, in name order, so results are reproducible).
///
/// # Errors
/// A path that does not exist or cannot be listed.
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut files = Vec::new();
    for path in paths {
        walk(path, true, &mut files)?;
    }
    Ok(files)
}

fn walk(path: &Path, explicit: bool, files: &mut Vec<PathBuf>) -> Result<(), InputError> {
    let read_error = |source| InputError::Read {
        path: path.to_path_buf(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(read_error)?;
    if metadata.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(read_error)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        entries.sort();
        for entry in entries {
            walk(&entry, false, files)?;
        }
    } else if explicit || is_snapshot_file(path) {
        files.push(path.to_path_buf());
    }
    Ok(())
}

fn is_snapshot_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

/// Threads to type a large list's items on ([`Loader::type_on_threads`]): one per core
/// the process may use, at most 8 (past that, recording the items in order on one
/// thread is the limit). Loading was the largest part of `simulate` on a 100,000-node
/// cluster (issue #28).
#[must_use]
pub fn typing_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// A large JSON file handed to the loader a piece at a time
/// ([`Loader::add_json_in_pieces`]), so its text is never held whole: at 100,000 nodes
/// the 650 MiB text was the largest part of `simulate`'s peak memory after the objects
/// (issue #28).
struct FilePieces {
    file: std::fs::File,
}

impl FilePieces {
    /// Files from this size on are read in pieces; smaller ones whole, as they cost
    /// little either way.
    const FROM: u64 = 16 << 20;
    /// Bytes per piece.
    const PIECE: u64 = 16 << 20;

    /// Whether `path` is a regular file of at least [`Self::FROM`] bytes (anything else,
    /// or an unreadable file, is read whole and reports as before).
    fn worth_it(path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() >= Self::FROM)
    }

    fn open(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            file: std::fs::File::open(path)?,
        })
    }
}

impl dra_sim::loader::Pieces for FilePieces {
    fn read_more(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<usize> {
        (&mut self.file).take(Self::PIECE).read_to_end(buffer)
    }
}

/// Loads every file under `paths` with `loader`.
///
/// # Errors
/// Unreadable files, invalid documents, or no input at all.
pub fn load(paths: &[PathBuf], mut loader: Loader) -> Result<Loaded, InputError> {
    let files = collect_files(paths)?;
    if files.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(InputError::Empty(shown.join(", ")));
    }
    for file in files {
        let read_error = |source| InputError::Read {
            path: file.clone(),
            source,
        };
        let name = file.display().to_string();
        let json = file.extension().and_then(|e| e.to_str()) == Some("json");
        if json && FilePieces::worth_it(&file) {
            let mut pieces = FilePieces::open(&file).map_err(read_error)?;
            if loader
                .add_json_in_pieces(&name, &mut pieces)
                .map_err(read_error)?
            {
                continue;
            }
        }
        let text = std::fs::read_to_string(&file).map_err(read_error)?;
        if json {
            loader.add_json(&name, &text)?;
        } else {
            loader.add_yaml(&name, &text)?;
        }
    }
    Ok(loader.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `kind: List` of `pods` pods, each padded past a kilobyte, as kubectl writes it.
    fn list(pods: usize) -> String {
        let padding = "x".repeat(3000);
        let items: Vec<String> = (0..pods)
            .map(|i| {
                format!(
                    r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p{i}","namespace":"ns","annotations":{{"pad":"{padding}"}}}},"spec":{{"containers":[{{"name":"c","resources":{{"requests":{{"cpu":"1"}}}}}}]}}}}"#
                )
            })
            .collect();
        format!(
            "{{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n{}\n    ],\n    \"kind\": \"List\"\n}}\n",
            items.join(",\n")
        )
    }

    fn loader() -> Loader {
        let mut loader = Loader::new();
        loader.trim_unread();
        loader.type_on_threads(2);
        loader
    }

    /// `text` loaded from a file (in pieces when large), and loaded whole.
    fn both(name: &str, text: &str) -> (Result<Loaded, InputError>, Result<Loaded, String>) {
        let path = std::env::temp_dir().join(format!("{}-{name}.json", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let from_file = load(std::slice::from_ref(&path), loader());
        assert!(FilePieces::worth_it(&path));
        std::fs::remove_file(&path).unwrap();
        let mut whole = loader();
        let loaded = whole
            .add_json(&path.display().to_string(), text)
            .map(|()| whole.finish())
            .map_err(|e| e.to_string());
        (from_file, loaded)
    }

    #[test]
    fn a_large_list_read_in_pieces_loads_as_its_whole_text() {
        let text = list(6000);
        assert!(text.len() as u64 >= FilePieces::FROM);
        let (from_file, whole) = both("list", &text);
        let (from_file, whole) = (from_file.unwrap(), whole.unwrap());
        assert_eq!(from_file.objects.pods.len(), 6000);
        assert_eq!(format!("{from_file:?}"), format!("{whole:?}"));
    }

    #[test]
    fn a_large_invalid_list_fails_as_its_whole_text() {
        let text = list(6000).replacen("\"kind\":\"Pod\"", "\"kind\":\"Pod\",", 1);
        let text = text.replacen("\"name\":\"p7\"", "\"name\":7", 1);
        let (from_file, whole) = both("invalid", &text);
        let error = from_file.unwrap_err().to_string();
        assert!(error.contains("not valid JSON"), "{error}");
        assert_eq!(error, whole.unwrap_err());
    }
}
