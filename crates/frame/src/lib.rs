//! edgesight-frame: what a camera frame is, before any OpenCL touches it.
//!
//! Read [`frame`] first: the pixel formats a camera delivers ([`frame::PixelFormat`],
//! [`frame::CaptureFormat`]), a frame's geometry and its bounds ([`frame::FrameLayout`]),
//! OpenCV's RGB-to-grey weights, and why a frame was lost before the pipeline
//! ([`frame::DropReason`]). Then [`region`], the regions of interest a config or the
//! command line names, checked against a layout, and the features of their sums; and
//! [`files`], which opens the files a user names so that a FIFO, a device or a directory is
//! refused with its name.
//!
//! Nothing of the workspace sits below this crate; every other crate builds on it. It
//! holds no unsafe code.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod files;
pub mod frame;
pub mod region;
