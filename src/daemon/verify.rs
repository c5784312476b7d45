//! `[opencl] verify_every`: one live frame in N checked against the plain-Rust reference
//! ([`selftest::compare_frame`]), so that a driver computing a stage wrong on the board
//! shows in the metrics and the log, not only in the `edgesight selftest` run once at
//! install: a driver update, a kernel cache gone stale, a GPU that computes wrong when hot.
//!
//! The camera's thread only copies what a check needs (the frame's bytes, luma, magnitude
//! and the small results) into a buffer of its own that goes to the verifier and comes
//! back, so the frame loop allocates nothing; the reference runs on one thread shared by
//! the cameras, at nice 19, so it takes only time the cameras leave. A camera whose last
//! check is still running checks the next frame instead: checks never queue up.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, OnceLock};

use prometheus::{IntCounter, IntCounterVec};

use crate::cl::Gpu;
use crate::frame::FrameLayout;
use crate::metrics::Metrics;
use crate::pipeline::{FrameImages, FrameResult, Pictures, PipelineError, PipelineOptions};
use crate::region::Region;
use crate::selftest::{self, Expected, Findings};

/// The verifier's nice value: the lowest priority, below the HTTP side's.
const VERIFY_NICE: libc::c_int = 19;

/// The stages a live frame's check covers (those of [`selftest::compare_frame`]): the
/// integrals are checked through the sums the regions and health cells read from them.
pub const CHECKED_STAGES: [&str; 5] = ["luma", "sobel", "histogram", "otsu", "regions"];

/// Checks waiting for the verifier at most: one per camera is ever out, so this is only
/// a bound, and a full queue leaves the frame unchecked rather than waiting.
const QUEUE: usize = 64;

pub struct VerifyFamilies {
    verified: IntCounterVec,
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
            mismatches: m.counters(
                "edgesight_kernel_mismatch_total",
                "Checked frames on which a stage's device output differed from the plain-Rust reference, by stage; the first difference of each stage is logged.",
                &["camera", "stage"],
            ),
        }
    }

    /// One camera's series, all there from the start (at 0), so that the first mismatch
    /// is an increase an alert sees.
    pub fn camera(&self, name: &str) -> Arc<VerifyMetrics> {
        Arc::new(VerifyMetrics {
            camera: name.to_string(),
            verified: self.verified.with_label_values(&[name]),
            mismatches: CHECKED_STAGES.map(|s| self.mismatches.with_label_values(&[name, s])),
            logged: CHECKED_STAGES.map(|_| AtomicBool::new(false)),
        })
    }
}

/// One camera's verification series, and which stages' first difference was logged.
pub struct VerifyMetrics {
    camera: String,
    verified: IntCounter,
    mismatches: [IntCounter; CHECKED_STAGES.len()],
    logged: [AtomicBool; CHECKED_STAGES.len()],
}

impl VerifyMetrics {
    /// Counts one checked frame and each stage it found wrong; logs a stage's first.
    fn record(&self, findings: &Findings, sequence: u64) {
        self.verified.inc();
        for (i, stage) in CHECKED_STAGES.iter().enumerate() {
            let Some(found) = findings.stages.get(stage) else {
                continue;
            };
            if found.mismatches == 0 {
                continue;
            }
            self.mismatches[i].inc();
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
    }

    /// Frames checked so far.
    pub fn verified(&self) -> u64 {
        self.verified.get()
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
}

impl Verifier {
    /// `every` 0 checks nothing.
    pub fn new(every: u32, metrics: Arc<VerifyMetrics>) -> Verifier {
        let (home, returned) = mpsc::sync_channel(1);
        let job = Box::new(Job {
            layout: FrameLayout::packed(crate::frame::PixelFormat::Grey, 1, 1),
            options: PipelineOptions::default(),
            sequence: 0,
            frame: Vec::new(),
            pictures: Pictures::default(),
            result: FrameResult::empty(),
            metrics,
            home,
        });
        Verifier {
            every,
            since: every,
            job: Some(job),
            returned,
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
        if self.since < self.every {
            return;
        }
        if self.job.is_none() {
            self.job = self.returned.try_recv().ok();
        }
        let Some(mut job) = self.job.take() else {
            return; // the last check still runs: this camera's next frame is checked
        };
        if let Err(e) = fill(&mut job, gpu, images, result, options, sequence) {
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
    if let Err(e) = crate::priority::lower_calling_thread(VERIFY_NICE) {
        tracing::warn!(
            "cannot lower the verifier's priority (setpriority: {e}): it competes with the \
             cameras"
        );
    }
    for job in jobs {
        // A reference that panics on some frame must not end the checks of every camera.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&job))) {
            Ok(findings) => job.metrics.record(&findings, job.sequence),
            Err(_) => tracing::error!(
                camera = %job.metrics.camera,
                "frame {}: the reference panicked on it; the frame is not counted as checked",
                job.sequence
            ),
        }
        let home = job.home.clone();
        // A camera that reopened made itself a new job: this one is let go.
        let _ = home.try_send(job);
        PENDING.fetch_sub(1, Ordering::AcqRel);
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
    let expected = Expected::of(&job.layout, job.options, &job.frame);
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
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::PixelFormat;
    use crate::pipeline::Pipeline;
    use std::time::{Duration, Instant};

    /// A YUYV frame of an awkward size with a wider stride, two regions and the health
    /// grid, processed on the test device; `offer` is called with its images, and with
    /// the result `doctor` makes of the true one.
    fn offer_frame(verifier: &mut Verifier, sequence: u64, doctor: impl FnOnce(&mut FrameResult)) {
        let gpu = crate::cl::test_gpu();
        let layout = FrameLayout {
            stride: PixelFormat::Yuyv.row_bytes(45) as u32 + 6,
            ..FrameLayout::packed(PixelFormat::Yuyv, 45, 23)
        };
        let regions = [
            "a:0,0,10,10".parse().unwrap(),
            "b:3,4,41,19".parse().unwrap(),
        ];
        let options = PipelineOptions::default();
        let mut pipeline = Pipeline::new(&gpu, layout, options, &regions).expect("pipeline");
        pipeline
            .set_health_grid(&gpu, Some(crate::health::GRID))
            .expect("grid");
        let mut slot = pipeline.new_slot(&gpu).expect("slot");
        let frame: Vec<u8> = (0..layout.frame_bytes())
            .map(|i| (i * 37 % 251 + i / 97) as u8)
            .collect();
        slot.write_bytes(&gpu, &frame).expect("write");
        let mut result = FrameResult::empty();
        let images = pipeline
            .process_into(&gpu, &slot, &mut result)
            .expect("process");
        doctor(&mut result);
        verifier.offer(&gpu, &images, &result, options, sequence);
    }

    /// Waits for the verifier to have checked `n` frames of `m`.
    fn wait_checked(m: &VerifyMetrics, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while m.verified() < n {
            assert!(
                Instant::now() < deadline,
                "{} of {n} frames checked",
                m.verified()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn families() -> VerifyFamilies {
        VerifyFamilies::new(&Metrics::new())
    }

    /// A right frame counts as checked with no mismatch; frames that are not due are not
    /// checked; a frame whose results differ from the reference counts a mismatch in
    /// each stage it differs in, and only there.
    #[test]
    fn one_frame_in_n_is_checked_and_each_wrong_stage_counted() {
        let m = families().camera("c");
        let mut verifier = Verifier::new(3, Arc::clone(&m));
        // Due at once: a camera's first frame is checked.
        offer_frame(&mut verifier, 1, |_| {});
        wait_checked(&m, 1);
        for stage in CHECKED_STAGES {
            assert_eq!(m.mismatches(stage), 0, "{stage}");
        }
        offer_frame(&mut verifier, 2, |r| r.otsu_threshold ^= 1);
        offer_frame(&mut verifier, 3, |r| r.otsu_threshold ^= 1);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(m.verified(), 1, "frames 2 and 3 are not due");
        offer_frame(&mut verifier, 4, |r| {
            r.otsu_threshold ^= 1;
            r.regions[1].1.sum += 1;
        });
        wait_checked(&m, 2);
        let counts = CHECKED_STAGES.map(|s| m.mismatches(s));
        assert_eq!(counts, [0, 0, 0, 1, 1], "{CHECKED_STAGES:?}");
        let logged = m.logged.each_ref().map(|l| l.load(Ordering::Relaxed));
        assert_eq!(
            logged,
            [false, false, false, true, true],
            "first of a stage logged"
        );
        offer_frame(&mut verifier, 5, |_| {});
        offer_frame(&mut verifier, 6, |_| {});
        offer_frame(&mut verifier, 7, |r| r.histogram[9] += 1);
        wait_checked(&m, 3);
        let counts = CHECKED_STAGES.map(|s| m.mismatches(s));
        assert_eq!(counts, [0, 0, 1, 1, 1], "{CHECKED_STAGES:?}");
    }

    /// A frame due while the camera's last check still runs is not checked, and the
    /// camera's next frame is: a check is late, never queued behind another nor put off
    /// for a whole period.
    #[test]
    fn a_due_frame_while_the_last_check_runs_passes_the_turn_on() {
        let m = families().camera("c");
        let mut verifier = Verifier::new(1000, Arc::clone(&m));
        // As while the verifier holds the job.
        let out = verifier.job.take();
        offer_frame(&mut verifier, 1, |_| {});
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(m.verified(), 0);
        assert_eq!(verifier.since, 1001, "still due");
        verifier.job = out;
        offer_frame(&mut verifier, 2, |_| {});
        assert_eq!(verifier.since, 0);
        wait_checked(&m, 1);
    }

    /// 0 checks nothing; a reload to N makes the next frame due after at most N.
    #[test]
    fn zero_checks_nothing_until_a_reload_asks() {
        let m = families().camera("c");
        let mut verifier = Verifier::new(0, Arc::clone(&m));
        offer_frame(&mut verifier, 1, |_| {});
        assert!(verifier.job.is_some(), "nothing was sent");
        verifier.set_every(1);
        offer_frame(&mut verifier, 2, |_| {});
        wait_checked(&m, 1);
    }
}
