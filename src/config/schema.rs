//! The config file's schema as serde reads it ([`FileConfig`], each field spanned so that a
//! check can name its line), and the checked [`Settings`] the daemon runs on.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

pub use crate::mqtt::MqttSettings;
pub use edgesight_capture::capture::SourceKind;
use edgesight_capture::capture::SourceSpec;
use edgesight_core::cl::{DeviceSpec, Profiling};
use edgesight_core::health::HealthSettings;
use edgesight_core::motion_events::CameraMotionSettings;
use edgesight_core::pipeline::{PipelineOptions, TuningChoice};
use edgesight_frame::region::Region;
pub use edgesight_http::server::WebSettings;

/// The port `edgesight run` listens on by default. Prometheus' list of default exporter
/// ports has filled 9100-9999, so this sits outside that range and away from the
/// Prometheus server's own 9090-9094.
pub(crate) const DEFAULT_PORT: u16 = 8947;

/// `[opencl] verify_every` unless the config says otherwise: once a minute at 30 fps. A
/// driver that computes a stage wrong does so on most frames, so a minute finds it (and a
/// camera's first frame is always checked); a check costs about 80 ms of one x86-64 core
/// for a 1080p frame (BENCHMARKS.md#verify-every), 0.13 % of that core, and a few times
/// that on a board's Cortex-A cores, still under one percent.
pub const DEFAULT_VERIFY_EVERY: u32 = 1800;

/// The file as written (defaults filled in by serde).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct FileConfig {
    pub log: LogConfig,
    pub opencl: OpenclConfig,
    pub web: WebConfig,
    pub metrics: MetricsConfig,
    /// Absent: nothing is published to MQTT.
    pub mqtt: Option<Spanned<MqttConfig>>,
    pub events: EventsConfig,
    #[serde(rename = "camera")]
    pub cameras: Vec<Spanned<CameraConfig>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct LogConfig {
    /// error, warn, info, debug or trace; `RUST_LOG` naming a level overrides it.
    pub level: Spanned<String>,
    /// text, logfmt or json ([`LogFormat`]).
    pub format: Spanned<String>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: Spanned::new(0..0, "info".into()),
            format: Spanned::new(0..0, "text".into()),
        }
    }
}

/// How each log line is written: `text` for people (a time, the level, the message, then
/// `key=value` fields, quoted where logfmt needs it), `logfmt` (`ts=... level=info
/// msg="..." key=value`, as node_exporter logs and Loki's `| logfmt` reads), or `json`
/// (one object a line). Under journald every format keeps the line's priority in front.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Logfmt,
    Json,
}

impl LogFormat {
    pub const NAMES: [(&'static str, LogFormat); 3] = [
        ("text", LogFormat::Text),
        ("logfmt", LogFormat::Logfmt),
        ("json", LogFormat::Json),
    ];

    pub fn name(self) -> &'static str {
        LogFormat::NAMES
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("text", |(name, _)| name)
    }
}

/// A name that is no log format.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown log format '{0}' (expected text, logfmt or json)")]
pub struct UnknownLogFormat(pub String);

impl std::str::FromStr for LogFormat {
    type Err = UnknownLogFormat;
    fn from_str(s: &str) -> Result<LogFormat, UnknownLogFormat> {
        LogFormat::NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(s.trim()))
            .map(|(_, f)| *f)
            .ok_or_else(|| UnknownLogFormat(s.to_string()))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct OpenclConfig {
    /// As `edgesight devices` numbers them, or a name; cameras may override it.
    pub device: Spanned<String>,
    /// The pipelines' work sizes: auto (the device's own) or a tuning's name; cameras
    /// may override it.
    pub tuning: Spanned<String>,
    /// One live frame in this many is checked against the plain-Rust reference; 0: none.
    pub verify_every: Spanned<i64>,
    /// Whether the device's queue gives profiling events: auto, on or off.
    pub profiling: Spanned<String>,
}

impl Default for OpenclConfig {
    fn default() -> Self {
        OpenclConfig {
            device: Spanned::new(0..0, "default".into()),
            tuning: Spanned::new(0..0, TuningChoice::Auto.to_string()),
            verify_every: Spanned::new(0..0, i64::from(DEFAULT_VERIFY_EVERY)),
            profiling: Spanned::new(0..0, Profiling::Auto.to_string()),
        }
    }
}

/// A key that takes one string or a list of them.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub(crate) fn items(&self) -> &[String] {
        match self {
            OneOrMany::One(one) => std::slice::from_ref(one),
            OneOrMany::Many(many) => many,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct WebConfig {
    /// One address, or a list of them.
    pub listen_address: Spanned<OneOrMany>,
    /// Serve `/snapshot/*.png` and the status page `/` with pictures.
    pub snapshots: Spanned<bool>,
    /// `/healthz` answers 503 once the newest frame is older than this.
    pub stale_after_seconds: Spanned<f64>,
    /// Connections served at once; more wait in the kernel's backlog.
    pub max_connections: Spanned<u32>,
    pub tls_cert_file: Option<Spanned<PathBuf>>,
    pub tls_key_file: Option<Spanned<PathBuf>>,
    /// User name → bcrypt hash, as Prometheus' own web config takes them.
    pub basic_auth_users: Spanned<BTreeMap<String, Spanned<String>>>,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            listen_address: Spanned::new(0..0, OneOrMany::One(format!("127.0.0.1:{DEFAULT_PORT}"))),
            snapshots: Spanned::new(0..0, false),
            stale_after_seconds: Spanned::new(0..0, 5.0),
            max_connections: Spanned::new(0..0, 64),
            tls_cert_file: None,
            tls_key_file: None,
            basic_auth_users: Spanned::new(0..0, BTreeMap::new()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct MetricsConfig {
    /// Buckets of the exported luma histogram: 256 or a power of two below it.
    pub histogram_bins: Spanned<u32>,
    /// The tier a scrape naming none gets: default or detail ([`edgesight_http::metrics::Tier`]).
    pub tier: Spanned<String>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            histogram_bins: Spanned::new(0..0, 32),
            tier: Spanned::new(0..0, "default".into()),
        }
    }
}

/// `[mqtt]`: each key optional but `url` (see [`crate::mqtt::MqttSettings`]).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MqttConfig {
    pub url: Option<Spanned<String>>,
    pub ca_file: Option<Spanned<PathBuf>>,
    pub cert_file: Option<Spanned<PathBuf>>,
    pub key_file: Option<Spanned<PathBuf>>,
    pub username: Option<Spanned<String>>,
    pub password_file: Option<Spanned<PathBuf>>,
    pub client_id: Option<Spanned<String>>,
    pub board: Option<Spanned<String>>,
    pub topic_prefix: Option<Spanned<String>>,
    pub discovery_prefix: Option<Spanned<String>>,
    pub qos: Option<Spanned<i64>>,
    pub keepalive_seconds: Option<Spanned<i64>>,
}

/// `[events]`: where each event's picture and JSON are kept; nothing without `dir`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsConfig {
    pub dir: Option<Spanned<PathBuf>>,
    pub max_files: Option<Spanned<i64>>,
    pub max_age_days: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CameraConfig {
    /// The `camera` label on this camera's metrics.
    pub name: Spanned<String>,
    /// OpenCL device for this camera's pipeline; `[opencl] device` when absent.
    pub opencl_device: Option<Spanned<String>>,
    /// Tuning of this camera's pipeline; `[opencl] tuning` when absent.
    pub opencl_tuning: Option<Spanned<String>>,
    /// Required, but missing in a drop-in's `[[camera]]` that changes a camera of an
    /// earlier file: refused by the checks when still missing after the merge.
    pub source: Option<Spanned<SourceConfig>>,
    #[serde(default)]
    pub pipeline: PipelineConfig,
    #[serde(default, rename = "roi")]
    pub rois: Vec<Spanned<RoiConfig>>,
    pub health: Option<Spanned<HealthSettings>>,
    pub motion: Option<Spanned<CameraMotionSettings>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SourceConfig {
    pub kind: Option<Spanned<SourceKind>>,
    /// v4l2: the video device node.
    pub device: Option<Spanned<PathBuf>>,
    /// replay: a raw file (with size and format), a directory of images or an MJPEG
    /// recording.
    pub path: Option<Spanned<PathBuf>>,
    /// A pixel format, or mjpeg.
    pub format: Option<Spanned<String>>,
    /// WIDTHxHEIGHT.
    pub size: Option<Spanned<String>>,
    pub fps: Option<Spanned<f64>>,
    /// v4l2: dmabuf, userptr or mmap; tried in that order when absent.
    pub io: Option<Spanned<String>>,
    /// JPEG frames decoded at 1/2, 1/4 or 1/8 of their size ("1/2"); whole when absent.
    pub scale: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct PipelineConfig {
    pub border: Spanned<String>,
    pub magnitude: Spanned<String>,
    pub edge_threshold: Spanned<i64>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        let d = PipelineOptions::default();
        PipelineConfig {
            border: Spanned::new(0..0, d.border.name().into()),
            magnitude: Spanned::new(0..0, "l1".into()),
            edge_threshold: Spanned::new(0..0, i64::from(d.edge_threshold)),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RoiConfig {
    pub name: String,
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
}

/// What the daemon runs on, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub log_level: String,
    pub log_format: LogFormat,
    pub web: WebSettings,
    pub histogram_bins: u32,
    pub metrics_tier: edgesight_http::metrics::Tier,
    /// `[mqtt]`; `None` when absent.
    pub mqtt: Option<MqttSettings>,
    /// `[events] dir` and its limits; `None` when no directory is given.
    pub events: Option<crate::events::EventsSettings>,
    pub cameras: Vec<CameraSettings>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CameraSettings {
    pub name: String,
    pub device: DeviceSpec,
    /// Fixed for the pipeline's life: a reload that changes it is logged as needing a
    /// restart.
    pub tuning: TuningChoice,
    /// `[opencl] verify_every`: one frame in this many checked against the reference
    /// (0: none).
    pub verify_every: u32,
    /// `[opencl] profiling`, for the camera's device; fixed as `device` is.
    pub profiling: Profiling,
    pub source: SourceSpec,
    pub options: PipelineOptions,
    pub regions: Vec<Region>,
    pub health: HealthSettings,
    /// `[camera.motion]`.
    pub motion: CameraMotionSettings,
}
