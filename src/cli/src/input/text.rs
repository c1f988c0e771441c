//! One input file's text, mapped from the page cache when it is large.
//!
//! `simulate` on a 100,000-node cluster reads a 650 MiB `kubectl get -o json` document.
//! Read into a `String`, every page of it is fresh memory the kernel first zeroes and
//! then copies the file into: about 1.3 s of system time on the project's machine
//! (issue #28). Mapped, the text is the page cache's own pages: nothing is zeroed or
//! copied, and the pages leave the process's resident set when the mapping is dropped.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Files smaller than this are read: a mapping saves nothing worth its system calls.
const MAP_FROM_BYTES: u64 = 1 << 20;

/// The text of one input file.
pub(super) enum FileText {
    /// A regular file of at least [`MAP_FROM_BYTES`], mapped read-only.
    Mapped(memmap2::Mmap),
    /// A small file, or one that cannot be mapped (a pipe, a character device), read.
    Read(Vec<u8>),
}

impl FileText {
    /// The contents of `path`.
    ///
    /// # Errors
    /// The file cannot be opened, mapped or read.
    pub(super) fn read(path: &Path) -> io::Result<Self> {
        let mut file = File::open(path)?;
        let metadata = file.metadata()?;
        if metadata.is_file() && metadata.len() >= MAP_FROM_BYTES {
            return map(&file).map(Self::Mapped);
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(Self::Read(bytes))
    }

    /// The text, checked to be UTF-8 (as `std::fs::read_to_string` checks it).
    ///
    /// # Errors
    /// The file is not UTF-8.
    pub(super) fn as_str(&self) -> io::Result<&str> {
        let bytes: &[u8] = match self {
            Self::Mapped(map) => map,
            Self::Read(bytes) => bytes,
        };
        std::str::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

/// Maps `file` read-only, its page-table entries filled at once (`MAP_POPULATE` on
/// Linux): the loader reads every byte, so one call instead of a fault per few pages.
#[allow(unsafe_code)]
fn map(file: &File) -> io::Result<memmap2::Mmap> {
    // SAFETY: the mapping is read-only and private to this process, and no code here
    // writes the file. Undefined behaviour would need another process to truncate or
    // rewrite the file while it is loaded (the same input would give a torn snapshot
    // when read, too); like ripgrep for the large files it searches, the CLI accepts
    // that for not copying hundreds of megabytes. The mapping lives in the returned
    // value, which the caller drops before it plans.
    unsafe { memmap2::MmapOptions::new().populate().map(file) }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("dra-input-text-{}-{name}", std::process::id()));
        let mut file = File::create(&path).expect("create");
        file.write_all(bytes).expect("write");
        path
    }

    #[test]
    fn a_large_file_is_mapped_and_reads_as_written() {
        let line = "{\"kind\":\"Node\"}\n";
        let text = line.repeat(usize::try_from(MAP_FROM_BYTES).expect("fits") / line.len() + 1);
        let path = temp_file("large", text.as_bytes());
        let read = FileText::read(&path).expect("read");
        assert!(matches!(read, FileText::Mapped(_)));
        assert_eq!(read.as_str().expect("utf-8"), text);
        drop(read);
        std::fs::remove_file(path).expect("remove");
    }

    #[test]
    fn a_small_file_is_read() {
        let path = temp_file("small", "kind: Node\n".as_bytes());
        let read = FileText::read(&path).expect("read");
        assert!(matches!(read, FileText::Read(_)));
        assert_eq!(read.as_str().expect("utf-8"), "kind: Node\n");
        std::fs::remove_file(path).expect("remove");
    }

    #[test]
    fn an_empty_file_is_empty_text() {
        let path = temp_file("empty", b"");
        assert_eq!(
            FileText::read(&path)
                .expect("read")
                .as_str()
                .expect("utf-8"),
            ""
        );
        std::fs::remove_file(path).expect("remove");
    }

    #[test]
    fn text_that_is_not_utf8_is_invalid_data_as_read_to_string_says() {
        let mut bytes = vec![b'a'; usize::try_from(MAP_FROM_BYTES).expect("fits")];
        bytes.push(0xff);
        let path = temp_file("latin1", &bytes);
        let expected = std::fs::read_to_string(&path)
            .expect_err("std refuses it")
            .kind();
        let read = FileText::read(&path).expect("read");
        assert_eq!(read.as_str().expect_err("not utf-8").kind(), expected);
        std::fs::remove_file(path).expect("remove");
    }
}
