//! What V4L2 capture devices the machine has, for `edgesight devices`: each node's card,
//! driver, capture type, and per pixel format its frame sizes and rates.

use std::path::{Path, PathBuf};

use super::device::Device;
use super::formats::{capture_format, fourcc_name, RateRange, SizeRange};
use edgesight_frame::frame::{CaptureFormat, Size};

/// One pixel format of a device.
#[derive(Clone, Debug)]
pub struct FormatInfo {
    /// The driver's four-character code, e.g. `YUYV` or `MJPG` (`?` for unprintable bytes).
    pub fourcc: String,
    /// The driver's description of the format (VIDIOC_ENUM_FMT).
    pub description: String,
    /// edgesight's name for it, where edgesight reads it.
    pub format: Option<CaptureFormat>,
    /// Sizes, each with the rates offered at it (rates only for discrete sizes).
    pub sizes: Vec<(SizeRange, Vec<RateRange>)>,
}

/// One capture device node.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// The device node, e.g. `/dev/video0`.
    pub path: PathBuf,
    /// The device's name as its driver reports it (VIDIOC_QUERYCAP's `card`).
    pub card: String,
    /// The driver's name, e.g. `uvcvideo`.
    pub driver: String,
    /// Where the device is attached (VIDIOC_QUERYCAP's `bus_info`, e.g. a USB port).
    pub bus: String,
    /// Whether the node captures multi-planar buffers rather than single-planar ones.
    pub multiplanar: bool,
    /// The pixel formats the node offers, in the driver's order.
    pub formats: Vec<FormatInfo>,
}

/// `/dev/video*` in numeric order.
pub fn nodes() -> Vec<PathBuf> {
    let mut nodes: Vec<(u32, PathBuf)> = std::fs::read_dir("/dev")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let n = name.strip_prefix("video")?.parse().ok()?;
                    Some((n, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    nodes.sort();
    nodes.into_iter().map(|(_, p)| p).collect()
}

/// Why a node cannot be described as a capture device.
#[derive(Debug, thiserror::Error)]
pub enum NotACaptureNode {
    /// The node cannot be opened.
    #[error("{0}")]
    Open(std::io::Error),
    /// VIDIOC_QUERYCAP is refused: not a V4L2 device.
    #[error("VIDIOC_QUERYCAP: {0}")]
    QueryCaps(std::io::Error),
    /// A V4L2 device without video capture (an output or a metadata node).
    #[error("{card} ({driver}): not a video capture node")]
    NoCapture {
        /// The device's name as its driver reports it (VIDIOC_QUERYCAP's `card`).
        card: String,
        /// The driver's name, e.g. `uvcvideo`.
        driver: String,
    },
}

/// Describes the capture node at `path`; `Err` says why it is not one (or not readable).
pub fn describe(path: &Path) -> Result<DeviceInfo, NotACaptureNode> {
    let dev = Device::open(path).map_err(NotACaptureNode::Open)?;
    let caps = dev.query_caps().map_err(NotACaptureNode::QueryCaps)?;
    let Some(buf_type) = caps.capture_type() else {
        return Err(NotACaptureNode::NoCapture {
            card: caps.card,
            driver: caps.driver,
        });
    };
    let formats = dev
        .formats(buf_type)
        .into_iter()
        .map(|(code, description)| {
            let sizes = dev
                .frame_sizes(code)
                .into_iter()
                .map(|range| {
                    let rates = match range {
                        SizeRange::Discrete(size) => dev.frame_rates(code, size),
                        SizeRange::Stepwise { .. } => Vec::new(),
                    };
                    (range, rates)
                })
                .collect();
            FormatInfo {
                fourcc: fourcc_name(code),
                description,
                format: capture_format(code),
                sizes,
            }
        })
        .collect();
    Ok(DeviceInfo {
        path: path.to_path_buf(),
        card: caps.card,
        driver: caps.driver,
        bus: caps.bus,
        multiplanar: buf_type == super::BufType::CaptureMplane,
        formats,
    })
}

fn rate_text(rates: &[RateRange]) -> String {
    let text: Vec<String> = rates
        .iter()
        .map(|r| match r {
            RateRange::Discrete(f) => format!("{}", (f * 1000.0).round() / 1000.0),
            RateRange::Range { min, max } => format!("{min:.3}-{max:.3}"),
        })
        .collect();
    text.join(", ")
}

fn size_text(s: Size) -> String {
    format!("{}x{}", s.width, s.height)
}

/// The listing as lines of text.
pub fn lines(info: &DeviceInfo) -> Vec<String> {
    let mut out = vec![format!(
        "{}: {} ({}, {}){}",
        info.path.display(),
        info.card,
        info.driver,
        info.bus,
        if info.multiplanar {
            ", multi-planar"
        } else {
            ""
        }
    )];
    for f in &info.formats {
        let name = f
            .format
            .map(|p| format!(" = {p}"))
            .unwrap_or_else(|| " (not read by edgesight)".into());
        out.push(format!("  {} {}{name}", f.fourcc, f.description));
        for (range, rates) in &f.sizes {
            match range {
                SizeRange::Discrete(size) if rates.is_empty() => {
                    out.push(format!("      {}", size_text(*size)))
                }
                SizeRange::Discrete(size) => out.push(format!(
                    "      {} at {} fps",
                    size_text(*size),
                    rate_text(rates)
                )),
                SizeRange::Stepwise { min, max, step } => out.push(format!(
                    "      {} to {} in steps of {}x{}",
                    size_text(*min),
                    size_text(*max),
                    step.0,
                    step.1
                )),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_that_is_no_capture_device_says_why() {
        let missing = describe(Path::new("/nonexistent/video9")).unwrap_err();
        assert!(
            matches!(&missing, NotACaptureNode::Open(e) if e.kind() == std::io::ErrorKind::NotFound),
            "{missing:?}"
        );
        let null = describe(Path::new("/dev/null")).unwrap_err();
        assert!(matches!(null, NotACaptureNode::QueryCaps(_)), "{null:?}");
        assert!(null.to_string().starts_with("VIDIOC_QUERYCAP: "), "{null}");
    }
}
