//! The per-frame pipeline: enqueues every stage's kernels on one in-order queue, keeps the
//! intermediate images on the device, and reads back only the small results (histogram,
//! threshold, gradient histogram, region sums: one buffer, one read) unless the full
//! images are asked for.
//!
//! ```text
//! slot ─► luma ─┬─► sobel (magnitude) ─────────────────────────┐
//!               ├─► histogram ─► otsu (threshold on device*) ──┤
//!               └──────────────────────────────────────────────┴─► integral ─► regions
//!                                                                  (+ motion's   (+ moving
//!                                                                   tiles)        pixels)
//! ```
//!
//! (*) With [`OtsuArithmetic::Host`] (Bifrost and Valhall, which have no fp64) the counts
//! are read back while Sobel runs and the host works the threshold out and writes it back.
//!
//! Motion (`motion/`, with its kernel's host-side control) has no launch of its own: the
//! integral stage's last launch compares each whole tile's mean, taken from the left
//! integral, with a background kept on the device, and the region stage's launch counts
//! the moving pixels of each of its rectangles from that mask of tiles.
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
//! `kernels/regions.cl`, which is built with `kernels/motion.cl` and `kernels/integral.cl`
//! as one program. Stages
//! never allocate capture buffers and never touch metrics or HTTP; they fill a
//! [`FrameResult`]. Around them: `options` (what is computed, and the work sizes a device
//! gets), `timings`, `buffers` (guarded device images and read-back memory), `launch`
//! (work-group geometry), `processed` (what a frame gives back), `traffic` and `inspect`
//! (what a pipeline costs and tells about its last frame). This file holds [`Pipeline`],
//! which runs them: what runs, what is read back, in which order.
//!
//! One room, long as it is: `Pipeline` is the one place that orders every stage's
//! kernels on the queue and reads their results back from the one buffer; the stages'
//! own code lives in their files, and the tests in `tests.rs` and `motion_tests.rs`.

// One unsafe operation per block, so each SAFETY comment covers exactly one.
#![deny(clippy::multiple_unsafe_ops_per_block)]

mod histogram;
mod integral;
mod luma;
mod motion;
pub mod motion_tiles;
mod otsu;
mod regions;
mod sobel;

mod buffers;
mod inspect;
mod launch;
mod options;
mod plausible;
mod processed;
pub mod programs;
mod timings;
mod traffic;

use opencl3::event::Event;

use std::time::Instant;

use crate::cl::{ClError, FrameSlot, Gpu, Record, Timing};
use edgesight_frame::frame::{FrameLayout, LayoutError};
use edgesight_frame::region::{Region, RegionError};

use buffers::{device_buffer, DeviceImage, DeviceImages, QueueDrain, ReadBack, Readout};
pub(crate) use launch::Launch;
use launch::StageContext;
pub use motion::control::{
    MotionResult, MotionSettings, MotionState, MotionThreshold, AUTO_FACTOR, AUTO_MAX, AUTO_MIN,
    LEARN_FOLLOW_SECONDS, LEARN_SECONDS, SCENE_CHANGE_SHARE, SUDDEN_LIGHT,
};
pub use motion::FrameMotion;
pub use options::{
    Border, FullImages, HistogramCounting, IntegralLayout, Magnitude, OtsuArithmetic, OtsuLaunch,
    PipelineOptions, Setup, SobelLayout, Stores, Tuning, TuningChoice, UnknownBorder,
    UnknownTuning, SOBEL_RUN_CHUNKS,
};
pub use otsu::{otsu_threshold, ThresholdParams};
pub use processed::{
    DeviceMotion, FrameImages, FrameResult, Images, Pictures, Processed, TileMask,
};
pub use timings::{Stage, StageTimings};
pub use traffic::Traffic;

/// Why a pipeline could not be built, or a frame not processed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The frame layout is invalid: empty, too large, or its stride too small for its width.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A region (or health-grid cell) is empty or lies outside the frame.
    #[error(transparent)]
    Region(#[from] RegionError),
    /// The frame slot handed to [`Pipeline::process`] is smaller than one frame of the layout.
    #[error("frame slot holds {have} bytes, a {layout} frame needs {need}")]
    SlotTooSmall {
        /// The slot's size in bytes.
        have: usize,
        /// The bytes one frame of the pipeline's layout takes.
        need: usize,
        /// The layout, as "FORMAT WIDTHxHEIGHT".
        layout: String,
    },
    /// A stage's results read back break what any frame's must hold (a broken driver or device):
    /// the frame is dropped and counted under that stage.
    #[error("{stage} stage: the device's results are impossible: {what}")]
    Implausible {
        /// The stage that wrote the impossible results.
        stage: Stage,
        /// What is impossible about them (e.g. a histogram whose counts miss pixels).
        what: String,
    },
    /// An OpenCL call of one stage failed, building its kernels or running them.
    #[error("{stage} stage")]
    Stage {
        /// The stage whose call failed.
        stage: Stage,
        /// The OpenCL error.
        #[source]
        source: ClError,
    },
    /// An OpenCL call outside any one stage failed (shared buffers, the read-back, the wait).
    #[error(transparent)]
    Cl(#[from] ClError),
    /// The full images were asked for from a pipeline built without them
    /// ([`FullImages::Discarded`]).
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
/// copy would (bench/notes/round2.md#h100-what-changed): either way the copy, and its
/// buffer, would be pure cost.
fn reads_luma_in_place(layout: &FrameLayout) -> bool {
    layout.format.luma_plane_first() && layout.stride == layout.width
}

/// The next pipeline's [`Pipeline::frame_number`] id.
static NEXT_PIPELINE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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
    motion: motion::MotionStage,
    /// What the motion kernels are told each frame; `None`: motion is not measured.
    motion_control: Option<motion::control::MotionControl>,
    /// What the motion kernels are told instead, every frame watched: the checks against
    /// the reference (`selftest`, the tests) ([`Pipeline::tell_motion`]).
    motion_told: Option<FrameMotion>,
    /// What the last frame's motion kernels were told, if it ran them.
    last_motion: Option<FrameMotion>,
    /// Unique in the process ([`Pipeline::frame_number`]).
    id: u64,
    bufs: DeviceImages,
    /// The last frame's events, kept so that a frame allocates nothing once warm (none on
    /// a frame that is not timed).
    events: Vec<(Stage, Event)>,
    /// On a device timed by the host ([`Timing::Host`]): when the last timed frame began
    /// enqueueing, and when each of its commands was seen complete.
    host_marks: (Instant, Vec<(Stage, Instant)>),
    /// Stage times are measured on one frame in this many ([`Pipeline::time_every`]).
    time_every: u64,
    /// The last timed frame's stage times, and its first kernel start to last kernel end
    /// in nanoseconds.
    last_timings: StageTimings,
    last_span: u64,
    /// Whether the histogram buffer holds zeros, as the last frame's Otsu kernel leaves it;
    /// a frame that failed before that kernel ran, or whose threshold the host worked out,
    /// leaves it to be cleared.
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
        let region_stage = regions::RegionsStage::new(gpu, &layout, regions, &tuning, images)?;
        let readout = Readout::new(gpu, region_stage.region_count())?;
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
            motion: motion::MotionStage::new(gpu, &layout).stage(Stage::Integral)?,
            motion_control: None,
            motion_told: None,
            last_motion: None,
            id: NEXT_PIPELINE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            bufs,
            events: Vec::with_capacity(32),
            host_marks: (Instant::now(), Vec::with_capacity(32)),
            time_every: 1,
            last_timings: StageTimings::default(),
            last_span: 0,
            hist_zeroed: false,
            read_back,
            grid: (0, 0),
            frames: 0,
        })
    }

    /// The layout of the frames this pipeline was built for.
    pub fn layout(&self) -> &FrameLayout {
        &self.layout
    }

    /// What this pipeline computes: the options it was built with, or last set.
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
    pub fn set_options(&mut self, options: PipelineOptions) {
        self.options = options;
    }

    /// Measures motion with `settings` from the next frame on, keeping the background
    /// learned so far; `None` stops measuring it (and forgets the background).
    pub fn set_motion(&mut self, settings: Option<MotionSettings>) {
        match (&mut self.motion_control, settings) {
            (Some(control), Some(settings)) => control.set_settings(settings),
            (control, settings) => {
                *control = settings.map(motion::control::MotionControl::new);
            }
        }
    }

    /// Tells the motion kernels `told` on every frame from the next on, instead of what
    /// [`Pipeline::set_motion`]'s control decides, every frame's moving pixels counted:
    /// how the checks against the reference (`selftest`) drive them frame by frame, read
    /// back with [`Pipeline::read_motion`]. `None`: back to the control.
    pub fn tell_motion(&mut self, told: Option<FrameMotion>) {
        self.motion_told = told;
    }

    /// Replaces the regions measured on each frame.
    pub fn set_regions(&mut self, gpu: &Gpu, regions: &[Region]) -> Result<(), PipelineError> {
        let cells = self.regions.cells().to_vec();
        self.regions.set_regions(gpu, regions, &cells)?;
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
                edgesight_frame::region::grid(w, h, cols, rows),
                edgesight_frame::region::grid_shape(w, h, cols, rows),
            ),
            None => (Vec::new(), (0, 0)),
        };
        let configured = self.regions.configured_regions().to_vec();
        self.regions.set_regions(gpu, &configured, &cells)?;
        self.new_readout(gpu)?;
        self.grid = shape;
        Ok(())
    }

    /// Makes the read-back buffers for the regions measured now.
    fn new_readout(&mut self, gpu: &Gpu) -> Result<(), PipelineError> {
        self.bufs.readout = Readout::new(gpu, self.regions.region_count())?;
        self.read_back.resize(self.bufs.readout.layout);
        Ok(())
    }

    /// Runs one blank frame through every stage and forgets it: a driver may compile a
    /// kernel for its work sizes at its first launch (POCL: seconds on a cold cache), which
    /// is then off the first real frames. Its results are never read, so impossible ones
    /// are no error here: a broken driver's frames are the next frames' to count.
    pub fn warm_up(&mut self, gpu: &Gpu) -> Result<(), PipelineError> {
        let blank = self.new_slot(gpu)?;
        match self.process(gpu, &blank) {
            Ok(_) | Err(PipelineError::Implausible { .. }) => Ok(()),
            Err(e) => Err(e),
        }
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
        let tiles = self.motion.tiles();
        let motion = match &mut self.motion_control {
            Some(control) if tiles > 0 => Some(control.next(std::time::Instant::now())),
            _ => None,
        };
        let motion = self.motion_told.filter(|_| tiles > 0).or(motion);
        self.last_motion = motion;
        let enqueued = self.enqueue_frame(gpu, slot, gradient, motion, Record::event_if(timed));
        let finished = drain.finish(self.read_back.event.as_ref());
        if finished.is_err() {
            self.read_back.abandon();
        }
        if enqueued.is_err() || finished.is_err() {
            if let Some(control) = &mut self.motion_control {
                control.relearn();
            }
        }
        enqueued?;
        finished?;
        #[cfg(any(test, feature = "test-support"))]
        crate::cl::scribble::over(
            crate::cl::scribble::Reads::Results,
            self.read_back.words_mut(),
        );
        if let Err(e) = self.read_results(result, motion, gradient) {
            // What the device left may be anything: the next frame clears the histogram
            // and learns the background afresh.
            self.hist_zeroed = false;
            if let Some(control) = &mut self.motion_control {
                control.relearn();
            }
            return Err(e);
        }
        self.hist_zeroed = self.otsu.clears_histogram();
        if timed {
            (self.last_timings, self.last_span) = match gpu.timing {
                Timing::Device => StageTimings::of_events(&self.events)?,
                Timing::Host => StageTimings::of_host_marks(self.host_marks.0, &self.host_marks.1),
            };
        }
        result.timings = self.last_timings;
        result.timed = timed;
        result.timing = gpu.timing;
        Ok(FrameImages {
            pipeline: self,
            slot,
        })
    }

    /// Reads a finished frame's results into `result`, each checked for what no right
    /// device writes ([`plausible`]) before the motion control or anything else reads it.
    fn read_results(
        &mut self,
        result: &mut FrameResult,
        motion: Option<FrameMotion>,
        gradient: bool,
    ) -> Result<(), PipelineError> {
        let l = self.layout;
        let tiles = self.motion.tiles();
        let read = &self.read_back;
        for (i, count) in result.histogram.iter_mut().enumerate() {
            *count = read.result(i);
        }
        result.motion = MotionResult::default();
        let mut watching = false;
        if motion.is_some() {
            self.motion.finished();
            let histogram = read.motion_histogram();
            let moving = read.motion_count(motion_tiles::STATS_MOVING);
            plausible::check_motion(&histogram, moving, tiles)?;
            if let Some(control) = &mut self.motion_control {
                let counts = motion::control::FrameCounts {
                    diff_histogram: &histogram,
                    moving,
                    gain: read.motion_count(motion_tiles::STATS_GAIN),
                };
                result.motion = control.observe(&counts, tiles);
                watching = result.motion.state == MotionState::Watching;
            }
        }
        if self.motion_told.is_some() && tiles > 0 {
            watching = true;
        }
        self.regions.fill(
            read.sums(),
            watching.then(|| read.moving_pixels()),
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
        result.width = l.width;
        result.height = l.height;
        let threshold = read.result(256);
        result.otsu_threshold = threshold as u8;
        let mut regions = result
            .regions
            .iter()
            .map(|(_, s)| s)
            .chain(result.cells.iter());
        plausible::check(plausible::RawResults {
            pixels: l.pixels() as u64,
            histogram: &result.histogram,
            threshold,
            frame: &result.frame,
            regions: &mut regions,
            gradients: gradient.then_some(&result.gradient_histogram),
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
        motion: Option<FrameMotion>,
        record: Record,
    ) -> Result<(), PipelineError> {
        let l = self.layout;
        let b = &self.bufs;
        let r = &b.readout;
        let events = &mut self.events;
        events.clear();
        // Timed by the host: each command is waited for as it is enqueued.
        let host_timed = record == Record::Event && gpu.timing == Timing::Host;
        let (begun, marks) = &mut self.host_marks;
        *begun = Instant::now();
        marks.clear();
        let mut keep = |stage: Stage, event: Option<Event>| {
            if let Some(event) = event {
                if host_timed {
                    // A command that failed is reported by the frame's finish, which
                    // follows whatever this wait says.
                    let _ = event.wait();
                    marks.push((stage, Instant::now()));
                }
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
        // Where the host works the threshold out, from here on: Sobel and the gradient
        // histogram run meanwhile, and the stages after read the threshold.
        keep(
            Stage::Otsu,
            self.otsu
                .enqueue_from_host(gpu, &r.results, record)
                .stage(Stage::Otsu)?,
        );
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
        let tiles = self
            .motion
            .tile_params(gpu, motion)
            .stage(Stage::Integral)?;
        // The frame runs motion where the motion stage was told one and it has tiles.
        let motion_on = tiles.on();
        self.integral
            .enqueue(gpu, &l, &counted, &tiles, record, |e| {
                keep(Stage::Integral, e)
            })
            .stage(Stage::Integral)?;
        keep(
            Stage::Regions,
            self.regions
                .enqueue(
                    gpu,
                    &counted,
                    self.integral.blocked(),
                    &r.sums,
                    self.motion.region_params(motion_on, &r.motion),
                    record,
                )
                .stage(Stage::Regions)?,
        );
        // One read of every result behind the kernels; the caller waits once.
        // SAFETY: `process_into`, the only caller, finishes the queue on every way out
        // (`QueueDrain`) before `read_back` is read, and nothing else can resize or free
        // it while `process_into` holds the pipeline.
        unsafe { self.read_back.enqueue(gpu, r).stage(Stage::Regions) }
    }
}

#[cfg(test)]
mod motion_tests;
#[cfg(test)]
mod tests;
