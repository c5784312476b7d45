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
    let cli = Cli::parse();
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
        Command::CheckConfig(args) => commands::check_config::check_config(&args.file),
        Command::Capture(args) => commands::capture::capture(&args),
        Command::Selftest(args) => commands::selftest::selftest(&args),
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
