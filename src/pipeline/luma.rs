//! Luma stage: launches `kernels/luma.cl`, one kernel per pixel format, 16 pixels per
//! work-item, writing dense 8-bit luma (stride = width).

use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::Buffer;

use super::Launch;
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
        unsafe {
            ExecuteKernel::new(&self.kernel)
                .set_arg(src)
                .set_arg(&layout.stride)
                .set_arg(&layout.width)
                .set_arg(&layout.height)
                .set_arg(luma)
                .set_arg(&layout.width)
                .set_global_work_sizes(&global)
                .set_local_work_sizes(&self.launch.local)
                .enqueue_nd_range(&gpu.queue)
        }
        .call("clEnqueueNDRangeKernel(luma)")
    }
}
