//! Histogram stage: `histogram_count` from `kernels/histogram.cl`: a fixed number of
//! work-groups (a few per compute unit) each fill a local sub-histogram, with local atomics
//! or, one work-item per group, plain increments ([`HistogramCounting`]), and add it to the
//! histogram, which the Otsu kernel of the frame before left zeroed. The group count does
//! not depend on the frame size.

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem};

use super::{HistogramCounting, Launch, Tuning};
use crate::cl::{launch, CallContext, ClError, Gpu, HISTOGRAM_CL};
use crate::frame::FrameLayout;

/// Work-groups per compute unit: enough to keep every unit busy.
const GROUPS_PER_COMPUTE_UNIT: usize = 4;
/// Work-items per group we ask for when they share local atomics (fewer where the device
/// allows fewer).
const GROUP_SIZE: usize = 256;

pub(super) struct HistogramStage {
    kernel: Kernel,
    launch: Launch,
    groups: usize,
}

impl HistogramStage {
    pub(super) fn new(gpu: &Gpu, tuning: &Tuning) -> Result<HistogramStage, ClError> {
        let (defines, group_size) = match tuning.histogram_counting {
            HistogramCounting::LocalAtomics => ("", GROUP_SIZE),
            HistogramCounting::OneItemPerGroup => ("-DONE_ITEM_PER_GROUP", 1),
        };
        let program = gpu.build_with(HISTOGRAM_CL, defines)?;
        let kernel = Kernel::create(&program, "histogram_count").call("clCreateKernel")?;
        let launch = Launch::one_d(gpu, &kernel, group_size)?;
        let groups = (gpu.info.compute_units as usize * GROUPS_PER_COMPUTE_UNIT).clamp(1, 1024);
        Ok(HistogramStage {
            kernel,
            launch,
            groups,
        })
    }

    /// Enqueues the zeroing of `hist`, which the pipeline needs only when the last frame
    /// did not reach the Otsu kernel (that kernel leaves `hist` zeroed).
    pub(super) fn enqueue_clear(&self, gpu: &Gpu, hist: &Buffer<u32>) -> Result<Event, ClError> {
        let zero = 0u32;
        // SAFETY: `hist` holds 256 counts; the pattern outlives the call (OpenCL copies it).
        let cleared = unsafe {
            opencl3::command_queue::enqueue_fill_buffer(
                gpu.queue.get(),
                hist.get(),
                (&zero as *const u32).cast(),
                std::mem::size_of::<u32>(),
                0,
                256 * std::mem::size_of::<u32>(),
                0,
                std::ptr::null(),
            )
        }
        .map_err(opencl3::error_codes::ClError)
        .call("clEnqueueFillBuffer(histogram)")?;
        Ok(Event::new(cleared))
    }

    /// Enqueues the counting into `hist`, which must hold zeros.
    pub(super) fn enqueue(
        &self,
        gpu: &Gpu,
        luma: &Buffer<u8>,
        layout: &FrameLayout,
        hist: &Buffer<u32>,
    ) -> Result<Event, ClError> {
        let (width, height) = (layout.width, layout.height);
        // The kernel reads luma as one flat run: the pipeline's luma is dense (a slot is
        // read in place only at stride = width).
        let src_stride = width;
        let local = self.launch.local[0];
        // SAFETY: the arguments are histogram.cl's (src, src_stride, width, height, hist), with
        // src_stride = width. Work-items stride over the width * height = `pixels()` bytes of
        // `src` (whole uchar16s, then a byte at a time for the tail) and add to the 256 counts
        // of `hist`. The pipeline, the only caller, passes its luma or gradient magnitude of
        // `pixels()` bytes (or a grey slot of at least that) and a 256-count buffer, made for the one layout it was
        // built for and always passes.
        unsafe {
            launch(
                gpu,
                &self.kernel,
                &[luma, &src_stride, &width, &height, hist],
                &[self.groups * local],
                &[local],
                "clEnqueueNDRangeKernel(histogram_count)",
            )
        }
    }
}
