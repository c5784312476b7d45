//! The log: `tracing` to stderr, at a level, with each line's syslog priority in front
//! under systemd, and every field (the message too) escaped so that a value cannot make
//! a line of its own.
//!
//! File names, device names, region names and the text of errors reach the log: a
//! newline in one would start a new line, and under journald a forged `<3>` at its start
//! would give that line priority "err". Control characters are written as `\n`, `\r`,
//! `\t` or `\x1b`-style escapes instead.

use std::fmt;

use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{DefaultFields, Writer};
use tracing_subscriber::fmt::{FormatEvent, FormatFields, MakeWriter};

/// Installs the `tracing` subscriber at `level`, or at `RUST_LOG` when that names a level
/// (error, warn, info, debug, trace). Per-module filters are left out to keep the binary
/// small. Under systemd (stderr is the journal's stream) each line starts with its
/// syslog priority (`<3>` for errors), so `journalctl -p err` finds the errors.
pub fn init_logging(level: &str) {
    let parse = |s: &str| s.trim().parse::<tracing::Level>().ok();
    let level = std::env::var("RUST_LOG")
        .ok()
        .and_then(|s| parse(&s))
        .or_else(|| parse(level))
        .unwrap_or(tracing::Level::INFO);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // A second call (tests) keeps the first subscriber.
    let _ = tracing::subscriber::set_global_default(subscriber(
        level,
        stderr_is_journal(),
        ansi,
        std::io::stderr,
    ));
}

/// The subscriber [`init_logging`] installs, writing to `writer`.
fn subscriber<W>(
    level: tracing::Level,
    journal: bool,
    ansi: bool,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(writer)
        // Colour codes only for a terminal: journald and log files get plain text.
        .with_ansi(ansi)
        .with_target(false)
        .fmt_fields(EscapedFields);
    if journal {
        // journald stamps each line itself.
        let format = tracing_subscriber::fmt::format()
            .with_target(false)
            .without_time();
        Box::new(builder.event_format(JournalPriority(format)).finish())
    } else {
        Box::new(builder.finish())
    }
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

/// Prefixes each line with its sd-daemon(3) priority.
struct JournalPriority<F>(F);

impl<S, N, F> FormatEvent<S, N> for JournalPriority<F>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        let priority = match *event.metadata().level() {
            tracing::Level::ERROR => 3,
            tracing::Level::WARN => 4,
            tracing::Level::INFO => 6,
            tracing::Level::DEBUG | tracing::Level::TRACE => 7,
        };
        write!(writer, "<{priority}>")?;
        self.0.format_event(ctx, writer, event)
    }
}

/// `tracing`'s own field format, with control characters escaped.
struct EscapedFields;

impl<'w> FormatFields<'w> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        // The inner writer is plain: the field names lose their italics on a terminal,
        // the level keeps its colour.
        let mut escaping = Escaping(writer);
        DefaultFields::new().format_fields(Writer::new(&mut escaping), fields)
    }
}

/// Passes text on with every control character escaped.
struct Escaping<W>(W);

impl<W: fmt::Write> fmt::Write for Escaping<W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some(i) = rest.find(|c: char| c.is_control()) {
            self.0.write_str(&rest[..i])?;
            let c = rest[i..].chars().next().expect("found at i");
            match c {
                '\n' => self.0.write_str("\\n")?,
                '\r' => self.0.write_str("\\r")?,
                '\t' => self.0.write_str("\\t")?,
                c => write!(self.0, "\\x{:02x}", u32::from(c))?,
            }
            rest = &rest[i + c.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The lines a subscriber wrote.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Lines {
        type Writer = Lines;
        fn make_writer(&'w self) -> Lines {
            self.clone()
        }
    }

    /// Resilience round 2, item 8: a newline in a replay image's file name split the
    /// warning, and the forged line's `<3>` gave it priority "err" under journald;
    /// carriage returns went out raw.
    #[test]
    fn round2_8_a_file_name_cannot_forge_a_log_line() {
        for journal in [true, false] {
            let lines = Lines::default();
            let subscriber = subscriber(tracing::Level::INFO, journal, false, lines.clone());
            let name = "x.png\n<3>edgesight: camera 'front' failed\r\x1b[2Kok";
            tracing::subscriber::with_default(subscriber, || {
                tracing::warn!(camera = %name, "replay /srv/{name}: not an image");
            });
            let text = String::from_utf8(lines.0.lock().expect("lock").clone()).expect("UTF-8");
            assert_eq!(text.matches('\n').count(), 1, "one line: {text:?}");
            assert!(text.ends_with('\n'), "{text:?}");
            assert!(!text.contains('\r') && !text.contains('\x1b'), "{text:?}");
            let escaped = r"x.png\n<3>edgesight: camera 'front' failed\r\x1b[2Kok";
            assert_eq!(
                text.matches(escaped).count(),
                2,
                "message and field: {text:?}"
            );
            assert_eq!(
                text.starts_with("<4>"),
                journal,
                "the priority only under journald: {text:?}"
            );
        }
    }
}
