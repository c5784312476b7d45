//! Sobel stage: launches `sobel3x3` (16 pixels per work-item) or `sobel3x3_pixel` (one, for
//! GPUs) from `kernels/sobel.cl`, which write dx, dy, the 8-bit magnitude and the edge mask
//! in one pass over luma.

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;

use super::{arg, enqueue_kernel, Launch, Magnitude, PipelineOptions, SobelLayout, Tuning};
use crate::cl::{CallContext, ClError, Gpu, SOBEL_CL};
use crate::frame::FrameLayout;

/// Pixels one work-item computes; it reads 18 x 3 input pixels for them.
pub const PIXELS_PER_ITEM: usize = 16;

pub(super) struct SobelStage {
    kernel: Kernel,
    launch: Launch,
    pixels_per_item: usize,
}

impl SobelStage {
    pub(super) fn new(gpu: &Gpu, tuning: &Tuning) -> Result<SobelStage, ClError> {
        let program = gpu.build(SOBEL_CL)?;
        let (name, pixels_per_item) = match tuning.sobel_layout {
            SobelLayout::Vector16 => ("sobel3x3", PIXELS_PER_ITEM),
            SobelLayout::PixelPerItem => ("sobel3x3_pixel", 1),
        };
        let kernel = Kernel::create(&program, name).call("clCreateKernel")?;
        let launch = Launch::two_d(gpu, &kernel)?;
        Ok(SobelStage {
            kernel,
            launch,
            pixels_per_item,
        })
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
            (layout.width as usize).div_ceil(self.pixels_per_item),
            layout.height as usize,
        );
        let l2 = i32::from(options.magnitude == Magnitude::L2);
        let threshold = i32::from(options.edge_threshold);
        let k = &self.kernel;
        unsafe {
            arg(k, 0, luma)?;
            arg(k, 1, &layout.width)?;
            arg(k, 2, &layout.width)?;
            arg(k, 3, &layout.height)?;
            arg(k, 4, &options.border.kernel_code())?;
            arg(k, 5, &l2)?;
            arg(k, 6, &threshold)?;
            arg(k, 7, gradients[0])?;
            arg(k, 8, gradients[1])?;
            arg(k, 9, bytes[0])?;
            arg(k, 10, bytes[1])?;
            arg(k, 11, &layout.width)?;
        }
        enqueue_kernel(
            gpu,
            k,
            &global,
            &self.launch.local,
            "clEnqueueNDRangeKernel(sobel3x3)",
        )
    }
}
