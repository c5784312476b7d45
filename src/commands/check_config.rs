//! `edgesight check-config`: the checks `run` makes before it starts, and the effective
//! settings printed as TOML, after what each drop-in set.

use std::path::{Path, PathBuf};

use anyhow::Result;

use edgesight::config::{self, Overrides, Settings};
use edgesight::daemon::series;
use edgesight::metrics::Tier;

/// The series each camera and the board will export, in both tiers, as TOML comments
/// after the settings (which stay a config `run` reads back the same).
fn series_comment(settings: &Settings) -> String {
    let default = series::count(settings, Tier::Default);
    let detail = series::count(settings, Tier::Detail);
    let mut out = format!(
        "\n# Series a scrape holds, default tier / detail tier ([metrics] tier = \"{}\"; \
         /metrics?collect[]=detail):\n",
        settings.metrics_tier.name()
    );
    for ((name, n), (_, d)) in default.cameras.iter().zip(&detail.cameras) {
        out.push_str(&format!("#   camera {name}: {n} / {d}\n"));
    }
    out.push_str(&format!(
        "#   board: {} / {}, and in the detail tier one for each HTTP handler and status \
         answered\n",
        default.board, detail.board
    ));
    out
}

/// The checks `run` makes before it starts (see [`config::validate`]), and the effective
/// settings.
pub(crate) fn check_config(file: &Path, web_config_file: Option<PathBuf>) -> Result<()> {
    let overrides = Overrides {
        web_config_file,
        ..Overrides::default()
    };
    let checked = config::validate(Some(file), &overrides)?;
    // Comments, so that the output stays a config that reads back as these settings.
    if !checked.origins.is_empty() {
        println!("# {}, then its drop-ins in order:", file.display());
        for origin in &checked.origins {
            println!("# {origin}");
        }
    }
    print!("{}", checked.settings.to_toml());
    print!("{}", series_comment(&checked.settings));
    for warning in &checked.warnings {
        eprintln!("{}: warning: {warning}", file.display());
    }
    eprintln!("{}: ok", file.display());
    Ok(())
}
