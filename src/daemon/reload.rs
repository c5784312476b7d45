//! SIGHUP: the config read again and checked as at start, then handed to the running
//! cameras, all of them or none; and the family that counts the outcomes.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use prometheus::{GaugeVec, IntCounterVec};
use tokio::sync::oneshot;

use super::camera::{Reload, ReloadRefused};
use super::CameraThread;
use crate::config::{self, Overrides, Settings};
use edgesight_http::metrics::Metrics;
use edgesight_http::server::{Auth, TlsIdentity, WebSettings};

/// `edgesight_config_reloads_total`. Its series appear with the first reload of their
/// result: reloads are rare, so nothing is resolved ahead.
pub struct ReloadMetrics {
    results: IntCounterVec,
    /// Prometheus' own names for its reloads, so the usual alert reads the same here.
    last_successful: GaugeVec,
    last_success: GaugeVec,
}

impl ReloadMetrics {
    pub fn new(metrics: &Metrics) -> ReloadMetrics {
        let metrics = ReloadMetrics {
            results: metrics.counters(
                "edgesight_config_reloads_total",
                "Configuration reloads on SIGHUP, by result: success (taken by every \
                 camera), partial (taken by some; the log names the others) or failure \
                 (refused whole, nothing changed).",
                &["result"],
            ),
            last_successful: metrics.gauges(
                "edgesight_config_last_reload_successful",
                "1 when the last configuration load (at start, or a reload on SIGHUP) was \
                 taken by every camera, 0 when it was refused or taken by some only.",
                &[],
            ),
            last_success: metrics.gauges(
                "edgesight_config_last_reload_success_timestamp_seconds",
                "When the configuration was last loaded whole (at start, or a reload on \
                 SIGHUP taken by every camera), in seconds since the epoch.",
                &[],
            ),
        };
        // Every result from 0, so that the first refused reload is an increase.
        for result in ["success", "partial", "failure"] {
            metrics.results.with_label_values(&[result]);
        }
        // The configuration the daemon started on was loaded whole.
        metrics.succeeded();
        metrics
    }

    pub fn count(&self, result: ReloadResult) {
        let label = match result {
            ReloadResult::Success => "success",
            ReloadResult::Partial => "partial",
            ReloadResult::Failure => "failure",
        };
        self.results.with_label_values(&[label]).inc();
        if result == ReloadResult::Success {
            self.succeeded();
        } else {
            self.last_successful.with_label_values::<&str>(&[]).set(0.0);
        }
    }

    fn succeeded(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.last_successful.with_label_values::<&str>(&[]).set(1.0);
        self.last_success.with_label_values::<&str>(&[]).set(now);
    }
}

/// What a reload came to, as `edgesight_config_reloads_total` counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReloadResult {
    /// Every camera took it.
    Success,
    /// Some cameras took it; the others refused it or had not answered yet.
    Partial,
    /// Refused whole: nothing changed.
    Failure,
}

/// How long a reload waits for the cameras to say they took it before it reports; a
/// camera that answers later (one being opened, say) is logged when it does.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// SIGHUP: reads the config again and hands each running camera its new ROIs and
/// options. Anything that would need the camera or socket reopened is logged and left
/// as it is; a config that does not check is refused whole. What each camera did with it
/// is what the log and the counter say.
pub(super) async fn reload(
    path: Option<&std::path::Path>,
    overrides: &Overrides,
    current: &Settings,
    threads: &[CameraThread],
    tls: Option<&TlsIdentity>,
    auth: &Auth,
    metrics: &ReloadMetrics,
) {
    if let Some(tls) = tls {
        reload_tls(tls);
    }
    let sent = match send(path, overrides, current, threads, auth).await {
        Ok(sent) => sent,
        Err(e) => {
            metrics.count(ReloadResult::Failure);
            tracing::error!("SIGHUP: reload refused, keeping the running configuration: {e:#}");
            return;
        }
    };
    let report = collect(sent, ANSWER_WITHIN).await;
    metrics.count(report.result());
}

/// Reads the served certificate and key again (renewed in place, say), whatever becomes
/// of the rest of the config: new handshakes get them; unreadable ones leave the served
/// identity in place.
fn reload_tls(tls: &TlsIdentity) {
    match tls.reload() {
        Ok(()) => {
            tracing::info!(cert = %tls.cert_path().display(), "SIGHUP: TLS certificate and key read again")
        }
        Err(e) => tracing::error!("SIGHUP: keeping the TLS certificate served: {e}"),
    }
}

/// Says which changes of `new` take a restart: `[web]` but its users, the log's format
/// `[metrics]`, `[mqtt]` and `[events]` are fixed when the server, the log and the cameras' metrics are made.
fn restart_only(current: &Settings, new: &Settings) {
    let web = WebSettings {
        users: current.web.users.clone(),
        ..new.web.clone()
    };
    for (changed, what) in [
        (
            web != current.web,
            "[web] changes other than basic-auth users",
        ),
        (new.log_format != current.log_format, "[log] format changes"),
        (
            new.histogram_bins != current.histogram_bins
                || new.metrics_tier != current.metrics_tier,
            "[metrics] changes",
        ),
        (new.mqtt != current.mqtt, "[mqtt] changes"),
        (new.events != current.events, "[events] changes"),
    ] {
        if changed {
            tracing::warn!("SIGHUP: {what} take a restart; keeping the running ones");
        }
    }
}

/// Logs at the reloaded `[log] level` from now on. A level that `RUST_LOG` overrides, as
/// at start, is said when the config changed it.
fn apply_log_level(current: &Settings, new: &Settings) {
    match super::set_log_level(&new.log_level) {
        Err(e) if new.log_level != current.log_level => {
            tracing::warn!("SIGHUP: [log] level not applied: {e}")
        }
        _ => {}
    }
}

/// Serves the reloaded basic-auth users from the next request on; the log says so when
/// they changed.
fn replace_users(auth: &Auth, users: &BTreeMap<String, String>) -> Result<()> {
    if auth
        .replace(users.clone())
        .map_err(|e| anyhow!("web.basic_auth_users: {e}"))?
    {
        tracing::info!("SIGHUP: basic-auth users read again: {} users", users.len());
    }
    Ok(())
}

/// A camera's answer to a reload, still to come.
struct Sent {
    camera: String,
    answer: oneshot::Receiver<Result<(), ReloadRefused>>,
}

/// Which cameras took a reload, refused it, or had not answered yet.
#[derive(Debug, Default, PartialEq)]
struct Report {
    took: Vec<String>,
    refused: Vec<String>,
    late: Vec<String>,
}

impl Report {
    fn result(&self) -> ReloadResult {
        if self.refused.is_empty() && self.late.is_empty() {
            ReloadResult::Success
        } else {
            ReloadResult::Partial
        }
    }
}

/// Waits up to `within` for every camera's answer and logs the outcome: every camera
/// took it, or which did and which did not. A camera that has not answered by then
/// takes the reload when its loop next turns; its answer is logged when it comes.
async fn collect(sent: Vec<Sent>, within: Duration) -> Report {
    let deadline = tokio::time::Instant::now() + within;
    let (mut took, mut refused, mut late) = (Vec::new(), Vec::new(), Vec::new());
    for Sent { camera, mut answer } in sent {
        match tokio::time::timeout_at(deadline, &mut answer).await {
            Ok(Ok(Ok(()))) => took.push(camera),
            Ok(Ok(Err(e))) => {
                tracing::error!(camera = %camera, "SIGHUP: camera refused the new configuration, keeping its own: {e}");
                refused.push(camera);
            }
            Ok(Err(_)) => {
                tracing::error!(camera = %camera, "SIGHUP: camera stopped before taking the new configuration");
                refused.push(camera);
            }
            Err(_) => {
                late.push(camera.clone());
                tokio::spawn(async move {
                    match answer.await {
                        Ok(Ok(())) => {
                            tracing::info!(camera = %camera, "SIGHUP: camera took the new configuration, late")
                        }
                        Ok(Err(e)) => {
                            tracing::error!(camera = %camera, "SIGHUP: camera refused the new configuration, keeping its own: {e}")
                        }
                        Err(_) => {}
                    }
                });
            }
        }
    }
    let report = Report {
        took,
        refused,
        late,
    };
    if report.result() == ReloadResult::Success {
        tracing::info!("SIGHUP: configuration reloaded");
    } else {
        tracing::warn!(
            took = %names(&report.took),
            refused = %names(&report.refused),
            busy = %names(&report.late),
            "SIGHUP: configuration reloaded in part: taken by the cameras named under took; \
             busy cameras (opening, say) take it when they turn their loop"
        );
    }
    report
}

fn names(cameras: &[String]) -> String {
    if cameras.is_empty() {
        return "none".into();
    }
    cameras
        .iter()
        .map(|c| format!("{c:?}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads and checks the config, then hands every running camera its part; `Err` when
/// the config is refused whole, before any camera was told.
async fn send(
    path: Option<&std::path::Path>,
    overrides: &Overrides,
    current: &Settings,
    threads: &[CameraThread],
    auth: &Auth,
) -> Result<Vec<Sent>> {
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
    restart_only(current, &new);
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
    replace_users(auth, &new.web.users)?;
    apply_log_level(current, &new);
    let mut sent = Vec::new();
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
            || c.profiling != t.settings.profiling
        {
            tracing::warn!(
                camera = %c.name,
                "SIGHUP: source, device, tuning and profiling changes take a restart"
            );
        }
        let (reply, rx) = oneshot::channel();
        t.reloads
            .send(Reload {
                options: c.options,
                regions: c.regions.clone(),
                health: c.health,
                motion: c.motion,
                verify_every: c.verify_every,
                reply,
            })
            .map_err(|_| anyhow!("camera '{}' is not running", c.name))?;
        sent.push(Sent {
            camera: c.name.clone(),
            answer: rx,
        });
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgesight_frame::region::RegionError;

    fn sent(camera: &str) -> (Sent, oneshot::Sender<Result<(), ReloadRefused>>) {
        let (reply, answer) = oneshot::channel();
        let camera = camera.to_string();
        (Sent { camera, answer }, reply)
    }

    /// The start counts as a whole load; a partial or refused reload turns the gauge to
    /// 0 and leaves the time of the last whole one; a whole reload sets both again.
    #[test]
    fn the_last_reload_gauges_follow_prometheus_own() {
        let metrics = Metrics::new();
        let reloads = ReloadMetrics::new(&metrics);
        let successful = || metrics.sample("edgesight_config_last_reload_successful");
        let at = || {
            metrics
                .sample("edgesight_config_last_reload_success_timestamp_seconds")
                .expect("the time")
        };
        let started = at();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        assert_eq!(successful(), Some(1.0));
        assert!((now - started).abs() < 60.0, "{started} vs {now}");
        for result in [ReloadResult::Partial, ReloadResult::Failure] {
            reloads.count(result);
            assert_eq!(successful(), Some(0.0), "{result:?}");
            assert_eq!(at(), started, "{result:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
        reloads.count(ReloadResult::Success);
        assert_eq!(successful(), Some(1.0));
        assert!(at() > started);
    }

    /// A camera slow to answer (one being opened) makes the reload partial, not refused:
    /// the cameras that took it are named, and the slow one is still told.
    #[tokio::test]
    async fn a_reload_reported_as_refused_but_applied_is_reported_per_camera() {
        let (fast, fast_reply) = sent("fast");
        let (slow, slow_reply) = sent("slow");
        fast_reply.send(Ok(())).expect("waiting");
        let report = collect(vec![fast, slow], Duration::from_millis(100)).await;
        assert_eq!(
            report,
            Report {
                took: vec!["fast".into()],
                refused: vec![],
                late: vec!["slow".into()],
            }
        );
        assert_eq!(report.result(), ReloadResult::Partial);
        // The slow camera's answer is still awaited (and logged) after the report.
        assert!(!slow_reply.is_closed());
        slow_reply.send(Ok(())).expect("still awaited");
    }

    #[tokio::test]
    async fn a_reload_every_camera_took_is_a_success_and_a_refusal_is_named() {
        let (a, a_reply) = sent("a");
        let (b, b_reply) = sent("b");
        a_reply.send(Ok(())).expect("waiting");
        b_reply.send(Ok(())).expect("waiting");
        let report = collect(vec![a, b], Duration::from_secs(5)).await;
        assert_eq!(report.result(), ReloadResult::Success);
        assert_eq!(report.took, ["a", "b"]);

        let (a, a_reply) = sent("a");
        let (b, b_reply) = sent("b");
        a_reply.send(Ok(())).expect("waiting");
        b_reply
            .send(Err(ReloadRefused::Region(RegionError::Empty {
                name: "door".into(),
                width: 0,
                height: 4,
            })))
            .expect("waiting");
        let report = collect(vec![a, b], Duration::from_secs(5)).await;
        assert_eq!(report.result(), ReloadResult::Partial);
        assert_eq!(
            (report.took, report.refused),
            (vec!["a".into()], vec!["b".into()])
        );
    }
}
