//! The per-frame pipeline: enqueues every stage's kernels on one in-order queue, keeps the
//! intermediate images on the device, and reads back only the small results (histogram,
//! threshold, gradient histogram, region sums: one buffer, one read) unless the full
//! images are asked for.
//!
//! ```text
//! slot ─► luma ─┬─► sobel (magnitude) ─────────────────────────┐
//!               ├─► histogram ─► otsu (threshold on device) ───┤
//!               └──────────────────────────────────────────────┴─► integral ─► regions
//! ```
//!
//! The integral stage counts edges (magnitude at least the edge threshold) and foreground
//! (luma above the threshold the Otsu kernel left on the device) as it goes, so no mask
//! is needed for the results. Sobel never reads the threshold, so on GPUs Otsu's one
//! work-group is the first of Sobel's launch and runs beside Sobel's groups
//! ([`OtsuLaunch::BesideSobel`]): one launch fewer, and Otsu off the critical path.
//! dx, dy, the edge mask, the foreground mask (`binarize`) and the integral images in
//! OpenCV's layout exist only in a pipeline built to keep its full images ([`Setup`],
//! [`FullImages`]): `process --raw` and `capture --raw` write them out; the daemon never
//! reads them, and its pipeline neither allocates nor writes them.
//! [`FrameImages::read_pictures`] gives any pipeline's luma, magnitude and mask.
//!
//! Grey frames (and NV12's Y plane) packed at stride = width skip the luma copy: the
//! stages read the slot itself, so a frame's images can be read only while its slot is
//! held ([`Processed`]).
//!
//! Each stage lives in its own file with the kernel file it launches; the integral stage
//! is a folder (`integral/`: the blocked form's geometry and buffers, its passes, its
//! un-blocking on the host), and the region stage (`regions.rs`) launches
//! `kernels/regions.cl`, which is built with `kernels/integral.cl` as one program. Stages
//! never allocate capture buffers and never touch metrics or HTTP; they fill a
//! [`FrameResult`]. Around them: `options` (what is computed, and the work sizes a device
//! gets), `timings`, `buffers` (guarded device images and read-back memory), `launch`
//! (work-group geometry) and `processed` (what a frame gives back). This file holds
//! [`Pipeline`], which runs them.
//!
//! Over 500 lines as one room: the `Pipeline` and the order of its stages on one queue
//! (what runs, what is read back, in which order); its unit tests follow from line 588.

// One unsafe operation per block, so each SAFETY comment covers exactly one.
#![deny(clippy::multiple_unsafe_ops_per_block)]

mod histogram;
mod integral;
mod luma;
mod otsu;
mod regions;
mod sobel;

mod buffers;
mod launch;
mod options;
mod processed;
mod timings;
mod traffic;

use opencl3::event::Event;

use crate::cl::{event_interval, ClError, FrameSlot, Gpu, RawClError, Record};
use crate::frame::{FrameLayout, LayoutError};
use crate::region::{Region, RegionError};

use buffers::{
    device_buffer, held_bytes, DeviceImage, DeviceImages, QueueDrain, ReadBack, Readout,
};
pub(crate) use launch::Launch;
use launch::StageContext;
pub use options::{
    Border, FullImages, HistogramCounting, IntegralLayout, Magnitude, OtsuArithmetic, OtsuLaunch,
    PipelineOptions, Setup, SobelLayout, Stores, Tuning, TuningChoice, UnknownBorder,
    UnknownTuning, SOBEL_RUN_CHUNKS,
};
pub use processed::{FrameImages, FrameResult, Images, Pictures, Processed};
pub use timings::{Stage, StageTimings};
pub use traffic::Traffic;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Region(#[from] RegionError),
    #[error("frame slot holds {have} bytes, a {layout} frame needs {need}")]
    SlotTooSmall {
        have: usize,
        need: usize,
        layout: String,
    },
    #[error("{stage} stage")]
    Stage {
        stage: &'static str,
        #[source]
        source: ClError,
    },
    #[error(transparent)]
    Cl(#[from] ClError),
    #[error(
        "the full images were not kept: the pipeline was built with FullImages::Discarded \
         (read_pictures gives luma, magnitude and mask)"
    )]
    NotKept,
}

/// Whether the stages read luma straight from the frame slot: grey (or the Y plane that
/// comes first in NV12, YU12 and the other YUV formats with planes) rows packed at stride = width already are the luma image. On unified memory (POCL,
/// Mali) the slot is as fast to read as a device buffer; on an NVIDIA H100 the driver
/// keeps the mapped slot in device memory, and reading it costs the stages less than the
/// copy would (BENCHMARKS.md): either way the copy, and its buffer, would be pure cost.
fn reads_luma_in_place(layout: &FrameLayout) -> bool {
    layout.format.luma_plane_first() && layout.stride == layout.width
}

/// Runs the stages for frames of one layout; buffers are allocated once, here.
pub struct Pipeline {
    layout: FrameLayout,
    options: PipelineOptions,
    luma: luma::LumaStage,
    sobel: sobel::SobelStage,
    histogram: histogram::HistogramStage,
    otsu: otsu::OtsuStage,
    integral: integral::IntegralStage,
    regions: regions::RegionsStage,
    bufs: DeviceImages,
    /// The last frame's events, kept so that a frame allocates nothing once warm (none on
    /// a frame that is not timed).
    events: Vec<(Stage, Event)>,
    /// Stage times are measured on one frame in this many ([`Pipeline::time_every`]).
    time_every: u64,
    /// The last timed frame's stage times, and its first kernel start to last kernel end
    /// in nanoseconds.
    last_timings: StageTimings,
    last_span: u64,
    /// Whether the histogram buffer holds zeros, as the last frame's Otsu kernel leaves it;
    /// a frame that failed before that kernel ran leaves it to be cleared.
    hist_zeroed: bool,
    /// Where the small results are read back to.
    read_back: ReadBack,
    /// The camera-health grid's columns and rows (its cells are measured with the
    /// regions); 0 x 0 until [`Pipeline::set_health_grid`].
    grid: (u32, u32),
    /// Frames processed, to count the gradient histogram on every
    /// [`GRADIENT_SAMPLE_FRAMES`]th and time every `time_every`th.
    frames: u64,
}

/// The gradient histogram is counted on one frame in this many: the health detectors
/// that read it need a few samples a second, and counting it on every frame would cost
/// as much as the luma histogram.
pub const GRADIENT_SAMPLE_FRAMES: u64 = 4;

impl Pipeline {
    /// Builds the kernels and allocates the buffers for frames of `layout`, with the work
    /// sizes suited to `gpu` and without the full images ([`Setup::for_device`]): the
    /// daemon's pipeline.
    pub fn new(
        gpu: &Gpu,
        layout: FrameLayout,
        options: PipelineOptions,
        regions: &[Region],
    ) -> Result<Pipeline, PipelineError> {
        Pipeline::with_setup(gpu, layout, options, regions, Setup::for_device(gpu))
    }

    /// As [`Pipeline::new`], with explicit work-size choices.
    pub fn with_tuning(
        gpu: &Gpu,
        layout: FrameLayout,
        options: PipelineOptions,
        regions: &[Region],
        tuning: Tuning,
    ) -> Result<Pipeline, PipelineError> {
        Pipeline::with_setup(gpu, layout, options, regions, Setup::with_tuning(tuning))
    }

    /// As [`Pipeline::new`], built as `setup` says: its work sizes, and whether it keeps
    /// its full images ([`FullImages::Kept`]: `process --raw`).
    pub fn with_setup(
        gpu: &Gpu,
        layout: FrameLayout,
        options: PipelineOptions,
        regions: &[Region],
        setup: Setup,
    ) -> Result<Pipeline, PipelineError> {
        let Setup { tuning, images } = setup;
        layout.validate()?;
        let n = layout.pixels();
        let luma_in_slot = reads_luma_in_place(&layout);
        let integral = integral::IntegralStage::new(gpu, &layout, &tuning, images)?;
        let region_stage = regions::RegionsStage::new(gpu, &layout, regions, &tuning)?;
        let readout = Readout::new(gpu, region_stage.sums_len())?;
        let read_back = ReadBack::new(readout.layout);
        let bufs = DeviceImages {
            luma: if luma_in_slot {
                None
            } else {
                Some(DeviceImage::new(gpu, n)?)
            },
            magnitude: DeviceImage::new(gpu, n)?,
            hist: device_buffer(gpu, 256)?,
            readout,
        };
        Ok(Pipeline {
            layout,
            options,
            luma: luma::LumaStage::new(gpu, layout.format, &tuning).stage(Stage::Luma)?,
            sobel: sobel::SobelStage::new(gpu, &tuning, images, n).stage(Stage::Sobel)?,
            histogram: histogram::HistogramStage::new(gpu, &tuning, n).stage(Stage::Histogram)?,
            otsu: otsu::OtsuStage::new(gpu, &tuning, images, n).stage(Stage::Otsu)?,
            integral,
            regions: region_stage,
            bufs,
            events: Vec::with_capacity(32),
            time_every: 1,
            last_timings: StageTimings::default(),
            last_span: 0,
            hist_zeroed: false,
            read_back,
            grid: (0, 0),
            frames: 0,
        })
    }

    pub fn layout(&self) -> &FrameLayout {
        &self.layout
    }

    pub fn options(&self) -> &PipelineOptions {
        &self.options
    }

    /// Whether this pipeline keeps its full images (decided when it was built).
    pub fn full_images(&self) -> FullImages {
        match self.sobel.kept() {
            Some(_) => FullImages::Kept,
            None => FullImages::Discarded,
        }
    }

    /// The bytes this pipeline holds on the device: every buffer it allocated (images with
    /// their guard bands, the integral passes' scratch, the small results), as the driver
    /// reports their sizes. The frame slots are not counted: they belong to the source
    /// ([`Pipeline::new_slot`] makes one of `frame_bytes()`).
    pub fn device_bytes(&self) -> Result<u64, ClError> {
        let sobel = match self.sobel.kept() {
            Some(k) => held_bytes(&k.dx.buf)? + held_bytes(&k.dy.buf)? + held_bytes(&k.edges.buf)?,
            None => 0,
        };
        let mask = match self.otsu.mask() {
            Some(mask) => held_bytes(&mask.buf)?,
            None => 0,
        };
        Ok(self.bufs.held_bytes()?
            + sobel
            + mask
            + self.histogram.held_bytes()?
            + self.integral.held_bytes()?
            + self.regions.held_bytes()?)
    }

    /// The bytes a frame moves through this pipeline, per stage and in all, inputs read
    /// once and outputs written once ([`Traffic`]), with the regions it measures now.
    pub fn traffic(&self) -> Traffic {
        Traffic::of(
            &self.layout,
            self.full_images(),
            self.regions.region_count(),
        )
    }

    /// Measures the stage times on one frame in `frames` from the next frame on (every
    /// frame until this is called; 0 counts as 1). Each timed frame asks the driver for an
    /// event per kernel and reads two timestamps from each; the others ask none of their
    /// kernels (only the read, which the wait watches), work a GPU driver that tracks
    /// events (NVIDIA's, on a thread of its own) is spared. Untimed frames carry the last
    /// timed frame's times ([`FrameResult::timed`]).
    pub fn time_every(&mut self, frames: u64) {
        self.time_every = frames.max(1);
    }

    /// Changes the options for the frames that follow (no reallocation).
    pub(crate) fn set_options(&mut self, options: PipelineOptions) {
        self.options = options;
    }

    /// Replaces the regions measured on each frame.
    pub fn set_regions(&mut self, gpu: &Gpu, regions: &[Region]) -> Result<(), PipelineError> {
        let cells = self.regions.cells().to_vec();
        self.regions
            .set_regions(gpu, &self.layout, regions, &cells)?;
        self.new_readout(gpu)
    }

    /// Measures a `cols` x `rows` grid of cells over the frame on every frame and the
    /// gradient histogram on every few, for the camera-health detectors; `None` stops
    /// both. Grids finer than the frame get one cell per pixel on that side.
    pub fn set_health_grid(
        &mut self,
        gpu: &Gpu,
        grid: Option<(u32, u32)>,
    ) -> Result<(), PipelineError> {
        let (w, h) = (self.layout.width, self.layout.height);
        let (cells, shape) = match grid {
            Some((cols, rows)) => (
                crate::region::grid(w, h, cols, rows),
                crate::region::grid_shape(w, h, cols, rows),
            ),
            None => (Vec::new(), (0, 0)),
        };
        let configured = self.regions.configured_regions().to_vec();
        self.regions
            .set_regions(gpu, &self.layout, &configured, &cells)?;
        self.new_readout(gpu)?;
        self.grid = shape;
        Ok(())
    }

    /// Makes the read-back buffers for the regions measured now.
    fn new_readout(&mut self, gpu: &Gpu) -> Result<(), PipelineError> {
        self.bufs.readout = Readout::new(gpu, self.regions.sums_len())?;
        self.read_back.resize(self.bufs.readout.layout);
        Ok(())
    }

    /// A frame slot of the size this pipeline's frames need.
    pub fn new_slot(&self, gpu: &Gpu) -> Result<FrameSlot, ClError> {
        FrameSlot::new(gpu, self.layout.frame_bytes())
    }

    /// Processes the frame in `slot` and waits for the results, which come with the
    /// frame's images for as long as `slot` is held.
    pub fn process<'a>(
        &'a mut self,
        gpu: &Gpu,
        slot: &'a FrameSlot,
    ) -> Result<Processed<'a>, PipelineError> {
        let mut result = FrameResult::empty();
        let images = self.process_into(gpu, slot, &mut result)?;
        Ok(Processed { result, images })
    }

    /// As [`Pipeline::process`], into `result`, reusing what it holds: once `result` has
    /// been filled for this pipeline's regions, a frame allocates no host memory.
    pub fn process_into<'a>(
        &'a mut self,
        gpu: &Gpu,
        slot: &'a FrameSlot,
        result: &mut FrameResult,
    ) -> Result<FrameImages<'a>, PipelineError> {
        let need = self.layout.frame_bytes();
        if slot.len() < need {
            return Err(PipelineError::SlotTooSmall {
                have: slot.len(),
                need,
                layout: format!(
                    "{} {}x{}",
                    self.layout.format, self.layout.width, self.layout.height
                ),
            });
        }
        // However this ends, the queue is finished before it returns or unwinds: the
        // device may be writing into `read_back` until then.
        let drain = QueueDrain::new(gpu);
        let gradient = self.grid != (0, 0) && self.frames.is_multiple_of(GRADIENT_SAMPLE_FRAMES);
        let timed = self.frames.is_multiple_of(self.time_every);
        self.frames = self.frames.wrapping_add(1);
        let enqueued = self.enqueue_frame(gpu, slot, gradient, Record::event_if(timed));
        let finished = drain.finish(self.read_back.event.as_ref());
        if finished.is_err() {
            self.read_back.abandon();
        }
        enqueued?;
        finished?;
        self.hist_zeroed = true;
        let l = self.layout;
        let read = &self.read_back;
        for (i, count) in result.histogram.iter_mut().enumerate() {
            *count = read.result(i);
        }
        self.regions.fill(
            read.sums(),
            &mut result.frame,
            &mut result.regions,
            &mut result.cells,
        );
        result.grid = self.grid;
        result.gradient_sampled = gradient;
        if gradient {
            for (i, count) in result.gradient_histogram.iter_mut().enumerate() {
                *count = read.gradient(i);
            }
        }
        if timed {
            let mut timings = StageTimings::default();
            let (mut first, mut last) = (u64::MAX, 0);
            for (stage, event) in self.events.iter() {
                let (start, end) = event_interval(event)?;
                timings.0[*stage as usize] += end.saturating_sub(start);
                first = first.min(start);
                last = last.max(end);
            }
            self.last_timings = timings;
            self.last_span = last.saturating_sub(first);
        }
        result.width = l.width;
        result.height = l.height;
        result.otsu_threshold = read.result(256) as u8;
        result.timings = self.last_timings;
        result.timed = timed;
        Ok(FrameImages {
            pipeline: self,
            slot,
        })
    }

    /// Enqueues every stage's kernels on the frame in `slot` and the read of the small
    /// results behind them, without waiting. The caller finishes the queue, whatever
    /// this returns, before touching `read_back`.
    fn enqueue_frame(
        &mut self,
        gpu: &Gpu,
        slot: &FrameSlot,
        gradient: bool,
        record: Record,
    ) -> Result<(), PipelineError> {
        let l = self.layout;
        let b = &self.bufs;
        let r = &b.readout;
        let events = &mut self.events;
        events.clear();
        let mut keep = |stage: Stage, event: Option<Event>| {
            if let Some(event) = event {
                events.push((stage, event));
            }
        };
        let luma_src = match &b.luma {
            None => slot.buffer(),
            Some(luma) => {
                keep(
                    Stage::Luma,
                    self.luma
                        .enqueue(gpu, slot.buffer(), &l, &luma.buf, record)
                        .stage(Stage::Luma)?,
                );
                &luma.buf
            }
        };
        if !self.hist_zeroed {
            keep(
                Stage::Histogram,
                self.histogram
                    .enqueue_clear(gpu, &b.hist, record)
                    .stage(Stage::Histogram)?,
            );
        }
        // Until this frame's Otsu kernel has run, the counts are not zero.
        self.hist_zeroed = false;
        self.histogram
            .enqueue(gpu, luma_src, &l, &b.hist, record, |e| {
                keep(Stage::Histogram, e)
            })
            .stage(Stage::Histogram)?;
        keep(
            Stage::Otsu,
            self.otsu
                .enqueue_threshold(gpu, &b.hist, &l, &r.results, record)
                .stage(Stage::Otsu)?,
        );
        keep(
            Stage::Sobel,
            self.sobel
                .enqueue(
                    gpu,
                    luma_src,
                    &l,
                    &self.options,
                    &b.magnitude.buf,
                    sobel::OtsuBuffers {
                        hist: &b.hist,
                        results: &r.results,
                    },
                    record,
                )
                .stage(Stage::Sobel)?,
        );
        if gradient {
            keep(
                Stage::Health,
                self.histogram
                    .enqueue_clear(gpu, &r.gradient, record)
                    .stage(Stage::Health)?,
            );
            self.histogram
                .enqueue(gpu, &b.magnitude.buf, &l, &r.gradient, record, |e| {
                    keep(Stage::Health, e)
                })
                .stage(Stage::Health)?;
        }
        keep(
            Stage::Binarize,
            self.otsu
                .enqueue_binarize(gpu, luma_src, &l, &r.results, record)
                .stage(Stage::Binarize)?,
        );
        let counted = integral::Counted {
            luma: luma_src,
            magnitude: &b.magnitude.buf,
            edge_threshold: self.options.edge_threshold,
            results: &r.results,
        };
        self.integral
            .enqueue(gpu, &l, &counted, record, |e| keep(Stage::Integral, e))
            .stage(Stage::Integral)?;
        keep(
            Stage::Regions,
            self.regions
                .enqueue(gpu, &l, &counted, self.integral.blocked(), &r.sums, record)
                .stage(Stage::Regions)?,
        );
        // One read of every result behind the kernels; the caller waits once.
        // SAFETY: `process_into`, the only caller, finishes the queue on every way out
        // (`QueueDrain`) before `read_back` is read, and nothing else can resize or free
        // it while `process_into` holds the pipeline.
        unsafe { self.read_back.enqueue(gpu, r).stage(Stage::Regions) }
    }

    /// How many of the last frame's commands (kernels and reads) the device has not
    /// completed yet.
    #[cfg(test)]
    fn unfinished_commands(&self) -> usize {
        let complete = |e: &Event| {
            e.command_execution_status().map(|s| s.0) == Ok(opencl3::event::CL_COMPLETE)
        };
        let kernels = self.events.iter().map(|(_, e)| e);
        let reads = self.read_back.event.iter();
        kernels.chain(reads).filter(|e| !complete(e)).count()
    }

    /// Device time from the first kernel's start to the last one's end for the last frame
    /// processed, in nanoseconds: the stages' times plus the gaps between kernels.
    pub(crate) fn last_device_span_nanos(&self) -> u64 {
        self.last_span
    }

    /// How many commands the last frame enqueued with an event: its kernels and the fills
    /// that clear a histogram if it was timed, none if not.
    pub(crate) fn last_command_count(&self) -> usize {
        self.events.len()
    }

    /// When the last frame's read of its results ended, on the device clock in
    /// nanoseconds: the end of every frame, timed or not.
    pub(crate) fn last_read_end_nanos(&self) -> Result<u64, ClError> {
        match &self.read_back.event {
            Some(read) => Ok(event_interval(read)?.1),
            None => Err(ClError::Call {
                call: "clGetEventProfilingInfo(the frame's read)",
                code: RawClError(opencl3::error_codes::CL_INVALID_EVENT),
            }),
        }
    }

    /// Names of the per-pixel buffers whose guard band a kernel overwrote (none, if every
    /// kernel kept within its image), of those the pipeline has (luma only where not read
    /// from the slot, the full images only when kept). For tests.
    pub fn broken_guards(&self, gpu: &Gpu) -> Result<Vec<&'static str>, ClError> {
        let b = &self.bufs;
        let mut images = vec![("magnitude", b.magnitude.guard_intact(gpu)?)];
        if let Some(luma) = &b.luma {
            images.push(("luma", luma.guard_intact(gpu)?));
        }
        if let Some(k) = self.sobel.kept() {
            images.push(("dx", k.dx.guard_intact(gpu)?));
            images.push(("dy", k.dy.guard_intact(gpu)?));
            images.push(("edges", k.edges.guard_intact(gpu)?));
        }
        if let Some(mask) = self.otsu.mask() {
            images.push(("mask", mask.guard_intact(gpu)?));
        }
        Ok(images
            .into_iter()
            .chain(self.integral.guard_checks(gpu)?)
            .filter(|&(_, intact)| !intact)
            .map(|(name, _)| name)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::PixelFormat;
    use crate::reference;

    fn gpu() -> Gpu {
        crate::cl::test_gpu()
    }

    /// Both ways of waiting (NVIDIA's: the frame's last read polled, no clFinish once it
    /// completed), run on the test device, timing one frame in 3 as the daemon times a
    /// few: every command of a frame has completed when it returns; the untimed frames
    /// keep no events and carry the last timed frame's stage times; and the results, all
    /// come back with one read, are exact (histogram, threshold, regions, the grid's
    /// cells, the gradient histogram), for frames read in place and through the luma
    /// stage, for every tuning (the Mali one's histogram scratch is shared by the two
    /// histograms).
    #[test]
    fn timed_and_untimed_frames_give_exact_results_with_every_command_complete() {
        for completion in [crate::cl::Completion::Finish, crate::cl::Completion::Poll] {
            let mut gpu = gpu();
            gpu.completion = completion;
            let formats = [PixelFormat::Grey, PixelFormat::Yuyv];
            for ((name, tuning), format) in Tuning::ALL.into_iter().zip(formats.iter().cycle()) {
                let what = format!("{completion:?}, {name}, {format}");
                let layout = FrameLayout::packed(*format, 641, 479);
                let regions = ["door:10,20,300,200".parse().expect("region")];
                let options = PipelineOptions::default();
                let mut pipeline = Pipeline::with_tuning(&gpu, layout, options, &regions, tuning)
                    .expect("pipeline");
                pipeline
                    .set_health_grid(&gpu, Some(crate::health::GRID))
                    .expect("health grid");
                pipeline.time_every(3);
                let mut slot = pipeline.new_slot(&gpu).expect("slot");
                let mut last_timed = StageTimings::default();
                for n in 0..5usize {
                    let what = format!("{what}, frame {n}");
                    let frame: Vec<u8> = (0..layout.frame_bytes())
                        .map(|i| ((i * (7 + n)) % 251) as u8)
                        .collect();
                    slot.write_bytes(&gpu, &frame).expect("write the frame");
                    let result = pipeline
                        .process(&gpu, &slot)
                        .expect("a frame")
                        .into_result();
                    assert_eq!(pipeline.unfinished_commands(), 0, "{what}");
                    assert_eq!(result.timed, n % 3 == 0, "{what}");
                    if result.timed {
                        assert!(result.timings.get(Stage::Sobel) > 0, "{what}");
                        last_timed = result.timings;
                    } else {
                        assert_eq!(result.timings, last_timed, "{what}");
                        assert!(pipeline.events.is_empty(), "{what}");
                    }
                    let luma = reference::luma(&layout, &frame);
                    let hist = reference::histogram(&luma);
                    assert_eq!(result.histogram, hist, "{what}");
                    assert_eq!(result.otsu_threshold, reference::otsu_threshold(&hist));
                    let (sum, sqsum) = reference::integral(&luma, 641, 479);
                    let at = |x: usize, y: usize| u64::from(sum[y * 642 + x]);
                    let door = at(310, 220) + at(10, 20) - at(310, 20) - at(10, 220);
                    assert_eq!(result.regions[0].1.sum, door, "{what}");
                    assert_eq!(result.frame.sum, at(641, 479), "{what}");
                    assert_eq!(result.frame.sqsum, sqsum[479 * 642 + 641], "{what}");
                    let cells: u64 = result.cells.iter().map(|c| c.sum).sum();
                    assert_eq!(cells, at(641, 479), "{what}");
                    let foreground =
                        luma.iter().filter(|&&v| v > result.otsu_threshold).count() as u64;
                    assert_eq!(result.frame.foreground, foreground, "{what}");
                    assert_eq!(result.gradient_sampled, n % 4 == 0, "{what}");
                    if result.gradient_sampled {
                        let (dx, dy) = reference::sobel(&luma, 641, 479, options.border);
                        let magnitude = reference::magnitude(&dx, &dy, options.magnitude);
                        let gradients = reference::histogram(&magnitude);
                        assert_eq!(result.gradient_histogram, gradients, "{what}");
                    }
                }
            }
        }
    }

    /// Two cameras on one device share its context and built programs: their pipelines,
    /// each with its own queue, kernels (and so kernel arguments) and buffers, run at
    /// once on two threads, one on grey frames read in place, one on YUYV through the luma
    /// stage, of other sizes and regions, and every frame of each is exact.
    #[test]
    fn two_cameras_sharing_a_context_run_at_once_with_exact_results() {
        let _turn = crate::cl::SHARING_TESTS
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let cameras = [
            (PixelFormat::Grey, 641, 479, "door:10,20,300,200"),
            (PixelFormat::Yuyv, 333, 250, "door:3,5,100,90"),
        ];
        let gpus = [gpu(), gpu()];
        assert!(gpus[0].shares_context_with(&gpus[1]));
        std::thread::scope(|scope| {
            for (n, (gpu, (format, w, h, region))) in gpus.iter().zip(cameras).enumerate() {
                scope.spawn(move || {
                    let layout = FrameLayout::packed(format, w, h);
                    let regions = [region.parse::<Region>().expect("region")];
                    let r = &regions[0];
                    let (x, y, rw, rh) = (r.x, r.y, r.width, r.height);
                    let mut pipeline =
                        Pipeline::new(gpu, layout, PipelineOptions::default(), &regions)
                            .expect("pipeline");
                    let mut slot = pipeline.new_slot(gpu).expect("slot");
                    for f in 0..20usize {
                        let what = format!("camera {n}, frame {f}");
                        let frame: Vec<u8> = (0..layout.frame_bytes())
                            .map(|i| ((i * (3 + f + 5 * n)) % 253) as u8)
                            .collect();
                        slot.write_bytes(gpu, &frame).expect("write the frame");
                        let result = pipeline.process(gpu, &slot).expect("a frame").into_result();
                        let luma = reference::luma(&layout, &frame);
                        let hist = reference::histogram(&luma);
                        assert_eq!(result.histogram, hist, "{what}");
                        assert_eq!(result.otsu_threshold, reference::otsu_threshold(&hist));
                        let (sum, _) = reference::integral(&luma, w as usize, h as usize);
                        let at = |x: u32, y: u32| u64::from(sum[(y * (w + 1) + x) as usize]);
                        let door = at(x + rw, y + rh) + at(x, y) - at(x + rw, y) - at(x, y + rh);
                        assert_eq!(result.regions[0].1.sum, door, "{what}");
                        assert_eq!(result.frame.sum, at(w, h), "{what}");
                    }
                });
            }
        });
    }

    /// Issue 4: a frame that fails after a non-blocking read was enqueued returned while
    /// the device could still write into a stack array. Here the failure comes right
    /// after the read, the last point before the wait; a 1080p frame keeps the device busy
    /// for milliseconds, so a return without waiting finds its commands still running.
    /// What this proves: every command the frame enqueued has completed when
    /// `process_into` returns its error, so no write is pending into host memory. It
    /// cannot see a write into freed memory itself, only that none can still come.
    #[test]
    fn r4_a_frame_failing_after_its_reads_returns_with_every_command_complete() {
        let gpu = gpu();
        let layout = FrameLayout::packed(PixelFormat::Yuyv, 1920, 1080);
        let regions = ["door:10,20,640,480".parse().expect("region")];
        let mut pipeline =
            Pipeline::new(&gpu, layout, PipelineOptions::default(), &regions).expect("pipeline");
        let mut slot = pipeline.new_slot(&gpu).expect("slot");
        let frame: Vec<u8> = (0..layout.frame_bytes())
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        slot.write_bytes(&gpu, &frame).expect("write the frame");
        for attempt in 0..3 {
            pipeline.read_back.fail_after_read = true;
            let err = pipeline
                .process(&gpu, &slot)
                .expect_err("the injected failure");
            let chain = format!(
                "{err}: {}",
                std::error::Error::source(&err).expect("a cause")
            );
            assert_eq!(
                chain,
                "regions stage: a step after clEnqueueReadBuffer(results), failing as a test \
                 asked failed: CL_OUT_OF_RESOURCES",
                "attempt {attempt}"
            );
            assert!(pipeline.read_back.event.is_some(), "the read was enqueued");
            assert_eq!(pipeline.unfinished_commands(), 0, "attempt {attempt}");
        }
        // The failed frames left nothing behind: the next one is exact.
        pipeline.read_back.fail_after_read = false;
        let result = pipeline.process(&gpu, &slot).expect("a frame");
        let luma = reference::luma(&layout, &frame);
        let hist = reference::histogram(&luma);
        assert_eq!(result.histogram, hist);
        assert_eq!(result.otsu_threshold, reference::otsu_threshold(&hist));
        assert_eq!(result.regions[0].1.area, 640 * 480);
        assert_eq!(pipeline.unfinished_commands(), 0);
    }
}
