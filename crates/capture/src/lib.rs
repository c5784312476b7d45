//! edgesight-capture: where frames come from.
//!
//! Read [`capture`] first: the [`capture::FrameSource`] contract every source keeps (a
//! frame lands in a [`FrameSlot`](edgesight_core::cl::FrameSlot) the pipeline reads), the
//! source specs and the builder from their parts; then its sources: V4L2 cameras
//! (`capture::v4l2`), recordings (`capture::replay`) and the test pattern
//! (`capture::pattern`). [`input`] reads one frame from an image or raw file, and [`jpeg`]
//! decodes JPEG images to luma with libjpeg-turbo, loaded at run time.
//!
//! Below: `edgesight-core` (the slots and the OpenCL errors) and `edgesight-frame`.
//! Above: the `edgesight` binary, whose camera threads own a source each.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod capture;
pub mod input;
pub mod jpeg;
