//! `edgesight bench`: the pipeline's cost per frame size, beside the cost of a device copy
//! of the same bytes (the floor no kernel can beat).
//!
//! For each size it makes a synthetic grey frame with natural-looking content
//! ([`grey_frame`](edgesight::capture::pattern::grey_frame)), runs the pipeline a few times to warm up, then `runs` times, and
//! takes from every run each stage's device time (profiling events), the pipeline's device
//! time (the sum of its stages, and the span from the first kernel's start to the last
//! one's end) and the host's wall time for the frame (map the slot, write the frame, unmap,
//! enqueue every kernel, wait, read the results). Medians and the 10th/90th percentiles are
//! reported.
//!
//! The floor of a stage is a `clEnqueueCopyBuffer` on the same device that reads and writes
//! as many bytes as the stage must move (every input read once, every output written once:
//! [`Pipeline::traffic`]), timed the same way. The launch floor is the span of as many
//! empty kernels, enqueued back to back, as the pipeline runs on a frame: what its span
//! costs before any kernel does work.
//!
//! The frames above are timed (an event per kernel). Then as many untimed frames run, as
//! the daemon runs 7 frames in 8 (no kernel asks for an event): their span is taken from
//! a marker enqueued before the first kernel to the end of the results' read, and it is
//! compared with empty kernels enqueued the same way. On NVIDIA's OpenCL each kernel's
//! event costs the device several microseconds (bench/notes/round3.md#h100-floor), so
//! the two spans differ. Motion, which has no stage of its own, is measured as the
//! difference between as many timed frames with it and without it, taken in turns.
//!
//! One room, long as it is: the stage timings, the copy floor and the JSON are one
//! report, measured on the same frames; its unit tests follow.

use std::time::Instant;

use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};
use serde::Serialize;

use edgesight::capture::pattern::PatternFrame;
use edgesight::cl::{
    event_interval, event_nanos, launch, new_buffer, CallContext, ClError, Gpu, KernelSource,
    Record,
};
use edgesight::frame::Size;
use edgesight::jpeg::{JpegError, LumaDecoder, Scale};
use edgesight::measure::{process_cpu_time, Spread};
use edgesight::pipeline::{
    FrameResult, Pipeline, PipelineError, PipelineOptions, Stage, StageTimings, Tuning,
};

/// Why a size could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error(transparent)]
    Cl(#[from] ClError),
    #[error("decoding the frame: {0}")]
    Jpeg(#[from] JpegError),
}

/// One stage's figures at one frame size.
#[derive(Clone, Debug, Serialize)]
pub struct StageFigures {
    pub name: &'static str,
    pub device: Spread,
    pub bytes: u64,
    /// Median time of a device copy moving `bytes` (reading half, writing half).
    pub floor_ms: f64,
}

/// Everything measured at one frame size.
#[derive(Clone, Debug)]
pub struct SizeFigures {
    pub width: u32,
    pub height: u32,
    pub runs: usize,
    pub stages: Vec<StageFigures>,
    /// Sum of the stages' device times.
    pub pipeline_device: Spread,
    /// The stages' device times but the health stage's (which runs on some frames only),
    /// on as many frames with motion and without it, taken in turns (on, off, off, on).
    /// Motion's whole cost is the difference (it has no stage of its own; its work runs
    /// inside the integral and region launches).
    pub pipeline_device_motion_on: Spread,
    pub pipeline_device_motion_off: Spread,
    /// Each stage's median with motion less its median without it, ms.
    pub motion_by_stage: Vec<(Stage, f64)>,
    /// First kernel's start to the last one's end, on the device.
    pub pipeline_span: Spread,
    /// Untimed frames (no kernel events): a marker before the first kernel to the end of
    /// the read of the results, on the device; and the host CPU per frame.
    pub untimed_span: Spread,
    pub untimed_host_cpu_pipeline: Spread,
    /// Host wall time per frame: map, write, unmap, kernels, wait, read results.
    pub pipeline_wall: Spread,
    /// Host CPU time per frame of the whole process (every thread, the driver's too):
    /// writing the frame into its slot (map, copy, unmap), which any source pays, and the
    /// pipeline (enqueue, wait, read back, results).
    pub host_cpu_write: Spread,
    pub host_cpu_pipeline: Spread,
    pub pipeline_bytes: u64,
    pub pipeline_floor_ms: f64,
    /// Commands a frame enqueues with an event (kernels and fills; the frames that also
    /// run the health stage not counted), and the median span of as many empty kernels,
    /// each with an event and (untimed) with none, between two markers.
    pub kernels_per_frame: usize,
    pub launch_floor_ms: f64,
    pub launch_floor_untimed_ms: f64,
    /// What the pipeline holds on the device ([`Pipeline::device_bytes`]; the frame slot,
    /// one byte a pixel, not included).
    pub held_bytes: u64,
    /// Otsu threshold of the frame (the same every run).
    pub otsu_threshold: u8,
}

impl SizeFigures {
    pub fn pixels(&self) -> u64 {
        u64::from(self.width) * u64::from(self.height)
    }

    /// Motion's share of the pipeline's median device time (the health stage aside): the
    /// pipeline's with it less the pipeline's without it, over the pipeline's with it.
    pub fn motion_share(&self) -> f64 {
        let with = self.pipeline_device_motion_on.median;
        (with - self.pipeline_device_motion_off.median) / with.max(1e-9)
    }

    /// The health stage's device time spread over the frames (it runs on one in
    /// [`GRADIENT_SAMPLE_FRAMES`](edgesight::pipeline::GRADIENT_SAMPLE_FRAMES)), as a share of
    /// the pipeline's median device time per frame.
    pub fn health_share(&self) -> f64 {
        let health = self
            .stages
            .iter()
            .find(|s| s.name == Stage::Health.name())
            .map_or(0.0, |s| s.device.median);
        let per_frame = health / edgesight::pipeline::GRADIENT_SAMPLE_FRAMES as f64;
        per_frame / self.pipeline_device.median.max(1e-9)
    }
}

/// Reports progress while a size runs: `(width, height, done, total)`.
pub(crate) type Progress<'a> = &'a mut dyn FnMut(u32, u32, usize, usize);

/// Runs the pipeline built with `tuning` `warmup` + `runs` times on `frame`, each run
/// writing (or decoding) it into the slot first, and measures the copy floor for the bytes
/// each stage moves.
pub fn bench_size(
    gpu: &Gpu,
    tuning: Tuning,
    frame: &PatternFrame,
    warmup: usize,
    runs: usize,
    progress: Progress<'_>,
) -> Result<SizeFigures, BenchError> {
    let layout = frame.layout;
    let (width, height) = (layout.width, layout.height);
    let mut decoder = if frame.jpeg {
        Some(LumaDecoder::new()?)
    } else {
        None
    };
    let size = Size { width, height };
    let mut write = |slot: &mut edgesight::cl::FrameSlot| -> Result<(), BenchError> {
        match decoder.as_mut() {
            Some(decoder) => slot.write(gpu, |out| {
                decoder.decode(&frame.bytes, size, Scale::Full, out, width as usize)
            })??,
            None => slot.write_bytes(gpu, &frame.bytes)?,
        }
        Ok(())
    };
    let mut pipeline = Pipeline::with_tuning(gpu, layout, PipelineOptions::default(), &[], tuning)?;
    // As the daemon runs it by default: with the camera-health grid and gradient histogram,
    // and motion.
    pipeline.set_health_grid(gpu, Some(edgesight::health::GRID))?;
    pipeline.set_motion(Some(edgesight::pipeline::MotionSettings::default()));
    let held_bytes = pipeline.device_bytes()?;
    let mut slot = pipeline.new_slot(gpu)?;
    let mut result = FrameResult::empty();
    let total = warmup + runs;
    let mut stage_ns: Vec<Vec<u64>> = vec![Vec::with_capacity(runs); Stage::ALL.len()];
    let (mut device_ns, mut span_ns, mut wall_ns) = (
        Vec::with_capacity(runs),
        Vec::with_capacity(runs),
        Vec::with_capacity(runs),
    );
    let (mut write_cpu_ns, mut pipeline_cpu_ns) =
        (Vec::with_capacity(runs), Vec::with_capacity(runs));
    // Every frame without the health stage enqueues as many.
    let mut kernels_per_frame = 0;
    for i in 0..total {
        let start = Instant::now();
        let cpu_start = process_cpu_nanos();
        write(&mut slot)?;
        let cpu_written = process_cpu_nanos();
        pipeline.process_into(gpu, &slot, &mut result)?;
        let cpu_end = process_cpu_nanos();
        let wall = start.elapsed().as_nanos() as u64;
        if i >= warmup {
            write_cpu_ns.push(cpu_written.saturating_sub(cpu_start));
            pipeline_cpu_ns.push(cpu_end.saturating_sub(cpu_written));
            for (s, ns) in result.timings.iter() {
                // The health stage runs on every few frames: its time is that of the
                // frames it ran on (SizeFigures::health_share spreads it).
                if s != Stage::Health || result.gradient_sampled {
                    stage_ns[s as usize].push(ns);
                }
            }
            device_ns.push(result.timings.total());
            span_ns.push(pipeline.last_device_span_nanos());
            wall_ns.push(wall);
            if !result.gradient_sampled {
                kernels_per_frame = pipeline.last_command_count();
            }
        }
        if i % 8 == 7 || i + 1 == total {
            progress(width, height, i + 1, total);
        }
    }
    // What motion costs in all: as many frames with it and without it, in the order on,
    // off, off, on (so that neither side is always first, or later), the health stage
    // left out of both (it runs on some frames only).
    let (mut motion_on, mut motion_off) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for k in 0..2 * runs {
        let on = k % 4 == 0 || k % 4 == 3;
        pipeline.set_motion(on.then(edgesight::pipeline::MotionSettings::default));
        write(&mut slot)?;
        pipeline.process_into(gpu, &slot, &mut result)?;
        let mut timings = result.timings;
        timings.0[Stage::Health as usize] = 0;
        if on {
            motion_on.push(timings);
        } else {
            motion_off.push(timings);
        }
    }
    let total = |runs: &[StageTimings]| {
        Spread::of_nanos(&runs.iter().map(StageTimings::total).collect::<Vec<_>>())
    };
    pipeline.set_motion(Some(edgesight::pipeline::MotionSettings::default()));
    // As many untimed frames: the daemon's usual frame.
    pipeline.time_every(u64::MAX);
    let (mut untimed_span_ns, mut untimed_cpu_ns) =
        (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        write(&mut slot)?;
        let cpu_start = process_cpu_nanos();
        let start = marker(gpu)?;
        pipeline.process_into(gpu, &slot, &mut result)?;
        untimed_cpu_ns.push(process_cpu_nanos().saturating_sub(cpu_start));
        let end = pipeline.last_read_end_nanos()?;
        untimed_span_ns.push(end.saturating_sub(event_interval(&start)?.0));
    }
    let traffic = pipeline.traffic();
    let (stage_bytes, pipeline_bytes) = (traffic.stages, traffic.pipeline);
    let most = stage_bytes.iter().copied().fold(pipeline_bytes, u64::max);
    let mut floor = CopyFloor::new(gpu, most)?;
    let copy_runs = runs.clamp(3, 30);
    let mut stages = Vec::with_capacity(Stage::ALL.len());
    for (i, stage) in Stage::ALL.into_iter().enumerate() {
        stages.push(StageFigures {
            name: stage.name(),
            device: Spread::of_nanos(&stage_ns[i]),
            bytes: stage_bytes[i],
            floor_ms: floor.median_ms(gpu, stage_bytes[i], copy_runs)?,
        });
    }
    Ok(SizeFigures {
        width,
        height,
        runs,
        stages,
        pipeline_device: Spread::of_nanos(&device_ns),
        pipeline_device_motion_on: total(&motion_on),
        pipeline_device_motion_off: total(&motion_off),
        motion_by_stage: StageTimings::median(&motion_on)
            .iter()
            .zip(StageTimings::median(&motion_off).iter())
            .map(|((stage, on), (_, off))| (stage, on as f64 / 1e6 - off as f64 / 1e6))
            .collect(),
        pipeline_span: Spread::of_nanos(&span_ns),
        untimed_span: Spread::of_nanos(&untimed_span_ns),
        untimed_host_cpu_pipeline: Spread::of_nanos(&untimed_cpu_ns),
        pipeline_wall: Spread::of_nanos(&wall_ns),
        host_cpu_write: Spread::of_nanos(&write_cpu_ns),
        host_cpu_pipeline: Spread::of_nanos(&pipeline_cpu_ns),
        pipeline_bytes,
        pipeline_floor_ms: floor.median_ms(gpu, pipeline_bytes, copy_runs)?,
        kernels_per_frame,
        launch_floor_ms: launch_floor_ms(gpu, kernels_per_frame, Record::Event, copy_runs)?,
        launch_floor_untimed_ms: launch_floor_ms(
            gpu,
            kernels_per_frame,
            Record::NoEvent,
            copy_runs,
        )?,
        held_bytes,
        otsu_threshold: result.otsu_threshold,
    })
}

/// [`process_cpu_time`] in nanoseconds, as the figures are kept.
fn process_cpu_nanos() -> u64 {
    process_cpu_time().as_nanos() as u64
}

/// Two device buffers to copy between.
struct CopyFloor {
    src: Buffer<u8>,
    dst: Buffer<u8>,
}

impl CopyFloor {
    /// Buffers for copies that move up to `max_bytes` (half read, half written).
    fn new(gpu: &Gpu, max_bytes: u64) -> Result<CopyFloor, ClError> {
        let len = (max_bytes as usize).div_ceil(2).max(1);
        let make = || new_buffer::<u8>(gpu, CL_MEM_READ_WRITE, len).call("clCreateBuffer");
        let (src, mut dst) = (make()?, make()?);
        // Touch both once so the first timed copy pays for no first use.
        // SAFETY: a copy between two device buffers of `len` bytes: no host memory.
        let e = unsafe {
            gpu.queue
                .enqueue_copy_buffer(&src, &mut dst, 0, 0, len, &[])
        }
        .call("clEnqueueCopyBuffer")?;
        e.wait().call("clWaitForEvents")?;
        Ok(CopyFloor { src, dst })
    }

    /// Median device time, in ms, of a copy that moves `bytes` (reads and writes half each).
    fn median_ms(&mut self, gpu: &Gpu, bytes: u64, runs: usize) -> Result<f64, ClError> {
        let len = (bytes as usize / 2).max(1);
        let mut ns = Vec::with_capacity(runs);
        for _ in 0..runs {
            // SAFETY: a copy between two device buffers, no host memory; a `len` past
            // their size is refused (CL_INVALID_VALUE), not copied.
            let e = unsafe {
                gpu.queue
                    .enqueue_copy_buffer(&self.src, &mut self.dst, 0, 0, len, &[])
            }
            .call("clEnqueueCopyBuffer")?;
            e.wait().call("clWaitForEvents")?;
            ns.push(event_nanos(&e)?);
        }
        Ok(Spread::of_nanos(&ns).median)
    }
}

/// A kernel that does nothing, for the launch floor: its one store never happens (`never`
/// is no work-item's id), yet it keeps a body, which NVIDIA's compiler needs: with the
/// 580.159 driver, a kernel without parameters or statements fails to assemble (ptxas).
const EMPTY_CL: KernelSource = KernelSource {
    file: "(bench: an empty kernel)",
    text: "__kernel void nothing(__global uint *sink, uint never) {\n\
           if (get_global_id(0) == never) sink[0] = 1;\n}\n",
};

edgesight::kernel_params! {
    /// The empty kernel's parameters.
    struct NothingParams<'a> {
        sink: &'a Buffer<u32>,
        never: u32,
    }
}

/// A marker on the pipeline's queue, with its event: it completes when the commands before
/// it have, and its start time is when the queue reached it.
fn marker(gpu: &Gpu) -> Result<opencl3::event::Event, ClError> {
    // SAFETY: no wait list is passed, so no event pointer is read.
    unsafe { gpu.queue.enqueue_marker_with_wait_list(&[]) }.call("clEnqueueMarkerWithWaitList")
}

/// Median span, in ms, of `kernels` empty kernels of one work-item each, enqueued back to
/// back on the pipeline's queue (0 for none): from the first start to the last end with
/// an event each ([`Record::Event`]), else from a marker before them to a marker after.
fn launch_floor_ms(gpu: &Gpu, kernels: usize, record: Record, runs: usize) -> Result<f64, ClError> {
    if kernels == 0 {
        return Ok(0.0);
    }
    let program = gpu.build_with(EMPTY_CL, "")?;
    let kernel = Kernel::create(&program, "nothing").call("clCreateKernel")?;
    let sink: Buffer<u32> = new_buffer(gpu, CL_MEM_READ_WRITE, 1).call("clCreateBuffer")?;
    let params = NothingParams {
        sink: &sink,
        never: u32::MAX,
    };
    let mut spans = Vec::with_capacity(runs);
    let mut events = Vec::with_capacity(kernels + 2);
    for _ in 0..runs + 1 {
        events.clear();
        if record == Record::NoEvent {
            events.push(marker(gpu)?);
        }
        for _ in 0..kernels {
            // SAFETY: `NothingParams` is the kernel's parameter list; its one work-item's
            // id is 0, never u32::MAX, so it touches no memory (sink has one element).
            let event = unsafe {
                launch(
                    gpu,
                    &kernel,
                    &params,
                    &[1],
                    &[1],
                    "clEnqueueNDRangeKernel(nothing)",
                    record,
                )
            }?;
            events.extend(event);
        }
        if record == Record::NoEvent {
            events.push(marker(gpu)?);
        }
        gpu.queue.finish().call("clFinish")?;
        let (mut first, mut last) = (u64::MAX, 0);
        for event in &events {
            let (start, end) = event_interval(event)?;
            first = first.min(start);
            last = last.max(end);
        }
        spans.push(last.saturating_sub(first));
    }
    // The first round warms the kernel up.
    Ok(Spread::of_nanos(&spans[1..]).median)
}

/// Achieved bandwidth in GB/s for `bytes` moved in `ms`.
pub fn gb_per_s(bytes: u64, ms: f64) -> f64 {
    if ms > 0.0 {
        bytes as f64 / (ms * 1e6)
    } else {
        0.0
    }
}

/// The JSON `--json` writes.
#[derive(Serialize)]
pub struct JsonReport<'a> {
    pub device: String,
    /// The name of the tuning the pipeline was built with.
    pub tuning: &'static str,
    pub format: &'static str,
    pub runs: usize,
    pub warmup: usize,
    pub results: Vec<JsonSize<'a>>,
}

#[derive(Serialize)]
pub struct JsonSize<'a> {
    pub width: u32,
    pub height: u32,
    pub pipeline_device_ms: f64,
    pub pipeline_span_ms: f64,
    pub pipeline_wall_ms: f64,
    pub pipeline_device_spread_ms: Spread,
    pub pipeline_wall_spread_ms: Spread,
    /// Host CPU per frame, all threads: the frame's write into its slot, the pipeline.
    pub host_cpu_write_ms: f64,
    pub host_cpu_pipeline_ms: f64,
    pub pipeline_bytes: u64,
    pub pipeline_floor_ms: f64,
    /// Commands with an event on a frame, and the span of as many empty kernels (with an
    /// event each, and with none); the span and host CPU of untimed frames.
    pub kernels_per_frame: usize,
    pub launch_floor_ms: f64,
    pub launch_floor_untimed_ms: f64,
    pub pipeline_untimed_span_ms: f64,
    pub host_cpu_untimed_pipeline_ms: f64,
    /// Device bytes the pipeline holds (the frame slot not included).
    pub pipeline_held_bytes: u64,
    pub moved_bytes_per_pixel: f64,
    pub held_bytes_per_pixel: f64,
    pub ns_per_pixel: f64,
    pub otsu_threshold: u8,
    pub stages: std::collections::BTreeMap<&'a str, f64>,
    pub stages_detail: &'a [StageFigures],
}

impl<'a> JsonSize<'a> {
    pub fn new(f: &'a SizeFigures) -> JsonSize<'a> {
        JsonSize {
            width: f.width,
            height: f.height,
            pipeline_device_ms: f.pipeline_device.median,
            pipeline_span_ms: f.pipeline_span.median,
            pipeline_wall_ms: f.pipeline_wall.median,
            pipeline_device_spread_ms: f.pipeline_device,
            pipeline_wall_spread_ms: f.pipeline_wall,
            host_cpu_write_ms: f.host_cpu_write.median,
            host_cpu_pipeline_ms: f.host_cpu_pipeline.median,
            pipeline_bytes: f.pipeline_bytes,
            pipeline_floor_ms: f.pipeline_floor_ms,
            kernels_per_frame: f.kernels_per_frame,
            launch_floor_ms: f.launch_floor_ms,
            launch_floor_untimed_ms: f.launch_floor_untimed_ms,
            pipeline_untimed_span_ms: f.untimed_span.median,
            host_cpu_untimed_pipeline_ms: f.untimed_host_cpu_pipeline.median,
            pipeline_held_bytes: f.held_bytes,
            moved_bytes_per_pixel: f.pipeline_bytes as f64 / f.pixels() as f64,
            held_bytes_per_pixel: f.held_bytes as f64 / f.pixels() as f64,
            ns_per_pixel: f.pipeline_device.median * 1e6 / f.pixels() as f64,
            otsu_threshold: f.otsu_threshold,
            stages: f.stages.iter().map(|s| (s.name, s.device.median)).collect(),
            stages_detail: &f.stages,
        }
    }
}
