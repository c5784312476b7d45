//! Luma stage: launches `kernels/luma.cl`, one kernel per pixel format, 16 pixels per
//! work-item, writing dense 8-bit luma (stride = width). Grey frames and NV12's Y plane
//! packed at stride = width never come here: they already are dense luma, and the pipeline
//! reads them in place.

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;

use super::{arg, enqueue_kernel, Launch};
use crate::cl::{CallContext, ClError, Gpu, LUMA_CL};
use crate::frame::{FrameLayout, PixelFormat};

/// Pixels one work-item converts (the uchar16 fast path).
pub const PIXELS_PER_ITEM: usize = 16;

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
    pub(super) fn new(gpu: &Gpu, format: PixelFormat) -> Result<LumaStage, ClError> {
        let program = gpu.build(LUMA_CL)?;
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
    ) -> Result<Event, ClError> {
        let global = self.launch.global_2d(
            (layout.width as usize).div_ceil(PIXELS_PER_ITEM),
            layout.height as usize,
        );
        let k = &self.kernel;
        unsafe {
            arg(k, 0, src)?;
            arg(k, 1, &layout.stride)?;
            arg(k, 2, &layout.width)?;
            arg(k, 3, &layout.height)?;
            arg(k, 4, luma)?;
            arg(k, 5, &layout.width)?;
        }
        enqueue_kernel(
            gpu,
            k,
            &global,
            &self.launch.local,
            "clEnqueueNDRangeKernel(luma)",
        )
    }
}
