//! Histogram stage: `histogram_partial` then `histogram_reduce` from `kernels/histogram.cl`.
//! A fixed number of work-groups (a few per compute unit) each fill a local sub-histogram,
//! with local atomics or, one work-item per group, plain increments ([`HistogramCounting`]);
//! the reduce kernel adds them. The group count does not depend on the frame size.

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::Buffer;

use super::{arg, device_buffer, enqueue_kernel, HistogramCounting, Launch, Tuning};
use crate::cl::{CallContext, ClError, Gpu, HISTOGRAM_CL};
use crate::frame::FrameLayout;

/// Work-groups per compute unit: enough to keep every unit busy.
const GROUPS_PER_COMPUTE_UNIT: usize = 4;
/// Work-items per group we ask for when they share local atomics (fewer where the device
/// allows fewer).
const GROUP_SIZE: usize = 256;

pub(super) struct HistogramStage {
    partial_kernel: Kernel,
    reduce_kernel: Kernel,
    partial_launch: Launch,
    reduce_launch: Launch,
    groups: usize,
    partial: Buffer<u32>,
}

impl HistogramStage {
    pub(super) fn new(gpu: &Gpu, tuning: &Tuning) -> Result<HistogramStage, ClError> {
        let (defines, group_size) = match tuning.histogram_counting {
            HistogramCounting::LocalAtomics => ("", GROUP_SIZE),
            HistogramCounting::OneItemPerGroup => ("-DONE_ITEM_PER_GROUP", 1),
        };
        let program = gpu.build_with(HISTOGRAM_CL, defines)?;
        let partial_kernel =
            Kernel::create(&program, "histogram_partial").call("clCreateKernel")?;
        let reduce_kernel = Kernel::create(&program, "histogram_reduce").call("clCreateKernel")?;
        let partial_launch = Launch::one_d(gpu, &partial_kernel, group_size)?;
        let reduce_launch = Launch::one_d(gpu, &reduce_kernel, 64)?;
        let groups = (gpu.info.compute_units as usize * GROUPS_PER_COMPUTE_UNIT).clamp(1, 1024);
        let partial = device_buffer(gpu, groups * 256)?;
        Ok(HistogramStage {
            partial_kernel,
            reduce_kernel,
            partial_launch,
            reduce_launch,
            groups,
            partial,
        })
    }

    pub(super) fn enqueue(
        &self,
        gpu: &Gpu,
        luma: &Buffer<u8>,
        layout: &FrameLayout,
        hist: &Buffer<u32>,
    ) -> Result<[Event; 2], ClError> {
        let (pk, rk) = (&self.partial_kernel, &self.reduce_kernel);
        let groups = self.groups as u32;
        unsafe {
            arg(pk, 0, luma)?;
            arg(pk, 1, &layout.width)?;
            arg(pk, 2, &layout.width)?;
            arg(pk, 3, &layout.height)?;
            arg(pk, 4, &self.partial)?;
            arg(rk, 0, &self.partial)?;
            arg(rk, 1, &groups)?;
            arg(rk, 2, hist)?;
        }
        let local = self.partial_launch.local[0];
        let partial = enqueue_kernel(
            gpu,
            pk,
            &[self.groups * local],
            &[local],
            "clEnqueueNDRangeKernel(histogram_partial)",
        )?;
        let reduce = enqueue_kernel(
            gpu,
            rk,
            &[self.reduce_launch.global_1d(256)],
            &[self.reduce_launch.local[0]],
            "clEnqueueNDRangeKernel(histogram_reduce)",
        )?;
        Ok([partial, reduce])
    }
}
