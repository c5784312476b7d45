//! Integral stage: the integrals of luma, of its square and of its edge and foreground
//! pixels (edges and foreground counted from the magnitude and the device's Otsu
//! threshold, no mask read) in the compact blocked form `kernels/integral.cl` defines:
//! tiles of 16 x 16 pixels, per row, column and tile the prefixes over whole tiles (about
//! 2.6 bytes a pixel), and, only with the full images, each pixel's prefix within its tile
//! (8 more). The region stage (`regions.rs`) reads any rectangle's sums from them in O(1).
//!
//! Its rooms: `tiles` (the blocked form's geometry), `blocked` (its buffers on the
//! device), `tile_pass` (the first pass, in four layouts), `scans` (the sums over whole
//! tiles after it, in two families) and `host` (OpenCV's images assembled on the host for
//! `process --raw`).

mod blocked;
#[cfg(test)]
mod fixture;
mod host;
mod scans;
mod tile_pass;
mod tiles;

use std::sync::Arc;

use opencl3::event::Event;
use opencl3::memory::Buffer;
use opencl3::program::Program;

pub(super) use blocked::{Blocked, CornerParams, LeftParams, TopParams};
pub(super) use host::HostIntegrals;
pub(super) use tiles::Tiles;

use super::launch::StageContext;
use super::motion::TileParams;
use super::motion_tiles;
use super::{FullImages, IntegralLayout, PipelineError, Stage, Tuning};
use crate::cl::{ClError, Gpu, Record, INTEGRAL_MOTION_REGIONS_CL};
use edgesight_frame::frame::FrameLayout;
use scans::Scans;
use tile_pass::TilePass;

/// What the integrals and the region sums count, on the device: luma (its sum and squared
/// sum), its edges (`magnitude` at least `edge_threshold`) and its foreground (above the
/// threshold at word 256 of `results`, which the Otsu kernel wrote before). Luma and the
/// magnitude are dense, `pixels()` bytes each.
#[derive(Clone, Copy)]
pub(super) struct Counted<'a> {
    pub luma: &'a Buffer<u8>,
    pub magnitude: &'a Buffer<u8>,
    pub edge_threshold: u8,
    pub results: &'a Buffer<u32>,
}

/// The program of integral.cl, motion.cl and regions.cl, built once per device and set of
/// defines and shared by this stage, the motion stage and the region stage. Motion's bins
/// come from the host (`-DDIFF_BINS`, [`motion_tiles::defines`]). For Bifrost
/// and Valhall Malis ([`IntegralLayout::TileParts`]) the region sums count a corner's rows
/// a byte at a time (`-DNARROW_ROWS`), motion splits its tiles without a 64-bit division
/// (`-DNO_LONG_DIVISION`), and without the full images the tile pass is built without its
/// stores of local (`-DNO_LOCAL`): each keeps a kernel from spilling registers there
/// (regions.cl, motion.cl, integral.cl). The other layouts take `keep_local` as it
/// comes, so that their tuning builds one program for both.
pub(super) fn program(
    gpu: &Gpu,
    tuning: &Tuning,
    images: FullImages,
) -> Result<Arc<Program>, ClError> {
    let mali = tuning.integral_layout == IntegralLayout::TileParts;
    let motion = motion_tiles::defines();
    let defines = [
        tuning.stores.define(),
        motion.as_str(),
        if mali {
            "-DNARROW_ROWS -DNO_LONG_DIVISION"
        } else {
            ""
        },
        if mali && images == FullImages::Discarded {
            "-DNO_LOCAL"
        } else {
            ""
        },
    ]
    .into_iter()
    .filter(|d| !d.is_empty())
    .collect::<Vec<_>>()
    .join(" ");
    gpu.build_with(INTEGRAL_MOTION_REGIONS_CL, &defines)
}

pub(super) struct IntegralStage {
    tile_pass: TilePass,
    scans: Scans,
    tiles: Tiles,
    blocked: Blocked,
}

impl IntegralStage {
    pub(super) fn new(
        gpu: &Gpu,
        layout: &FrameLayout,
        tuning: &Tuning,
        images: FullImages,
    ) -> Result<IntegralStage, PipelineError> {
        let tiles = Tiles::new(layout);
        let built = || -> Result<_, ClError> {
            let program = program(gpu, tuning, images)?;
            let tile_pass = TilePass::new(gpu, &program, tuning.integral_layout, &tiles, images)?;
            Ok((
                tile_pass,
                Scans::new(gpu, &program, tuning.integral_layout)?,
            ))
        };
        let (tile_pass, scans) = built().stage(Stage::Integral)?;
        Ok(IntegralStage {
            tile_pass,
            scans,
            tiles,
            blocked: Blocked::new(gpu, &tiles, images)?,
        })
    }

    /// Enqueues the blocked integrals of `counted`, handing each kernel's event to
    /// `event`. The pipeline, the only caller, passes the layout the stage was built for.
    pub(super) fn enqueue(
        &self,
        gpu: &Gpu,
        layout: &FrameLayout,
        counted: &Counted,
        motion: &TileParams,
        record: Record,
        mut event: impl FnMut(Option<Event>),
    ) -> Result<(), ClError> {
        event(
            self.tile_pass
                .enqueue(gpu, layout, counted, &self.blocked, record)?,
        );
        self.scans
            .enqueue(gpu, layout, &self.blocked, motion, record, event)
    }

    /// The blocked integrals the last frame's kernels wrote, for the region sums.
    pub(super) fn blocked(&self) -> &Blocked {
        &self.blocked
    }

    /// Whether each part's guard band is intact, by name.
    pub(super) fn guard_checks(&self, gpu: &Gpu) -> Result<[(&'static str, bool); 10], ClError> {
        self.blocked.guard_checks(gpu)
    }

    /// The bytes the stage's buffers hold on the device: the blocked integrals.
    pub(super) fn held_bytes(&self) -> Result<u64, ClError> {
        self.blocked.held_bytes()
    }

    /// Reads the blocked integrals back, local empty unless the full images are kept.
    pub(super) fn read_integrals(&self, gpu: &Gpu) -> Result<HostIntegrals, ClError> {
        self.blocked.read(gpu, self.tiles)
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{Frame, SIZES};
    use super::*;
    use crate::pipeline::{Pipeline, PipelineOptions, Setup, Tuning};
    use edgesight_frame::frame::PixelFormat;

    fn gpu() -> Gpu {
        crate::cl::test_gpu()
    }

    /// Every layout's kernels write every part exactly as integral.cl defines it, padding
    /// included (and local's counts modulo 256 at a tile's last pixel); without the full
    /// images they write no local at all (its buffers are empty, and their guard bands
    /// intact).
    #[test]
    fn every_layout_writes_the_parts_as_defined() {
        let gpu = gpu();
        for (k, (w, h)) in SIZES.into_iter().chain([(641, 479)]).enumerate() {
            for edge_threshold in [0, 64] {
                let frame = Frame::new(w, h, 100 + k as u64, edge_threshold);
                let want = frame.blocked();
                let layout = FrameLayout::packed(PixelFormat::Grey, w as u32, h as u32);
                let options = PipelineOptions {
                    edge_threshold,
                    ..PipelineOptions::default()
                };
                for ((_, tuning), images) in Tuning::ALL
                    .into_iter()
                    .flat_map(|t| [(t, FullImages::Kept), (t, FullImages::Discarded)])
                {
                    let label = format!("{w}x{h}, {edge_threshold}, {tuning:?}, {images:?}");
                    let setup = Setup { tuning, images };
                    let mut pipeline =
                        Pipeline::with_setup(&gpu, layout, options, &[], setup).unwrap();
                    let mut slot = pipeline.new_slot(&gpu).unwrap();
                    slot.write_bytes(&gpu, &frame.luma).unwrap();
                    pipeline.process(&gpu, &slot).unwrap();
                    let got = pipeline.integral.read_integrals(&gpu).unwrap();
                    if images == FullImages::Kept {
                        assert!(got.sum == want.sum, "local sum, {label}");
                        assert!(got.sqsum == want.sqsum, "local sqsum, {label}");
                        assert!(got.edges == want.edges, "local edges, {label}");
                        assert!(got.foreground == want.foreground, "local fg, {label}");
                    } else {
                        assert!(got.sum.is_empty() && got.sqsum.is_empty(), "{label}");
                        assert!(got.edges.is_empty() && got.foreground.is_empty(), "{label}");
                    }
                    let broken = pipeline.broken_guards(&gpu).unwrap();
                    assert!(broken.is_empty(), "{broken:?}, {label}");
                    assert!(got.left == want.left, "left, {label}");
                    assert!(got.left_sq == want.left_sq, "left_sq, {label}");
                    assert!(got.top == want.top, "top, {label}");
                    assert!(got.top_sq == want.top_sq, "top_sq, {label}");
                    assert!(got.corner == want.corner, "corner, {label}");
                    assert!(got.corner_sq == want.corner_sq, "corner_sq, {label}");
                }
            }
        }
    }
}
