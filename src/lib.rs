//! edgesight: vision telemetry for ARM boards with Mali GPUs.
//!
//! Camera frames land in host-mapped OpenCL buffers ([`cl::FrameSlot`]), a chain of
//! OpenCL kernels ([`pipeline::Pipeline`]) turns each into luma, Sobel gradients, a
//! histogram, an Otsu mask and integral images, and the small results
//! ([`pipeline::FrameResult`]) are what the rest of the program publishes. [`reference`](mod@reference)
//! holds the plain-Rust definition of every stage, the oracle the kernels are tested
//! against.
//!
//! The work is split into crates, each building only on those below it:
//! - `edgesight-frame`: [`frame`], [`region`], [`files`];
//! - `edgesight-core`: [`cl`], [`pipeline`], [`reference`](mod@reference), [`selftest`], [`health`],
//!   [`motion_events`], [`board`];
//! - `edgesight-capture`: [`capture`], [`input`], [`jpeg`];
//! - `edgesight-http`: [`server`], [`mailbox`], [`metrics`], [`report`], [`priority`];
//! - this crate: the daemon ([`daemon`]), its config ([`config`]), [`events`], [`mqtt`],
//!   [`pages`] and [`measure`], and the `edgesight` binary on top.
//!
//! The rooms of the crates below are re-exported here under their own names
//! (`edgesight::pipeline`), so that the binary, the tests and the benchmarks name every
//! room the same way.

// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub use edgesight_capture::{capture, input, jpeg};
pub use edgesight_core::{
    board, cl, health, kernel_params, motion_events, pipeline, reference, selftest,
};
pub use edgesight_frame::{files, frame, region};
pub use edgesight_http::{mailbox, metrics, priority, report, server};
pub use edgesight_http::{REVISION, RUSTC_VERSION, VERSION};

pub mod config;
pub mod daemon;
pub mod events;
pub mod measure;
pub mod mqtt;
pub mod pages;
