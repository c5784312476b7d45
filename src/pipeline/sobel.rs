//! Sobel stage: launches `sobel3x3` from `kernels/sobel.cl`, which writes dx, dy, the 8-bit
//! magnitude and the edge mask in one pass over luma, 16 pixels per work-item.

use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::Buffer;

use super::{Launch, Magnitude, PipelineOptions};
use crate::cl::{CallContext, ClError, Gpu, SOBEL_CL};
use crate::frame::FrameLayout;

/// Pixels one work-item computes; it reads 18 x 3 input pixels for them.
pub const PIXELS_PER_ITEM: usize = 16;

pub(super) struct SobelStage {
    kernel: Kernel,
    launch: Launch,
}

impl SobelStage {
    pub(super) fn new(gpu: &Gpu) -> Result<SobelStage, ClError> {
        let program = gpu.build(SOBEL_CL)?;
        let kernel = Kernel::create(&program, "sobel3x3").call("clCreateKernel")?;
        let launch = Launch::two_d(gpu, &kernel)?;
        Ok(SobelStage { kernel, launch })
    }

    /// `gradients` are dx and dy, `bytes` the magnitude and the edge mask; all dense.
    pub(super) fn enqueue(
        &self,
        gpu: &Gpu,
        luma: &Buffer<u8>,
        layout: &FrameLayout,
        options: &PipelineOptions,
        gradients: [&Buffer<i16>; 2],
        bytes: [&Buffer<u8>; 2],
    ) -> Result<Event, ClError> {
        let global = self.launch.global_2d(
            (layout.width as usize).div_ceil(PIXELS_PER_ITEM),
            layout.height as usize,
        );
        let l2 = i32::from(options.magnitude == Magnitude::L2);
        let threshold = i32::from(options.edge_threshold);
        unsafe {
            ExecuteKernel::new(&self.kernel)
                .set_arg(luma)
                .set_arg(&layout.width)
                .set_arg(&layout.width)
                .set_arg(&layout.height)
                .set_arg(&options.border.kernel_code())
                .set_arg(&l2)
                .set_arg(&threshold)
                .set_arg(gradients[0])
                .set_arg(gradients[1])
                .set_arg(bytes[0])
                .set_arg(bytes[1])
                .set_arg(&layout.width)
                .set_global_work_sizes(&global)
                .set_local_work_sizes(&self.launch.local)
                .enqueue_nd_range(&gpu.queue)
        }
        .call("clEnqueueNDRangeKernel(sobel3x3)")
    }
}
