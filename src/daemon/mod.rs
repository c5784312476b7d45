//! `edgesight run`: the config is checked and the socket bound before anything starts,
//! then one capture/GPU thread per camera (`es-cam-NAME`) and one publisher thread per
//! camera (`es-pub-NAME`), the verifier, and on a small tokio runtime the HTTP server,
//! systemd notification and the signal handling. Each job has its file: the log
//! (`logging`), the signal and reload loop (`serve`, `reload`), the publishers
//! (`publish`), systemd's READY and watchdog (`supervisor`), live-frame checks (`verify`);
//! this one starts the threads and joins them.
//!
//! Shutdown has one switch, the `stop` flag: SIGTERM/SIGINT set it, camera loops see it
//! within their poll interval, the server stops accepting, and the threads are joined.

pub mod camera;
pub mod camera_metrics;
mod logging;
mod publish;
pub mod reload;
pub mod series;
mod serve;
mod signals;
mod supervisor;
pub mod verify;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::{mpsc as tmpsc, watch};

use crate::config::{self, CameraSettings, Overrides};
use camera::{CameraThreadState, Links, Reload};
use camera_metrics::CameraFamilies;
use edgesight_http::metrics::Metrics;
use edgesight_http::server::{self, CameraView};
use reload::ReloadMetrics;

pub use logging::{init_logging, set_log_level, LogLevelError};
pub use publish::publish;

/// Results waiting for the publisher, per camera. Small on purpose: a publisher that
/// falls this far behind loses frames (counted) rather than making the camera wait.
const PUBLISH_QUEUE: usize = 8;

struct CameraThread {
    settings: CameraSettings,
    state: Arc<CameraThreadState>,
    reloads: mpsc::Sender<Reload>,
    thread: Option<JoinHandle<()>>,
}

/// Runs the daemon until SIGTERM/SIGINT. Config errors come back as [`config::ConfigError`]
/// before anything has started.
pub fn run(config_path: Option<PathBuf>, overrides: Overrides) -> Result<()> {
    crate::pages::map_large_allocations();
    // First: a SIGHUP or SIGTERM during the config checks (which open OpenCL) must be
    // queued for the loop below, not end the process by the default action.
    block_signals().context("blocking signals")?;
    let signals = signals::forward().context("starting the signal thread")?;
    let checked = config::validate(config_path.as_deref(), &overrides)?;
    let settings = checked.settings;
    init_logging(&settings.log_level, settings.log_format);
    for warning in &checked.warnings {
        tracing::warn!("{warning}");
    }
    let listener = server::Listener::prepare(&settings.web, settings.cameras.len())?;
    let metrics = Arc::new(Metrics::new());
    metrics.set_tier(settings.metrics_tier);
    let camera_families = CameraFamilies::new(&metrics, settings.histogram_bins);
    let reloads = ReloadMetrics::new(&metrics);
    verify::start().context("starting the verifier thread")?;
    let stop = Arc::new(AtomicBool::new(false));
    let (exits_tx, exits_rx) = tmpsc::unbounded_channel::<String>();

    // Cameras start in the background: one whose device is absent, or that fails, is
    // shown down and retried by its own thread, and the server runs meanwhile.
    let mut threads = Vec::new();
    let mut views = Vec::new();
    for c in &settings.cameras {
        let (links, ends) = Links::new(Arc::clone(&stop), PUBLISH_QUEUE);
        let m = Arc::new(camera_families.camera(&c.name, camera::target_fps(c)));
        let (settings_c, m_c, exits) = (c.clone(), Arc::clone(&m), exits_tx.clone());
        let name = c.name.clone();
        let thread = std::thread::Builder::new()
            .name(format!("es-cam-{}", c.name))
            .spawn(move || {
                camera::run(settings_c, m_c, links);
                let _ = exits.send(name);
            })
            .context("starting a camera thread")?;
        let (latest_tx, latest_rx) = watch::channel(None);
        let (published, spare) = (ends.published, ends.spare);
        // Its own thread, not a tokio task: a camera thread's wake-ups reach tokio through
        // its shared queue, which busy workers poll late; under HTTP load (wrk on
        // /metrics) that held a tokio publisher back long enough to drop frames.
        std::thread::Builder::new()
            .name(format!("es-pub-{}", c.name))
            .spawn(move || publish(published, spare, m, latest_tx))
            .with_context(|| format!("starting the publisher of camera '{}'", c.name))?;
        views.push(
            CameraView::new(c.name.clone(), latest_rx, ends.snapshots)
                .with_status(Arc::clone(&ends.state.status)),
        );
        threads.push(CameraThread {
            settings: c.clone(),
            state: ends.state,
            reloads: ends.reloads,
            thread: Some(thread),
        });
    }

    let tls = listener.tls();
    let auth = listener.auth();
    let runtime = server::runtime()?;
    let outcome = runtime.block_on(serve::serve(
        &settings,
        config_path,
        overrides,
        &metrics,
        &reloads,
        &threads,
        Arc::new(views),
        listener,
        tls,
        &auth,
        exits_rx,
        signals,
    ));
    stop.store(true, Ordering::Relaxed);
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    join(&mut threads, STOP_WITHIN);
    // Connections still open (a client that never reads) must not hold the exit up.
    runtime.shutdown_timeout(Duration::from_millis(100));
    tracing::info!("stopped");
    outcome
}

/// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and every thread it starts
/// afterwards; `run` takes them with `sigwait`. A program calls it first thing, before
/// anything that may start a thread, so that none of them gets the default action.
pub fn block_signals() -> std::io::Result<()> {
    signals::block()
}

/// Undoes [`block_signals`], for commands other than `run`, which keep the default
/// actions (Ctrl-C ends them).
pub fn unblock_signals() -> std::io::Result<()> {
    signals::unblock()
}

/// How long the camera threads get to stop: well inside the unit's `TimeoutStopSec=5s`,
/// after which systemd would kill the daemon and count a failure.
const STOP_WITHIN: Duration = Duration::from_secs(3);

/// Joins the camera threads that stop within `within` and names those that do not (one
/// blocked in a driver's call, say): the daemon exits without them rather than wait.
fn join(threads: &mut [CameraThread], within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline
        && threads
            .iter()
            .any(|t| t.thread.as_ref().is_some_and(|h| !h.is_finished()))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut stuck = Vec::new();
    for t in threads {
        let Some(handle) = t.thread.take() else {
            continue;
        };
        if !handle.is_finished() {
            tracing::error!(
                camera = %t.settings.name,
                "camera thread did not stop within {} s (blocked in its source or its device); exiting without it",
                within.as_secs_f64()
            );
            stuck.push(t.settings.name.clone());
        } else if handle.join().is_err() {
            tracing::error!(camera = %t.settings.name, "camera thread panicked");
        }
    }
    stuck
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SIGTERM ends the daemon within the unit's stop timeout whatever a camera thread is
    /// blocked in: the threads that stop are joined, one that does not is named and left.
    #[test]
    fn a_camera_thread_blocked_forever_does_not_hold_the_exit_up() {
        let thread = |name: &str, blocked: Duration| CameraThread {
            settings: CameraSettings {
                name: name.into(),
                device: edgesight_core::cl::DeviceSpec::default(),
                tuning: edgesight_core::pipeline::TuningChoice::Auto,
                verify_every: 0,
                profiling: edgesight_core::cl::Profiling::Auto,
                source: edgesight_capture::capture::SourceSpec::default_pattern(),
                options: edgesight_core::pipeline::PipelineOptions::default(),
                regions: Vec::new(),
                health: edgesight_core::health::HealthSettings::default(),
                motion: edgesight_core::motion_events::CameraMotionSettings::default(),
            },
            state: Arc::new(CameraThreadState::new()),
            reloads: mpsc::channel().0,
            thread: Some(std::thread::spawn(move || std::thread::sleep(blocked))),
        };
        let mut threads = [
            thread("stops", Duration::from_millis(50)),
            thread("blocked", Duration::from_secs(3600)),
        ];
        let start = Instant::now();
        let stuck = join(&mut threads, Duration::from_millis(500));
        let took = start.elapsed();
        assert_eq!(stuck, ["blocked"]);
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert!(threads.iter().all(|t| t.thread.is_none()));
    }
}
