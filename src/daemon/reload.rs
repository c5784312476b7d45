//! SIGHUP: the config read again and checked as at start, then handed to the running
//! cameras, all of them or none; and the family that counts the outcomes.

use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use prometheus::IntCounterVec;
use tokio::sync::oneshot;

use super::camera::Reload;
use super::CameraThread;
use crate::config::{self, Overrides, Settings};
use crate::metrics::Metrics;

/// `edgesight_config_reloads_total`. Its series appear with the first reload of their
/// result: reloads are rare, so nothing is resolved ahead.
pub struct ReloadMetrics {
    results: IntCounterVec,
}

impl ReloadMetrics {
    pub fn new(metrics: &Metrics) -> ReloadMetrics {
        ReloadMetrics {
            results: metrics.counters(
                "edgesight_config_reloads_total",
                "Configuration reloads on SIGHUP, by result (success or failure).",
                &["result"],
            ),
        }
    }

    /// Counts one reload, taken (`ok`) or refused.
    pub fn count(&self, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        self.results.with_label_values(&[result]).inc();
    }
}

/// SIGHUP: reads the config again and hands each running camera its new ROIs and
/// options. Anything that would need the camera or socket reopened is logged and left
/// as it is; a config that does not check is refused whole.
pub(super) async fn reload(
    path: Option<&std::path::Path>,
    overrides: &Overrides,
    current: &Settings,
    threads: &[CameraThread],
    metrics: &ReloadMetrics,
) {
    let outcome = reload_inner(path, overrides, current, threads).await;
    metrics.count(outcome.is_ok());
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
    current: &Settings,
    threads: &[CameraThread],
) -> Result<()> {
    let path = path.ok_or_else(|| anyhow!("no --config file to read again"))?;
    let path_owned = path.to_path_buf();
    let overrides_owned = overrides.clone();
    // The checks `run` made at start, all of them: a config that would not start is not
    // taken by a reload either.
    let checked =
        tokio::task::spawn_blocking(move || config::validate(Some(&path_owned), &overrides_owned))
            .await
            .context("reading the config")??;
    for warning in &checked.warnings {
        tracing::warn!("SIGHUP: {warning}");
    }
    let new = checked.settings;
    if new.web != current.web {
        tracing::warn!("SIGHUP: [web] changes take a restart; keeping the running ones");
    }
    for c in &new.cameras {
        if !threads.iter().any(|t| t.settings.name == c.name) {
            tracing::warn!(camera = %c.name, "SIGHUP: new cameras take a restart");
        }
    }
    // Regions are checked against the sizes the cameras really deliver before any camera
    // is told, so that a reload is taken by all cameras or by none. A camera that has not
    // delivered a frame yet checks them when it does.
    for t in threads {
        let Some(layout) = t.state.layout() else {
            continue;
        };
        if let Some(c) = new.cameras.iter().find(|c| c.name == t.settings.name) {
            for r in &c.regions {
                r.validate(&layout)
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
        // The tuning decides the kernels and buffers a pipeline is built with, as the
        // device decides its context: a new one takes a new pipeline, as at start.
        if c.source != t.settings.source
            || c.device != t.settings.device
            || c.tuning != t.settings.tuning
        {
            tracing::warn!(
                camera = %c.name,
                "SIGHUP: source, device and tuning changes take a restart"
            );
        }
        let (reply, rx) = oneshot::channel();
        t.reloads
            .send(Reload {
                options: c.options,
                regions: c.regions.clone(),
                health: c.health,
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
