//! Sobel stage: launches `sobel3x3` (16 pixels per work-item, CPUs), or on GPUs
//! `sobel3x3_quad` (four, for widths that are a multiple of 4) or `sobel3x3_pixel` (one, any
//! width), from `kernels/sobel.cl`; each writes dx, dy, the 8-bit magnitude and the edge
//! mask in one pass over luma.

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
    /// The one-pixel kernel for widths the four-pixel one cannot take.
    fallback: Option<(Kernel, Launch)>,
}

impl SobelStage {
    pub(super) fn new(gpu: &Gpu, tuning: &Tuning) -> Result<SobelStage, ClError> {
        let program = gpu.build_with(SOBEL_CL, tuning.stores.define())?;
        let (name, pixels_per_item) = match tuning.sobel_layout {
            SobelLayout::Vector16 => ("sobel3x3", PIXELS_PER_ITEM),
            SobelLayout::FourPixelsPerItem => ("sobel3x3_quad", 4),
        };
        let kernel = Kernel::create(&program, name).call("clCreateKernel")?;
        let launch = Launch::two_d(gpu, &kernel)?;
        let fallback = match tuning.sobel_layout {
            SobelLayout::Vector16 => None,
            SobelLayout::FourPixelsPerItem => {
                let k = Kernel::create(&program, "sobel3x3_pixel").call("clCreateKernel")?;
                let launch = Launch::two_d(gpu, &k)?;
                Some((k, launch))
            }
        };
        Ok(SobelStage {
            kernel,
            launch,
            pixels_per_item,
            fallback,
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
        // The four-pixel kernel needs rows that start 4-byte aligned.
        let (k, launch, per_item) = match &self.fallback {
            Some((k, launch)) if !layout.width.is_multiple_of(4) => (k, launch, 1),
            _ => (&self.kernel, &self.launch, self.pixels_per_item),
        };
        let global = launch.global_2d(
            (layout.width as usize).div_ceil(per_item),
            layout.height as usize,
        );
        let l2 = i32::from(options.magnitude == Magnitude::L2);
        let threshold = i32::from(options.edge_threshold);
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
            &launch.local,
            "clEnqueueNDRangeKernel(sobel3x3)",
        )
    }
}
