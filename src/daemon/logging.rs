//! The log: `tracing` to stderr, at a level, in one of three formats ([`LogFormat`]: text
//! for people, logfmt, JSON), with each line's syslog priority in front under systemd, and
//! every field (the message too) escaped so that a value cannot make a line of its own.
//!
//! File names, device names, region names and the text of errors reach the log: a
//! newline in one would start a new line, and under journald a forged `<3>` at its start
//! would give that line priority "err". In text and logfmt, a value with a space, `=`,
//! `"` or a control character is quoted as logfmt's grammar requires (go-logfmt, which
//! Loki's `| logfmt` follows), control characters written as `\n`, `\r`, `\t` or
//! `\u001b`-style escapes; JSON escapes them itself.

use std::fmt;
use std::sync::OnceLock;

use tracing::field::{Field, Visit};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::{LookupSpan, Registry};
use tracing_subscriber::reload;

/// The installed log's level, for SIGHUP to change.
static LEVEL: OnceLock<reload::Handle<LevelFilter, Registry>> = OnceLock::new();

use crate::config::LogFormat;

/// Installs the `tracing` subscriber at `level` writing `format`, or at `RUST_LOG` when
/// that names a level (error, warn, info, debug, trace). Per-module filters are left out
/// to keep the binary small. Under systemd (stderr is the journal's stream) each line
/// starts with its syslog priority (`<3>` for errors), so `journalctl -p err` finds the
/// errors, and carries no time of its own (journald stamps each line).
pub fn init_logging(level: &str, format: LogFormat) {
    let level = env_level()
        .or_else(|| parse_level(level))
        .unwrap_or(tracing::Level::INFO);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (subscriber, handle) = subscriber(
        level,
        Lines {
            format,
            journal: stderr_is_journal(),
            ansi,
        },
        std::io::stderr,
    );
    // A second call (tests) keeps the first subscriber.
    if tracing::subscriber::set_global_default(subscriber).is_ok() {
        let _ = LEVEL.set(handle);
    }
}

fn parse_level(s: &str) -> Option<tracing::Level> {
    s.trim().parse::<tracing::Level>().ok()
}

/// The level `RUST_LOG` names, which wins over the config's.
fn env_level() -> Option<tracing::Level> {
    std::env::var("RUST_LOG").ok().and_then(|s| parse_level(&s))
}

/// Why a reloaded log level is not applied.
#[derive(Debug, thiserror::Error)]
pub enum LogLevelError {
    /// `RUST_LOG` names a level, which wins as it did at start.
    #[error("RUST_LOG={0} wins over the config's level")]
    EnvWins(tracing::Level),
    /// Not a level's name.
    #[error("unknown log level '{0}'")]
    Unknown(String),
    /// [`init_logging`] has not run.
    #[error("no log installed")]
    NotInstalled,
    /// The subscriber is gone.
    #[error(transparent)]
    Reload(#[from] tracing_subscriber::reload::Error),
}

/// Logs at `level` from now on (SIGHUP), unless `RUST_LOG` names one, which wins as it
/// did at start; whether the level changed, or why it was not applied. A change is said
/// at info by whichever level shows it, the old or the new.
pub fn set_log_level(level: &str) -> Result<bool, LogLevelError> {
    if let Some(env) = env_level() {
        return Err(LogLevelError::EnvWins(env));
    }
    let level = parse_level(level).ok_or_else(|| LogLevelError::Unknown(level.to_string()))?;
    let handle = LEVEL.get().ok_or(LogLevelError::NotInstalled)?;
    let filter = LevelFilter::from_level(level);
    let old = handle.clone_current();
    if old == Some(filter) {
        return Ok(false);
    }
    let name = level.as_str().to_ascii_lowercase();
    let announce = || tracing::info!("SIGHUP: log level now {name}");
    let old_shows_it = old.is_some_and(|o| o >= LevelFilter::INFO);
    if old_shows_it {
        announce();
    }
    handle.reload(filter)?;
    if !old_shows_it {
        announce();
    }
    Ok(true)
}

/// The subscriber [`init_logging`] installs, writing `lines` to `writer`, and the handle
/// that changes its level.
fn subscriber<W>(
    level: tracing::Level,
    lines: Lines,
    writer: W,
) -> (
    Box<dyn tracing::Subscriber + Send + Sync>,
    reload::Handle<LevelFilter, Registry>,
)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let (filter, handle) = reload::Layer::new(LevelFilter::from_level(level));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .event_format(lines);
    (
        Box::new(tracing_subscriber::registry().with(filter).with(fmt)),
        handle,
    )
}

/// Whether stderr is the stream systemd connected to the journal (`JOURNAL_STREAM` holds
/// its device and inode, see systemd.exec(5)).
fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(stream) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = stream.split_once(':') else {
        return false;
    };
    // SAFETY: fd 2 stays open for the whole process; ManuallyDrop never closes it.
    let file = std::mem::ManuallyDrop::new(unsafe {
        <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(2)
    });
    file.metadata()
        .is_ok_and(|m| dev.parse() == Ok(m.dev()) && ino.parse() == Ok(m.ino()))
}

/// How each event becomes a line.
#[derive(Clone, Copy, Debug)]
struct Lines {
    format: LogFormat,
    /// Under journald: the sd-daemon(3) priority in front, no time.
    journal: bool,
    /// The text format's level in colour (a terminal).
    ansi: bool,
}

/// A field's value as the event gave it.
enum Value {
    Text(String),
    Int(i128),
    Float(f64),
    Bool(bool),
}

/// An event's message and fields, in the order given.
#[derive(Default)]
struct Fields {
    message: String,
    fields: Vec<(&'static str, Value)>,
}

impl Fields {
    fn push(&mut self, field: &Field, value: Value) {
        match (field.name(), value) {
            ("message", Value::Text(text)) => self.message = text,
            (name, value) => self.fields.push((name, value)),
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%x` fields and the message arrive here, formatted as Display.
        self.push(field, Value::Text(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, Value::Text(value.to_string()));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, Value::Text(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Value::Int(value.into()));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, Value::Int(value.into()));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.push(field, Value::Int(value));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        let value = i128::try_from(value).map_or(Value::Text(value.to_string()), Value::Int);
        self.push(field, value);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, Value::Float(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Value::Bool(value));
    }
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let level = *event.metadata().level();
        if self.journal {
            write!(writer, "<{}>", priority(level))?;
        }
        let mut time = String::new();
        if !self.journal {
            SystemTime.format_time(&mut Writer::new(&mut time))?;
        }
        match self.format {
            LogFormat::Text => self.text(&mut writer, &time, level, &fields)?,
            LogFormat::Logfmt => logfmt(&mut writer, &time, level, &fields)?,
            LogFormat::Json => json(&mut writer, &time, level, &fields)?,
        }
        writeln!(writer)
    }
}

/// The sd-daemon(3) priority of `level`.
fn priority(level: tracing::Level) -> u8 {
    match level {
        tracing::Level::ERROR => 3,
        tracing::Level::WARN => 4,
        tracing::Level::INFO => 6,
        tracing::Level::DEBUG | tracing::Level::TRACE => 7,
    }
}

impl Lines {
    /// `TIME LEVEL message key=value ...`: the level right-aligned in five columns, the
    /// message as it is (its control characters escaped), the values as logfmt writes them.
    fn text(
        &self,
        w: &mut Writer<'_>,
        time: &str,
        level: tracing::Level,
        f: &Fields,
    ) -> fmt::Result {
        if !time.is_empty() {
            write!(w, "{time} ")?;
        }
        let colour = match level {
            tracing::Level::ERROR => "31",
            tracing::Level::WARN => "33",
            tracing::Level::INFO => "32",
            tracing::Level::DEBUG => "34",
            tracing::Level::TRACE => "35",
        };
        if self.ansi {
            write!(w, "\x1b[{colour}m{:>5}\x1b[0m ", level.as_str())?;
        } else {
            write!(w, "{:>5} ", level.as_str())?;
        }
        write_escaped(w, &f.message)?;
        for (name, value) in &f.fields {
            write!(w, " {name}=")?;
            logfmt_value(w, value)?;
        }
        Ok(())
    }
}

/// `ts=TIME level=LEVEL msg=MESSAGE key=value ...`, as go-logfmt writes it.
fn logfmt(w: &mut Writer<'_>, time: &str, level: tracing::Level, f: &Fields) -> fmt::Result {
    if !time.is_empty() {
        write!(w, "ts={time} ")?;
    }
    write!(w, "level={} msg=", level.as_str().to_ascii_lowercase())?;
    logfmt_text(w, &f.message)?;
    for (name, value) in &f.fields {
        write!(w, " {name}=")?;
        logfmt_value(w, value)?;
    }
    Ok(())
}

/// `{"ts":TIME,"level":LEVEL,"msg":MESSAGE,"key":value,...}`.
fn json(w: &mut Writer<'_>, time: &str, level: tracing::Level, f: &Fields) -> fmt::Result {
    w.write_char('{')?;
    if !time.is_empty() {
        write!(w, "\"ts\":")?;
        quoted(w, time)?;
        w.write_char(',')?;
    }
    write!(
        w,
        "\"level\":\"{}\",\"msg\":",
        level.as_str().to_ascii_lowercase()
    )?;
    quoted(w, &f.message)?;
    for (name, value) in &f.fields {
        w.write_char(',')?;
        quoted(w, name)?;
        w.write_char(':')?;
        match value {
            Value::Text(text) => quoted(w, text)?,
            Value::Int(n) => write!(w, "{n}")?,
            Value::Float(x) if x.is_finite() => write!(w, "{x}")?,
            Value::Float(x) => quoted(w, &x.to_string())?,
            Value::Bool(b) => write!(w, "{b}")?,
        }
    }
    w.write_char('}')
}

/// A logfmt value: bare where it may be, else quoted (go-logfmt quotes a value that is
/// empty or holds a space, `=`, `"` or any character at or below the space).
fn logfmt_value(w: &mut Writer<'_>, value: &Value) -> fmt::Result {
    match value {
        Value::Text(text) => logfmt_text(w, text),
        Value::Int(n) => write!(w, "{n}"),
        Value::Float(x) => write!(w, "{x}"),
        Value::Bool(b) => write!(w, "{b}"),
    }
}

/// A logfmt string value, bare or quoted as [`logfmt_value`] says.
fn logfmt_text(w: &mut Writer<'_>, text: &str) -> fmt::Result {
    let bare = !text.is_empty()
        && !text
            .chars()
            .any(|c| c <= ' ' || c == '=' || c == '"' || c.is_control());
    if bare {
        return w.write_str(text);
    }
    quoted(w, text)
}

/// `text` quoted, as logfmt and JSON both quote a string: `"` and `\` escaped, `\n`,
/// `\r`, `\t`, and every other control character as `\u00XX`.
fn quoted(w: &mut Writer<'_>, text: &str) -> fmt::Result {
    w.write_char('"')?;
    for c in text.chars() {
        match c {
            '"' => w.write_str("\\\"")?,
            '\\' => w.write_str("\\\\")?,
            '\n' => w.write_str("\\n")?,
            '\r' => w.write_str("\\r")?,
            '\t' => w.write_str("\\t")?,
            c if c.is_control() => write!(w, "\\u{:04x}", u32::from(c))?,
            c => w.write_char(c)?,
        }
    }
    w.write_char('"')
}

/// `text` with every control character escaped (a message in the text format, unquoted).
fn write_escaped(w: &mut Writer<'_>, text: &str) -> fmt::Result {
    for c in text.chars() {
        match c {
            '\n' => w.write_str("\\n")?,
            '\r' => w.write_str("\\r")?,
            '\t' => w.write_str("\\t")?,
            c if c.is_control() => write!(w, "\\x{:02x}", u32::from(c))?,
            c => w.write_char(c)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The lines a subscriber wrote.
    #[derive(Clone, Default)]
    struct Output(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Output {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Output {
        type Writer = Output;
        fn make_writer(&'w self) -> Output {
            self.clone()
        }
    }

    /// What `log` writes in `format` (under journald where `journal`).
    fn logged(format: LogFormat, journal: bool, log: impl FnOnce()) -> String {
        let out = Output::default();
        let lines = Lines {
            format,
            journal,
            ansi: false,
        };
        tracing::subscriber::with_default(
            subscriber(tracing::Level::INFO, lines, out.clone()).0,
            log,
        );
        let text = String::from_utf8(out.0.lock().expect("lock").clone()).expect("UTF-8");
        text
    }

    /// An awkward event: a message and values with spaces, quotes, `=`, a backslash,
    /// control characters, an empty value and numbers.
    fn awkward_event() {
        let device = "pthread-haswell-AMD EPYC (Portable Computing Language)";
        let path = "/srv/a \"b\"=c\\d\te\u{1b}[2K";
        tracing::warn!(
            camera = %"front",
            device = %device,
            path = %path,
            empty = %"",
            frames = 42u64,
            ratio = 0.5f64,
            up = true,
            "replay {path}: not an image"
        );
    }

    /// A logfmt line as go-logfmt writes it: bare values where they may be, quoted and
    /// escaped where not; under journald the priority in front and no time.
    #[test]
    fn logfmt_lines_quote_and_escape_as_go_logfmt() {
        let text = logged(LogFormat::Logfmt, false, awkward_event);
        let (time, line) = text
            .strip_prefix("ts=")
            .expect("ts first")
            .split_once(' ')
            .expect("more");
        assert!(time.ends_with('Z') && time.len() >= 20, "{text}");
        let want = concat!(
            r#"level=warn msg="replay /srv/a \"b\"=c\\d\te\u001b[2K: not an image" camera=front "#,
            r#"device="pthread-haswell-AMD EPYC (Portable Computing Language)" "#,
            r#"path="/srv/a \"b\"=c\\d\te\u001b[2K" empty="" frames=42 ratio=0.5 up=true"#,
            "\n"
        );
        assert_eq!(line, want);
        let journal = logged(LogFormat::Logfmt, true, awkward_event);
        assert_eq!(journal, format!("<4>{want}"));
    }

    /// Every JSON line is one object that serde_json parses, numbers and booleans as such.
    #[test]
    fn json_lines_are_objects_with_every_value_whole() {
        let device = "pthread-haswell-AMD EPYC (Portable Computing Language)";
        let path = "/srv/a \"b\"=c\\d\te\u{1b}[2K";
        let text = logged(LogFormat::Json, false, awkward_event);
        assert_eq!(text.matches('\n').count(), 1, "{text:?}");
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(v["level"], "warn");
        assert_eq!(v["msg"], format!("replay {path}: not an image"));
        assert_eq!(v["camera"], "front");
        assert_eq!(v["device"], device);
        assert_eq!(v["path"], path);
        assert_eq!(v["empty"], "");
        assert_eq!(v["frames"], 42);
        assert_eq!(v["ratio"], 0.5);
        assert_eq!(v["up"], true);
        assert!(v["ts"].as_str().is_some_and(|t| t.ends_with('Z')), "{text}");
        let journal = logged(LogFormat::Json, true, awkward_event);
        let v: serde_json::Value =
            serde_json::from_str(journal.strip_prefix("<4>").expect("priority")).expect("JSON");
        assert!(v.get("ts").is_none(), "{journal}");
    }

    /// The text format keeps its layout for people, with values quoted as logfmt's.
    #[test]
    fn text_lines_quote_values_that_need_it() {
        let text = logged(LogFormat::Text, false, awkward_event);
        let (time, rest) = text.split_once(' ').expect("a time first");
        assert!(time.ends_with('Z'), "{text}");
        assert!(
            rest.starts_with(
                " WARN replay /srv/a \"b\"=c\\d\\te\\x1b[2K: not an image camera=front "
            ),
            "{text}"
        );
        assert!(
            rest.contains(r#" device="pthread-haswell-AMD EPYC (Portable Computing Language)" "#),
            "{text}"
        );
        assert!(
            rest.contains(r#" empty="" frames=42 ratio=0.5 up=true"#),
            "{text}"
        );
    }

    /// Resilience round 2, item 8: a newline in a replay image's file name split the
    /// warning, and the forged line's `<3>` gave it priority "err" under journald;
    /// carriage returns went out raw. In every format.
    #[test]
    fn round2_8_a_file_name_cannot_forge_a_log_line() {
        let name = "x.png\n<3>edgesight: camera 'front' failed\r\x1b[2Kok";
        for (format, _) in LogFormat::NAMES.map(|(n, f)| (f, n)) {
            for journal in [true, false] {
                let text = logged(format, journal, || {
                    tracing::warn!(camera = %name, "replay /srv/{name}: not an image");
                });
                assert_eq!(text.matches('\n').count(), 1, "one line: {text:?}");
                assert!(text.ends_with('\n'), "{text:?}");
                assert!(!text.contains('\r') && !text.contains('\x1b'), "{text:?}");
                let quoted = r#""x.png\n<3>edgesight: camera 'front' failed\r\u001b[2Kok""#;
                assert!(text.contains(quoted), "the field, quoted: {text:?}");
                if format == LogFormat::Text {
                    let escaped =
                        r"replay /srv/x.png\n<3>edgesight: camera 'front' failed\r\x1b[2Kok";
                    assert!(text.contains(escaped), "the message: {text:?}");
                }
                assert_eq!(
                    text.starts_with("<4>"),
                    journal,
                    "the priority only under journald: {text:?}"
                );
            }
        }
    }
}
