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
//! The rooms: `env` expands the file's `${VAR}`s, `dropin` finds and merges the
//! `conf.d` files, `glob` makes a camera per node a device pattern matches, [`schema`] is
//! the file as serde reads it and the settings it becomes, `check` turns one into the other (`web` the `[web]`
//! table), [`validate`] adds the machine, and `print` writes settings back as TOML. This file places errors (positions
//! and keys) and reads the file.

mod check;
mod dropin;
mod env;
mod events;
mod glob;
mod mqtt;
mod print;
pub mod schema;
mod threads;
mod validate;
mod web;
mod web_file;

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

pub use check::{check_region_name, BadRegionName};
pub use mqtt::discovery_cameras;
pub use schema::*;
pub use validate::{validate, Checked};

use edgesight_capture::capture::SourceSpec;
use env::Expanded;

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

/// One file of a config (the file, or a drop-in of its `conf.d`), to place errors.
struct Part {
    path: PathBuf,
    /// The file as written: errors are placed in it.
    written: String,
    /// What is parsed: the file with its variables expanded.
    expanded: Expanded,
    /// Where the part's text starts in the offsets its spans have: each part is parsed
    /// after a comment of this length, so that a span says which file it is in.
    base: usize,
}

impl Part {
    fn new(path: &Path, written: String, expanded: Expanded, after: Option<&Part>) -> Part {
        // A comment line is at least "#\n".
        let base = after.map_or(0, |p| p.base + p.expanded.text.len() + 2);
        Part {
            path: path.to_path_buf(),
            written,
            expanded,
            base,
        }
    }

    /// The text handed to the parser: its spans are offsets from `base` on.
    fn padded(&self) -> String {
        if self.base == 0 {
            return self.expanded.text.clone();
        }
        format!("#{}\n{}", " ".repeat(self.base - 2), self.expanded.text)
    }
}

/// The files of a config, to place errors.
struct Doc<'a> {
    /// `None`: the built-in defaults, no file.
    path: Option<&'a Path>,
    parts: &'a [Part],
}

impl<'a> Doc<'a> {
    /// The part a span's `offset` is in, and the offset in its expanded text.
    fn part_at(&self, offset: usize) -> Option<(&Part, usize)> {
        let part = self.parts.iter().rev().find(|p| p.base <= offset)?;
        Some((part, offset - part.base))
    }

    /// The file position of `offset` in the spans.
    fn file_at(&self, offset: usize) -> Origin {
        let Some((part, local)) = self.part_at(offset) else {
            return Origin::Defaults;
        };
        let (line, column) = line_column(&part.written, part.expanded.written_offset(local));
        Origin::File {
            path: part.path.clone(),
            line,
            column,
        }
    }

    /// Where `key = value` of the table whose header starts at `table` writes its value
    /// (see [`check::value_span`]).
    fn value_span(&self, table: Range<usize>, key: &str) -> Option<Range<usize>> {
        let (part, local) = self.part_at(table.start)?;
        let found = check::value_span(&part.expanded.text, local..local, key)?;
        Some(found.start + part.base..found.end + part.base)
    }

    fn at(
        &self,
        span: Range<usize>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        let origin = match self.path {
            Some(_) if span.end > 0 => self.file_at(span.start),
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

/// `text` (the file `path` as written) with its variables expanded from the environment
/// (see [`env`]), an error placed at the variable.
fn expand(
    path: &Path,
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Expanded, ConfigError> {
    env::expand(text, lookup).map_err(|e| {
        let (line, column) = line_column(text, e.offset);
        ConfigError {
            origin: Origin::File {
                path: path.to_path_buf(),
                line,
                column,
            },
            key: key_at(text, e.offset),
            message: e.message,
        }
    })
}

/// A variable of the daemon's environment, if set as UTF-8.
fn from_environment(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Parses part `index` of a config.
fn parse(doc: &Doc, index: usize) -> Result<FileConfig, ConfigError> {
    let part = &doc.parts[index];
    toml::from_str::<FileConfig>(&part.padded()).map_err(|e| {
        let offset = e.span().unwrap_or(0..0).start.max(part.base);
        ConfigError {
            origin: doc.file_at(offset),
            key: key_at(&part.expanded.text, offset - part.base),
            message: e.message().trim().to_string(),
        }
    })
}

/// Reads a config file whole, refusing one that is not a regular file of at most
/// [`MAX_CONFIG_BYTES`].
fn read(path: &Path) -> Result<String, ConfigError> {
    edgesight_frame::files::read_small_file(path, MAX_CONFIG_BYTES).map_err(|e| ConfigError {
        origin: Origin::File {
            path: path.to_path_buf(),
            line: 0,
            column: 0,
        },
        key: "(file)".into(),
        message: e.to_string(),
    })
}

/// The config `path` and its drop-ins, each read and expanded.
fn read_parts(
    path: &Path,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<Vec<Part>, ConfigError> {
    let mut parts: Vec<Part> = Vec::new();
    let files = std::iter::once(Ok(path.to_path_buf())).chain(
        dropin::files(path)
            .map_err(|e| ConfigError {
                origin: Origin::File {
                    path: dropin::dir(path),
                    line: 0,
                    column: 0,
                },
                key: "(directory)".into(),
                message: e.to_string(),
            })?
            .into_iter()
            .map(Ok::<_, ConfigError>),
    );
    let mut total = 0;
    for file in files {
        let file = file?;
        let written = read(&file)?;
        total += written.len();
        if parts.len() > MAX_DROPINS || total > MAX_CONFIG_TOTAL {
            return Err(ConfigError {
                origin: Origin::File {
                    path: file,
                    line: 0,
                    column: 0,
                },
                key: "(file)".into(),
                message: format!(
                    "one drop-in too many: a config and its drop-ins are at most \
                     {MAX_DROPINS} drop-ins and {MAX_CONFIG_TOTAL} bytes"
                ),
            });
        }
        let expanded = expand(&file, &written, lookup)?;
        let part = Part::new(&file, written, expanded, parts.last());
        parts.push(part);
    }
    Ok(parts)
}

/// Parses every part and merges the drop-ins into the file, in order; what each part
/// set, for `check-config`.
fn parse_merged(doc: &Doc) -> Result<(FileConfig, Vec<String>), ConfigError> {
    let mut file = parse(doc, 0)?;
    let mut origins = Vec::new();
    for index in 1..doc.parts.len() {
        let dropin = parse(doc, index)?;
        let set = dropin::merge(doc, &mut file, dropin)?;
        origins.push(format!(
            "{}: {}",
            doc.parts[index].path.display(),
            if set.is_empty() {
                "nothing".to_string()
            } else {
                set.join(", ")
            }
        ));
    }
    Ok((file, origins))
}

/// The most a config file may hold; a longer one is refused rather than read whole.
pub(crate) const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The most drop-ins a config may have, and the most bytes it and they may hold together:
/// each file is parsed after a comment as long as the files before it, so their number
/// and size bound the work of reading a config (64 parses of at most 4 MiB).
const MAX_DROPINS: usize = 64;
const MAX_CONFIG_TOTAL: usize = 4 << 20;

/// A config read and checked, with what [`validate`] needs to place its errors.
struct Loaded {
    parts: Vec<Part>,
    file: FileConfig,
    /// What each drop-in set, in order.
    origins: Vec<String>,
    settings: Settings,
    /// For each camera of `settings`, the index of its `[[camera]]` in `file`.
    placed: Vec<usize>,
}

/// Reads, expands, parses and checks `path` (or the defaults when `None`) with
/// `overrides` applied. Touches no device: [`validate`] adds what needs the machine.
fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Loaded, ConfigError> {
    let parts = match path {
        Some(p) => read_parts(p, &from_environment)?,
        None => Vec::new(),
    };
    let doc = Doc {
        path,
        parts: &parts,
    };
    let (file, origins) = match path {
        Some(_) => parse_merged(&doc)?,
        None => (FileConfig::default(), Vec::new()),
    };
    let (settings, placed) = check::check_placed(&doc, &file, overrides)?;
    Ok(Loaded {
        parts,
        file,
        origins,
        settings,
        placed,
    })
}

/// Every check of `load` on a config's text, its variables taken from the environment
/// (what `check-config` does short of looking at devices); `path` only names it in
/// errors. The fuzz target's entry.
pub fn check_text(path: &Path, text: &str) -> Result<Settings, ConfigError> {
    check_text_with(path, text, from_environment)
}

/// [`check_text`] with the variables looked up with `lookup`.
pub(crate) fn check_text_with(
    path: &Path,
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Settings, ConfigError> {
    let expanded = expand(path, text, lookup)?;
    let parts = [Part::new(path, text.to_string(), expanded, None)];
    let doc = Doc {
        path: Some(path),
        parts: &parts,
    };
    let file = parse(&doc, 0)?;
    check::check(&doc, &file, &Overrides::default())
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::path::{Path, PathBuf};

    use super::*;

    /// Checks `text` as `t.toml`, with no variable set.
    pub(crate) fn load_text(text: &str) -> Result<Settings, ConfigError> {
        check_text_with(Path::new("t.toml"), text, |_| None)
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

    fn with_site(text: &str) -> Result<Settings, String> {
        let env = |name: &str| (name == "SITE").then(|| "lyon".to_string());
        check_text_with(Path::new("t.toml"), text, env).map_err(|e| e.to_string())
    }

    #[test]
    fn variables_are_expanded_in_string_values() {
        let text = GOOD
            .replace("name = \"front\"", "name = \"${SITE}-${BOARD:-b7}\"")
            .replace("name = \"door\"", "name = \"$${BOARD}\"");
        let s = with_site(&text).unwrap();
        assert_eq!(s.cameras[0].name, "lyon-b7");
        assert_eq!(s.cameras[0].regions[0].name, "${BOARD}");
        // The printed settings keep the dollar a dollar.
        assert_eq!(with_site(&s.to_toml()).unwrap(), s);
    }

    #[test]
    fn an_unset_variable_names_its_file_line_and_key() {
        let text = GOOD.replace("name = \"door\"", "name = \"${SITE}-${DOOR}\"");
        assert_eq!(
            with_site(&text).unwrap_err(),
            "t.toml:14:17: camera.roi.name: ${DOOR}: DOOR is not set in the environment \
             (give it, or a default: ${DOOR:-...})"
        );
    }

    #[test]
    fn errors_after_an_expansion_are_placed_in_the_file_as_written() {
        // `${SITE}` is longer than its value: what follows it on its line is placed in
        // the file, not in the expanded text.
        let text = "[log]\nlevel = \"${SITE}\" \"${SITE}\"\n";
        let err = with_site(text).unwrap_err();
        assert!(err.starts_with("t.toml:2:19: log.level: "), "{err}");
        let text = "[log]\nlevel = \"${SITE}\"\n";
        assert_eq!(
            with_site(text).unwrap_err(),
            "t.toml:2:9: log.level: unknown level 'lyon' (expected error, warn, info, debug or trace)"
        );
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
