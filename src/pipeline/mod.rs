//! The per-frame pipeline: enqueues every stage's kernels on one in-order queue, keeps the
//! intermediate images on the device, and reads back only the small results (histogram,
//! threshold, region sums) unless the full images are asked for.
//!
//! ```text
//! slot ─► luma ─┬─► sobel (dx, dy, magnitude, edge mask) ──────────────┐
//!               ├─► histogram ─► otsu (threshold on device) ─► binarize ┤
//!               └─► integral (sum, sqsum) ◄─ integral (edges, mask) ◄───┘ ─► region sums
//! ```
//!
//! Grey frames (and NV12's Y plane) packed at stride = width skip the luma copy: the
//! stages read the slot itself.
//!
//! Each stage lives in its own file with the kernel file it launches. Stages never allocate
//! capture buffers and never touch metrics or HTTP; they fill a [`FrameResult`].

// One unsafe operation per block, so each SAFETY comment covers exactly one.
#![deny(clippy::multiple_unsafe_ops_per_block)]

mod histogram;
mod integral;
mod luma;
mod otsu;
mod sobel;

use std::fmt;
use std::str::FromStr;

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::types::CL_NON_BLOCKING;
use serde::Serialize;

use crate::cl::{
    event_interval, new_buffer, read_blocking, write_blocking, CallContext, ClError, FrameSlot,
    Gpu, Plain,
};
use crate::frame::{FrameLayout, LayoutError, PixelFormat};
use crate::region::{Region, RegionError, RegionStats};

/// How Sobel reads pixels outside the frame (OpenCV's border types).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Border {
    /// `gfedcb|abcdefgh|gfedcba`, OpenCV's default `BORDER_REFLECT_101`.
    #[default]
    Reflect101,
    /// `aaaaaa|abcdefgh|hhhhhhh`, `BORDER_REPLICATE`.
    Replicate,
    /// `000000|abcdefgh|0000000`, `BORDER_CONSTANT` with 0.
    Constant,
}

impl Border {
    pub const ALL: [Border; 3] = [Border::Reflect101, Border::Replicate, Border::Constant];

    pub fn name(self) -> &'static str {
        match self {
            Border::Reflect101 => "reflect101",
            Border::Replicate => "replicate",
            Border::Constant => "constant",
        }
    }

    /// The code sobel.cl's `border` argument takes.
    fn kernel_code(self) -> i32 {
        match self {
            Border::Reflect101 => 0,
            Border::Replicate => 1,
            Border::Constant => 2,
        }
    }
}

impl fmt::Display for Border {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown border mode '{0}' (expected reflect101, replicate or constant)")]
pub struct UnknownBorder(pub String);

impl FromStr for Border {
    type Err = UnknownBorder;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace(['_', '-'], "").as_str() {
            "reflect101" | "default" => Ok(Border::Reflect101),
            "replicate" => Ok(Border::Replicate),
            "constant" => Ok(Border::Constant),
            _ => Err(UnknownBorder(s.to_string())),
        }
    }
}

/// How the 8-bit gradient magnitude is computed from dx and dy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Magnitude {
    /// `min(|dx| + |dy|, 255)`.
    #[default]
    L1,
    /// `min(round(sqrt(dx² + dy²)), 255)`.
    L2,
}

impl FromStr for Magnitude {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "l1" => Ok(Magnitude::L1),
            "l2" => Ok(Magnitude::L2),
            _ => Err(format!("unknown magnitude '{s}' (expected l1 or l2)")),
        }
    }
}

/// Options of the per-frame computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PipelineOptions {
    pub border: Border,
    pub magnitude: Magnitude,
    /// A pixel is an edge where its magnitude is at least this.
    pub edge_threshold: u8,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            border: Border::Reflect101,
            magnitude: Magnitude::L1,
            edge_threshold: 64,
        }
    }
}

/// Work-size choices that depend on the device, not on what is computed: every choice
/// gives the same results, so tests run each one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// How the integral passes are laid out.
    pub integral_layout: IntegralLayout,
    /// How the histogram's work-groups count into their local sub-histogram.
    pub histogram_counting: HistogramCounting,
    /// How Otsu's threshold does OpenCV's double arithmetic.
    pub otsu_arithmetic: OtsuArithmetic,
    /// How many pixels a Sobel work-item computes.
    pub sobel_layout: SobelLayout,
    /// How Sobel, binarize and the CPU integral write their images.
    pub stores: Stores,
}

/// How the kernels that write whole images store them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stores {
    /// Ordinary stores (GPUs, which write whole lines without reading them first).
    Cached,
    /// Non-temporal stores for aligned vectors (CPUs: an ordinary store first reads the
    /// cache line it overwrites, a third more memory traffic for write-once images).
    Streaming,
}

impl Stores {
    /// The `-D` option the kernel files take for this choice.
    fn define(self) -> &'static str {
        match self {
            Stores::Cached => "",
            Stores::Streaming => "-DSTREAMING_STORES",
        }
    }
}

/// The two Sobel kernels of `kernels/sobel.cl`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SobelLayout {
    /// 16 pixels per work-item with uchar16 vectors (CPUs: one SIMD register a row).
    Vector16,
    /// Four pixels per work-item with aligned 4-byte loads and vector stores, one pixel per
    /// item where the width is not a multiple of 4 (GPUs: neighbouring work-items read
    /// neighbouring words).
    FourPixelsPerItem,
}

/// The two ways `kernels/otsu.cl` computes in binary64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtsuArithmetic {
    /// The integer emulation of binary64: any OpenCL 1.2 device (Mali Bifrost and Valhall
    /// have no fp64).
    Emulated,
    /// The device's own doubles where it offers `cl_khr_fp64` (correctly rounded add,
    /// subtract, multiply and divide, contraction off), else the emulation. A GPU runs the
    /// emulation's sequential part on one slow thread (0.5 ms on an NVIDIA H100).
    NativeWhereAvailable,
}

/// The two layouts of the integral passes in `kernels/integral.cl`; both read the inputs
/// twice and write each image once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntegralLayout {
    /// GPUs: a work-group per band of rows, about one band per compute unit, scanning each
    /// row in chunks of four pixels per work-item (coalesced rows, many work-items).
    GroupBands,
    /// CPUs: a few bands of rows per compute unit, a work-item each, with 16-wide vector
    /// prefixes along the rows (one core streams through its band).
    ItemBands,
}

/// The two ways `kernels/histogram.cl` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistogramCounting {
    /// Many work-items per group share the sub-histogram through local atomics (GPUs,
    /// where local memory and its atomics are on chip).
    LocalAtomics,
    /// One work-item per group counts with plain increments: on a CPU local memory is
    /// ordinary memory and every atomic a locked instruction (on POCL at 1080p: 1.4-2.2 ms
    /// instead of 8-14 ms).
    OneItemPerGroup,
}

impl Tuning {
    /// The choices for GPUs.
    pub const FOR_GPU: Tuning = Tuning {
        integral_layout: IntegralLayout::GroupBands,
        histogram_counting: HistogramCounting::LocalAtomics,
        otsu_arithmetic: OtsuArithmetic::NativeWhereAvailable,
        sobel_layout: SobelLayout::FourPixelsPerItem,
        stores: Stores::Cached,
    };
    /// The choices for CPUs (POCL).
    pub const FOR_CPU: Tuning = Tuning {
        integral_layout: IntegralLayout::ItemBands,
        histogram_counting: HistogramCounting::OneItemPerGroup,
        otsu_arithmetic: OtsuArithmetic::Emulated,
        sobel_layout: SobelLayout::Vector16,
        stores: Stores::Streaming,
    };

    /// The choices for `gpu`'s kind of device.
    pub fn for_device(gpu: &Gpu) -> Tuning {
        if gpu.info.kind == "CPU" {
            Tuning::FOR_CPU
        } else {
            Tuning::FOR_GPU
        }
    }
}

/// The stages, in the order they run; their names label timings and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Luma,
    Sobel,
    Histogram,
    Otsu,
    Binarize,
    Integral,
    Regions,
}

impl Stage {
    pub const ALL: [Stage; 7] = [
        Stage::Luma,
        Stage::Sobel,
        Stage::Histogram,
        Stage::Otsu,
        Stage::Binarize,
        Stage::Integral,
        Stage::Regions,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Luma => "luma",
            Stage::Sobel => "sobel",
            Stage::Histogram => "histogram",
            Stage::Otsu => "otsu",
            Stage::Binarize => "binarize",
            Stage::Integral => "integral",
            Stage::Regions => "regions",
        }
    }
}

/// Device time of each stage for one frame, from profiling events, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimings(pub [u64; Stage::ALL.len()]);

impl StageTimings {
    pub fn get(&self, stage: Stage) -> u64 {
        self.0[stage as usize]
    }

    /// Each stage's median over several frames (the upper middle for an even count).
    pub fn median<'a>(runs: impl IntoIterator<Item = &'a StageTimings>) -> StageTimings {
        let runs: Vec<&StageTimings> = runs.into_iter().collect();
        let mut out = StageTimings::default();
        for (i, slot) in out.0.iter_mut().enumerate() {
            let mut values: Vec<u64> = runs.iter().map(|r| r.0[i]).collect();
            values.sort_unstable();
            *slot = values.get(values.len() / 2).copied().unwrap_or(0);
        }
        out
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = (Stage, u64)> + '_ {
        Stage::ALL.into_iter().map(|s| (s, self.get(s)))
    }
}

/// What one frame produced, without the full images.
#[derive(Clone, Debug)]
pub struct FrameResult {
    pub width: u32,
    pub height: u32,
    pub histogram: [u32; 256],
    pub otsu_threshold: u8,
    /// The whole frame as a region.
    pub frame: RegionStats,
    /// The configured regions, in order.
    pub regions: Vec<(Region, RegionStats)>,
    pub timings: StageTimings,
}

impl FrameResult {
    /// A result with nothing in it yet, to be filled by [`Pipeline::process_into`].
    pub fn empty() -> FrameResult {
        FrameResult {
            width: 0,
            height: 0,
            histogram: [0; 256],
            otsu_threshold: 0,
            frame: RegionStats::default(),
            regions: Vec::new(),
            timings: StageTimings::default(),
        }
    }
}

/// The full per-pixel outputs of the last frame, dense, row-major.
#[derive(Clone, Debug, Default)]
pub struct Images {
    pub luma: Vec<u8>,
    pub dx: Vec<i16>,
    pub dy: Vec<i16>,
    pub magnitude: Vec<u8>,
    pub edges: Vec<u8>,
    pub mask: Vec<u8>,
    /// `(height + 1) x (width + 1)`, as the three below.
    pub integral_sum: Vec<u32>,
    pub integral_sqsum: Vec<u64>,
    pub integral_edges: Vec<u32>,
    pub integral_foreground: Vec<u32>,
}

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
    #[error("the last frame's luma is its frame slot: its images need that slot, still held")]
    SlotNotHeld,
    #[error("the slot given is not the one the last frame was processed from")]
    NotTheFramesSlot,
    #[error(transparent)]
    Cl(#[from] ClError),
}

/// Attaches a stage name to an OpenCL error.
trait StageContext<T> {
    fn stage(self, stage: Stage) -> Result<T, PipelineError>;
}

impl<T> StageContext<T> for Result<T, ClError> {
    fn stage(self, stage: Stage) -> Result<T, PipelineError> {
        self.map_err(|source| PipelineError::Stage {
            stage: stage.name(),
            source,
        })
    }
}

/// A device buffer of `len` elements (at least one: OpenCL refuses empty buffers).
fn device_buffer<T>(gpu: &Gpu, len: usize) -> Result<Buffer<T>, ClError> {
    new_buffer(gpu, CL_MEM_READ_WRITE, len).call("clCreateBuffer")
}

/// Elements a guard band holds past the end of every per-pixel buffer. The band is filled
/// with a sentinel when the buffer is made, so tests can prove that no kernel's tail writes
/// beyond the image ([`Pipeline::broken_guards`]).
const GUARD_ELEMENTS: usize = 64;

/// An element type with a recognisable guard value.
pub(crate) trait Sentinel: Plain + PartialEq {
    const SENTINEL: Self;
}
impl Sentinel for u8 {
    const SENTINEL: u8 = 0xA5;
}
impl Sentinel for i16 {
    const SENTINEL: i16 = 0x5A5A;
}
impl Sentinel for u32 {
    const SENTINEL: u32 = 0xA5A5_5A5A;
}
impl Sentinel for u64 {
    const SENTINEL: u64 = 0xA5A5_5A5A_A5A5_5A5A;
}

/// A device buffer of `len` elements followed by a guard band.
pub(crate) struct DeviceImage<T> {
    pub buf: Buffer<T>,
    pub len: usize,
}

impl<T: Sentinel> DeviceImage<T> {
    fn new(gpu: &Gpu, len: usize) -> Result<DeviceImage<T>, ClError> {
        let mut buf = device_buffer::<T>(gpu, len + GUARD_ELEMENTS)?;
        write_blocking(gpu, &mut buf, len, &[T::SENTINEL; GUARD_ELEMENTS])?;
        Ok(DeviceImage { buf, len })
    }

    fn read(&self, gpu: &Gpu) -> Result<Vec<T>, ClError> {
        read_buffer(gpu, &self.buf, self.len)
    }

    fn guard_intact(&self, gpu: &Gpu) -> Result<bool, ClError> {
        let mut guard = [T::default(); GUARD_ELEMENTS];
        read_blocking(gpu, &self.buf, self.len, &mut guard)?;
        Ok(guard.iter().all(|&g| g == T::SENTINEL))
    }
}

/// Reads a whole device buffer (blocking).
fn read_buffer<T: Plain>(gpu: &Gpu, buffer: &Buffer<T>, len: usize) -> Result<Vec<T>, ClError> {
    let mut out = vec![T::default(); len];
    read_blocking(gpu, buffer, 0, &mut out)?;
    Ok(out)
}

/// Work-group geometry chosen once per kernel from what the device allows, so the global
/// size of a new frame size never changes the local size (POCL compiles per local size).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Launch {
    local: [usize; 2],
}

impl Launch {
    /// 2-D groups of up to 16 x 4 work-items.
    fn two_d(gpu: &Gpu, kernel: &Kernel) -> Result<Launch, ClError> {
        let max = kernel
            .get_work_group_size(gpu.device.id())
            .call("clGetKernelWorkGroupInfo")?
            .max(1);
        let x = max.min(16);
        let y = (max / x).clamp(1, 4);
        Ok(Launch { local: [x, y] })
    }

    /// 1-D groups of up to `want` work-items.
    fn one_d(gpu: &Gpu, kernel: &Kernel, want: usize) -> Result<Launch, ClError> {
        let max = kernel
            .get_work_group_size(gpu.device.id())
            .call("clGetKernelWorkGroupInfo")?
            .max(1);
        Ok(Launch {
            local: [want.min(max), 1],
        })
    }

    /// Global sizes rounded up to whole work-groups (OpenCL 1.2 requires it).
    fn global_2d(&self, x: usize, y: usize) -> [usize; 2] {
        [
            x.div_ceil(self.local[0]) * self.local[0],
            y.div_ceil(self.local[1]) * self.local[1],
        ]
    }

    fn global_1d(&self, n: usize) -> usize {
        n.div_ceil(self.local[0]) * self.local[0]
    }
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
    bufs: DeviceImages,
    /// The last frame's events, kept so that a frame allocates nothing once warm.
    events: Vec<(Stage, Event)>,
    /// First kernel start to last kernel end of the last frame, in nanoseconds.
    last_span: u64,
    /// Whether the stages read luma straight from the slot: grey (or NV12's Y plane) rows
    /// packed at stride = width already are the luma image. On unified memory (POCL, Mali)
    /// the slot is as fast to read as a device buffer; on an NVIDIA H100 the driver keeps
    /// the mapped slot in device memory, and reading it costs the stages about 2.5 µs more
    /// per 4K frame where the copy costs 10 µs: either way the copy would be pure cost.
    luma_in_slot: bool,
    /// The handle of the slot the last frame was read from when `luma_in_slot`, only to
    /// check that `read_images` is handed that slot: never read through, because once
    /// its holder lets the slot go the source may refill it with a newer frame.
    last_slot: Option<usize>,
    /// Whether the histogram buffer holds zeros, as the last frame's Otsu kernel leaves it;
    /// a frame that failed before that kernel ran leaves it to be cleared.
    hist_zeroed: bool,
    /// Where the small results are read back to.
    read_back: ReadBack,
}

/// Host memory the small results of a frame are read back into without blocking, owned
/// by the pipeline: on the heap, so moving the pipeline does not move it, and never
/// resized or freed while a read into it may be pending, because `process_into` finishes
/// the queue on every way out ([`QueueDrain`]) before anything else can touch it.
struct ReadBack {
    /// The histogram counts and, at index 256, the threshold.
    results: Box<[u32; 257]>,
    /// Four sums per region, the whole frame first.
    sums: Vec<u64>,
    /// The last frame's read commands.
    events: [Option<Event>; 2],
    /// A failure injected between the two reads, to test what a failed frame leaves.
    #[cfg(test)]
    fail_between_reads: bool,
}

impl ReadBack {
    fn new(sums: usize) -> ReadBack {
        ReadBack {
            results: Box::new([0; 257]),
            sums: vec![0; sums],
            events: [None, None],
            #[cfg(test)]
            fail_between_reads: false,
        }
    }

    /// Room for `len` region sums (outside `process_into`, so no read is pending).
    fn resize_sums(&mut self, len: usize) {
        self.sums.resize(len, 0);
    }

    /// Enqueues non-blocking reads of `results` and `sums` behind the frame's kernels.
    ///
    /// # Safety
    /// The queue must be finished before this memory is read, resized or freed: the
    /// device writes into it until the reads complete.
    unsafe fn enqueue(
        &mut self,
        gpu: &Gpu,
        results: &Buffer<u32>,
        sums: &Buffer<u64>,
    ) -> Result<(), ClError> {
        self.events = [None, None];
        // SAFETY: 257 words into 257 words of heap memory the pipeline owns; the caller
        // keeps it alive, unresized and unread until the queue is finished.
        let read = unsafe {
            gpu.queue
                .enqueue_read_buffer(results, CL_NON_BLOCKING, 0, &mut self.results[..], &[])
        }
        .call("clEnqueueReadBuffer(results)")?;
        self.events[0] = Some(read);
        #[cfg(test)]
        if self.fail_between_reads {
            return Err(ClError::Call {
                call: "clEnqueueReadBuffer(sums), failing as a test asked",
                code: opencl3::error_codes::ClError(opencl3::error_codes::CL_OUT_OF_RESOURCES),
            });
        }
        // SAFETY: as above; `sums` holds as many elements as the device buffer (both
        // sized from the regions in `set_regions`), and a longer read would be refused.
        let read = unsafe {
            gpu.queue
                .enqueue_read_buffer(sums, CL_NON_BLOCKING, 0, &mut self.sums, &[])
        }
        .call("clEnqueueReadBuffer(sums)")?;
        self.events[1] = Some(read);
        Ok(())
    }

    /// Leaks the memory a queue whose finish failed may still write into, and takes
    /// fresh memory in its place: a few kilobytes lost for a device that is failing,
    /// rather than a write into freed memory.
    fn abandon(&mut self) {
        Box::leak(std::mem::replace(&mut self.results, Box::new([0; 257])));
        let len = self.sums.len();
        std::mem::replace(&mut self.sums, vec![0; len]).leak();
    }
}

/// Finishes `gpu`'s queue when dropped, so that however `process_into` ends (an error
/// after the reads were enqueued, a panic), the device has stopped writing into the
/// pipeline's read-back memory before the caller may free or move anything.
struct QueueDrain<'a> {
    gpu: &'a Gpu,
    finished: bool,
}

impl<'a> QueueDrain<'a> {
    fn new(gpu: &'a Gpu) -> QueueDrain<'a> {
        QueueDrain {
            gpu,
            finished: false,
        }
    }

    /// Finishes the queue and says whether that worked.
    fn finish(mut self) -> Result<(), ClError> {
        self.finished = true;
        self.gpu.finish()
    }
}

impl Drop for QueueDrain<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Unwinding: nothing to report the error to.
            let _ = self.gpu.finish();
        }
    }
}

/// The intermediate images, kept on the device.
struct DeviceImages {
    luma: DeviceImage<u8>,
    dx: DeviceImage<i16>,
    dy: DeviceImage<i16>,
    magnitude: DeviceImage<u8>,
    edges: DeviceImage<u8>,
    mask: DeviceImage<u8>,
    /// The counts, zero between frames (the Otsu kernel clears them after reading).
    hist: Buffer<u32>,
    /// The counts and, at index 256, the threshold: what the host reads of both.
    results: Buffer<u32>,
}

impl Pipeline {
    /// Builds the kernels and allocates the buffers for frames of `layout`, with the work
    /// sizes suited to `gpu`.
    pub fn new(
        gpu: &Gpu,
        layout: FrameLayout,
        options: PipelineOptions,
        regions: &[Region],
    ) -> Result<Pipeline, PipelineError> {
        Pipeline::with_tuning(gpu, layout, options, regions, Tuning::for_device(gpu))
    }

    /// As [`Pipeline::new`], with explicit work-size choices.
    pub fn with_tuning(
        gpu: &Gpu,
        layout: FrameLayout,
        options: PipelineOptions,
        regions: &[Region],
        tuning: Tuning,
    ) -> Result<Pipeline, PipelineError> {
        layout.validate()?;
        let n = layout.pixels();
        let integral = integral::IntegralStage::new(gpu, &layout, regions, &tuning)?;
        let read_back = ReadBack::new(integral.sums_len());
        let bufs = DeviceImages {
            luma: DeviceImage::new(gpu, n)?,
            dx: DeviceImage::new(gpu, n)?,
            dy: DeviceImage::new(gpu, n)?,
            magnitude: DeviceImage::new(gpu, n)?,
            edges: DeviceImage::new(gpu, n)?,
            mask: DeviceImage::new(gpu, n)?,
            hist: device_buffer(gpu, 256)?,
            results: device_buffer(gpu, 257)?,
        };
        Ok(Pipeline {
            layout,
            options,
            luma: luma::LumaStage::new(gpu, layout.format).stage(Stage::Luma)?,
            sobel: sobel::SobelStage::new(gpu, &tuning).stage(Stage::Sobel)?,
            histogram: histogram::HistogramStage::new(gpu, &tuning).stage(Stage::Histogram)?,
            otsu: otsu::OtsuStage::new(gpu, &tuning).stage(Stage::Otsu)?,
            integral,
            bufs,
            events: Vec::with_capacity(32),
            last_span: 0,
            luma_in_slot: matches!(layout.format, PixelFormat::Grey | PixelFormat::Nv12)
                && layout.stride == layout.width,
            last_slot: None,
            hist_zeroed: false,
            read_back,
        })
    }

    pub fn layout(&self) -> &FrameLayout {
        &self.layout
    }

    pub fn options(&self) -> &PipelineOptions {
        &self.options
    }

    /// Changes the options for the frames that follow (no reallocation).
    pub fn set_options(&mut self, options: PipelineOptions) {
        self.options = options;
    }

    /// Replaces the regions measured on each frame.
    pub fn set_regions(&mut self, gpu: &Gpu, regions: &[Region]) -> Result<(), PipelineError> {
        self.integral.set_regions(gpu, &self.layout, regions)?;
        self.read_back.resize_sums(self.integral.sums_len());
        Ok(())
    }

    /// A frame slot of the size this pipeline's frames need.
    pub fn new_slot(&self, gpu: &Gpu) -> Result<FrameSlot, ClError> {
        FrameSlot::new(gpu, self.layout.frame_bytes())
    }

    /// Processes the frame in `slot` and waits for the results.
    pub fn process(&mut self, gpu: &Gpu, slot: &FrameSlot) -> Result<FrameResult, PipelineError> {
        let mut result = FrameResult::empty();
        self.process_into(gpu, slot, &mut result)?;
        Ok(result)
    }

    /// As [`Pipeline::process`], into `result`, reusing what it holds: once `result` has
    /// been filled for this pipeline's regions, a frame allocates no host memory.
    pub fn process_into(
        &mut self,
        gpu: &Gpu,
        slot: &FrameSlot,
        result: &mut FrameResult,
    ) -> Result<(), PipelineError> {
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
        let enqueued = self.enqueue_frame(gpu, slot);
        let finished = drain.finish();
        if finished.is_err() {
            self.read_back.abandon();
        }
        enqueued?;
        finished?;
        self.hist_zeroed = true;
        let l = self.layout;
        let read = &self.read_back;
        result.histogram.copy_from_slice(&read.results[..256]);
        self.integral
            .fill_regions(&read.sums, &mut result.frame, &mut result.regions);

        let mut timings = StageTimings::default();
        let (mut first, mut last) = (u64::MAX, 0);
        for (stage, event) in self.events.iter() {
            let (start, end) = event_interval(event)?;
            timings.0[*stage as usize] += end.saturating_sub(start);
            first = first.min(start);
            last = last.max(end);
        }
        self.last_span = last.saturating_sub(first);
        result.width = l.width;
        result.height = l.height;
        result.otsu_threshold = read.results[256] as u8;
        result.timings = timings;
        Ok(())
    }

    /// Enqueues every stage's kernels on the frame in `slot` and the reads of the small
    /// results behind them, without waiting. The caller finishes the queue, whatever
    /// this returns, before touching `read_back`.
    fn enqueue_frame(&mut self, gpu: &Gpu, slot: &FrameSlot) -> Result<(), PipelineError> {
        let l = self.layout;
        if self.luma_in_slot {
            self.last_slot = Some(slot.buffer().get() as usize);
        }
        let b = &self.bufs;
        let events = &mut self.events;
        events.clear();
        let luma_src = if self.luma_in_slot {
            slot.buffer()
        } else {
            events.push((
                Stage::Luma,
                self.luma
                    .enqueue(gpu, slot.buffer(), &l, &b.luma.buf)
                    .stage(Stage::Luma)?,
            ));
            &b.luma.buf
        };
        events.push((
            Stage::Sobel,
            self.sobel
                .enqueue(
                    gpu,
                    luma_src,
                    &l,
                    &self.options,
                    [&b.dx.buf, &b.dy.buf],
                    [&b.magnitude.buf, &b.edges.buf],
                )
                .stage(Stage::Sobel)?,
        ));
        if !self.hist_zeroed {
            events.push((
                Stage::Histogram,
                self.histogram
                    .enqueue_clear(gpu, &b.hist)
                    .stage(Stage::Histogram)?,
            ));
        }
        // Until this frame's Otsu kernel has run, the counts are not zero.
        self.hist_zeroed = false;
        events.push((
            Stage::Histogram,
            self.histogram
                .enqueue(gpu, luma_src, &l, &b.hist)
                .stage(Stage::Histogram)?,
        ));
        events.push((
            Stage::Otsu,
            self.otsu
                .enqueue_threshold(gpu, &b.hist, &l, &b.results)
                .stage(Stage::Otsu)?,
        ));
        events.push((
            Stage::Binarize,
            self.otsu
                .enqueue_binarize(gpu, luma_src, &l, &b.results, &b.mask.buf)
                .stage(Stage::Binarize)?,
        ));
        self.integral
            .enqueue_integrals(gpu, &l, luma_src, &b.edges.buf, &b.mask.buf, |e| {
                events.push((Stage::Integral, e))
            })
            .stage(Stage::Integral)?;
        events.push((
            Stage::Regions,
            self.integral
                .enqueue_regions(gpu, &l)
                .stage(Stage::Regions)?,
        ));
        // Queue the small reads behind the kernels; the caller waits once.
        // SAFETY: `process_into`, the only caller, finishes the queue on every way out
        // (`QueueDrain`) before `read_back` is read, and nothing else can resize or free
        // it while `process_into` holds the pipeline.
        unsafe {
            self.read_back
                .enqueue(gpu, &b.results, self.integral.sums())
                .stage(Stage::Regions)
        }
    }

    /// How many of the last frame's commands (kernels and reads) the device has not
    /// completed yet.
    #[cfg(test)]
    fn unfinished_commands(&self) -> usize {
        let complete = |e: &Event| {
            e.command_execution_status().map(|s| s.0) == Ok(opencl3::event::CL_COMPLETE)
        };
        let kernels = self.events.iter().map(|(_, e)| e);
        let reads = self.read_back.events.iter().flatten();
        kernels.chain(reads).filter(|e| !complete(e)).count()
    }

    /// Device time from the first kernel's start to the last one's end for the last frame
    /// processed, in nanoseconds: the stages' times plus the gaps between kernels.
    pub fn last_device_span_nanos(&self) -> u64 {
        self.last_span
    }

    /// Names of the per-pixel buffers whose guard band a kernel overwrote (none, if every
    /// kernel kept within its image). For tests.
    pub fn broken_guards(&self, gpu: &Gpu) -> Result<Vec<&'static str>, ClError> {
        let b = &self.bufs;
        let images = [
            ("luma", b.luma.guard_intact(gpu)?),
            ("dx", b.dx.guard_intact(gpu)?),
            ("dy", b.dy.guard_intact(gpu)?),
            ("magnitude", b.magnitude.guard_intact(gpu)?),
            ("edges", b.edges.guard_intact(gpu)?),
            ("mask", b.mask.guard_intact(gpu)?),
        ];
        Ok(images
            .into_iter()
            .chain(self.integral.guard_checks(gpu)?)
            .filter(|&(_, intact)| !intact)
            .map(|(name, _)| name)
            .collect())
    }

    /// Whether the last frame's luma is its frame slot rather than a pipeline buffer
    /// (grey or NV12 frames at stride = width): then its images can be
    /// read back only while that slot is held, before the source refills it.
    pub fn luma_reads_slot(&self) -> bool {
        self.luma_in_slot
    }

    /// Reads back every per-pixel output of the last processed frame.
    ///
    /// `slot` is the slot that frame was processed from, still held (for a
    /// [`FrameSource`](crate::capture::FrameSource), before the next `next_frame`, which
    /// may requeue and refill it), or `None` where the caller no longer holds it. Where
    /// [`Pipeline::luma_reads_slot`], luma is read from `slot`, so `None` or another slot
    /// is refused: luma from a refilled slot would belong to a newer frame than the edges
    /// and mask.
    pub fn read_images(
        &self,
        gpu: &Gpu,
        slot: Option<&FrameSlot>,
    ) -> Result<Images, PipelineError> {
        let b = &self.bufs;
        let luma = if self.luma_in_slot {
            let slot = slot.ok_or(PipelineError::SlotNotHeld)?;
            if self.last_slot != Some(slot.buffer().get() as usize) {
                return Err(PipelineError::NotTheFramesSlot);
            }
            read_buffer(gpu, slot.buffer(), b.luma.len)?
        } else {
            b.luma.read(gpu)?
        };
        let (sum, sqsum, edges, foreground) = self.integral.read_integrals(gpu)?;
        Ok(Images {
            luma,
            dx: b.dx.read(gpu)?,
            dy: b.dy.read(gpu)?,
            magnitude: b.magnitude.read(gpu)?,
            edges: b.edges.read(gpu)?,
            mask: b.mask.read(gpu)?,
            integral_sum: sum,
            integral_sqsum: sqsum,
            integral_edges: edges,
            integral_foreground: foreground,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cl::DeviceSpec;
    use crate::reference;

    fn gpu() -> Gpu {
        let spec: DeviceSpec = std::env::var("EDGESIGHT_TEST_DEVICE")
            .unwrap_or_default()
            .parse()
            .expect("device spec");
        Gpu::open(&spec).expect("an OpenCL device (install pocl-opencl-icd)")
    }

    /// Issue 4: a frame that fails after a non-blocking read was enqueued returned while
    /// the device could still write into a stack array. Here the failure comes between
    /// the two reads, the last point before the wait; a 1080p frame keeps the device busy
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
            pipeline.read_back.fail_between_reads = true;
            let err = pipeline
                .process(&gpu, &slot)
                .expect_err("the injected failure");
            let chain = format!(
                "{err}: {}",
                std::error::Error::source(&err).expect("a cause")
            );
            assert_eq!(
                chain,
                "regions stage: clEnqueueReadBuffer(sums), failing as a test asked failed: \
                 CL_OUT_OF_RESOURCES",
                "attempt {attempt}"
            );
            assert!(pipeline.read_back.events[0].is_some(), "the first read ran");
            assert!(pipeline.read_back.events[1].is_none(), "the second did not");
            assert_eq!(pipeline.unfinished_commands(), 0, "attempt {attempt}");
        }
        // The failed frames left nothing behind: the next one is exact.
        pipeline.read_back.fail_between_reads = false;
        let result = pipeline.process(&gpu, &slot).expect("a frame");
        let luma = reference::luma(&layout, &frame);
        let hist = reference::histogram(&luma);
        assert_eq!(result.histogram, hist);
        assert_eq!(result.otsu_threshold, reference::otsu_threshold(&hist));
        assert_eq!(result.regions[0].1.area, 640 * 480);
        assert_eq!(pipeline.unfinished_commands(), 0);
    }

    #[test]
    fn median_per_stage() {
        let runs = [
            StageTimings([5, 1, 9, 0, 0, 0, 2]),
            StageTimings([1, 2, 8, 0, 0, 0, 2]),
            StageTimings([3, 3, 7, 0, 0, 4, 2]),
        ];
        assert_eq!(
            StageTimings::median(&runs),
            StageTimings([3, 2, 8, 0, 0, 0, 2])
        );
        assert_eq!(StageTimings::median(&runs[..2]).0[0], 5);
        assert_eq!(StageTimings::median(&[]), StageTimings::default());
    }
}
