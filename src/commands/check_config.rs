//! `edgesight check-config`: the checks `run` makes before it starts, and the effective
//! settings printed as TOML.

use std::path::{Path, PathBuf};

use anyhow::Result;

use edgesight::config::{self, Overrides};

/// The checks `run` makes before it starts (see [`config::validate`]), and the effective
/// settings.
pub(crate) fn check_config(file: &Path, web_config_file: Option<PathBuf>) -> Result<()> {
    let overrides = Overrides {
        web_config_file,
        ..Overrides::default()
    };
    let checked = config::validate(Some(file), &overrides)?;
    print!("{}", checked.settings.to_toml());
    for warning in &checked.warnings {
        eprintln!("{}: warning: {warning}", file.display());
    }
    eprintln!("{}: ok", file.display());
    Ok(())
}
