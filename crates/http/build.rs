//! Build facts for `edgesight_build_info`: the source revision (`EDGESIGHT_REVISION`,
//! which the board builds pass into their container, else `git rev-parse` of this
//! checkout, else "unknown") and the compiler's version.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=EDGESIGHT_REVISION");
    let revision = std::env::var("EDGESIGHT_REVISION")
        .ok()
        .filter(|r| !r.trim().is_empty())
        .or_else(git_revision)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=EDGESIGHT_REVISION={}", revision.trim());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    // "rustc 1.95.0 (59807616e 2026-04-14)": the second word.
    let version = output(Command::new(rustc).arg("--version"))
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=EDGESIGHT_RUSTC_VERSION={version}");
}

/// The checkout's commit, and a rebuild when it moves.
fn git_revision() -> Option<String> {
    let git_dir = output(Command::new("git").args(["rev-parse", "--git-dir"]))?;
    let git_dir = std::path::Path::new(git_dir.trim());
    println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
    if let Some(reference) = std::fs::read_to_string(git_dir.join("HEAD"))
        .ok()
        .and_then(|h| h.strip_prefix("ref: ").map(|r| r.trim().to_string()))
    {
        println!(
            "cargo:rerun-if-changed={}",
            git_dir.join(reference).display()
        );
        println!(
            "cargo:rerun-if-changed={}",
            git_dir.join("packed-refs").display()
        );
    }
    output(Command::new("git").args(["rev-parse", "--short=12", "HEAD"]))
}

/// What `command` printed, where it ran and succeeded.
fn output(command: &mut Command) -> Option<String> {
    let out = command.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}
