//! `edgesight run`: the daemon (in the library's `daemon` module), given the config file and
//! the command line's overrides.

use anyhow::Result;

use edgesight::config::Overrides;

use crate::cli::RunArgs;

/// Runs the daemon until SIGTERM or SIGINT.
pub(crate) fn run(args: RunArgs) -> Result<()> {
    edgesight::daemon::run(
        args.config,
        Overrides {
            source: args.source,
            listen: args.listen,
            log_level: args.log_level,
            log_format: args.log_format,
            web_config_file: args.web_config_file,
        },
    )
}
