//! Otsu stage: `otsu_threshold` (one work-group; the threshold never leaves the device) and
//! `binarize` (16 pixels per work-item) from `kernels/otsu.cl`.

use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::Buffer;

use super::{Launch, OtsuArithmetic, Tuning};
use crate::cl::{CallContext, ClError, Gpu, OTSU_CL};
use crate::frame::FrameLayout;

/// Pixels one binarize work-item writes.
pub const PIXELS_PER_ITEM: usize = 16;

pub(super) struct OtsuStage {
    threshold_kernel: Kernel,
    threshold_launch: Launch,
    binarize_kernel: Kernel,
    binarize_launch: Launch,
}

/// Work-items of the threshold's one work-group: one per histogram bin.
const THRESHOLD_GROUP_SIZE: usize = 256;

impl OtsuStage {
    pub(super) fn new(gpu: &Gpu, tuning: &Tuning) -> Result<OtsuStage, ClError> {
        let native =
            tuning.otsu_arithmetic == OtsuArithmetic::NativeWhereAvailable && gpu.info.fp64;
        let program = gpu.build_with(OTSU_CL, if native { "-DOTSU_FP64" } else { "" })?;
        let threshold_kernel = Kernel::create(&program, "otsu_threshold").call("clCreateKernel")?;
        let binarize_kernel = Kernel::create(&program, "binarize").call("clCreateKernel")?;
        let binarize_launch = Launch::two_d(gpu, &binarize_kernel)?;
        let threshold_launch = Launch::one_d(gpu, &threshold_kernel, THRESHOLD_GROUP_SIZE)?;
        Ok(OtsuStage {
            threshold_kernel,
            threshold_launch,
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
                .set_global_work_size(self.threshold_launch.local[0])
                .set_local_work_size(self.threshold_launch.local[0])
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
