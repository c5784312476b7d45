//! A camera thread's supervision: [`run`] opens the camera, runs its frame loop, and when
//! the camera fails (an error or a panic) shows it down, logs why once, and opens it
//! again after a growing delay. [`CameraThreadState`] is what the thread shows the rest of the
//! daemon meanwhile: the watchdog's evidence that it turns, whether it is waiting, and
//! the layout of its frames. One room: the restart loop, the state the watchdog reads and
//! the slow-step grace it honours are one contract, and their tests drive it end to end.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{open, run_opened, Camera, Links, POLL};
use crate::config::CameraSettings;
use crate::daemon::camera_metrics::CameraMetrics;
use edgesight_capture::capture::FrameSource;
use edgesight_core::cl::Gpu;
use edgesight_frame::frame::FrameLayout;
use edgesight_http::mailbox::CameraStatus;

/// A camera that failed waits this long before it is opened again, doubled after each
/// failure up to [`MAX_RESTART_DELAY`]; a camera that ran for [`RESTART_RESET`] starts
/// over at the shortest delay.
const MIN_RESTART_DELAY: Duration = Duration::from_secs(1);
const MAX_RESTART_DELAY: Duration = Duration::from_secs(30);
const RESTART_RESET: Duration = Duration::from_secs(60);
/// How long opening a camera or building its pipeline may take before the watchdog counts
/// the loop as stuck: compiling the kernels takes seconds on a Mali driver and on a CPU
/// device under load (a cold start on a busy 2-core machine took over 5 s, half the unit's
/// WatchdogSec), while a driver hung in the compiler still gets the service restarted.
pub(super) const SLOW_STEP_GRACE: Duration = Duration::from_secs(120);
/// How long one program's build may run before the watchdog counts it as hung: a board's
/// first start compiles for minutes under Mesa's Rusticl on a small core (an estimated 15
/// to 25 for the Mali tunings' programs before they were reshaped), once, since the
/// binaries are kept for the next start ([`edgesight_core::cl::ProgramCache`]).
pub(crate) const BUILD_GRACE: Duration = Duration::from_secs(3600);

/// State shared between a camera thread and the rest of the daemon: the watchdog's
/// evidence, the frame layout and the [`CameraStatus`] (whose [`edgesight_http::mailbox::CameraState`]
/// is what `/api/v1/cameras` says the camera is doing).
pub struct CameraThreadState {
    /// Milliseconds since `epoch` at the loop's last turn: the watchdog's evidence that
    /// the loop (and so the GPU) is not stuck.
    last_turn_ms: AtomicU64,
    /// Milliseconds since `epoch` until which a slow step (opening, building the
    /// pipeline) is under way: not stuck before then; 0 when none is.
    slow_until_ms: AtomicU64,
    epoch: Instant,
    /// Set while the camera delivers no frames (its device absent, or restarting after a
    /// failure): it has started as far as it can, so it does not hold READY up.
    waiting: AtomicBool,
    /// The layout the pipeline is built for; `None` until the camera delivered a frame.
    layout: Mutex<Option<FrameLayout>>,
    /// What the camera is doing, for `/api/v1/cameras`.
    pub status: Arc<CameraStatus>,
}

impl CameraThreadState {
    pub fn new() -> CameraThreadState {
        CameraThreadState {
            last_turn_ms: AtomicU64::new(0),
            slow_until_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            waiting: AtomicBool::new(false),
            layout: Mutex::new(None),
            status: Arc::default(),
        }
    }

    pub(super) fn turn(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_turn_ms.store(ms, Ordering::Relaxed);
    }

    /// Time since the loop last turned.
    pub fn since_last_turn(&self) -> Duration {
        let last = Duration::from_millis(self.last_turn_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// Whether the loop has not turned for longer than `limit`, outside a slow step's
    /// grace and while no program has been building for less than [`BUILD_GRACE`].
    pub fn stuck(&self, limit: Duration) -> bool {
        self.stuck_while(limit, edgesight_core::cl::build_under_way())
    }

    /// [`CameraThreadState::stuck`], with the oldest program build under way in the process
    /// running for `building`.
    fn stuck_while(&self, limit: Duration, building: Option<Duration>) -> bool {
        let slow_until = self.slow_until_ms.load(Ordering::Relaxed);
        let now = self.epoch.elapsed().as_millis() as u64;
        let compiling = building.is_some_and(|d| d < BUILD_GRACE);
        self.since_last_turn() > limit && now >= slow_until && !compiling
    }

    /// Runs `step`, which may take up to `grace` without the loop counting as stuck; the
    /// loop has turned when it returns.
    pub(super) fn slow_step<T>(&self, grace: Duration, step: impl FnOnce() -> T) -> T {
        let until = self.epoch.elapsed() + grace;
        self.slow_until_ms
            .store(until.as_millis() as u64, Ordering::Relaxed);
        let out = step();
        self.turn();
        self.slow_until_ms.store(0, Ordering::Relaxed);
        out
    }

    /// Whether the camera is waiting for its device or for a restart.
    pub fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed)
    }

    pub(super) fn set_waiting(&self, waiting: bool) {
        self.waiting.store(waiting, Ordering::Relaxed);
    }

    /// The layout of the frames the camera delivers, once it delivered one.
    pub fn layout(&self) -> Option<FrameLayout> {
        *self.layout.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn set_layout(&self, layout: FrameLayout) {
        *self.layout.lock().unwrap_or_else(|e| e.into_inner()) = Some(layout);
    }
}

impl Default for CameraThreadState {
    fn default() -> Self {
        CameraThreadState::new()
    }
}

/// The thread's body: opens the camera and runs it until the stop flag is set. A camera
/// that fails (its OpenCL device, its source, a pipeline that cannot be built, a panic)
/// is shown down, logged once per distinct reason, and opened again after a growing
/// delay; it never ends the thread, so it never stops the other cameras or the daemon.
pub fn run(settings: CameraSettings, m: Arc<CameraMetrics>, links: Links) {
    run_with(settings, m, links, open);
}

/// [`run`] with the camera's frames from the source `source` opens (on the camera's
/// OpenCL device) rather than from its settings: for a test that puts its own source
/// between the driver and the camera loop (one that falls behind, say).
pub fn run_with_source(
    settings: CameraSettings,
    m: Arc<CameraMetrics>,
    links: Links,
    mut source: impl FnMut(&CameraSettings, &Gpu) -> Result<Box<dyn FrameSource>>,
) {
    run_with(settings, m, links, |settings| {
        super::open_with(settings, &mut source)
    });
}

/// [`run`] with the opening of the camera given, so that tests can hand it a source.
fn run_with(
    mut settings: CameraSettings,
    m: Arc<CameraMetrics>,
    links: Links,
    mut open: impl FnMut(&CameraSettings) -> Result<Camera>,
) {
    let name = settings.name.clone();
    let mut delay = MIN_RESTART_DELAY;
    let mut last_problem: Option<String> = None;
    while !links.stopped() {
        links.state.turn();
        let attempt_start = Instant::now();
        let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let cam = links.state.slow_step(SLOW_STEP_GRACE, || open(&settings))?;
            run_opened(cam, &mut settings, &m, &links)
        }));
        let problem = match attempt {
            Ok(Ok(())) => break,
            Ok(Err(e)) => format!("{e:#}"),
            Err(panic) => format!("panicked: {}", panic_message(&panic)),
        };
        m.set_up(false);
        m.restarted();
        links.state.set_waiting(true);
        links.state.status.restarting(problem.clone(), delay);
        if attempt_start.elapsed() >= RESTART_RESET {
            delay = MIN_RESTART_DELAY;
        }
        if last_problem.as_deref() == Some(problem.as_str()) {
            tracing::debug!(camera = %name, "failed again: {problem}");
        } else {
            tracing::error!(
                camera = %name,
                "camera failed: {problem}; opening it again in {} s, then with growing delays",
                delay.as_secs()
            );
            last_problem = Some(problem);
        }
        wait_to_restart(delay, &mut settings, &links);
        delay = (delay * 2).min(MAX_RESTART_DELAY);
    }
    tracing::info!(camera = %name, "camera stopped");
}

/// Sleeps `delay` in short steps, turning the loop for the watchdog and taking reloads,
/// which then apply when the camera opens again.
fn wait_to_restart(delay: Duration, settings: &mut CameraSettings, links: &Links) {
    let until = Instant::now() + delay;
    while !links.stopped() && Instant::now() < until {
        links.state.turn();
        while let Ok(reload) = links.reloads.try_recv() {
            reload.take_into(settings);
            let _ = reload.reply.send(Ok(()));
        }
        std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::camera_metrics::CameraFamilies;
    use edgesight_capture::capture::{
        CaptureError, CaptureStats, Frame, FrameSource, IoMode, Next,
    };
    use edgesight_core::cl::{ClError, DeviceSpec, FrameSlot, Gpu};
    use edgesight_core::pipeline::{PipelineOptions, TuningChoice};
    use edgesight_frame::frame::PixelFormat;
    use edgesight_http::mailbox::SourceInfo;
    use edgesight_http::metrics::Metrics;

    /// Opening a camera or building its pipeline may take longer than the watchdog's half
    /// period (a cold kernel compile under load took over 5 s): not stuck during such a
    /// step, up to its grace; stuck once a plain loop stops turning.
    #[test]
    fn a_slow_step_is_not_stuck_within_its_grace() {
        let state = CameraThreadState::new();
        let limit = Duration::from_millis(40);
        state.turn();
        state.slow_step(Duration::from_secs(60), || {
            std::thread::sleep(Duration::from_millis(80));
            assert!(state.since_last_turn() > limit);
            assert!(
                !state.stuck_while(limit, None),
                "stuck during the slow step"
            );
        });
        assert!(!state.stuck_while(limit, None), "the step's end is a turn");
        std::thread::sleep(Duration::from_millis(80));
        assert!(
            state.stuck_while(limit, None),
            "a loop that stopped turning after the step"
        );
        // A step that outlives its grace is stuck all the same.
        state.slow_step(Duration::from_millis(10), || {
            std::thread::sleep(Duration::from_millis(80));
            assert!(state.stuck_while(limit, None), "stuck past the grace");
        });
    }

    /// A program building (a board's first start compiles for minutes) keeps a loop that
    /// has not turned from counting as stuck, up to BUILD_GRACE.
    #[test]
    fn a_loop_is_not_stuck_while_a_program_builds() {
        let state = CameraThreadState::new();
        let limit = Duration::from_millis(10);
        state.turn();
        std::thread::sleep(Duration::from_millis(40));
        assert!(state.stuck_while(limit, None));
        assert!(!state.stuck_while(limit, Some(Duration::from_secs(900))));
        assert!(state.stuck_while(limit, Some(BUILD_GRACE)));
    }

    /// What a test source does when asked for frames.
    enum Script {
        /// Hands out one frame from its slot and then panics, as the test pattern's pacer
        /// did at 6e-20 fps (its second frame's due time overflowed the clock).
        OneFrameThenPanic(FrameSlot),
        /// Fails in an OpenCL call (mapping its slot) from the first frame on.
        FailInOpenCl,
    }

    struct ScriptedSource {
        layout: FrameLayout,
        script: Script,
        calls: u32,
    }

    impl ScriptedSource {
        fn new(script: Script) -> ScriptedSource {
            ScriptedSource {
                layout: test_layout(),
                script,
                calls: 0,
            }
        }
    }

    impl FrameSource for ScriptedSource {
        fn describe(&self) -> String {
            match self.script {
                Script::OneFrameThenPanic(_) => "one frame, then a panic".into(),
                Script::FailInOpenCl => "a failing map".into(),
            }
        }
        fn layout(&self) -> FrameLayout {
            self.layout
        }
        fn io_mode(&self) -> IoMode {
            IoMode::Generated
        }
        fn is_up(&self) -> bool {
            matches!(self.script, Script::OneFrameThenPanic(_))
        }
        fn stats(&self) -> CaptureStats {
            CaptureStats::default()
        }
        fn next_frame(&mut self, _gpu: &Gpu, _wait: Duration) -> Result<Next<'_>, CaptureError> {
            self.calls += 1;
            match &self.script {
                Script::OneFrameThenPanic(slot) => {
                    assert!(self.calls == 1, "the source broke after its first frame");
                    Ok(Next::Frame(Frame {
                        slot,
                        layout: self.layout,
                        sequence: 0,
                        captured: Instant::now(),
                        decoded: None,
                        jpeg: None,
                    }))
                }
                Script::FailInOpenCl => Err(CaptureError::Cl {
                    source_name: self.describe(),
                    source: ClError::Call {
                        call: "clEnqueueMapBuffer",
                        code: opencl3::error_codes::ClError(
                            opencl3::error_codes::CL_OUT_OF_RESOURCES,
                        ),
                    },
                }),
            }
        }
    }

    /// Waits (up to a minute, for a loaded machine) until `done`.
    fn wait_for(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn test_layout() -> FrameLayout {
        FrameLayout::packed(PixelFormat::Grey, 32, 24)
    }

    /// The device the tests run on, and a camera's settings on it.
    fn test_camera() -> (DeviceSpec, CameraSettings) {
        let device: DeviceSpec = std::env::var("EDGESIGHT_TEST_DEVICE")
            .unwrap_or_default()
            .parse()
            .expect("device spec");
        let settings = CameraSettings {
            name: "t".into(),
            device: device.clone(),
            tuning: TuningChoice::Auto,
            verify_every: 0,
            profiling: edgesight_core::cl::Profiling::Auto,
            source: "pattern:32x24@100".parse().expect("spec"),
            options: PipelineOptions::default(),
            regions: Vec::new(),
            health: edgesight_core::health::HealthSettings::default(),
            motion: edgesight_core::motion_events::CameraMotionSettings::default(),
        };
        (device, settings)
    }

    /// A camera built by a test's `open_camera`: `source` on `gpu`.
    fn camera_of(gpu: Gpu, source: ScriptedSource) -> Camera {
        let describe = Arc::new(SourceInfo {
            format: source.layout.format.name(),
            device: gpu.info.to_string(),
        });
        Camera {
            gpu,
            source: Box::new(source),
            pipeline: None,
            describe,
        }
    }

    /// A camera shares its device's context with the other cameras on it until it fails
    /// in an OpenCL call: opened again, it gets a new context, and the other cameras
    /// keep theirs.
    #[test]
    fn a_camera_failing_in_opencl_is_opened_again_on_a_new_context() {
        let _turn = edgesight_core::cl::SHARING_TESTS
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (device, settings) = test_camera();
        let other_camera = Gpu::open(&device).expect("an OpenCL device");
        let stop = Arc::new(AtomicBool::new(false));
        let (links, _ends) = Links::new(Arc::clone(&stop), 4);
        let metrics = Metrics::new();
        let m = Arc::new(CameraFamilies::new(&metrics, 16).camera("t", None));
        let shared = Arc::new(Mutex::new(Vec::new()));
        let open_camera = {
            let shared = Arc::clone(&shared);
            let device = device.clone();
            let other_camera = Gpu::open(&device).expect("an OpenCL device");
            move |_: &CameraSettings| -> Result<Camera> {
                let gpu = Gpu::open(&device)?;
                shared
                    .lock()
                    .expect("lock")
                    .push(gpu.shares_context_with(&other_camera));
                Ok(camera_of(gpu, ScriptedSource::new(Script::FailInOpenCl)))
            }
        };
        let camera = std::thread::spawn(move || run_with(settings, m, links, open_camera));
        wait_for("not opened again", || {
            shared.lock().expect("lock").len() >= 2
        });
        stop.store(true, Ordering::Relaxed);
        camera
            .join()
            .expect("the camera thread itself does not panic");
        let shared = shared.lock().expect("lock").clone();
        assert_eq!(shared[..2], [true, false], "shared the context when opened");
        assert!(!Gpu::open(&device)
            .expect("an OpenCL device")
            .shares_context_with(&other_camera));
    }

    #[test]
    fn a_panic_after_the_first_frame_shows_the_camera_down_and_restarts_it() {
        let (device, settings) = test_camera();
        let stop = Arc::new(AtomicBool::new(false));
        let (links, ends) = Links::new(Arc::clone(&stop), 4);
        let metrics = Metrics::new();
        let m = Arc::new(CameraFamilies::new(&metrics, 16).camera("t", None));
        let opened = Arc::new(AtomicU64::new(0));
        let open_camera = {
            let opened = Arc::clone(&opened);
            move |_: &CameraSettings| -> Result<Camera> {
                opened.fetch_add(1, Ordering::Relaxed);
                let gpu = Gpu::open(&device)?;
                let slot = FrameSlot::new(&gpu, test_layout().frame_bytes())?;
                let source = ScriptedSource::new(Script::OneFrameThenPanic(slot));
                Ok(camera_of(gpu, source))
            }
        };
        let camera = std::thread::spawn(move || run_with(settings, m, links, open_camera));
        // The frame went through the pipeline (published, so the camera was up) before
        // the source panicked.
        let frame = ends
            .published
            .recv_timeout(Duration::from_secs(60))
            .expect("the first frame");
        assert_eq!(frame.sequence, 0);
        wait_for("no restart counted", || {
            metrics.sample(r#"edgesight_camera_restarts_total{camera="t"}"#) == Some(1.0)
        });
        assert_eq!(
            metrics.sample(r#"edgesight_camera_up{camera="t"}"#),
            Some(0.0)
        );
        // Opened once so far; it is opened again after the restart delay.
        assert_eq!(opened.load(Ordering::Relaxed), 1);
        stop.store(true, Ordering::Relaxed);
        camera
            .join()
            .expect("the camera thread itself does not panic");
    }

    /// Every reloadable setting reaches a camera that waits to be opened again: it opens
    /// with the new regions and with its health detectors as the reload left them (the
    /// detectors stayed on before: only the options and regions were taken).
    #[test]
    fn a_reload_while_the_camera_waits_to_restart_reaches_it_when_it_reopens() {
        let (_, settings) = test_camera();
        assert!(settings.health.enabled);
        let stop = Arc::new(AtomicBool::new(false));
        let (links, ends) = Links::new(Arc::clone(&stop), 4);
        let metrics = Metrics::new();
        let m = Arc::new(CameraFamilies::new(&metrics, 16).camera("t", None));
        let opened = Arc::new(Mutex::new(Vec::new()));
        let open_camera = {
            let opened = Arc::clone(&opened);
            move |settings: &CameraSettings| -> Result<Camera> {
                let mut opened = opened.lock().expect("lock");
                opened.push(settings.clone());
                anyhow::bail!("no camera yet (open {})", opened.len())
            }
        };
        let camera = std::thread::spawn(move || run_with(settings, m, links, open_camera));
        wait_for("never opened", || !opened.lock().expect("lock").is_empty());
        let options = PipelineOptions {
            edge_threshold: 99,
            ..PipelineOptions::default()
        };
        let regions = vec!["door:1,2,3,4".parse().expect("region")];
        let health = edgesight_core::health::HealthSettings {
            enabled: false,
            ..edgesight_core::health::HealthSettings::default()
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        ends.reloads
            .send(super::super::Reload {
                options,
                regions: regions.clone(),
                health,
                motion: edgesight_core::motion_events::CameraMotionSettings::default(),
                verify_every: 7,
                reply,
            })
            .expect("the camera thread runs");
        assert!(answer.blocking_recv().expect("an answer").is_ok());
        wait_for("not opened again", || {
            opened.lock().expect("lock").len() >= 2
        });
        stop.store(true, Ordering::Relaxed);
        camera
            .join()
            .expect("the camera thread itself does not panic");
        let reopened = opened.lock().expect("lock")[1].clone();
        assert_eq!(reopened.options, options);
        assert_eq!(reopened.regions, regions);
        assert_eq!(reopened.health, health);
        assert_eq!(reopened.verify_every, 7);
    }
}
