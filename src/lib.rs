//! edgesight: vision telemetry for ARM boards with Mali GPUs.
//!
//! Camera frames land in host-mapped OpenCL buffers ([`cl::FrameSlot`]), a chain of
//! OpenCL kernels ([`pipeline::Pipeline`]) turns each into luma, Sobel gradients, a
//! histogram, an Otsu mask and integral images, and the small results ([`pipeline::FrameResult`])
//! are what the rest of the program publishes. [`reference`] holds the plain-Rust
//! definition of every stage, the oracle the kernels are tested against.

// Every unsafe block says why it is sound; an unsafe fn's body is no unsafe block.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod bench;
pub mod board;
pub mod capture;
pub mod cl;
pub mod config;
pub mod daemon;
pub mod events;
pub mod files;
pub mod frame;
pub mod health;
pub mod input;
pub mod jpeg;
pub mod mailbox;
pub mod metrics;
pub mod motion_events;
pub mod mqtt;
pub mod pages;
pub mod pipeline;
pub(crate) mod priority;
pub mod reference;
pub mod region;
pub mod report;
pub mod selftest;
pub mod server;
