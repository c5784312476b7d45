//! Luma stage: launches `kernels/luma.cl` (one kernel per pixel format) or, for raw sensor
//! formats, `kernels/raw.cl` (wide mono and Bayer mosaics, built for the way their samples
//! are stored), 16 pixels per work-item, writing dense 8-bit luma (stride = width). Frames
//! whose first plane is luma (grey, NV12, YU12, ...) packed at stride = width never come
//! here: they already are dense luma, and the pipeline reads them in place.

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;

use super::{Launch, Tuning};
use crate::cl::{launch, ClError, Gpu, KernelSource, Record, LUMA_CL, RAW_CL};
use crate::kernel_params;
use edgesight_frame::frame::{FrameLayout, PixelFormat, Samples};

/// Pixels one work-item converts (the uchar16 fast path).
pub(crate) const PIXELS_PER_ITEM: usize = 16;

kernel_params! {
    /// The parameters of luma.cl's kernels, and of raw.cl's, which add `raw`.
    struct LumaParams<'a> {
        src: &'a Buffer<u8>,
        src_stride: u32,
        width: u32,
        height: u32,
        dst: &'a Buffer<u8>,
        dst_stride: u32,
        raw: Option<RawParams>,
    }
}

kernel_params! {
    /// What `kernels/raw.cl` takes besides the images: the sample's bits beyond 8 and the
    /// red pixel's column and row parities (0 for mono).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct RawParams {
        shift: u32,
        red_x: u32,
        red_y: u32,
    }
}

pub(super) struct LumaStage {
    kernel: Kernel,
    launch: Launch,
    /// The raw kernels' extra arguments; `None` for `luma.cl`'s kernels.
    raw: Option<RawParams>,
}

/// The kernel file, kernel and the `-D` option of the samples' storage for `format`.
pub(super) fn kernel_for(format: PixelFormat) -> (KernelSource, &'static str, &'static str) {
    let samples_define = |samples: Samples| match samples {
        Samples::Eight => "",
        Samples::Le10 | Samples::Le12 | Samples::Le16 => "-DSAMPLES_LE16",
        Samples::Mipi10 => "-DSAMPLES_MIPI10",
        Samples::Mipi12 => "-DSAMPLES_MIPI12",
    };
    let luma = |name| (LUMA_CL, name, "");
    match format {
        f if f.luma_plane_first() => luma("luma_grey"),
        PixelFormat::Yuyv => luma("luma_yuyv"),
        PixelFormat::Uyvy => luma("luma_uyvy"),
        PixelFormat::Rgb24 => luma("luma_rgb24"),
        PixelFormat::Bgr24 => luma("luma_bgr24"),
        PixelFormat::Rgbx => luma("luma_rgbx"),
        PixelFormat::Bgrx => luma("luma_bgrx"),
        PixelFormat::Mono(samples) => (RAW_CL, "luma_mono", samples_define(samples)),
        PixelFormat::Bayer(_, samples) => (RAW_CL, "luma_bayer", samples_define(samples)),
        other => unreachable!("{other} has its luma plane first"),
    }
}

impl LumaStage {
    pub(super) fn new(
        gpu: &Gpu,
        format: PixelFormat,
        tuning: &Tuning,
    ) -> Result<LumaStage, ClError> {
        let (source, name, samples) = kernel_for(format);
        let defines = [tuning.stores.define(), samples]
            .into_iter()
            .filter(|d| !d.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let program = gpu.build_with(source, &defines)?;
        let kernel = gpu.kernel(&program, name)?;
        let launch = Launch::two_d(gpu, &kernel)?;
        let raw = match format {
            PixelFormat::Mono(samples) => Some(RawParams {
                shift: samples.shift(),
                red_x: 0,
                red_y: 0,
            }),
            PixelFormat::Bayer(cfa, samples) => {
                let (red_x, red_y) = cfa.red_at();
                Some(RawParams {
                    shift: samples.shift(),
                    red_x,
                    red_y,
                })
            }
            _ => None,
        };
        Ok(LumaStage {
            kernel,
            launch,
            raw,
        })
    }

    pub(super) fn enqueue(
        &self,
        gpu: &Gpu,
        src: &Buffer<u8>,
        layout: &FrameLayout,
        luma: &Buffer<u8>,
        record: Record,
    ) -> Result<Option<Event>, ClError> {
        let global = self.launch.global_2d(
            (layout.width as usize).div_ceil(PIXELS_PER_ITEM),
            layout.height as usize,
        );
        let params = LumaParams {
            src,
            src_stride: layout.stride,
            width: layout.width,
            height: layout.height,
            dst: luma,
            dst_stride: layout.width,
            raw: self.raw,
        };
        // SAFETY: `LumaParams` is the kernel's parameter list (the raw ones exactly for
        // raw.cl's kernels). A work-item returns unless x < width and y < height and
        // touches only row y's `width` pixels (raw.cl's Bayer kernel also rows y - 1 and
        // y + 1, clamped into the frame), `src_stride` apart in `src` (at most
        // `frame_bytes()` bytes, stride >= a row's bytes by `FrameLayout::validate`) and
        // `width` apart in `dst` (`pixels()` bytes). The pipeline, the only caller, keeps
        // the sizes: `src` is a slot it checked holds `frame_bytes()` and `luma` its
        // buffer of `pixels()`, both for the one layout it was built for and always passes.
        unsafe {
            launch(
                gpu,
                &self.kernel,
                &params,
                &global,
                &self.launch.local,
                "clEnqueueNDRangeKernel(luma)",
                record,
            )
        }
    }
}
