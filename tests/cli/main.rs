//! The `edgesight` binary end to end: `process` on the bundled sample against the reference,
//! the files it writes, and one clear error line with exit code 2 for each kind of bad input.
//!
//! One test binary, a module per command or concern, so that the CLI's tests link once:
//! `process` (its outputs against the reference, every input kind, every tuning), `bench`,
//! `bad_input` (refusals of every command, one line each) and `device` (`devices`,
//! `selftest`, the tuning `check-config` prints). The helpers they share are below.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod bench;
mod device;
mod outputs;
mod process;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn edgesight(args: &[&str]) -> Output {
    common::gpu(); // sets POCL_CACHE_DIR for the child as well
    Command::new(env!("CARGO_BIN_EXE_edgesight"))
        .args(args)
        .output()
        .expect("run edgesight")
}

/// Runs edgesight, which must succeed (its output in the failure's message), and returns
/// its stdout.
fn edgesight_ok(args: &[&str]) -> String {
    let o = edgesight(args);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn sample() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/samples/scene.png").to_string()
}

/// Runs a command that must fail on bad input: exit code 2, one line naming `culprit`.
fn assert_bad_input(args: &[&str], culprit: &str) {
    let o = edgesight(args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: stderr {stderr}");
    assert!(
        stderr.contains(culprit),
        "{args:?}: stderr does not name '{culprit}': {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
}

/// Runs a command that must fail on bad input and returns its stderr, which must be the one
/// line `edgesight: error: {line}`.
fn bad_input_line(args: &[&str]) -> String {
    let o = edgesight(args);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?}: stderr {stderr}");
    stderr
}
