//! `edgesight run`: the config is checked and the socket bound before anything starts,
//! then one capture/GPU thread per camera (`es-cam-NAME`) and one publisher thread per
//! camera (`es-pub-NAME`), and on a small tokio runtime the HTTP server, systemd
//! notification and the signal handling.
//!
//! Shutdown has one switch, the `stop` flag: SIGTERM/SIGINT set it, camera loops see it
//! within their poll interval, the server stops accepting, and the threads are joined.

pub mod camera;
pub mod camera_metrics;
pub mod health_metrics;
mod logging;
mod publish;
pub mod reload;
mod signals;
pub mod verify;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tokio::sync::{mpsc as tmpsc, watch};

use crate::config::{self, CameraSettings, Overrides, Settings};
use crate::metrics::Metrics;
use crate::server::{self, CameraView};
use camera::{CameraState, Links, Reload};
use camera_metrics::CameraFamilies;
use reload::{reload, ReloadMetrics};
use signals::Signal;

pub use logging::init_logging;
pub use publish::publish;

/// Results waiting for the publisher, per camera. Small on purpose: a publisher that
/// falls this far behind loses frames (counted) rather than making the camera wait.
const PUBLISH_QUEUE: usize = 8;

struct CameraThread {
    settings: CameraSettings,
    state: Arc<CameraState>,
    reloads: mpsc::Sender<Reload>,
    thread: Option<JoinHandle<()>>,
}

/// Runs the daemon until SIGTERM/SIGINT. Config errors come back as [`config::ConfigError`]
/// before anything has started.
pub fn run(config_path: Option<PathBuf>, overrides: Overrides) -> Result<()> {
    // First: a SIGHUP or SIGTERM during the config checks (which open OpenCL) must be
    // queued for the loop below, not end the process by the default action.
    block_signals().context("blocking signals")?;
    let signals = signals::forward().context("starting the signal thread")?;
    let checked = config::validate(config_path.as_deref(), &overrides)?;
    let settings = checked.settings;
    init_logging(&settings.log_level);
    for warning in &checked.warnings {
        tracing::warn!("{warning}");
    }
    let listener = server::Listener::prepare(&settings.web, settings.cameras.len())?;
    let metrics = Arc::new(Metrics::new());
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
        views.push(CameraView::new(c.name.clone(), latest_rx, ends.snapshots));
        threads.push(CameraThread {
            settings: c.clone(),
            state: ends.state,
            reloads: ends.reloads,
            thread: Some(thread),
        });
    }

    let tls = listener.tls();
    let runtime = server::runtime()?;
    let outcome = runtime.block_on(serve(
        &settings,
        config_path,
        overrides,
        &metrics,
        &reloads,
        &threads,
        Arc::new(views),
        listener,
        tls,
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

#[allow(clippy::too_many_arguments)]
async fn serve(
    settings: &Settings,
    config_path: Option<PathBuf>,
    overrides: Overrides,
    metrics: &Arc<Metrics>,
    reloads: &ReloadMetrics,
    threads: &[CameraThread],
    views: Arc<Vec<CameraView>>,
    listener: server::Listener,
    tls: Option<server::TlsIdentity>,
    mut exits: tmpsc::UnboundedReceiver<String>,
    mut signals: tmpsc::UnboundedReceiver<Signal>,
) -> Result<()> {
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let bound = listener.addr;
    let server = tokio::spawn(server::serve(
        listener,
        settings.web.clone(),
        Arc::clone(metrics),
        Arc::clone(&views),
        shutdown_rx.clone(),
    ));
    let states: Vec<Arc<CameraState>> = threads.iter().map(|t| Arc::clone(&t.state)).collect();
    tokio::spawn(supervise(Arc::clone(&views), states, shutdown_rx));

    tracing::info!(listen = %bound, "serving");
    // A reload runs beside this loop, never inside it: reading the config or waiting for
    // the cameras' answers must not delay a SIGTERM. A SIGHUP during a reload is kept
    // and starts one more when it is done.
    let start_reload = || {
        Box::pin(reload(
            config_path.as_deref(),
            &overrides,
            settings,
            threads,
            tls.as_ref(),
            reloads,
        ))
    };
    let mut reloading = None;
    let mut reload_again = false;
    let outcome = loop {
        tokio::select! {
            Some(signal) = signals.recv() => match signal {
                Signal::Terminate | Signal::Interrupt => {
                    tracing::info!("{signal:?}: stopping");
                    break Ok(());
                }
                Signal::Hangup if reloading.is_some() => reload_again = true,
                Signal::Hangup => reloading = Some(start_reload()),
            },
            () = async { reloading.as_mut().expect("guarded by the condition").await },
                if reloading.is_some() =>
            {
                reloading = std::mem::take(&mut reload_again).then(start_reload);
            }
            // A camera thread ends only when told to stop, or by a panic outside the part
            // it restarts: then systemd's restart is the way back.
            Some(name) = exits.recv() => break Err(anyhow!("camera '{name}' stopped")),
        }
    };
    let _ = shutdown_tx.send(true);
    // The server stops accepting at once; give open responses a moment to finish.
    let _ = tokio::time::timeout(Duration::from_millis(300), server).await;
    outcome
}

/// Tells systemd READY once every camera has published a frame or is waiting for its
/// device (a board whose camera is unplugged at boot still serves its metrics), and pings
/// its watchdog only while every camera loop keeps turning, so a hung GPU call gets the
/// service restarted.
async fn supervise(
    views: Arc<Vec<CameraView>>,
    states: Vec<Arc<CameraState>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let watchdog = sd_notify::watchdog_enabled();
    let mut ready = false;
    let mut last_ping: Option<Instant> = None;
    // Until READY, a look at the cameras every 100 ms; after it, the task wakes only for
    // the watchdog (an eighth of its period, so the pings, a quarter period apart, stay well
    // inside it), or not at all without one: no thread woken ten times a second for nothing.
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if !ready
            && views
                .iter()
                .zip(&states)
                .all(|(v, s)| v.latest().is_some() || s.waiting())
        {
            ready = true;
            tracing::info!("every camera delivers frames or waits for its device: ready");
            if let Err(e) = sd_notify::notify(&[sd_notify::NotifyState::Ready]) {
                tracing::warn!("telling systemd READY: {e}");
            }
            match watchdog {
                None => {
                    let _ = shutdown.changed().await;
                    return;
                }
                Some(period) => {
                    tick = tokio::time::interval((period / 8).max(Duration::from_millis(10)))
                }
            }
        }
        let Some(period) = watchdog else { continue };
        let stuck = states.iter().any(|s| s.since_last_turn() > period / 2);
        let due = last_ping.is_none_or(|t| t.elapsed() >= period / 4);
        if ready && !stuck && due {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
            last_ping = Some(Instant::now());
        }
    }
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
                device: crate::cl::DeviceSpec::default(),
                tuning: crate::pipeline::TuningChoice::Auto,
                verify_every: 0,
                source: crate::capture::SourceSpec::default_pattern(),
                options: crate::pipeline::PipelineOptions::default(),
                regions: Vec::new(),
                health: crate::health::HealthSettings::default(),
            },
            state: Arc::new(CameraState::new()),
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
