//! The daemon's main loop on the tokio runtime: the HTTP server and the systemd
//! supervisor started, then signals taken until one stops the daemon. A SIGHUP starts a
//! reload beside the loop, never inside it, so a SIGTERM during a reload is served at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use tokio::sync::{mpsc as tmpsc, watch};

use super::camera::CameraThreadState;
use super::reload::{reload, ReloadMetrics};
use super::signals::Signal;
use super::supervisor::supervise;
use super::CameraThread;
use crate::config::{Overrides, Settings};
use edgesight_http::metrics::Metrics;
use edgesight_http::server::{self, CameraView};

/// Serves until SIGTERM or SIGINT (`Ok`) or a camera thread that ended (`Err`).
#[allow(clippy::too_many_arguments)]
pub(super) async fn serve(
    settings: &Settings,
    config_path: Option<PathBuf>,
    overrides: Overrides,
    metrics: &Arc<Metrics>,
    reloads: &ReloadMetrics,
    threads: &[CameraThread],
    views: Arc<Vec<CameraView>>,
    listener: server::Listener,
    tls: Option<server::TlsIdentity>,
    auth: &server::Auth,
    mut exits: tmpsc::UnboundedReceiver<String>,
    mut signals: tmpsc::UnboundedReceiver<Signal>,
) -> Result<()> {
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let bound = listener
        .addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let server = tokio::spawn(server::serve(
        listener,
        settings.web.clone(),
        Arc::clone(metrics),
        Arc::clone(&views),
        shutdown_rx.clone(),
    ));
    let states: Vec<Arc<CameraThreadState>> =
        threads.iter().map(|t| Arc::clone(&t.state)).collect();
    tokio::spawn(supervise(Arc::clone(&views), states, shutdown_rx.clone()));
    // The events are made for the broker, for `[events] dir`, or for both.
    let (news_tx, news_rx) = match settings.mqtt {
        Some(_) => {
            let (tx, rx) = tmpsc::unbounded_channel();
            (Some(tx), Some(rx))
        }
        None => (None, None),
    };
    if settings.mqtt.is_some() || settings.events.is_some() {
        crate::events::start(
            settings.events.clone(),
            news_tx,
            Arc::clone(&views),
            shutdown_rx.clone(),
        );
    }
    let mqtt = settings.mqtt.clone().zip(news_rx).map(|(m, news)| {
        let families = crate::mqtt::MqttMetrics::new(metrics);
        let cameras = crate::config::discovery_cameras(settings, &m.board);
        crate::mqtt::start(m, news, Arc::clone(&views), cameras, families, shutdown_rx)
    });

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
            auth,
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
    // The broker hears `offline` before the process ends (the publisher bounds its wait).
    if let Some(mqtt) = mqtt {
        let _ = tokio::time::timeout(Duration::from_secs(1), mqtt).await;
    }
    outcome
}
