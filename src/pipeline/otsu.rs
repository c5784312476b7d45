//! Otsu stage: `otsu_threshold` (one work-item; the threshold never leaves the device) and
//! `binarize` (16 pixels per work-item) from `kernels/otsu.cl`.

use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::Buffer;

use super::Launch;
use crate::cl::{CallContext, ClError, Gpu, OTSU_CL};
use crate::frame::FrameLayout;

/// Pixels one binarize work-item writes.
pub const PIXELS_PER_ITEM: usize = 16;

pub(super) struct OtsuStage {
    threshold_kernel: Kernel,
    binarize_kernel: Kernel,
    binarize_launch: Launch,
}

impl OtsuStage {
    pub(super) fn new(gpu: &Gpu) -> Result<OtsuStage, ClError> {
        let program = gpu.build(OTSU_CL)?;
        let threshold_kernel = Kernel::create(&program, "otsu_threshold").call("clCreateKernel")?;
        let binarize_kernel = Kernel::create(&program, "binarize").call("clCreateKernel")?;
        let binarize_launch = Launch::two_d(gpu, &binarize_kernel)?;
        Ok(OtsuStage {
            threshold_kernel,
            binarize_kernel,
            binarize_launch,
        })
    }

    pub(super) fn enqueue_threshold(
        &self,
        gpu: &Gpu,
        hist: &Buffer<u32>,
        layout: &FrameLayout,
        threshold: &Buffer<u32>,
    ) -> Result<Event, ClError> {
        let total = layout.width * layout.height;
        unsafe {
            ExecuteKernel::new(&self.threshold_kernel)
                .set_arg(hist)
                .set_arg(&total)
                .set_arg(threshold)
                .set_global_work_size(1)
                .set_local_work_size(1)
                .enqueue_nd_range(&gpu.queue)
        }
        .call("clEnqueueNDRangeKernel(otsu_threshold)")
    }

    pub(super) fn enqueue_binarize(
        &self,
        gpu: &Gpu,
        luma: &Buffer<u8>,
        layout: &FrameLayout,
        threshold: &Buffer<u32>,
        mask: &Buffer<u8>,
    ) -> Result<Event, ClError> {
        let global = self.binarize_launch.global_2d(
            (layout.width as usize).div_ceil(PIXELS_PER_ITEM),
            layout.height as usize,
        );
        unsafe {
            ExecuteKernel::new(&self.binarize_kernel)
                .set_arg(luma)
                .set_arg(&layout.width)
                .set_arg(&layout.width)
                .set_arg(&layout.height)
                .set_arg(threshold)
                .set_arg(mask)
                .set_arg(&layout.width)
                .set_global_work_sizes(&global)
                .set_local_work_sizes(&self.binarize_launch.local)
                .enqueue_nd_range(&gpu.queue)
        }
        .call("clEnqueueNDRangeKernel(binarize)")
    }
}
