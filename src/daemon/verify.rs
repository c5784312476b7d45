//! `[opencl] verify_every`: one live frame in N checked against the plain-Rust reference
//! ([`selftest::compare_frame`]), so that a driver computing a stage wrong on the board
//! shows in the metrics and the log, not only in the `edgesight selftest` run once at
//! install: a driver update, a kernel cache gone stale, a GPU that computes wrong when hot.
//!
//! The camera's thread only copies what a check needs (the frame's bytes, luma, magnitude
//! and the small results) into a buffer of its own that goes to the verifier and comes
//! back, so the frame loop allocates nothing (its pages are given back to the kernel
//! between checks: [`crate::pages`]); the reference runs on one thread shared by
//! the cameras, at nice 19, so it takes only time the cameras leave. A camera whose last
//! check is still running checks the next frame instead: checks never queue up.
//!
//! Motion keeps its background on the device, so a frame's motion is checked from the
//! background the frame before left: read after that frame (when the next one is due),
//! and the checked frame's after it.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, OnceLock};

use prometheus::{IntCounter, IntCounterVec};

use crate::pages;
use edgesight_core::cl::Gpu;
use edgesight_core::pipeline::{
    DeviceMotion, FrameImages, FrameMotion, FrameResult, MotionState, Pictures, PipelineError,
    PipelineOptions,
};
use edgesight_core::selftest::{self, Expected, Findings};
use edgesight_frame::frame::FrameLayout;
use edgesight_frame::region::Region;
use edgesight_http::metrics::Metrics;

/// The verifier's nice value: the lowest priority, below the HTTP side's.
const VERIFY_NICE: libc::c_int = 19;

/// The stages a live frame's check covers (those of [`selftest::compare_frame`], and
/// motion): the integrals are checked through the sums the regions and health cells read
/// from them.
pub const CHECKED_STAGES: [&str; 6] = ["luma", "sobel", "histogram", "otsu", "regions", "motion"];

/// Checks waiting for the verifier at most: one per camera is ever out, so this is only
/// a bound, and a full queue leaves the frame unchecked rather than waiting.
const QUEUE: usize = 64;

pub struct VerifyFamilies {
    verified: IntCounterVec,
    mismatched: IntCounterVec,
    mismatches: IntCounterVec,
}

impl VerifyFamilies {
    pub fn new(m: &Metrics) -> VerifyFamilies {
        VerifyFamilies {
            verified: m.counters(
                "edgesight_kernel_verified_frames_total",
                "Live frames checked against the plain-Rust reference, one in [opencl] verify_every.",
                &["camera"],
            ),
            mismatched: m.counters(
                "edgesight_kernel_mismatched_frames_total",
                "Checked frames on which any stage's device output differed from the plain-Rust reference (edgesight_kernel_mismatch_total, of the detail tier, says which stage).",
                &["camera"],
            ),
            // A breakdown of edgesight_kernel_mismatched_frames_total.
            mismatches: m.detail_only(m.counters(
                "edgesight_kernel_mismatch_total",
                "Checked frames on which a stage's device output differed from the plain-Rust reference, by stage; the first difference of each stage is logged.",
                &["camera", "stage"],
            )),
        }
    }

    /// One camera's series, all there from the start (at 0), so that the first mismatch
    /// is an increase an alert sees.
    pub fn camera(&self, name: &str) -> Arc<VerifyMetrics> {
        Arc::new(VerifyMetrics {
            camera: name.to_string(),
            verified: self.verified.with_label_values(&[name]),
            mismatched: self.mismatched.with_label_values(&[name]),
            mismatches: CHECKED_STAGES.map(|s| self.mismatches.with_label_values(&[name, s])),
            logged: CHECKED_STAGES.map(|_| AtomicBool::new(false)),
        })
    }
}

/// One camera's verification series, and which stages' first difference was logged.
pub struct VerifyMetrics {
    camera: String,
    verified: IntCounter,
    mismatched: IntCounter,
    mismatches: [IntCounter; CHECKED_STAGES.len()],
    logged: [AtomicBool; CHECKED_STAGES.len()],
}

impl VerifyMetrics {
    /// Counts one checked frame and each stage it found wrong; logs a stage's first.
    fn record(&self, findings: &Findings, sequence: u64) {
        self.verified.inc();
        let mut wrong = false;
        for (i, stage) in CHECKED_STAGES.iter().enumerate() {
            let Some(found) = findings.stages.get(stage) else {
                continue;
            };
            if found.mismatches == 0 {
                continue;
            }
            self.mismatches[i].inc();
            wrong = true;
            if !self.logged[i].swap(true, Ordering::Relaxed) {
                tracing::error!(
                    camera = %self.camera,
                    stage,
                    "frame {sequence}: the device's output differs from the reference: {}; \
                     later differences of this stage are only counted \
                     (edgesight_kernel_mismatch_total)",
                    found.first_mismatch.as_deref().unwrap_or("(no detail)")
                );
            }
        }
        if wrong {
            self.mismatched.inc();
        }
    }

    /// Frames checked so far.
    pub fn verified(&self) -> u64 {
        self.verified.get()
    }

    /// Checked frames any stage was found wrong on.
    pub fn mismatched_frames(&self) -> u64 {
        self.mismatched.get()
    }

    /// Checked frames `stage` was found wrong on.
    pub fn mismatches(&self, stage: &str) -> u64 {
        CHECKED_STAGES
            .iter()
            .position(|s| *s == stage)
            .map_or(0, |i| self.mismatches[i].get())
    }
}

/// What a check needs of one frame, copied on the camera's thread.
struct Job {
    layout: FrameLayout,
    options: PipelineOptions,
    sequence: u64,
    frame: Vec<u8>,
    pictures: Pictures,
    result: FrameResult,
    /// What the frame's motion was told, where it is checked: the frame ran motion and
    /// the frame before it did too, and left `motion_before`.
    motion_told: Option<FrameMotion>,
    motion_before: DeviceMotion,
    motion_after: DeviceMotion,
    metrics: Arc<VerifyMetrics>,
    /// Where the job goes back to be filled again.
    home: mpsc::SyncSender<Box<Job>>,
}

/// A camera's side of verification: counts frames and hands one in `every` to the
/// verifier.
pub struct Verifier {
    every: u32,
    /// Frames since the last check; starts due, so a camera's first frame is checked.
    since: u32,
    /// The job, while it is not out with the verifier.
    job: Option<Box<Job>>,
    returned: mpsc::Receiver<Box<Job>>,
    /// What the last frame's motion left on the device, read when the next frame is due
    /// (the background that frame begins from), and which frame that was
    /// (`Pipeline::frame_number`).
    before: DeviceMotion,
    before_of: Option<(u64, u64)>,
    metrics: Arc<VerifyMetrics>,
}

impl Verifier {
    /// `every` 0 checks nothing.
    pub fn new(every: u32, metrics: Arc<VerifyMetrics>) -> Verifier {
        let (home, returned) = mpsc::sync_channel(1);
        let job = Box::new(Job {
            layout: FrameLayout::packed(edgesight_frame::frame::PixelFormat::Grey, 1, 1),
            options: PipelineOptions::default(),
            sequence: 0,
            frame: Vec::new(),
            pictures: Pictures::default(),
            result: FrameResult::empty(),
            motion_told: None,
            motion_before: DeviceMotion::default(),
            motion_after: DeviceMotion::default(),
            metrics: Arc::clone(&metrics),
            home,
        });
        Verifier {
            every,
            since: every,
            job: Some(job),
            returned,
            before: DeviceMotion::default(),
            before_of: None,
            metrics,
        }
    }

    /// A reload's `verify_every`.
    pub fn set_every(&mut self, every: u32) {
        self.every = every;
        self.since = self.since.min(every);
    }

    /// Called with every processed frame while its images are held: on a due frame,
    /// copies what the check needs and hands it to the verifier.
    pub fn offer(
        &mut self,
        gpu: &Gpu,
        images: &FrameImages,
        result: &FrameResult,
        options: PipelineOptions,
        sequence: u64,
    ) {
        if self.every == 0 {
            return;
        }
        self.since = self.since.saturating_add(1);
        if self.since >= self.every {
            self.hand_over(gpu, images, result, options, sequence);
        }
        self.keep_background(gpu, images);
    }

    /// Copies what the check of this (due) frame needs and hands it to the verifier.
    fn hand_over(
        &mut self,
        gpu: &Gpu,
        images: &FrameImages,
        result: &FrameResult,
        options: PipelineOptions,
        sequence: u64,
    ) {
        if self.job.is_none() {
            self.job = self.returned.try_recv().ok();
        }
        let Some(mut job) = self.job.take() else {
            return; // the last check still runs: this camera's next frame is checked
        };
        let filled = fill(&mut job, gpu, images, result, options, sequence)
            .and_then(|()| self.fill_motion(&mut job, gpu, images));
        if let Err(e) = filled {
            tracing::warn!(camera = %job.metrics.camera, "frame {sequence}: reading it back for verification: {e:#}");
            self.job = Some(job);
            return;
        }
        PENDING.fetch_add(1, Ordering::AcqRel);
        match queue().map(|q| q.try_send(job)) {
            Some(Ok(())) => self.since = 0,
            Some(Err(mpsc::TrySendError::Full(job) | mpsc::TrySendError::Disconnected(job))) => {
                PENDING.fetch_sub(1, Ordering::AcqRel);
                self.job = Some(job)
            }
            None => {
                // No verifier thread: said once in the log.
                PENDING.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// The frame's motion, where the frame before it ran motion too and left the
    /// background this one began from (`before`).
    fn fill_motion(
        &mut self,
        job: &mut Job,
        gpu: &Gpu,
        images: &FrameImages,
    ) -> Result<(), PipelineError> {
        let p = images.pipeline();
        job.motion_told = None;
        let Some(told) = p.last_motion() else {
            return Ok(());
        };
        p.read_motion_into(gpu, &mut job.motion_after)?;
        let (id, n) = p.frame_number();
        if self.before_of == Some((id, n.wrapping_sub(1))) {
            std::mem::swap(&mut self.before, &mut job.motion_before);
            job.motion_told = Some(told);
        } else {
            // Not checked (a camera's first frame): the memory of both backgrounds is
            // taken here, before the first check, so that a warm camera's reads and swaps
            // allocate nothing.
            job.motion_before.copy_from(&job.motion_after);
            self.before.copy_from(&job.motion_after);
        }
        Ok(())
    }

    /// When the next frame is due and this one ran motion: reads the background it left,
    /// which the next begins from.
    fn keep_background(&mut self, gpu: &Gpu, images: &FrameImages) {
        self.before_of = None;
        let p = images.pipeline();
        if self.since.saturating_add(1) < self.every || p.last_motion().is_none() {
            return;
        }
        match p.read_motion_into(gpu, &mut self.before) {
            Ok(()) => self.before_of = Some(p.frame_number()),
            Err(e) => tracing::warn!(
                camera = %self.metrics.camera,
                "reading the motion background back for verification: {e:#}"
            ),
        }
    }
}

fn fill(
    job: &mut Job,
    gpu: &Gpu,
    images: &FrameImages,
    result: &FrameResult,
    options: PipelineOptions,
    sequence: u64,
) -> Result<(), PipelineError> {
    images.read_frame_into(gpu, &mut job.frame)?;
    images.read_pictures_into(gpu, &mut job.pictures)?;
    job.result.copy_from(result);
    job.layout = *images.layout();
    job.options = options;
    job.sequence = sequence;
    Ok(())
}

/// Checks handed to the verifier and not yet done.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Checks handed to the verifier and not yet done, of every camera: a test waits for 0
/// before it counts what the process allocates.
pub fn pending() -> usize {
    PENDING.load(Ordering::Acquire)
}

static QUEUE_TX: OnceLock<Option<mpsc::SyncSender<Box<Job>>>> = OnceLock::new();

/// Starts the verifier's thread, as `run` starts every thread it needs before the
/// cameras: a task limit that refuses it refuses the start, not a check later.
pub fn start() -> std::io::Result<()> {
    let mut failed = None;
    QUEUE_TX.get_or_init(|| match spawn() {
        Ok(tx) => Some(tx),
        Err(e) => {
            failed = Some(e);
            None
        }
    });
    failed.map_or(Ok(()), Err)
}

/// The verifier's queue; started here where `start` was not called (tests), and `None`
/// where it could not start.
fn queue() -> Option<&'static mpsc::SyncSender<Box<Job>>> {
    QUEUE_TX
        .get_or_init(|| match spawn() {
            Ok(tx) => Some(tx),
            Err(e) => {
                tracing::error!("cannot start the verifier thread ({e}): no frame is verified");
                None
            }
        })
        .as_ref()
}

fn spawn() -> std::io::Result<mpsc::SyncSender<Box<Job>>> {
    let (tx, rx) = mpsc::sync_channel(QUEUE);
    std::thread::Builder::new()
        .name("es-verify".into())
        .spawn(move || verify_jobs(rx))?;
    Ok(tx)
}

fn verify_jobs(jobs: mpsc::Receiver<Box<Job>>) {
    if let Err(e) = edgesight_http::priority::lower_calling_thread(VERIFY_NICE) {
        tracing::warn!(
            "cannot lower the verifier's priority (setpriority: {e}): it competes with the \
             cameras"
        );
    }
    for mut job in jobs {
        // A reference that panics on some frame must not end the checks of every camera.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&job))) {
            Ok(findings) => job.metrics.record(&findings, job.sequence),
            Err(_) => tracing::error!(
                camera = %job.metrics.camera,
                "frame {}: the reference panicked on it; the frame is not counted as checked",
                job.sequence
            ),
        }
        release(&mut job);
        let home = job.home.clone();
        // A camera that reopened made itself a new job: this one is let go.
        let _ = home.try_send(job);
        PENDING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Between checks (a minute apart by default) the job's copies hold no memory: their
/// pages go back to the kernel, and the camera's next copy faults them in again without
/// allocating. (The reference's images are freed, and given back as large blocks are:
/// [`pages::map_large_allocations`].)
fn release(job: &mut Job) {
    let p = &mut job.pictures;
    for buf in [&mut job.frame, &mut p.luma, &mut p.magnitude, &mut p.mask] {
        pages::release(buf);
    }
}

/// The frame's label in a logged difference.
struct Live<'a>(&'a Job);

impl fmt::Display for Live<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (l, o) = (&self.0.layout, &self.0.options);
        write!(
            f,
            "{} {}x{} stride {}, border {}, {:?}",
            l.format,
            l.width,
            l.height,
            l.stride,
            o.border.name(),
            o.magnitude
        )
    }
}

fn check(job: &Job) -> Findings {
    let expected = Expected::of_live(&job.layout, job.options, &job.frame);
    let regions: Vec<Region> = job.result.regions.iter().map(|(r, _)| r.clone()).collect();
    let mut findings = Findings::default();
    selftest::compare_frame(
        &mut findings,
        &Live(job),
        &expected,
        &job.result,
        &job.pictures,
        &regions,
    );
    if let Some(told) = job.motion_told {
        let size = (job.layout.width as usize, job.layout.height as usize);
        let watched = job.result.motion.state == MotionState::Watching;
        selftest::compare_frame_motion(
            &mut findings,
            &Live(job),
            &expected.luma,
            size,
            told,
            &job.motion_before,
            &job.motion_after,
            watched.then_some(&job.result),
        );
    }
    findings
}

#[cfg(test)]
mod tests;
