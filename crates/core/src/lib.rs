//! edgesight-core: the OpenCL kernels, the pipeline that chains them on a frame, and the
//! plain-Rust definition every stage is checked against.
//!
//! Read in this order:
//! - [`cl`]: the OpenCL plumbing: device choice, the queue, program builds and their cache,
//!   [`cl::FrameSlot`] (a host-mapped buffer a source fills), kernel launches whose
//!   parameters are structs ([`kernel_params!`]), and the one layer of raw calls;
//! - [`pipeline`]: one file per stage, [`pipeline::Pipeline`] enqueueing them in one order
//!   on the camera's queue, and [`pipeline::FrameResult`], the small results the rest of
//!   the program publishes;
//! - [`reference`](mod@reference): each stage one pixel at a time, the oracle of the kernel tests,
//!   `selftest` and `verify_every`;
//! - [`selftest`]: every stage on a device against [`reference`](mod@reference);
//! - [`health`] (the tamper detectors) and [`motion_events`] (motion per region), which
//!   read a frame's results;
//! - [`board`]: what a board says of itself outside OpenCL.
//!
//! Below: `edgesight-frame` (formats, layouts, regions). Above: `edgesight-capture`, which
//! fills the slots, `edgesight-http`, which serves the results, and the `edgesight` binary.
//! The kernels' sources (`kernels/*.cl`) are compiled into this crate.

#![deny(missing_docs)]
// Every unsafe block says why it is sound; the raw OpenCL calls are in one module,
// `cl::raw`, and a launch's safety is argued by its caller.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod board;
pub mod cl;
pub mod health;
pub mod motion_events;
pub mod pipeline;
pub mod reference;
pub mod selftest;
