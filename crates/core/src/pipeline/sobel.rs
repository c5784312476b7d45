//! Sobel stage: launches `sobel3x3` (runs of 16 pixels per work-item: 8 runs on CPUs,
//! taken two at a time as pairs of bytes (`-DBYTE_PAIRS`), 1 under the Mali tuning), or on
//! other GPUs `sobel3x3_quad` (four, in two rows, for widths
//! that are a multiple of 4) or `sobel3x3_pixel` (one, any width), from `kernels/sobel.cl`;
//! each writes the 8-bit magnitude in one pass over luma, and dx, dy and the edge mask
//! where the pipeline keeps its full images ([`FullImages`]): the stage then owns those
//! images, and its program is built without them otherwise, so a launch always passes
//! exactly the buffers its kernel takes. With [`OtsuLaunch::BesideSobel`] the launch also
//! runs Otsu's threshold, in one more row of work-groups (`-DOTSU_BESIDE`).

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;

use super::buffers::DeviceImage;
use super::otsu::ThresholdParams;
use super::{
    otsu, FullImages, Launch, Magnitude, OtsuLaunch, PipelineOptions, SobelLayout, Tuning,
    SOBEL_RUN_CHUNKS,
};
use crate::cl::{launch, ClError, Gpu, Record, OTSU_SOBEL_CL, SOBEL_CL};
use crate::kernel_params;
use edgesight_frame::frame::FrameLayout;

/// Pixels in one of `sobel3x3`'s runs; it reads 18 x 3 input pixels for them.
pub(crate) const PIXELS_PER_ITEM: usize = 16;

kernel_params! {
    /// The parameters of sobel.cl's kernels: the gradients and the edge mask exactly where
    /// the program was built to write them, Otsu's exactly where it runs the threshold.
    struct SobelParams<'a> {
        src: &'a Buffer<u8>,
        src_stride: u32,
        width: u32,
        height: u32,
        border: i32,
        l2: i32,
        edge_threshold: i32,
        gradients: Option<Gradients<'a>>,
        mag: &'a Buffer<u8>,
        edges: Option<&'a Buffer<u8>>,
        dst_stride: u32,
        otsu: Option<ThresholdParams<'a>>,
    }
}

kernel_params! {
    struct Gradients<'a> {
        dx: &'a Buffer<i16>,
        dy: &'a Buffer<i16>,
    }
}

/// The images only a pipeline that keeps its full images has Sobel write.
pub(super) struct SobelImages {
    pub(super) dx: DeviceImage<i16>,
    pub(super) dy: DeviceImage<i16>,
    pub(super) edges: DeviceImage<u8>,
}

pub(super) struct SobelStage {
    kernel: Kernel,
    launch: Launch,
    /// Pixels along a row and rows one work-item of `kernel` computes.
    item: [usize; 2],
    /// The one-pixel kernel for widths the four-pixel one cannot take.
    fallback: Option<(Kernel, Launch)>,
    /// dx, dy and the edge mask, `pixels` elements each, when the pipeline keeps them: the
    /// kernels were built to take and write them exactly when these exist.
    kept: Option<SobelImages>,
    /// Whether the kernels were built to run Otsu's threshold in their first row of
    /// work-groups (and take its three arguments).
    otsu: OtsuLaunch,
}

/// What Otsu's threshold reads and writes (otsu.cl's `hist` and `results`).
pub(super) struct OtsuBuffers<'a> {
    pub(super) hist: &'a Buffer<u32>,
    pub(super) results: &'a Buffer<u32>,
}

impl SobelStage {
    /// The stage for frames of `pixels` pixels; with [`FullImages::Kept`] it allocates dx,
    /// dy and the edge mask, otherwise its kernels neither take nor write them.
    pub(super) fn new(
        gpu: &Gpu,
        tuning: &Tuning,
        images: FullImages,
        pixels: usize,
    ) -> Result<SobelStage, ClError> {
        let (name, item, runs) = match tuning.sobel_layout {
            SobelLayout::Vector16 => ("sobel3x3", [PIXELS_PER_ITEM, 1], String::new()),
            SobelLayout::Vector16Runs => (
                "sobel3x3",
                [PIXELS_PER_ITEM * SOBEL_RUN_CHUNKS, 1],
                format!("-DCHUNKS_PER_ITEM={SOBEL_RUN_CHUNKS} -DBYTE_PAIRS"),
            ),
            // A work-item loads each source row once for all its rows.
            SobelLayout::FourPixelsPerItem { rows } => {
                ("sobel3x3_quad", [4, rows], format!("-DQUAD_ROWS={rows}"))
            }
        };
        let beside = tuning.otsu_kernel_launch() == Some(OtsuLaunch::BesideSobel);
        let (source, otsu_defines) = if beside {
            (
                OTSU_SOBEL_CL,
                format!("-DOTSU_BESIDE {}", otsu::arithmetic_define(gpu, tuning)),
            )
        } else {
            (SOBEL_CL, String::new())
        };
        let defines = format!(
            "{} {} {runs} {otsu_defines}",
            tuning.stores.define(),
            images.sobel_defines()
        );
        let program = gpu.build_with(source, defines.trim())?;
        let kernel = gpu.kernel(&program, name)?;
        let launch = Launch::two_d(gpu, &kernel)?;
        let fallback = match tuning.sobel_layout {
            SobelLayout::Vector16 | SobelLayout::Vector16Runs => None,
            SobelLayout::FourPixelsPerItem { .. } => {
                let k = gpu.kernel(&program, "sobel3x3_pixel")?;
                let launch = Launch::two_d(gpu, &k)?;
                Some((k, launch))
            }
        };
        let kept = match images {
            FullImages::Kept => Some(SobelImages {
                dx: DeviceImage::new(gpu, pixels)?,
                dy: DeviceImage::new(gpu, pixels)?,
                edges: DeviceImage::new(gpu, pixels)?,
            }),
            FullImages::Discarded => None,
        };
        // otsu_group takes one work-item a lane of its reduction.
        if beside {
            for l in std::iter::once(&launch).chain(fallback.as_ref().map(|(_, l)| l)) {
                assert!(l.local[0] * l.local[1] <= otsu::THRESHOLD_GROUP_MAX);
            }
        }
        Ok(SobelStage {
            kernel,
            launch,
            item,
            fallback,
            kept,
            otsu: if beside {
                OtsuLaunch::BesideSobel
            } else {
                OtsuLaunch::Own
            },
        })
    }

    /// dx, dy and the edge mask, when this stage keeps them.
    pub(super) fn kept(&self) -> Option<&SobelImages> {
        self.kept.as_ref()
    }

    /// Writes the magnitude, dense, into `magnitude` (dx, dy and the edge mask, when kept,
    /// into the stage's own images), and where the stage was built to, Otsu's threshold of
    /// the counts in `otsu.hist` into `otsu.results`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn enqueue(
        &self,
        gpu: &Gpu,
        luma: &Buffer<u8>,
        layout: &FrameLayout,
        options: &PipelineOptions,
        magnitude: &Buffer<u8>,
        otsu: OtsuBuffers,
        record: Record,
    ) -> Result<Option<Event>, ClError> {
        // The four-pixel kernel needs rows that start 4-byte aligned.
        let (k, geometry, [per_item, rows_per_item]) = match &self.fallback {
            Some((k, geometry)) if !layout.width.is_multiple_of(4) => (k, geometry, [1, 1]),
            _ => (&self.kernel, &self.launch, self.item),
        };
        let mut global = geometry.global_2d(
            (layout.width as usize).div_ceil(per_item),
            (layout.height as usize).div_ceil(rows_per_item),
        );
        if self.otsu == OtsuLaunch::BesideSobel {
            // Otsu's row of work-groups, before Sobel's.
            global[1] += geometry.local[1];
        }
        let width = layout.width;
        let params = SobelParams {
            src: luma,
            src_stride: width,
            width,
            height: layout.height,
            border: options.border.kernel_code(),
            l2: i32::from(options.magnitude == Magnitude::L2),
            edge_threshold: i32::from(options.edge_threshold),
            gradients: self.kept.as_ref().map(|kept| Gradients {
                dx: &kept.dx.buf,
                dy: &kept.dy.buf,
            }),
            mag: magnitude,
            edges: self.kept.as_ref().map(|kept| &kept.edges.buf),
            dst_stride: width,
            otsu: (self.otsu == OtsuLaunch::BesideSobel).then_some(ThresholdParams {
                hist: otsu.hist,
                total: width * layout.height,
                results: otsu.results,
            }),
        };
        // SAFETY: `SobelParams` is the kernel's parameter list: the stage holds dx, dy and
        // edges exactly when its program was built without NO_GRADIENTS and NO_EDGE_MASK,
        // and passes Otsu's exactly when it was built with OTSU_BESIDE. Both strides are
        // `width`. A work-item of Sobel's groups returns unless its first pixel lies
        // inside the frame; for each of its rows y < height (one, or the quad kernel's
        // QUAD_ROWS, cut at the height) it reads rows y - 1 to y + 1 clamped (or, in
        // constant mode, skipped) at the frame's edges and columns within [0, width), and
        // writes its pixels of row y: within `pixels()` elements of luma and of each
        // output. dx, dy and edges hold the `pixels` elements the stage was built for, and
        // the pipeline, the only caller, passes its magnitude of `pixels()` bytes and luma
        // of as many (or a grey slot of at least that at stride = width), all made for the
        // one layout it was built for (and this stage with it) and always passes. With
        // OTSU_BESIDE the first row of groups is Otsu's (Sobel's rows are shifted past it,
        // as `global` adds it): its first group, of at most 256 work-items (asserted when
        // the stage was built), reads and clears the 256 counts of `hist` and writes 257
        // words of `results`, whatever `total` is; the pipeline passes its buffers of 256
        // and 257 words.
        unsafe {
            launch(
                gpu,
                k,
                &params,
                &global,
                &geometry.local,
                "clEnqueueNDRangeKernel(sobel3x3)",
                record,
            )
        }
    }
}
