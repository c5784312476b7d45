//! The daemon's TOML configuration: the schema, its defaults, and the checks that turn a
//! file (plus command-line overrides) into [`Settings`] the daemon can run on.
//!
//! Every error names the file, line and column, and the key it is about, so a bad
//! config is refused before a thread starts. Loading opens no device or socket; it checks
//! that the files the config names exist and loads the TLS files with the server's own
//! loader. [`validate`] adds what needs the machine (the OpenCL devices, the V4L2 nodes):
//! `run`, SIGHUP and `check-config` all go through it, so whatever `run` refuses,
//! `check-config` refuses with the same words.
//!
//! The rooms: [`schema`] is the file as serde reads it and the settings it becomes,
//! `check` turns one into the other (`web` the `[web]` table), [`validate`] adds the
//! machine, and `print` writes settings back as TOML. This file places errors (positions
//! and keys) and reads the file.

mod check;
mod print;
pub mod schema;
mod threads;
mod validate;
mod web;
mod web_file;

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

pub use check::check_region_name;
pub use schema::*;
pub use validate::{validate, Checked};

use crate::capture::SourceSpec;

/// Where a config error is: a file position, or a command-line flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    File {
        path: PathBuf,
        line: usize,
        column: usize,
    },
    Flag(&'static str),
    /// Built-in defaults (no file given).
    Defaults,
}

/// A config that cannot be run: where, which key, and why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{origin}: {key}: {message}")]
pub struct ConfigError {
    pub origin: Origin,
    pub key: String,
    pub message: String,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line, column } => {
                write!(f, "{}:{line}:{column}", path.display())
            }
            Origin::Flag(flag) => write!(f, "command line {flag}"),
            Origin::Defaults => f.write_str("built-in defaults"),
        }
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The dotted key a TOML parse error is about, read back from the text around its span:
/// the innermost table header above it plus the key on its line.
fn key_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    // An error on a table header (a table defined twice, say) is about that table.
    if let Some(header) = table_header(line) {
        return if header.is_empty() {
            "(table header)".into()
        } else {
            header
        };
    }
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('['))
        .unwrap_or_default();
    let table = text[..line_start]
        .lines()
        .rev()
        .find_map(table_header)
        .filter(|t| !t.is_empty());
    match (table, key.is_empty()) {
        (Some(t), false) => format!("{t}.{key}"),
        (Some(t), true) => t,
        (None, false) => key,
        (None, true) => "(top level)".into(),
    }
}

/// The table a `[name]` or `[[name]]` line opens, if `line` is one.
fn table_header(line: &str) -> Option<String> {
    let line = line.trim();
    let name = line.strip_prefix('[')?.trim_start_matches('[');
    Some(name.split(']').next().unwrap_or(name).trim().to_string())
}

/// Overrides from the command line, applied before checking.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub source: Option<SourceSpec>,
    /// `--web.listen-address` (or `--listen`), each time given; replacing
    /// `[web] listen_address` unless empty.
    pub listen: Vec<String>,
    /// `--log.level`, replacing `[log] level`.
    pub log_level: Option<String>,
    /// `--log.format`, replacing `[log] format`.
    pub log_format: Option<String>,
    /// `--web.config.file`: TLS, users and headers from an exporter web config file.
    pub web_config_file: Option<std::path::PathBuf>,
}

/// The text of a config and where it came from, to place errors.
struct Doc<'a> {
    path: Option<&'a Path>,
    text: &'a str,
}

impl Doc<'_> {
    fn at(
        &self,
        span: Range<usize>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        let origin = match self.path {
            Some(path) if span.end > 0 => {
                let (line, column) = line_column(self.text, span.start);
                Origin::File {
                    path: path.to_path_buf(),
                    line,
                    column,
                }
            }
            _ => Origin::Defaults,
        };
        ConfigError {
            origin,
            key: key.into(),
            message: message.into(),
        }
    }
}

fn flag(flag: &'static str, key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        origin: Origin::Flag(flag),
        key: key.into(),
        message: message.into(),
    }
}

/// Parses a config file's text; `path` only names it in errors.
pub(crate) fn parse(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str::<FileConfig>(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let (line, column) = line_column(text, span.start);
        ConfigError {
            origin: Origin::File {
                path: path.to_path_buf(),
                line,
                column,
            },
            key: key_at(text, span.start),
            message: e.message().trim().to_string(),
        }
    })
}

/// The most a config file may hold; a longer one is refused rather than read whole.
pub(crate) const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Reads, parses and checks `path` (or the defaults when `None`) with `overrides` applied,
/// and hands back the text and the parsed file beside the settings, so that [`validate`]
/// can place its errors. Touches no device: [`validate`] adds what needs the machine.
fn load(
    path: Option<&Path>,
    overrides: &Overrides,
) -> Result<(String, FileConfig, Settings), ConfigError> {
    let text = match path {
        Some(p) => {
            crate::files::read_small_file(p, MAX_CONFIG_BYTES).map_err(|message| ConfigError {
                origin: Origin::File {
                    path: p.to_path_buf(),
                    line: 0,
                    column: 0,
                },
                key: "(file)".into(),
                message,
            })?
        }
        None => String::new(),
    };
    let file = match path {
        Some(p) => parse(p, &text)?,
        None => FileConfig::default(),
    };
    let doc = Doc { path, text: &text };
    let settings = check::check(&doc, &file, overrides)?;
    Ok((text, file, settings))
}

/// [`parse`] and every check of `load` on a config's text (what `check-config` does short
/// of looking at devices); `path` only names it in errors. The fuzz target's entry.
pub fn check_text(path: &Path, text: &str) -> Result<Settings, ConfigError> {
    let file = parse(path, text)?;
    let doc = Doc {
        path: Some(path),
        text,
    };
    check::check(&doc, &file, &Overrides::default())
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::path::{Path, PathBuf};

    use super::*;

    pub(crate) fn load_text(text: &str) -> Result<Settings, ConfigError> {
        let file = parse(Path::new("t.toml"), text)?;
        let doc = Doc {
            path: Some(Path::new("t.toml")),
            text,
        };
        check::check(&doc, &file, &Overrides::default())
    }

    pub(crate) fn at(err: &ConfigError) -> (usize, usize) {
        match err.origin {
            Origin::File { line, column, .. } => (line, column),
            ref o => panic!("no file position: {o:?}"),
        }
    }

    /// The whole message of a config error, position included.
    pub(crate) fn refusal(text: &str) -> String {
        load_text(text).unwrap_err().to_string()
    }

    pub(crate) const GOOD: &str = r#"
[web]
listen_address = "127.0.0.1:9000"

[[camera]]
name = "front"
[camera.source]
kind = "pattern"
size = "320x240"
fps = 10
[camera.pipeline]
edge_threshold = 40
[[camera.roi]]
name = "door"
x = 0
y = 0
w = 320
h = 240
"#;

    pub(crate) fn write_tmp(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("edgesight-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::test_support::{at, load_text, write_tmp, GOOD};
    use super::*;

    #[test]
    fn line_and_column_count_from_one() {
        assert_eq!(line_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("é\nx", 3), (2, 1));
    }

    #[test]
    fn unknown_key_is_placed_and_named() {
        let text = GOOD.replace("h = 240", "heigth = 240");
        let err = load_text(&text).unwrap_err();
        assert_eq!(at(&err), (18, 1));
        assert_eq!(err.key, "camera.roi.heigth");
        assert!(err.message.contains("unknown field `heigth`"), "{err}");
        assert!(
            err.to_string()
                .starts_with("t.toml:18:1: camera.roi.heigth: "),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_is_placed_and_named() {
        let err = load_text(&GOOD.replace("x = 0", "x = \"left\"")).unwrap_err();
        assert_eq!(at(&err), (15, 5));
        assert_eq!(err.key, "camera.roi.x");
        assert!(
            err.message.contains("invalid type: string \"left\""),
            "{err}"
        );
    }

    #[test]
    fn a_table_defined_twice_is_named() {
        let err = load_text(&format!("{GOOD}[web]\nsnapshots = true\n")).unwrap_err();
        assert_eq!((err.key.as_str(), at(&err)), ("web", (19, 1)), "{err}");
        assert!(err.message.contains("duplicate key"), "{err}");
        let err = load_text("[log]\nlevel = \"info\"\n[ log ] # again\n").unwrap_err();
        assert_eq!((err.key.as_str(), at(&err)), ("log", (3, 1)), "{err}");
        // Found by the config fuzz target: a header without a name named no key.
        let err = load_text("[log]\nlevel = \"info\"\n[\nname = \"x\"\n").unwrap_err();
        assert_eq!(err.key, "(table header)", "{err}");
    }

    /// `load` on another thread, so that a read that blocks fails the test instead of
    /// hanging it.
    fn load_within(path: &Path, limit: Duration) -> Result<(), String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let path = path.to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(load(Some(&path), &Overrides::default()).map(drop));
        });
        match rx.recv_timeout(limit) {
            Ok(outcome) => outcome.map_err(|e| e.to_string()),
            Err(_) => panic!("load did not return within {limit:?}"),
        }
    }

    #[test]
    fn only_regular_files_up_to_1_mib_are_read() {
        let fifo = std::env::temp_dir().join(format!("edgesight-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // No writer ever opens it: a blocking read would wait forever.
        let limit = Duration::from_secs(10);
        assert_eq!(
            load_within(&fifo, limit),
            Err(format!(
                "{}:0:0: (file): not a regular file but a FIFO",
                fifo.display()
            ))
        );
        std::fs::remove_file(&fifo).unwrap();
        assert_eq!(
            load_within(Path::new("/dev/zero"), limit),
            Err("/dev/zero:0:0: (file): not a regular file but a character device".into())
        );
        let dir = std::env::temp_dir();
        assert_eq!(
            load_within(&dir, limit),
            Err(format!(
                "{}:0:0: (file): not a regular file but a directory",
                dir.display()
            ))
        );
        // Comments only: valid TOML of any length.
        let line = "# a comment line of 32 bytes ..\n";
        assert_eq!(line.len(), 32);
        let full = write_tmp("full.toml", &line.repeat(32 * 1024));
        assert_eq!(load_within(&full, limit), Ok(()));
        let over = write_tmp("over.toml", &format!("{}\n", line.repeat(32 * 1024)));
        assert_eq!(
            load_within(&over, limit),
            Err(format!(
                "{}:0:0: (file): larger than 1048576 bytes",
                over.display()
            ))
        );
    }
}
