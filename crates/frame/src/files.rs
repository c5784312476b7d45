//! Opening the files a user names (configs, the files a config names, input frames) so that
//! a FIFO, a device or a directory is refused at once: a FIFO's read waits for a writer,
//! and `/dev/zero` never ends. Writing the files the commands make (results, reports) so
//! that nothing already at their paths is written through: a link planted in an output
//! directory must not have its target overwritten.

use std::fs::{File, FileType};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a file could not be opened for reading.
#[derive(Debug)]
pub enum OpenError {
    /// Opening the path or reading its metadata failed (missing, no permission, ...).
    Io(std::io::Error),
    /// The path names something else than a regular file: [`kind_name`] of it.
    NotRegular(&'static str),
}

/// Opens `path` for reading if it is a regular file, with its length. The open does not
/// block (O_NONBLOCK) and takes no terminal, so a FIFO is looked at, not waited on.
pub fn open_regular(path: &Path) -> Result<(File, u64), OpenError> {
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

/// Why a small text file cannot be read; the caller names the file.
#[derive(Debug, thiserror::Error)]
pub enum SmallFileError {
    /// Opening or reading it failed.
    #[error("cannot read: {0}")]
    Io(std::io::Error),
    /// Something other than a regular file (a FIFO would block the reader), and what.
    #[error("not a regular file but {0}")]
    NotRegular(&'static str),
    /// Over the caller's limit.
    #[error("larger than {limit} bytes")]
    TooLarge {
        /// The caller's limit, in bytes.
        limit: u64,
    },
    /// Not UTF-8 text.
    #[error("not UTF-8 text: {0}")]
    NotUtf8(std::string::FromUtf8Error),
}

/// Reads a small text file (a config, or a file a config names): only a regular file, at
/// most `limit` bytes.
pub fn read_small_file(path: &Path, limit: u64) -> Result<String, SmallFileError> {
    let (file, _) = open_regular(path).map_err(|e| match e {
        OpenError::Io(e) => SmallFileError::Io(e),
        OpenError::NotRegular(kind) => SmallFileError::NotRegular(kind),
    })?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(SmallFileError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(SmallFileError::TooLarge { limit });
    }
    String::from_utf8(bytes).map_err(SmallFileError::NotUtf8)
}

/// What a file type is, for messages: "a directory", "a FIFO", "a character device"...
pub fn kind_name(kind: FileType) -> &'static str {
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
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "a special file"
    }
}

/// An output file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Something else than a regular file is at the path: a link planted there would
    /// have its target overwritten, and a FIFO would hold the writer forever.
    #[error(
        "{}: not a regular file but {kind}; edgesight replaces only regular files (remove it \
         or choose another path)",
        path.display()
    )]
    NotRegular {
        /// The output path that was to be written.
        path: PathBuf,
        /// What is there instead, as [`kind_name`] names it ("a directory", ...).
        kind: &'static str,
    },
    /// Checking the path, creating or filling the temporary file beside it, or renaming
    /// that onto the path failed.
    #[error("{}: cannot write: {source}", path.display())]
    Io {
        /// The output path that was to be written.
        path: PathBuf,
        /// The I/O error that stopped the write.
        source: std::io::Error,
    },
}

/// Writes `bytes` as the file `path`: see [`write_with`].
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_with(path, |file| file.write_all(bytes))
}

/// Writes the file `path` with `write`, without following or opening what is there:
/// `write` fills a new temporary file beside it (created exclusively, never through a
/// link), then renamed to `path`: a rename replaces a name, never writes through it. A regular file there is replaced, keeping its permissions; anything else
/// (a link, a FIFO, a device, a directory) is refused. A failed write leaves no
/// temporary file.
pub fn write_with(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<(), WriteError> {
    let io = |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    };
    let kept_mode = check_replaceable(path)?;
    let (mut file, temp) = create_temp(path).map_err(io)?;
    let written = (|| {
        if let Some(mode) = kept_mode {
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        write(&mut file)?;
        drop(file);
        std::fs::rename(&temp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        // A directory or a link put there after the look above is refused as it would
        // have been then.
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_file() {
                return Err(WriteError::NotRegular {
                    path: path.to_path_buf(),
                    kind: kind_name(meta.file_type()),
                });
            }
        }
        return Err(io(e));
    }
    Ok(())
}

/// Whether [`write_with`] would write `path`: nothing there, or a regular file, whose
/// permission bits are returned. A command that works long before it writes looks first.
pub fn check_replaceable(path: &Path) -> Result<Option<u32>, WriteError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_file() => Ok(Some(meta.permissions().mode() & 0o777)),
        Ok(meta) => Err(WriteError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_name(meta.file_type()),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(WriteError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The temporary files this process has made, for their names.
static TEMPS: AtomicU64 = AtomicU64::new(0);

/// A new file beside `path` under a name no other writer uses: `.NAME.PID.N.tmp`. A name
/// taken (by a writer that died, or by anything planted there) is passed over.
fn create_temp(path: &Path) -> std::io::Result<(File, PathBuf)> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let mut tries = 0;
    loop {
        let n = TEMPS.fetch_add(1, Ordering::Relaxed);
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".{}.{n}.tmp", std::process::id()));
        let temp = path.with_file_name(temp_name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY)
            .open(&temp)
        {
            Ok(file) => return Ok((file, temp)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 16 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("edgesight-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_small_file_is_regular_text_within_its_limit() {
        let dir = fresh_dir("small");
        let file = dir.join("f");
        std::fs::write(&file, "four").unwrap();
        assert_eq!(read_small_file(&file, 4).unwrap(), "four");
        let large = read_small_file(&file, 3).unwrap_err();
        assert!(
            matches!(large, SmallFileError::TooLarge { limit: 3 }),
            "{large:?}"
        );
        assert_eq!(large.to_string(), "larger than 3 bytes");
        std::fs::write(&file, b"\xff").unwrap();
        let binary = read_small_file(&file, 4).unwrap_err();
        assert!(matches!(binary, SmallFileError::NotUtf8(_)), "{binary:?}");
        let directory = read_small_file(&dir, 4).unwrap_err();
        assert!(
            matches!(directory, SmallFileError::NotRegular("a directory")),
            "{directory:?}"
        );
        assert_eq!(directory.to_string(), "not a regular file but a directory");
        let missing = read_small_file(&dir.join("none"), 4).unwrap_err();
        assert!(matches!(missing, SmallFileError::Io(_)), "{missing:?}");
        assert!(
            missing.to_string().starts_with("cannot read: "),
            "{missing}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// Issue 46, finding 2: a write that fails half way leaves the file that was there
    /// whole, and no temporary file.
    #[test]
    fn round3_2_a_failed_write_keeps_the_old_file_and_leaves_no_temp() {
        let dir = fresh_dir("files-failed");
        let path = dir.join("report.json");
        std::fs::write(&path, "old").unwrap();
        let e = write_with(&path, |f| {
            f.write_all(b"half")?;
            Err(std::io::Error::other("the encoder gave up"))
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: cannot write: the encoder gave up", path.display())
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(names(&dir), ["report.json"]);
        write_file(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(names(&dir), ["report.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 46, finding 2: a directory, or a link that leads nowhere, is refused as a
    /// link to a file is; a temporary name already taken (by a link planted there) is
    /// passed over, and the link left alone.
    #[test]
    fn round3_2_only_a_regular_file_is_replaced() {
        let dir = fresh_dir("files-kinds");
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("dangling")).unwrap();
        for (name, kind) in [("sub", "a directory"), ("dangling", "a symbolic link")] {
            let e = write_file(&dir.join(name), b"x").unwrap_err();
            assert!(
                matches!(e, WriteError::NotRegular { kind: k, .. } if k == kind),
                "{name}: {e}"
            );
        }
        assert!(!dir.join("nowhere").exists());
        // The next temporary name this process would take, and the one after it.
        let next = TEMPS.load(Ordering::Relaxed);
        for n in [next, next + 1] {
            let temp = dir.join(format!(".out.{}.{n}.tmp", std::process::id()));
            std::os::unix::fs::symlink(dir.join("victim"), temp).unwrap();
        }
        write_file(&dir.join("out"), b"bytes").unwrap();
        assert_eq!(std::fs::read(dir.join("out")).unwrap(), b"bytes");
        assert!(!dir.join("victim").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
