//! [`Settings`] written back as TOML in the file's schema (what `check-config` prints): a
//! printable form of the settings, serialised by the `toml` crate, so that what is printed
//! reads back as the same settings.

use std::collections::BTreeMap;

use serde::Serialize;

use super::schema::{CameraSettings, Settings};
use edgesight_capture::capture::{SourceKind, SourceSpec};
use edgesight_capture::jpeg::Scale;
use edgesight_core::health::HealthSettings;
use edgesight_core::motion_events::CameraMotionSettings;
use edgesight_core::pipeline::Magnitude;

/// What a password hash is printed as where the hashes are not shown.
const HIDDEN_HASH: &str = "(bcrypt hash)";

#[derive(Serialize)]
struct Printed<'a> {
    log: Log<'a>,
    opencl: Opencl,
    web: Web,
    metrics: Metrics,
    #[serde(skip_serializing_if = "Option::is_none")]
    mqtt: Option<Mqtt<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<Events>,
    camera: Vec<Camera>,
}

/// `[events]`, its limits filled in.
#[derive(Serialize)]
struct Events {
    dir: String,
    max_files: usize,
    max_age_days: u64,
}

impl Events {
    fn of(e: &crate::events::EventsSettings) -> Events {
        Events {
            dir: e.dir.display().to_string(),
            max_files: e.max_files,
            max_age_days: e.max_age.as_secs() / 86_400,
        }
    }
}

/// `[mqtt]`: every key, the defaults filled in, so that what is printed is what runs.
#[derive(Serialize)]
struct Mqtt<'a> {
    url: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ca_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cert_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    username: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    password_file: Option<String>,
    client_id: &'a str,
    board: &'a str,
    topic_prefix: &'a str,
    discovery_prefix: &'a str,
    qos: u8,
    keepalive_seconds: u64,
}

impl<'a> Mqtt<'a> {
    fn of(m: &'a crate::mqtt::MqttSettings) -> Mqtt<'a> {
        let path = |p: &std::path::Path| p.display().to_string();
        Mqtt {
            url: &m.url,
            ca_file: m.ca_file.as_deref().map(path),
            cert_file: m.client_cert.as_ref().map(|(c, _)| path(c)),
            key_file: m.client_cert.as_ref().map(|(_, k)| path(k)),
            username: m.username.as_deref(),
            password_file: m.password_file.as_deref().map(path),
            client_id: &m.client_id,
            board: &m.board,
            topic_prefix: &m.topic_prefix,
            discovery_prefix: &m.discovery_prefix,
            qos: m.qos,
            keepalive_seconds: m.keepalive.as_secs(),
        }
    }
}

#[derive(Serialize)]
struct Log<'a> {
    level: &'a str,
    format: &'static str,
}

/// What `[opencl]` sets for every camera and no camera overrides (device and tuning are
/// printed per camera).
#[derive(Serialize)]
struct Opencl {
    verify_every: u32,
    profiling: &'static str,
}

/// One listen address as a string, more as a list, as the config takes them.
#[derive(Serialize)]
#[serde(untagged)]
enum ListenPrinted {
    One(String),
    Many(Vec<String>),
}

#[derive(Serialize)]
struct Web {
    listen_address: ListenPrinted,
    snapshots: bool,
    stale_after_seconds: f64,
    max_connections: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_cert_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_key_file: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    basic_auth_users: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct Metrics {
    histogram_bins: u32,
    tier: &'static str,
}

#[derive(Serialize)]
struct Camera {
    name: String,
    opencl_device: String,
    opencl_tuning: String,
    source: Source,
    pipeline: Pipeline,
    health: HealthSettings,
    motion: CameraMotionSettings,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    roi: Vec<Roi>,
}

/// A source as `[camera.source]` spells it; absent fields are left out.
#[derive(Serialize, Default)]
struct Source {
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    device: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    io: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scale: Option<String>,
}

#[derive(Serialize)]
struct Pipeline {
    border: String,
    magnitude: &'static str,
    edge_threshold: u8,
}

#[derive(Serialize)]
struct Roi {
    name: String,
    x: u32,
    y: u32,
    w: u32,
    h: u32,
}

/// A scale as the config spells it; the default (whole frames) is left out.
fn printed_scale(scale: Scale) -> Option<String> {
    (scale != Scale::Full).then(|| scale.to_string())
}

impl Source {
    fn of(spec: &SourceSpec) -> Source {
        match spec {
            SourceSpec::Pattern { size, format, fps } => Source {
                kind: SourceKind::Pattern.name(),
                size: Some(size.to_string()),
                format: Some(format.to_string()),
                fps: Some(*fps),
                ..Source::default()
            },
            SourceSpec::V4l2 {
                device,
                format,
                size,
                fps,
                io,
                scale,
            } => Source {
                kind: SourceKind::V4l2.name(),
                device: Some(device.display().to_string()),
                size: size.map(|s| s.to_string()),
                format: format.map(|f| f.to_string()),
                fps: *fps,
                io: io.map(|io| io.to_string()),
                scale: printed_scale(*scale),
                ..Source::default()
            },
            SourceSpec::Replay {
                path,
                raw,
                fps,
                scale,
            } => Source {
                kind: SourceKind::Replay.name(),
                path: Some(path.display().to_string()),
                size: raw.map(|(size, _)| size.to_string()),
                format: raw.map(|(_, format)| format.to_string()),
                fps: Some(*fps),
                scale: printed_scale(*scale),
                ..Source::default()
            },
        }
    }
}

impl Camera {
    fn of(c: &CameraSettings) -> Camera {
        let o = &c.options;
        Camera {
            name: c.name.clone(),
            opencl_device: c.device.to_string(),
            opencl_tuning: c.tuning.to_string(),
            source: Source::of(&c.source),
            pipeline: Pipeline {
                border: o.border.to_string(),
                magnitude: match o.magnitude {
                    Magnitude::L1 => "l1",
                    Magnitude::L2 => "l2",
                },
                edge_threshold: o.edge_threshold,
            },
            health: c.health,
            motion: c.motion,
            roi: c
                .regions
                .iter()
                .map(|r| Roi {
                    name: r.name.clone(),
                    x: r.x,
                    y: r.y,
                    w: r.width,
                    h: r.height,
                })
                .collect(),
        }
    }
}

impl Settings {
    /// The effective settings as TOML, in the file's schema (what `check-config` prints).
    /// Password hashes are shown as "(bcrypt hash)".
    pub fn to_toml(&self) -> String {
        self.print(false)
    }

    /// [`Settings::to_toml`] with the password hashes: text that reads back as the same
    /// settings.
    pub fn to_toml_with_hashes(&self) -> String {
        self.print(true)
    }

    fn print(&self, hashes: bool) -> String {
        let w = &self.web;
        let printed = Printed {
            log: Log {
                level: &self.log_level,
                format: self.log_format.name(),
            },
            opencl: Opencl {
                // The same for every camera, and there is always one.
                verify_every: self.cameras.first().map_or(0, |c| c.verify_every),
                profiling: self.cameras.first().map_or("auto", |c| c.profiling.name()),
            },
            web: Web {
                listen_address: match w.listen.as_slice() {
                    [one] => ListenPrinted::One(one.to_string()),
                    many => ListenPrinted::Many(many.iter().map(|l| l.to_string()).collect()),
                },
                snapshots: w.snapshots,
                stale_after_seconds: w.stale_after.as_secs_f64(),
                max_connections: w.max_connections,
                tls_cert_file: w.tls.as_ref().map(|t| t.cert.display().to_string()),
                tls_key_file: w.tls.as_ref().map(|t| t.key.display().to_string()),
                basic_auth_users: w
                    .users
                    .iter()
                    .map(|(user, hash)| {
                        let hash = if hashes { hash.as_str() } else { HIDDEN_HASH };
                        (user.clone(), hash.to_string())
                    })
                    .collect(),
            },
            metrics: Metrics {
                histogram_bins: self.histogram_bins,
                tier: self.metrics_tier.name(),
            },
            mqtt: self.mqtt.as_ref().map(Mqtt::of),
            events: self.events.as_ref().map(Events::of),
            camera: self.cameras.iter().map(Camera::of).collect(),
        };
        // Every field is a string, number, bool, map or table of them: nothing here can
        // fail to serialise. A `$` in a string is doubled, so that the text reads back as
        // these settings rather than as a variable.
        super::env::escape_dollars(&toml::to_string(&printed).expect("settings serialise as TOML"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{load_text, GOOD};

    #[test]
    fn printed_settings_read_back_the_same() {
        let s = load_text(GOOD).unwrap();
        let printed = s.to_toml();
        assert!(printed.contains("[[camera.roi]]"), "{printed}");
        assert_eq!(load_text(&printed).unwrap(), s);
        let off = load_text(&format!("[opencl]\nverify_every = 0\n{GOOD}")).unwrap();
        assert_eq!(load_text(&off.to_toml()).unwrap(), off);
    }
}
