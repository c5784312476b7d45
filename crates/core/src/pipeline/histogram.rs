//! Histogram stage: `histogram_count` from `kernels/histogram.cl`: a fixed number of
//! work-groups (a few per compute unit) each fill a local sub-histogram, with local atomics
//! or, one work-item per group, plain increments, and add it to the histogram, which the
//! Otsu kernel of the frame before left zeroed; or every work-item fills its own
//! sub-histogram in global memory and `histogram_sum` adds them up
//! ([`HistogramCounting`]). The group count does not depend on the frame size, except
//! that sub-histograms of 16-bit counts need enough work-items for the largest frames.

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;

use super::buffers::held_bytes;
use super::{device_buffer, HistogramCounting, Launch, Tuning};
use crate::cl::{launch, ClError, Gpu, Record, HISTOGRAM_CL};
use crate::kernel_params;
use edgesight_frame::frame::FrameLayout;

/// Work-groups per compute unit: enough to keep every unit busy.
const GROUPS_PER_COMPUTE_UNIT: usize = 4;
/// Work-groups per compute unit with a sub-histogram per work-item: fewer, since every
/// work-item's 512 bytes are zeroed and read again on every frame, yet two groups, so a
/// core has another to run while one waits on memory.
const SUB_HISTOGRAM_GROUPS_PER_COMPUTE_UNIT: usize = 2;
/// Pixels a work-item reads at a time (`PIXELS_PER_ITEM` in histogram.cl).
const PIXELS_PER_UNIT: usize = 16;
/// Most units of 16 pixels one work-item may count into 16-bit counts: 4095 x 16 = 65520
/// pixels, so no count exceeds 65535.
const UNITS_PER_SUB_HISTOGRAM: usize = 4095;
/// Words of one packed sub-histogram: 256 counts of 16 bits.
const SUB_HISTOGRAM_WORDS: usize = 128;

kernel_params! {
    /// The parameters of histogram.cl's `histogram_count`: `hist` is the 256 counts, or
    /// built with ITEM_SUB_HISTOGRAMS, the work-items' sub-histograms.
    struct CountParams<'a> {
        src: &'a Buffer<u8>,
        src_stride: u32,
        width: u32,
        height: u32,
        hist: &'a Buffer<u32>,
    }
}

kernel_params! {
    /// The parameters of histogram.cl's `histogram_sum`.
    struct SumParams<'a> {
        subs: &'a Buffer<u32>,
        rows: u32,
        hist: &'a Buffer<u32>,
    }
}

pub(super) struct HistogramStage {
    kernel: Kernel,
    launch: Launch,
    groups: usize,
    /// With [`HistogramCounting::ItemSubHistograms`]: the summing kernel, its geometry and
    /// the sub-histograms (one per work-item of `histogram_count`).
    sum: Option<(Kernel, Launch, Buffer<u32>)>,
}

impl HistogramStage {
    /// The stage for frames of `pixels` pixels.
    pub(super) fn new(
        gpu: &Gpu,
        tuning: &Tuning,
        pixels: usize,
    ) -> Result<HistogramStage, ClError> {
        let (defines, group_size) = match tuning.histogram_counting {
            HistogramCounting::LocalAtomics => ("", tuning.group_size),
            HistogramCounting::OneItemPerGroup => ("-DONE_ITEM_PER_GROUP", 1),
            HistogramCounting::ItemSubHistograms => ("-DITEM_SUB_HISTOGRAMS", tuning.group_size),
        };
        let program = gpu.build_with(HISTOGRAM_CL, defines)?;
        let kernel = gpu.kernel(&program, "histogram_count")?;
        let launch = Launch::one_d(gpu, &kernel, group_size)?;
        let units = gpu.info.compute_units as usize;
        let (groups, sum) = match tuning.histogram_counting {
            HistogramCounting::ItemSubHistograms => {
                let local = launch.local[0];
                let fewest_items = pixels
                    .div_ceil(PIXELS_PER_UNIT)
                    .div_ceil(UNITS_PER_SUB_HISTOGRAM);
                let groups = (units * SUB_HISTOGRAM_GROUPS_PER_COMPUTE_UNIT)
                    .max(fewest_items.div_ceil(local))
                    .max(1);
                let k = gpu.kernel(&program, "histogram_sum")?;
                let sum_launch = Launch::one_d(gpu, &k, tuning.group_size)?;
                let subs = device_buffer(gpu, groups * local * SUB_HISTOGRAM_WORDS)?;
                (groups, Some((k, sum_launch, subs)))
            }
            _ => ((units * GROUPS_PER_COMPUTE_UNIT).clamp(1, 1024), None),
        };
        Ok(HistogramStage {
            kernel,
            launch,
            groups,
            sum,
        })
    }

    /// The bytes of the sub-histograms, where this stage has them.
    pub(super) fn held_bytes(&self) -> Result<u64, ClError> {
        match &self.sum {
            Some((_, _, subs)) => held_bytes(subs),
            None => Ok(0),
        }
    }

    /// Enqueues the zeroing of `hist`, which the pipeline needs only when the last frame
    /// did not reach the Otsu kernel (that kernel leaves `hist` zeroed).
    pub(super) fn enqueue_clear(
        &self,
        gpu: &Gpu,
        hist: &Buffer<u32>,
        record: Record,
    ) -> Result<Option<Event>, ClError> {
        // SAFETY: no host mapping of the histogram buffer exists: the pipeline maps
        // only frame slots.
        unsafe {
            crate::cl::enqueue_fill(
                &gpu.queue,
                hist,
                0u32,
                0,
                256,
                record,
                "clEnqueueFillBuffer(histogram)",
            )
        }
    }

    /// Enqueues the counting into `hist`, which must hold zeros, and hands `event` each
    /// kernel's event, where one is recorded.
    pub(super) fn enqueue(
        &self,
        gpu: &Gpu,
        luma: &Buffer<u8>,
        layout: &FrameLayout,
        hist: &Buffer<u32>,
        record: Record,
        mut event: impl FnMut(Option<Event>),
    ) -> Result<(), ClError> {
        let (width, height) = (layout.width, layout.height);
        let count = |hist| CountParams {
            src: luma,
            // The kernel reads luma as one flat run: the pipeline's luma is dense (a slot
            // is read in place only at stride = width).
            src_stride: width,
            width,
            height,
            hist,
        };
        let local = self.launch.local[0];
        let items = self.groups * local;
        let Some((sum_kernel, sum_launch, subs)) = &self.sum else {
            // SAFETY: `CountParams` is the kernel's parameter list. Work-items stride over the
            // width * height = `pixels()` bytes of `src` (whole uchar16s, then a byte at a time for
            // the tail) and add to the 256 counts of `hist`. The pipeline, the only caller, passes
            // its luma or gradient magnitude of `pixels()` bytes (or a grey slot of at least that)
            // and a 256-count buffer, made for the one layout it was built for and always passes.
            event(unsafe {
                launch(
                    gpu,
                    &self.kernel,
                    &count(hist),
                    &[items],
                    &[local],
                    "clEnqueueNDRangeKernel(histogram_count)",
                    record,
                )
            }?);
            return Ok(());
        };
        // SAFETY: `CountParams` is the kernel's parameter list, built with
        // ITEM_SUB_HISTOGRAMS, `hist` the sub-histograms. Work-items stride over the
        // width * height = `pixels()` bytes of `src` as above, and work-item i writes only
        // words 128 i to 128 i + 127 of `subs`, which holds 128 words for each of the
        // `items` work-items (made in `new` for this group count and local size). `new`
        // sized `items` for the `pixels()` of the one layout the pipeline built this
        // stage for and always passes, so no work-item counts more than 65520 pixels.
        event(unsafe {
            launch(
                gpu,
                &self.kernel,
                &count(subs),
                &[items],
                &[local],
                "clEnqueueNDRangeKernel(histogram_count)",
                record,
            )
        }?);
        let sum_local = sum_launch.local[0];
        // SAFETY: `SumParams` is the kernel's parameter list. Work-item w < 128
        // reads word w of each of the `rows` = `items` sub-histograms of `subs` (128 words
        // each, as made in `new`) and adds to counts 2w and 2w + 1 of `hist`, which holds
        // 256; the others return.
        event(unsafe {
            launch(
                gpu,
                sum_kernel,
                &SumParams {
                    subs,
                    rows: items as u32,
                    hist,
                },
                &[sum_launch.global_1d(SUB_HISTOGRAM_WORDS)],
                &[sum_local],
                "clEnqueueNDRangeKernel(histogram_sum)",
                record,
            )
        }?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::buffers::read_buffer;
    use super::*;
    use crate::cl::write_blocking;
    use edgesight_frame::frame::PixelFormat;

    fn gpu() -> Gpu {
        crate::cl::test_gpu()
    }

    /// One value everywhere puts every pixel a work-item counts into one 16-bit count: at
    /// 4096 x 4096 a device of two compute units (POCL on a 2-core machine) would give each
    /// of its 256 work-items 65536 pixels, one too many, without the work-items added for
    /// large frames. Runs the sub-histograms with every count at its fullest, near the top
    /// of the frame sizes the pipeline takes, and a frame where the last unit is partial.
    #[test]
    fn sub_histograms_of_16_bits_hold_the_largest_frames_of_one_value() {
        let gpu = gpu();
        for (w, h, value) in [(4096u32, 4096u32, 255u8), (4111, 4097, 0), (17, 3, 1)] {
            let layout = FrameLayout::packed(PixelFormat::Grey, w, h);
            let n = layout.pixels();
            let stage = HistogramStage::new(&gpu, &Tuning::FOR_MIDGARD, n).expect("stage");
            let mut luma: Buffer<u8> = device_buffer(&gpu, n).expect("luma");
            write_blocking(&gpu, &mut luma, 0, &vec![value; n]).expect("write luma");
            let mut hist: Buffer<u32> = device_buffer(&gpu, 256).expect("hist");
            write_blocking(&gpu, &mut hist, 0, &[0; 256]).expect("zero hist");
            stage
                .enqueue(&gpu, &luma, &layout, &hist, Record::NoEvent, drop)
                .expect("enqueue");
            let counts = read_buffer(&gpu, &hist, 256).expect("read hist");
            let mut want = vec![0u32; 256];
            want[usize::from(value)] = n as u32;
            assert_eq!(counts, want, "{w}x{h} of {value}");
        }
    }
}
