//! `edgesight run`: the config is checked and the socket bound before anything starts,
//! then one capture/GPU thread per camera (`es-cam-NAME`) and one publisher thread per
//! camera (`es-pub-NAME`), and on a small tokio runtime the HTTP server, systemd
//! notification and the signal handling.
//!
//! Shutdown has one switch, the `stop` flag: SIGTERM/SIGINT set it, camera loops see it
//! within their poll interval, the server stops accepting, and the threads are joined.

pub mod camera;
mod signals;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tokio::sync::{mpsc as tmpsc, oneshot, watch};

use crate::config::{self, CameraSettings, Overrides, Settings};
use crate::frame::FrameLayout;
use crate::metrics::{CameraMetrics, Metrics};
use crate::pipeline::{FrameResult, PipelineOptions};
use crate::server::{self, CameraView};
use camera::{Beat, Links, Published, Reload, Started};
use signals::Signal;

/// Results waiting for the publisher, per camera. Small on purpose: a publisher that
/// falls this far behind loses frames (counted) rather than making the camera wait.
const PUBLISH_QUEUE: usize = 8;

/// The last published frame of a camera.
pub struct Latest {
    pub sequence: u64,
    pub published: Instant,
    pub result: FrameResult,
    pub options: PipelineOptions,
    pub format: String,
    pub device: String,
}

struct CameraThread {
    settings: CameraSettings,
    beat: Arc<Beat>,
    reloads: mpsc::Sender<Reload>,
    thread: Option<JoinHandle<()>>,
}

/// Installs the `tracing` subscriber at `level`, or at `RUST_LOG` when that names a level
/// (error, warn, info, debug, trace). Per-module filters are left out to keep the binary
/// small.
pub fn init_logging(level: &str) {
    let parse = |s: &str| s.trim().parse::<tracing::Level>().ok();
    let level = std::env::var("RUST_LOG")
        .ok()
        .and_then(|s| parse(&s))
        .or_else(|| parse(level))
        .unwrap_or(tracing::Level::INFO);
    // A second call (tests) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: journald and log files get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

/// Runs the daemon until SIGTERM/SIGINT. Config errors come back as [`config::ConfigError`]
/// before anything has started.
pub fn run(config_path: Option<PathBuf>, overrides: Overrides) -> Result<()> {
    let (_, settings) = config::load(config_path.as_deref(), &overrides)?;
    signals::block().context("blocking signals")?;
    let mut signals = signals::forward().context("starting the signal thread")?;
    init_logging(&settings.log_level);
    let listener = server::Listener::prepare(&settings.web)?;
    let metrics = Arc::new(Metrics::new(settings.histogram_bins));
    let stop = Arc::new(AtomicBool::new(false));
    let (exits_tx, exits_rx) = tmpsc::unbounded_channel::<(String, Result<()>)>();

    let mut threads = Vec::new();
    let mut pending = Vec::new();
    for c in &settings.cameras {
        let (links, ends) = Links::new(Arc::clone(&stop), PUBLISH_QUEUE);
        let (settings_c, metrics_c, exits) = (c.clone(), Arc::clone(&metrics), exits_tx.clone());
        let name = c.name.clone();
        let thread = std::thread::Builder::new()
            .name(format!("es-cam-{}", c.name))
            .spawn(move || {
                let outcome = camera::run(settings_c, metrics_c, links);
                let _ = exits.send((name, outcome));
            })
            .context("starting a camera thread")?;
        threads.push(CameraThread {
            settings: c.clone(),
            beat: ends.beat,
            reloads: ends.reloads,
            thread: Some(thread),
        });
        pending.push((ends.started, ends.published, ends.snapshots));
    }

    let mut started = Vec::new();
    let mut failure = None;
    for (i, (rx, publish_rx, snap_tx)) in pending.into_iter().enumerate() {
        // Kernel builds can take seconds on a cold cache: a stop request meanwhile is
        // honoured at once, leaving the builds to die with the process.
        let answer = loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Signal::Terminate | Signal::Interrupt) = signals.try_recv() {
                        tracing::info!("stopping while cameras start");
                        stop.store(true, Ordering::Relaxed);
                        return Ok(());
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                Ok(answer) => break Some(answer),
            }
        };
        match answer {
            Some(Ok(s)) => started.push((s, publish_rx, snap_tx)),
            Some(Err(e)) => {
                failure.get_or_insert(e);
            }
            None => {
                failure.get_or_insert(anyhow!(
                    "camera '{}' ended while starting",
                    threads[i].settings.name
                ));
            }
        }
    }
    if let Some(e) = failure {
        stop.store(true, Ordering::Relaxed);
        join(&mut threads);
        return Err(e);
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("es-tokio")
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let outcome = runtime.block_on(serve(
        &settings,
        config_path,
        overrides,
        &metrics,
        &threads,
        started,
        listener,
        exits_rx,
        signals,
    ));
    stop.store(true, Ordering::Relaxed);
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    join(&mut threads);
    // Connections still open (a client that never reads) must not hold the exit up.
    runtime.shutdown_timeout(Duration::from_millis(100));
    tracing::info!("stopped");
    outcome
}

fn join(threads: &mut [CameraThread]) {
    for t in threads {
        if let Some(handle) = t.thread.take() {
            if handle.join().is_err() {
                tracing::error!(camera = %t.settings.name, "camera thread panicked");
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    settings: &Settings,
    config_path: Option<PathBuf>,
    overrides: Overrides,
    metrics: &Arc<Metrics>,
    threads: &[CameraThread],
    started: Vec<(
        Started,
        mpsc::Receiver<Published>,
        mpsc::Sender<camera::SnapshotReply>,
    )>,
    listener: server::Listener,
    mut exits: tmpsc::UnboundedReceiver<(String, Result<()>)>,
    mut signals: tmpsc::UnboundedReceiver<Signal>,
) -> Result<()> {
    let mut views = Vec::new();
    let layouts: Vec<FrameLayout> = started.iter().map(|(s, _, _)| s.layout).collect();
    for (t, (s, publish_rx, snap_tx)) in threads.iter().zip(started) {
        let (latest_tx, latest_rx) = watch::channel(None);
        let format = s.layout.format.name().to_string();
        let device = s.device.to_string();
        // Its own thread, not a tokio task: a camera thread's wake-ups reach tokio through
        // its shared queue, which busy workers poll late; under HTTP load (wrk on
        // /metrics) that held a tokio publisher back long enough to drop frames.
        let name = t.settings.name.clone();
        std::thread::Builder::new()
            .name(format!("es-pub-{name}"))
            .spawn(move || publish(publish_rx, s.metrics, latest_tx, format, device))
            .with_context(|| format!("starting the publisher of camera '{name}'"))?;
        views.push(CameraView::new(t.settings.name.clone(), latest_rx, snap_tx));
    }
    let views = Arc::new(views);
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let server = tokio::spawn(server::serve(
        listener,
        settings.web.clone(),
        Arc::clone(metrics),
        Arc::clone(&views),
        shutdown_rx.clone(),
    ));
    let beats: Vec<Arc<Beat>> = threads.iter().map(|t| Arc::clone(&t.beat)).collect();
    tokio::spawn(supervise(Arc::clone(&views), beats, shutdown_rx));

    tracing::info!(listen = %settings.web.listen, "serving");
    let outcome = loop {
        tokio::select! {
            Some(signal) = signals.recv() => match signal {
                Signal::Terminate | Signal::Interrupt => {
                    tracing::info!("{signal:?}: stopping");
                    break Ok(());
                }
                Signal::Hangup => {
                    let running = Running { settings, threads, layouts: &layouts };
                    reload(config_path.as_deref(), &overrides, &running, metrics).await
                }
            },
            Some((name, outcome)) = exits.recv() => {
                break Err(match outcome {
                    Err(e) => e.context(format!("camera '{name}' failed")),
                    Ok(()) => anyhow!("camera '{name}' stopped"),
                });
            }
        }
    };
    let _ = shutdown_tx.send(true);
    // The server stops accepting at once; give open responses a moment to finish.
    let _ = tokio::time::timeout(Duration::from_millis(300), server).await;
    outcome
}

/// Copies each frame's results into the metrics and the latest-frame slot; ends when the
/// camera thread does.
fn publish(
    rx: mpsc::Receiver<Published>,
    m: Arc<CameraMetrics>,
    latest: watch::Sender<Option<Arc<Latest>>>,
    format: String,
    device: String,
) {
    const WINDOW: Duration = Duration::from_secs(2);
    let mut times: VecDeque<Instant> = VecDeque::new();
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(p) => {
                let now = Instant::now();
                m.frame(&p.result, now.saturating_duration_since(p.captured));
                times.push_back(now);
                latest.send_replace(Some(Arc::new(Latest {
                    sequence: p.sequence,
                    published: now,
                    result: p.result,
                    options: p.options,
                    format: format.clone(),
                    device: device.clone(),
                })));
            }
            // No frame for a while: the rate below still has to fall.
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        let now = Instant::now();
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) > WINDOW)
        {
            times.pop_front();
        }
        m.frame_rate.set(match (times.front(), times.back()) {
            (Some(first), Some(last)) if times.len() >= 2 && last > first => {
                (times.len() - 1) as f64 / last.duration_since(*first).as_secs_f64()
            }
            _ => 0.0,
        });
    }
}

/// Tells systemd READY once every camera has published a frame, and pings its watchdog
/// only while every camera loop keeps turning, so a hung GPU call gets the service
/// restarted.
async fn supervise(
    views: Arc<Vec<CameraView>>,
    beats: Vec<Arc<Beat>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let watchdog = sd_notify::watchdog_enabled();
    let mut ready = false;
    let mut last_ping: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if !ready && views.iter().all(|v| v.latest().is_some()) {
            ready = true;
            tracing::info!("first frame from every camera: ready");
            if let Err(e) = sd_notify::notify(&[sd_notify::NotifyState::Ready]) {
                tracing::warn!("telling systemd READY: {e}");
            }
        }
        let Some(period) = watchdog else { continue };
        let stuck = beats.iter().any(|b| b.since_last_turn() > period / 2);
        let due = last_ping.is_none_or(|t| t.elapsed() >= period / 4);
        if ready && !stuck && due {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
            last_ping = Some(Instant::now());
        }
    }
}

/// SIGHUP: reads the config again and hands each running camera its new ROIs and
/// options. Anything that would need the camera or socket reopened is logged and left
/// as it is; a config that does not check is refused whole.
/// What a reload changes: the running settings and each camera's negotiated layout.
struct Running<'a> {
    settings: &'a Settings,
    threads: &'a [CameraThread],
    layouts: &'a [FrameLayout],
}

async fn reload(
    path: Option<&std::path::Path>,
    overrides: &Overrides,
    running: &Running<'_>,
    metrics: &Metrics,
) {
    let outcome = reload_inner(path, overrides, running).await;
    let result = if outcome.is_ok() {
        "success"
    } else {
        "failure"
    };
    metrics.reloads.with_label_values(&[result]).inc();
    match outcome {
        Ok(()) => tracing::info!("SIGHUP: configuration reloaded"),
        Err(e) => {
            tracing::error!("SIGHUP: reload refused, keeping the running configuration: {e:#}")
        }
    }
}

async fn reload_inner(
    path: Option<&std::path::Path>,
    overrides: &Overrides,
    running: &Running<'_>,
) -> Result<()> {
    let (current, threads) = (running.settings, running.threads);
    let path = path.ok_or_else(|| anyhow!("no --config file to read again"))?;
    let path_owned = path.to_path_buf();
    let overrides_owned = overrides.clone();
    let (_, new) =
        tokio::task::spawn_blocking(move || config::load(Some(&path_owned), &overrides_owned))
            .await
            .context("reading the config")??;
    if new.web != current.web {
        tracing::warn!("SIGHUP: [web] changes take a restart; keeping the running ones");
    }
    for c in &new.cameras {
        if !threads.iter().any(|t| t.settings.name == c.name) {
            tracing::warn!(camera = %c.name, "SIGHUP: new cameras take a restart");
        }
    }
    // Regions are checked against the sizes the cameras really deliver before any camera
    // is told, so that a reload is taken by all cameras or by none.
    for (t, layout) in threads.iter().zip(running.layouts) {
        if let Some(c) = new.cameras.iter().find(|c| c.name == t.settings.name) {
            for r in &c.regions {
                r.validate(layout)
                    .with_context(|| format!("camera '{}'", c.name))?;
            }
        }
    }
    let mut replies = Vec::new();
    for t in threads {
        let Some(c) = new.cameras.iter().find(|c| c.name == t.settings.name) else {
            tracing::warn!(camera = %t.settings.name, "SIGHUP: removing cameras takes a restart");
            continue;
        };
        if c.source != t.settings.source || c.device != t.settings.device {
            tracing::warn!(camera = %c.name, "SIGHUP: source and device changes take a restart");
        }
        let (reply, rx) = oneshot::channel();
        t.reloads
            .send(Reload {
                options: c.options,
                regions: c.regions.clone(),
                reply,
            })
            .map_err(|_| anyhow!("camera '{}' is not running", c.name))?;
        replies.push((c.name.clone(), rx));
    }
    for (name, rx) in replies {
        match tokio::time::timeout(Duration::from_secs(5), rx).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => return Err(anyhow!("camera '{name}': {e}")),
            _ => return Err(anyhow!("camera '{name}' did not answer")),
        }
    }
    Ok(())
}
