//! Luma stage: launches `kernels/luma.cl`, one kernel per pixel format, 16 pixels per
//! work-item, writing dense 8-bit luma (stride = width). Grey frames and NV12's Y plane
//! packed at stride = width never come here: they already are dense luma, and the pipeline
//! reads them in place.

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;

use super::{Launch, Tuning};
use crate::cl::{launch, CallContext, ClError, Gpu, Record, LUMA_CL};
use crate::frame::{FrameLayout, PixelFormat};

/// Pixels one work-item converts (the uchar16 fast path).
pub(crate) const PIXELS_PER_ITEM: usize = 16;

pub(super) struct LumaStage {
    kernel: Kernel,
    launch: Launch,
}

fn kernel_name(format: PixelFormat) -> &'static str {
    match format {
        PixelFormat::Grey | PixelFormat::Nv12 => "luma_grey",
        PixelFormat::Yuyv => "luma_yuyv",
        PixelFormat::Uyvy => "luma_uyvy",
        PixelFormat::Rgb24 => "luma_rgb24",
        PixelFormat::Bgr24 => "luma_bgr24",
        PixelFormat::Rgbx => "luma_rgbx",
        PixelFormat::Bgrx => "luma_bgrx",
    }
}

impl LumaStage {
    pub(super) fn new(
        gpu: &Gpu,
        format: PixelFormat,
        tuning: &Tuning,
    ) -> Result<LumaStage, ClError> {
        let program = gpu.build_with(LUMA_CL, tuning.stores.define())?;
        let kernel = Kernel::create(&program, kernel_name(format)).call("clCreateKernel")?;
        let launch = Launch::two_d(gpu, &kernel)?;
        Ok(LumaStage { kernel, launch })
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
        // SAFETY: the arguments are luma.cl's (src, src_stride, width, height, dst,
        // dst_stride). A work-item returns unless x < width and y < height and touches only
        // row y's `width` pixels, `src_stride` apart in `src` (at most `frame_bytes()`
        // bytes, stride >= a row's bytes by `FrameLayout::validate`) and `width` apart in
        // `dst` (`pixels()` bytes). The pipeline, the only caller, keeps the sizes: `src`
        // is a slot it checked holds `frame_bytes()` and `luma` its buffer of `pixels()`,
        // both for the one layout it was built for and always passes.
        unsafe {
            launch(
                gpu,
                &self.kernel,
                &[
                    src,
                    &layout.stride,
                    &layout.width,
                    &layout.height,
                    luma,
                    &layout.width,
                ],
                &global,
                &self.launch.local,
                "clEnqueueNDRangeKernel(luma)",
                record,
            )
        }
    }
}
