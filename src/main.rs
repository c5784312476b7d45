//! The `edgesight` command line: `devices` lists what OpenCL and V4L2 offer, `process` runs
//! the pipeline on one image or raw frame and writes a report, pictures and raw outputs,
//! `capture` does the same for the last of N frames from a camera (or any frame source),
//! `bench` measures the pipeline per frame size beside a device copy of the same bytes;
//! `run` is the daemon and `check-config` checks its config file.
//!
//! Exit codes: 0 success, 2 bad input or usage (the message names the file, flag or
//! device), 1 anything else (an OpenCL failure).

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod bench;
mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser;

use edgesight::capture::{CaptureError, InvalidSource};
use edgesight::cl::ClError;
use edgesight::config::ConfigError;
use edgesight::frame::LayoutError;
use edgesight::input::InputError;
use edgesight::region::RegionError;

use cli::{Cli, Command};
use commands::capture::BadSource;
use commands::{BadOutDir, BadRoiName};

/// Blocks SIGTERM, SIGINT and SIGHUP before `main` runs, from the executable's
/// initialisers: `run` takes them with `sigwait`, and one that arrives while the program
/// is still starting (`systemctl reload` right after `start`) must wait for it rather than
/// end the process by its default action. `main` unblocks them for the other commands.
#[used]
#[link_section = ".init_array"]
static BLOCK_SIGNALS_FIRST: extern "C" fn() = block_signals_first;

extern "C" fn block_signals_first() {
    // Nothing can be reported this early; `run` blocks them again and reports a failure.
    let _ = edgesight::daemon::block_signals();
}

fn main() -> ExitCode {
    let cli = Cli::try_parse().unwrap_or_else(|e| with_suggestion(e).exit());
    if !matches!(cli.command, Command::Run(_)) {
        if let Err(e) = edgesight::daemon::unblock_signals() {
            eprintln!("edgesight: error: unblocking signals: {e}");
            return ExitCode::FAILURE;
        }
    }
    let result = match cli.command {
        Command::Devices => commands::devices::devices(),
        Command::Process(args) => commands::process::process(&args),
        Command::Bench(args) => commands::bench::bench(&args),
        Command::Run(args) => commands::run::run(args),
        Command::CheckConfig(args) => {
            commands::check_config::check_config(&args.file, args.web_config_file)
        }
        Command::Capture(args) => commands::capture::capture(&args),
        Command::Selftest(args) => commands::selftest::selftest(&args),
        Command::Kernels(args) => commands::kernels::kernels(&args),
        Command::Manpage(args) => {
            commands::manpage::manpage(args.dir.as_deref(), args.date.as_deref())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("edgesight: error: {err:#}");
            ExitCode::from(exit_code(&err))
        }
    }
}

/// 2 when the error is the user's input (file, size, ROI, device choice), else 1.
fn exit_code(err: &anyhow::Error) -> u8 {
    if is_bad_input(err) {
        2
    } else {
        1
    }
}

/// Whether `err` is the user's input (file, size, ROI, device choice).
fn is_bad_input(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.is::<InputError>()
            || e.is::<RegionError>()
            || e.is::<LayoutError>()
            || e.is::<BadOutDir>()
            || matches!(
                e.downcast_ref::<edgesight::files::WriteError>(),
                Some(edgesight::files::WriteError::NotRegular { .. })
            )
            || e.is::<ConfigError>()
            || e.is::<InvalidSource>()
            || e.is::<BadSource>()
            || e.is::<BadRoiName>()
            || matches!(
                e.downcast_ref::<CaptureError>(),
                Some(CaptureError::Source { .. })
            )
            || matches!(e.downcast_ref::<ClError>(), Some(ClError::NoDevice { .. }))
            || e.downcast_ref::<commands::process::InputsFailed>()
                .is_some_and(|f| f.all_bad_input)
    })
}

/// `e`, with the subcommand meant where clap has none to suggest: its own suggestions miss
/// two letters swapped (`rnu`), the commonest slip on a small keyboard.
fn with_suggestion(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use clap::CommandFactory;
    if e.kind() != ErrorKind::InvalidSubcommand || e.get(ContextKind::SuggestedSubcommand).is_some()
    {
        return e;
    }
    let Some(ContextValue::String(typed)) = e.get(ContextKind::InvalidSubcommand) else {
        return e;
    };
    let typed = typed.clone();
    let command = Cli::command();
    let nearest = command
        .get_subcommands()
        .map(|c| c.get_name())
        .filter(|name| edit_distance(&typed, name) <= 2.min(name.len() / 2))
        .min_by_key(|name| edit_distance(&typed, name));
    if let Some(name) = nearest {
        e.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::Strings(vec![name.to_string()]),
        );
    }
    e
}

/// Edits (insert, delete, replace, or swap two neighbours) from `a` to `b`.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swapped_and_missing_letters_are_one_edit() {
        assert_eq!(edit_distance("rnu", "run"), 1);
        assert_eq!(edit_distance("proces", "process"), 1);
        assert_eq!(edit_distance("devcies", "devices"), 1);
        assert_eq!(edit_distance("run", "run"), 0);
        assert_eq!(edit_distance("xyz", "run"), 3);
    }

    #[test]
    fn a_slip_of_the_keyboard_gets_the_subcommand_meant() {
        let e = with_suggestion(
            Cli::try_parse_from(["edgesight", "rnu"])
                .err()
                .expect("refused"),
        );
        assert!(
            e.to_string().contains("a similar subcommand exists: 'run'"),
            "{e}"
        );
        let e = with_suggestion(
            Cli::try_parse_from(["edgesight", "xyz"])
                .err()
                .expect("refused"),
        );
        assert!(!e.to_string().contains("similar"), "{e}");
    }
}
