//! Opening the files a user names (configs, the files a config names, input frames) so that
//! a FIFO, a device or a directory is refused at once: a FIFO's read waits for a writer,
//! and `/dev/zero` never ends.

use std::fs::{File, FileType};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file could not be opened for reading.
#[derive(Debug)]
pub(crate) enum OpenError {
    Io(std::io::Error),
    /// The path names something else than a regular file: [`kind_name`] of it.
    NotRegular(&'static str),
}

/// Opens `path` for reading if it is a regular file, with its length. The open does not
/// block (O_NONBLOCK) and takes no terminal, so a FIFO is looked at, not waited on.
pub(crate) fn open_regular(path: &Path) -> Result<(File, u64), OpenError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(OpenError::Io)?;
    let meta = file.metadata().map_err(OpenError::Io)?;
    if !meta.file_type().is_file() {
        return Err(OpenError::NotRegular(kind_name(meta.file_type())));
    }
    Ok((file, meta.len()))
}

/// Reads a small text file (a config, or a file a config names): only a regular file, at
/// most `limit` bytes.
pub(crate) fn read_small_file(path: &Path, limit: u64) -> Result<String, String> {
    let (file, _) = open_regular(path).map_err(|e| match e {
        OpenError::Io(e) => format!("cannot read: {e}"),
        OpenError::NotRegular(kind) => format!("not a regular file but {kind}"),
    })?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!("larger than {limit} bytes"));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text: {e}"))
}

/// What a file type is, for messages: "a directory", "a FIFO", "a character device"...
pub(crate) fn kind_name(kind: FileType) -> &'static str {
    if kind.is_file() {
        "a regular file"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}
