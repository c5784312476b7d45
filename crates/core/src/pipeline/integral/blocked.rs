//! The blocked integrals' buffers on the device, each part with its guard band, and their
//! reading back.

use opencl3::memory::Buffer;

use super::{HostIntegrals, Tiles};
use crate::cl::{ClError, Gpu};
use crate::kernel_params;
use crate::pipeline::buffers::held_bytes;
use crate::pipeline::{DeviceImage, FullImages};

kernel_params! {
    /// Left's sums and squared sums, as the kernels that take them name them.
    pub(in crate::pipeline) struct LeftParams<'a> {
        left: &'a Buffer<u32>,
        left_sq: &'a Buffer<u64>,
    }
}

kernel_params! {
    /// Top's sums and squared sums.
    pub(in crate::pipeline) struct TopParams<'a> {
        top: &'a Buffer<u32>,
        top_sq: &'a Buffer<u64>,
    }
}

kernel_params! {
    /// Corner's sums and squared sums.
    pub(in crate::pipeline) struct CornerParams<'a> {
        corner: &'a Buffer<u32>,
        corner_sq: &'a Buffer<u64>,
    }
}

/// Local per pixel (u16 sum, u32 squared sum, u8 edge and foreground counts), empty unless
/// the full images are kept; left, top and corner with their u32 sum, edges and foreground
/// as three planes of one buffer and their u64 squared sums in another. Every part is as
/// long as [`Tiles`] says for the stage's layout, which is what the kernels' SAFETY
/// comments rely on.
pub(in crate::pipeline) struct Blocked {
    pub(super) sum: DeviceImage<u16>,
    pub(super) sqsum: DeviceImage<u32>,
    pub(super) edges: DeviceImage<u8>,
    pub(super) foreground: DeviceImage<u8>,
    pub(in crate::pipeline) left: DeviceImage<u32>,
    pub(in crate::pipeline) left_sq: DeviceImage<u64>,
    pub(in crate::pipeline) top: DeviceImage<u32>,
    pub(in crate::pipeline) top_sq: DeviceImage<u64>,
    pub(in crate::pipeline) corner: DeviceImage<u32>,
    pub(in crate::pipeline) corner_sq: DeviceImage<u64>,
}

impl Blocked {
    pub(super) fn new(gpu: &Gpu, t: &Tiles, images: FullImages) -> Result<Blocked, ClError> {
        let local = t.local_len(images);
        Ok(Blocked {
            sum: DeviceImage::new(gpu, local)?,
            sqsum: DeviceImage::new(gpu, local)?,
            edges: DeviceImage::new(gpu, local)?,
            foreground: DeviceImage::new(gpu, local)?,
            left: DeviceImage::new(gpu, 3 * t.left_len())?,
            left_sq: DeviceImage::new(gpu, t.left_len())?,
            top: DeviceImage::new(gpu, 3 * t.top_len())?,
            top_sq: DeviceImage::new(gpu, t.top_len())?,
            corner: DeviceImage::new(gpu, 3 * t.corner_len())?,
            corner_sq: DeviceImage::new(gpu, t.corner_len())?,
        })
    }

    /// Left, as kernel parameters.
    pub(in crate::pipeline) fn left_params(&self) -> LeftParams<'_> {
        LeftParams {
            left: &self.left.buf,
            left_sq: &self.left_sq.buf,
        }
    }

    /// Top, as kernel parameters.
    pub(in crate::pipeline) fn top_params(&self) -> TopParams<'_> {
        TopParams {
            top: &self.top.buf,
            top_sq: &self.top_sq.buf,
        }
    }

    /// Corner, as kernel parameters.
    pub(in crate::pipeline) fn corner_params(&self) -> CornerParams<'_> {
        CornerParams {
            corner: &self.corner.buf,
            corner_sq: &self.corner_sq.buf,
        }
    }

    pub(super) fn held_bytes(&self) -> Result<u64, ClError> {
        Ok(held_bytes(&self.sum.buf)?
            + held_bytes(&self.sqsum.buf)?
            + held_bytes(&self.edges.buf)?
            + held_bytes(&self.foreground.buf)?
            + held_bytes(&self.left.buf)?
            + held_bytes(&self.left_sq.buf)?
            + held_bytes(&self.top.buf)?
            + held_bytes(&self.top_sq.buf)?
            + held_bytes(&self.corner.buf)?
            + held_bytes(&self.corner_sq.buf)?)
    }

    /// Whether each part's guard band is intact, by name.
    pub(super) fn guard_checks(&self, gpu: &Gpu) -> Result<[(&'static str, bool); 10], ClError> {
        Ok([
            ("integral_sum", self.sum.guard_intact(gpu)?),
            ("integral_sqsum", self.sqsum.guard_intact(gpu)?),
            ("integral_edges", self.edges.guard_intact(gpu)?),
            ("integral_foreground", self.foreground.guard_intact(gpu)?),
            ("integral_left", self.left.guard_intact(gpu)?),
            ("integral_left_sq", self.left_sq.guard_intact(gpu)?),
            ("integral_top", self.top.guard_intact(gpu)?),
            ("integral_top_sq", self.top_sq.guard_intact(gpu)?),
            ("integral_corner", self.corner.guard_intact(gpu)?),
            ("integral_corner_sq", self.corner_sq.guard_intact(gpu)?),
        ])
    }

    /// Every part read back, laid out as `tiles` says; local empty unless the full images
    /// are kept.
    pub(super) fn read(&self, gpu: &Gpu, tiles: Tiles) -> Result<HostIntegrals, ClError> {
        Ok(HostIntegrals {
            tiles,
            sum: self.sum.read(gpu)?,
            sqsum: self.sqsum.read(gpu)?,
            edges: self.edges.read(gpu)?,
            foreground: self.foreground.read(gpu)?,
            left: self.left.read(gpu)?,
            left_sq: self.left_sq.read(gpu)?,
            top: self.top.read(gpu)?,
            top_sq: self.top_sq.read(gpu)?,
            corner: self.corner.read(gpu)?,
            corner_sq: self.corner_sq.read(gpu)?,
        })
    }
}
