//! edgesight-http: what the daemon shows the world.
//!
//! Read [`mailbox`] first: what a camera thread hands the HTTP side (the latest results,
//! snapshots on request, the camera's state), the only place the two meet. Then
//! [`metrics`], the Prometheus registry and its tiers; [`server`], the HTTP server on
//! tokio (its routes, `/metrics`, the JSON API, the status page, TLS and basic auth); and
//! [`report`], what `process` writes. [`priority`] lowers a thread's nice value.
//!
//! Below: `edgesight-core` (the results, health and motion reports) and `edgesight-frame`.
//! Above: the `edgesight` binary's daemon, which fills the mailboxes and the registry.
//!
//! Unsafe code is refused but in three places, each allowed where it stands with its
//! reason: `setpriority` ([`priority`]), the open-file limit's raise and the unread bytes
//! of a connection (`FIONREAD`), both in the server.

#![deny(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod mailbox;
pub mod metrics;
pub mod priority;
pub mod report;
pub mod server;

/// The source revision this binary was built from: `EDGESIGHT_REVISION` where the build
/// was given one (the board builds pass it into their container), else the checkout's
/// commit, else "unknown".
pub const REVISION: &str = env!("EDGESIGHT_REVISION");

/// The version of the compiler that built this binary.
pub const RUSTC_VERSION: &str = env!("EDGESIGHT_RUSTC_VERSION");

/// The version `edgesight_build_info`, the status page and `selftest --json` show:
/// the workspace's version and [`REVISION`], as `0.1.0-1a2b3c4d5e6f`.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "-", env!("EDGESIGHT_REVISION"));
