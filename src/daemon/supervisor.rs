//! systemd's side of the daemon: READY once the cameras are up or waiting, and the
//! watchdog pinged only while every camera loop keeps turning.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::camera::CameraThreadState;
use edgesight_http::server::CameraView;

/// How far each extension of systemd's start timeout reaches, and how often one is sent
/// while a program builds before READY.
const EXTEND_BY: Duration = Duration::from_secs(60);
const EXTEND_EVERY: Duration = Duration::from_secs(20);

/// Tells systemd READY once every camera has published a frame or is waiting for its
/// device (a board whose camera is unplugged at boot still serves its metrics), and pings
/// its watchdog only while every camera loop keeps turning, so a hung GPU call gets the
/// service restarted.
pub(super) async fn supervise(
    views: Arc<Vec<CameraView>>,
    states: Vec<Arc<CameraThreadState>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let watchdog = sd_notify::watchdog_enabled();
    let mut ready = false;
    let mut last_ping: Option<Instant> = None;
    // Until READY, a look at the cameras every 100 ms; after it, the task wakes only for
    // the watchdog (an eighth of its period, so the pings, a quarter period apart, stay well
    // inside it), or not at all without one: no thread woken ten times a second for nothing.
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut extended: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        // A first start on a board compiles for minutes: systemd's start timeout is
        // pushed out while a program builds, a minute at a time.
        if !ready
            && edgesight_core::cl::build_under_way().is_some()
            && extended.is_none_or(|t| t.elapsed() >= EXTEND_EVERY)
        {
            let usec = u32::try_from(EXTEND_BY.as_micros()).unwrap_or(u32::MAX);
            let _ = sd_notify::notify(&[sd_notify::NotifyState::ExtendTimeoutUsec(usec)]);
            extended = Some(Instant::now());
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
        let stuck = states.iter().any(|s| s.stuck(period / 2));
        let due = last_ping.is_none_or(|t| t.elapsed() >= period / 4);
        if ready && !stuck && due {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
            last_ping = Some(Instant::now());
        }
    }
}
