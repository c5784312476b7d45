//! The daemon's TOML configuration: the schema, its defaults, and the checks that turn a
//! file (plus command-line overrides) into [`Settings`] the daemon can run on.
//!
//! Every error names the file, line and column, and the key it is about, so a bad
//! config is refused before a thread starts. [`load`] opens no device or socket; it checks
//! that the files the config names exist and loads the TLS files with the server's own
//! loader. [`validate`] adds what needs the machine (the OpenCL devices, the V4L2 nodes):
//! `run`, SIGHUP and `check-config` all go through it, so whatever `run` refuses,
//! `check-config` refuses with the same words.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::capture::{check_fps, check_frame_size, IoMode, SourceSpec};
use crate::cl::{DeviceSpec, Gpu};
use crate::frame::{FrameLayout, PixelFormat, Size};
use crate::pipeline::{Border, Magnitude, PipelineOptions};
use crate::region::Region;

/// The port `edgesight run` listens on by default. Prometheus' list of default exporter
/// ports has filled 9100-9999, so this sits outside that range and away from the
/// Prometheus server's own 9090-9094.
pub const DEFAULT_PORT: u16 = 8947;

/// The file as written (defaults filled in by serde). `check-config` prints it back.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileConfig {
    pub log: LogConfig,
    pub opencl: OpenclConfig,
    pub web: WebConfig,
    pub metrics: MetricsConfig,
    #[serde(rename = "camera")]
    pub cameras: Vec<Spanned<CameraConfig>>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// error, warn, info, debug or trace; `RUST_LOG` naming a level overrides it.
    pub level: Spanned<String>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: Spanned::new(0..0, "info".into()),
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenclConfig {
    /// As `edgesight devices` numbers them, or a name; cameras may override it.
    pub device: Spanned<String>,
}

impl Default for OpenclConfig {
    fn default() -> Self {
        OpenclConfig {
            device: Spanned::new(0..0, "default".into()),
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    pub listen_address: Spanned<String>,
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
            listen_address: Spanned::new(0..0, format!("127.0.0.1:{DEFAULT_PORT}")),
            snapshots: Spanned::new(0..0, false),
            stale_after_seconds: Spanned::new(0..0, 5.0),
            max_connections: Spanned::new(0..0, 64),
            tls_cert_file: None,
            tls_key_file: None,
            basic_auth_users: Spanned::new(0..0, BTreeMap::new()),
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Buckets of the exported luma histogram: 256 or a power of two below it.
    pub histogram_bins: Spanned<u32>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            histogram_bins: Spanned::new(0..0, 32),
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CameraConfig {
    /// The `camera` label on this camera's metrics.
    pub name: Spanned<String>,
    /// OpenCL device for this camera's pipeline; `[opencl] device` when absent.
    pub opencl_device: Option<Spanned<String>>,
    pub source: Spanned<SourceConfig>,
    #[serde(default)]
    pub pipeline: PipelineConfig,
    #[serde(default, rename = "roi")]
    pub rois: Vec<Spanned<RoiConfig>>,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    Pattern,
    V4l2,
    Replay,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    pub kind: Option<Spanned<SourceKind>>,
    /// v4l2: the video device node.
    pub device: Option<Spanned<PathBuf>>,
    /// replay: a raw file (with size and format) or a directory of images.
    pub path: Option<Spanned<PathBuf>>,
    pub format: Option<Spanned<String>>,
    /// WIDTHxHEIGHT.
    pub size: Option<Spanned<String>>,
    pub fps: Option<Spanned<f64>>,
    /// v4l2: dmabuf, userptr or mmap; tried in that order when absent.
    pub io: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
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

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RoiConfig {
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
    pub web: WebSettings,
    pub histogram_bins: u32,
    pub cameras: Vec<CameraSettings>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct WebSettings {
    pub listen: SocketAddr,
    pub snapshots: bool,
    pub stale_after: Duration,
    pub max_connections: u32,
    pub tls: Option<(PathBuf, PathBuf)>,
    pub users: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CameraSettings {
    pub name: String,
    pub device: DeviceSpec,
    pub source: SourceSpec,
    pub options: PipelineOptions,
    pub regions: Vec<Region>,
}

/// Where a config error is: a file position, or a command-line flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    File {
        path: PathBuf,
        line: usize,
        column: usize,
    },
    Flag(&'static str),
    /// Built-in defaults (no file given).
    Defaults,
}

/// A config that cannot be run: where, which key, and why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{origin}: {key}: {message}")]
pub struct ConfigError {
    pub origin: Origin,
    pub key: String,
    pub message: String,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line, column } => {
                write!(f, "{}:{line}:{column}", path.display())
            }
            Origin::Flag(flag) => write!(f, "command line {flag}"),
            Origin::Defaults => f.write_str("built-in defaults"),
        }
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The dotted key a TOML parse error is about, read back from the text around its span:
/// the innermost table header above it plus the key on its line.
fn key_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    // An error on a table header (a table defined twice, say) is about that table.
    if let Some(header) = table_header(line) {
        return if header.is_empty() {
            "(table header)".into()
        } else {
            header
        };
    }
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('['))
        .unwrap_or_default();
    let table = text[..line_start]
        .lines()
        .rev()
        .find_map(table_header)
        .filter(|t| !t.is_empty());
    match (table, key.is_empty()) {
        (Some(t), false) => format!("{t}.{key}"),
        (Some(t), true) => t,
        (None, false) => key,
        (None, true) => "(top level)".into(),
    }
}

/// The table a `[name]` or `[[name]]` line opens, if `line` is one.
fn table_header(line: &str) -> Option<String> {
    let line = line.trim();
    let name = line.strip_prefix('[')?.trim_start_matches('[');
    Some(name.split(']').next().unwrap_or(name).trim().to_string())
}

/// Overrides from the command line, applied before checking.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub source: Option<SourceSpec>,
    pub listen: Option<String>,
}

/// The text of a config and where it came from, to place errors.
struct Doc<'a> {
    path: Option<&'a Path>,
    text: &'a str,
}

impl Doc<'_> {
    fn at(
        &self,
        span: Range<usize>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        let origin = match self.path {
            Some(path) if span.end > 0 => {
                let (line, column) = line_column(self.text, span.start);
                Origin::File {
                    path: path.to_path_buf(),
                    line,
                    column,
                }
            }
            _ => Origin::Defaults,
        };
        ConfigError {
            origin,
            key: key.into(),
            message: message.into(),
        }
    }
}

fn flag(flag: &'static str, key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        origin: Origin::Flag(flag),
        key: key.into(),
        message: message.into(),
    }
}

/// Parses a config file's text; `path` only names it in errors.
pub fn parse(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str::<FileConfig>(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let (line, column) = line_column(text, span.start);
        ConfigError {
            origin: Origin::File {
                path: path.to_path_buf(),
                line,
                column,
            },
            key: key_at(text, span.start),
            message: e.message().trim().to_string(),
        }
    })
}

/// The most a config file may hold; a longer one is refused rather than read whole.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Reads, parses and checks `path` (or the defaults when `None`) with `overrides` applied.
/// Touches no device: [`validate`] adds what needs the machine.
pub fn load(
    path: Option<&Path>,
    overrides: &Overrides,
) -> Result<(FileConfig, Settings), ConfigError> {
    load_text(path, overrides).map(|(_, file, settings)| (file, settings))
}

fn load_text(
    path: Option<&Path>,
    overrides: &Overrides,
) -> Result<(String, FileConfig, Settings), ConfigError> {
    let text = match path {
        Some(p) => {
            crate::files::read_small_file(p, MAX_CONFIG_BYTES).map_err(|message| ConfigError {
                origin: Origin::File {
                    path: p.to_path_buf(),
                    line: 0,
                    column: 0,
                },
                key: "(file)".into(),
                message,
            })?
        }
        None => String::new(),
    };
    let file = match path {
        Some(p) => parse(p, &text)?,
        None => FileConfig::default(),
    };
    let doc = Doc { path, text: &text };
    let settings = check(&doc, &file, overrides)?;
    Ok((text, file, settings))
}

/// [`parse`] and every check of [`load`] on a config's text (what `check-config` does short
/// of looking at devices); `path` only names it in errors. The fuzz target's entry.
pub fn check_text(path: &Path, text: &str) -> Result<Settings, ConfigError> {
    let file = parse(path, text)?;
    let doc = Doc {
        path: Some(path),
        text,
    };
    check(&doc, &file, &Overrides::default())
}

/// Above this many cameras, `run` and `check-config` warn: each camera is two threads and
/// its own OpenCL context, buffers and kernels: 17 test-pattern cameras of 320x240 took
/// 153 MB and 32 threads more than one did, with POCL on a 2-core x86-64 VM.
pub const MANY_CAMERAS: usize = 16;

/// A config as `run` takes it: checked by [`load`] and against the machine.
pub struct Checked {
    pub file: FileConfig,
    pub settings: Settings,
    /// Things that do not stop `run` but that its log and `check-config` show.
    pub warnings: Vec<String>,
}

/// Everything `run` checks before it starts anything, in one place for `run`, SIGHUP and
/// `check-config`: [`load`], then each camera's OpenCL device must resolve to a device,
/// a V4L2 node that exists must be a video device (one that does not exist yet is waited
/// for: boards enumerate USB cameras late), and many cameras draw a warning.
pub fn validate(path: Option<&Path>, overrides: &Overrides) -> Result<Checked, ConfigError> {
    let (text, file, settings) = load_text(path, overrides)?;
    let doc = Doc { path, text: &text };
    let mut warnings = Vec::new();
    let mut devices: Vec<(&DeviceSpec, Result<(), String>)> = Vec::new();
    for (i, camera) in settings.cameras.iter().enumerate() {
        let written = file.cameras.get(i).map(Spanned::get_ref);
        let resolved = match devices.iter().find(|(spec, _)| **spec == camera.device) {
            Some((_, resolved)) => resolved.clone(),
            None => {
                let resolved = Gpu::open(&camera.device)
                    .map(drop)
                    .map_err(|e| e.to_string());
                devices.push((&camera.device, resolved.clone()));
                resolved
            }
        };
        if let Err(why) = resolved {
            let message = format!("camera '{}': {why}", camera.name);
            return Err(match written.and_then(|c| c.opencl_device.as_ref()) {
                Some(d) => doc.at(d.span(), "camera.opencl_device", message),
                None => doc.at(file.opencl.device.span(), "opencl.device", message),
            });
        }
        let SourceSpec::V4l2 { device, .. } = &camera.source else {
            continue;
        };
        match video_node(device) {
            Ok(true) => {}
            Ok(false) => warnings.push(format!(
                "camera '{}': {} is not present now; `run` waits for it",
                camera.name,
                device.display()
            )),
            Err(why) if i == 0 && overrides.source.is_some() => {
                return Err(flag("--source", "source", why))
            }
            Err(why) => {
                let span = written
                    .and_then(|c| c.source.get_ref().device.as_ref())
                    .map_or(0..0, Spanned::span);
                return Err(doc.at(span, "camera.source.device", why));
            }
        }
    }
    if settings.cameras.len() > MANY_CAMERAS {
        warnings.push(format!(
            "{} cameras: each one is two threads (capture and publisher) and its own OpenCL \
             context, frame buffers and kernels (about 10 MB at 320x240 on a CPU device); \
             more than {MANY_CAMERAS} rarely keep their frame rates on one board",
            settings.cameras.len()
        ));
    }
    Ok(Checked {
        file,
        settings,
        warnings,
    })
}

/// The character device major number of every V4L2 node (`VIDEO_MAJOR` in the kernel).
const VIDEO_MAJOR: u32 = 81;

/// Whether the V4L2 node `path` is there (`Ok(false)` when it does not exist yet), or why
/// it cannot be a camera.
fn video_node(path: &Path) -> Result<bool, String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if !meta.file_type().is_char_device() {
        return Err(format!(
            "{} is {}, not a V4L2 device (a character device such as /dev/video0)",
            path.display(),
            crate::files::kind_name(meta.file_type())
        ));
    }
    let major = libc::major(meta.rdev());
    if major != VIDEO_MAJOR {
        return Err(format!(
            "{} is not a V4L2 device: a character device of major {major}, where V4L2's are \
             {VIDEO_MAJOR}",
            path.display()
        ));
    }
    Ok(true)
}

fn check(doc: &Doc, file: &FileConfig, overrides: &Overrides) -> Result<Settings, ConfigError> {
    let level = file.log.level.get_ref().to_ascii_lowercase();
    if !["error", "warn", "info", "debug", "trace"].contains(&level.as_str()) {
        return Err(doc.at(
            file.log.level.span(),
            "log.level",
            format!("unknown level '{level}' (expected error, warn, info, debug or trace)"),
        ));
    }
    let bins = *file.metrics.histogram_bins.get_ref();
    if !(1..=256).contains(&bins) || !bins.is_power_of_two() {
        return Err(doc.at(
            file.metrics.histogram_bins.span(),
            "metrics.histogram_bins",
            format!("{bins} is not a power of two from 1 to 256"),
        ));
    }
    let web = check_web(doc, &file.web, overrides)?;
    let default_device: DeviceSpec = file.opencl.device.get_ref().parse().unwrap_or_default();

    let mut cameras = Vec::new();
    let mut names = HashSet::new();
    for camera in &file.cameras {
        let c = check_camera(doc, camera, &default_device)?;
        if !names.insert(c.name.clone()) {
            return Err(doc.at(
                camera.get_ref().name.span(),
                "camera.name",
                format!("camera '{}' is named twice", c.name),
            ));
        }
        cameras.push(c);
    }
    if let Some(source) = &overrides.source {
        match cameras.len() {
            0 => cameras.push(CameraSettings {
                name: "default".into(),
                device: default_device.clone(),
                source: source.clone(),
                options: PipelineOptions::default(),
                regions: Vec::new(),
            }),
            1 => {
                let camera = &mut cameras[0];
                camera.source = source.clone();
                for r in &camera.regions {
                    if let Some(layout) = known_layout(source) {
                        r.validate(&layout)
                            .map_err(|e| flag("--source", "camera.roi", e.to_string()))?;
                    }
                }
            }
            n => {
                return Err(flag(
                    "--source",
                    "camera",
                    format!("the config has {n} cameras; --source replaces the source of one"),
                ))
            }
        }
        check_source_exists(source).map_err(|m| flag("--source", "source", m))?;
    }
    if cameras.is_empty() {
        cameras.push(CameraSettings {
            name: "default".into(),
            device: default_device,
            source: SourceSpec::default_pattern(),
            options: PipelineOptions::default(),
            regions: Vec::new(),
        });
    }
    Ok(Settings {
        log_level: level,
        web,
        histogram_bins: bins,
        cameras,
    })
}

fn check_web(
    doc: &Doc,
    web: &WebConfig,
    overrides: &Overrides,
) -> Result<WebSettings, ConfigError> {
    let listen = match &overrides.listen {
        Some(addr) => addr.parse::<SocketAddr>().map_err(|e| {
            flag(
                "--listen",
                "web.listen_address",
                format!("'{addr}': {e} (expected IP:PORT)"),
            )
        })?,
        None => web.listen_address.get_ref().parse().map_err(|e| {
            doc.at(
                web.listen_address.span(),
                "web.listen_address",
                format!("'{}': {e} (expected IP:PORT)", web.listen_address.get_ref()),
            )
        })?,
    };
    let stale = *web.stale_after_seconds.get_ref();
    // From 1 ms: a shorter time is 0 once it is a Duration, and every frame is stale.
    if !(stale.is_finite() && (0.001..=3600.0).contains(&stale)) {
        return Err(doc.at(
            web.stale_after_seconds.span(),
            "web.stale_after_seconds",
            format!("{stale} is not a time from 0.001 to 3600 seconds"),
        ));
    }
    let max_connections = *web.max_connections.get_ref();
    if !(1..=4096).contains(&max_connections) {
        return Err(doc.at(
            web.max_connections.span(),
            "web.max_connections",
            format!("{max_connections} is not between 1 and 4096"),
        ));
    }
    let tls = match (&web.tls_cert_file, &web.tls_key_file) {
        (None, None) => None,
        (Some(cert), Some(key)) => {
            for (file, name) in [(cert, "web.tls_cert_file"), (key, "web.tls_key_file")] {
                if !file.get_ref().is_file() {
                    return Err(doc.at(
                        file.span(),
                        name,
                        format!("{}: no such file", file.get_ref().display()),
                    ));
                }
            }
            // The server's own loader: what passes here is what `run` serves.
            if let Err(e) = crate::server::tls_config(cert.get_ref(), key.get_ref()) {
                let (file, name) = match e {
                    crate::server::TlsError::Cert(_) => (cert, "web.tls_cert_file"),
                    crate::server::TlsError::Key(_) => (key, "web.tls_key_file"),
                };
                return Err(doc.at(file.span(), name, e.to_string()));
            }
            Some((cert.get_ref().clone(), key.get_ref().clone()))
        }
        (Some(one), None) | (None, Some(one)) => {
            return Err(doc.at(
                one.span(),
                "web.tls_cert_file",
                "TLS needs both tls_cert_file and tls_key_file",
            ))
        }
    };
    let mut users = BTreeMap::new();
    for (user, hash) in web.basic_auth_users.get_ref() {
        let key = format!("web.basic_auth_users.{user}");
        if user.contains(':') || user.is_empty() {
            return Err(doc.at(
                hash.span(),
                key,
                format!("user '{user}': a user name is not empty and has no ':'"),
            ));
        }
        // The verifier's own parser: a hash that passes here is one `run` can check.
        crate::server::check_hash(hash.get_ref())
            .map_err(|e| doc.at(hash.span(), key, format!("user '{user}': {e}")))?;
        users.insert(user.clone(), hash.get_ref().clone());
    }
    let snapshots = *web.snapshots.get_ref();
    // TLS only hides the pictures from the network; who may see them is auth's to say.
    if snapshots && users.is_empty() && !listen.ip().is_loopback() {
        let message = format!(
            "snapshots and the status page show camera pictures: listening on {listen}, \
             beyond loopback, they need basic_auth_users (TLS encrypts them but lets \
             anyone see them)"
        );
        return Err(match &overrides.listen {
            Some(_) => flag("--listen", "web.snapshots", message),
            None => doc.at(web.snapshots.span(), "web.snapshots", message),
        });
    }
    Ok(WebSettings {
        listen,
        snapshots,
        stale_after: Duration::from_secs_f64(stale),
        max_connections,
        tls,
        users,
    })
}

/// The frame layout a source will produce, where the config alone says it.
fn known_layout(spec: &SourceSpec) -> Option<FrameLayout> {
    let (size, format) = match spec {
        SourceSpec::Pattern { size, format, .. } => (*size, *format),
        SourceSpec::V4l2 {
            size: Some(size),
            format,
            ..
        } => (*size, format.unwrap_or(PixelFormat::Grey)),
        SourceSpec::Replay {
            raw: Some((size, format)),
            ..
        } => (*size, *format),
        _ => return None,
    };
    Some(FrameLayout::packed(format, size.width, size.height))
}

fn check_source_exists(spec: &SourceSpec) -> Result<(), String> {
    match spec {
        // A camera absent now is waited for: boards enumerate USB cameras late, and
        // cameras get unplugged.
        SourceSpec::Pattern { .. } | SourceSpec::V4l2 { .. } => Ok(()),
        SourceSpec::Replay { path, .. } if !path.exists() => {
            Err(format!("{}: no such file or directory", path.display()))
        }
        _ => Ok(()),
    }
}

fn check_camera(
    doc: &Doc,
    camera: &Spanned<CameraConfig>,
    default_device: &DeviceSpec,
) -> Result<CameraSettings, ConfigError> {
    let c = camera.get_ref();
    let name = c.name.get_ref();
    let label_safe = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "_-.".contains(ch));
    if !label_safe {
        return Err(doc.at(
            c.name.span(),
            "camera.name",
            format!("'{name}': use 1-64 letters, digits, '_', '-' or '.'"),
        ));
    }
    let source = check_source(doc, &c.source)?;
    let p = &c.pipeline;
    let border: Border =
        p.border
            .get_ref()
            .parse()
            .map_err(|e: crate::pipeline::UnknownBorder| {
                doc.at(p.border.span(), "camera.pipeline.border", e.to_string())
            })?;
    let magnitude: Magnitude = p
        .magnitude
        .get_ref()
        .parse()
        .map_err(|e: String| doc.at(p.magnitude.span(), "camera.pipeline.magnitude", e))?;
    let threshold = *p.edge_threshold.get_ref();
    let edge_threshold = u8::try_from(threshold)
        .ok()
        .filter(|t| *t >= 1)
        .ok_or_else(|| {
            doc.at(
                p.edge_threshold.span(),
                "camera.pipeline.edge_threshold",
                format!("{threshold} is not between 1 and 255"),
            )
        })?;
    let layout = known_layout(&source);
    let mut regions = Vec::new();
    let mut roi_names = HashSet::new();
    for roi in &c.rois {
        let r = roi.get_ref();
        let region = Region {
            name: r.name.clone(),
            x: r.x,
            y: r.y,
            width: r.w,
            height: r.h,
        };
        check_region_name(&r.name, &mut roi_names)
            .map_err(|m| doc.at(roi.span(), "camera.roi.name", m))?;
        if let Some(layout) = &layout {
            region
                .validate(layout)
                .map_err(|e| doc.at(roi.span(), "camera.roi", e.to_string()))?;
        }
        regions.push(region);
    }
    Ok(CameraSettings {
        name: name.clone(),
        device: c
            .opencl_device
            .as_ref()
            .map(|d| d.get_ref().parse().unwrap_or_default())
            .unwrap_or_else(|| default_device.clone()),
        source,
        options: PipelineOptions {
            border,
            magnitude,
            edge_threshold,
        },
        regions,
    })
}

/// Checks a ROI name as the config and the command line (`--roi`) both take them: it
/// becomes a Prometheus label value and a JSON key, and must differ from the `seen`
/// names of the same camera (it is added to them).
pub fn check_region_name(name: &str, seen: &mut HashSet<String>) -> Result<(), String> {
    let label_safe = !name.is_empty()
        && name.chars().count() <= 64
        && !name
            .chars()
            .any(|c| c == '"' || c == '\\' || c.is_control());
    if !label_safe {
        return Err(format!(
            "{name:?}: use 1-64 characters without quotes, backslashes or control characters"
        ));
    }
    if !seen.insert(name.to_string()) {
        return Err(format!("ROI '{name}' is named twice"));
    }
    Ok(())
}

fn check_source(doc: &Doc, source: &Spanned<SourceConfig>) -> Result<SourceSpec, ConfigError> {
    let s = source.get_ref();
    let kind = s.kind.as_ref().ok_or_else(|| {
        doc.at(
            source.span(),
            "camera.source.kind",
            "missing: pattern, v4l2 or replay",
        )
    })?;
    let kind_name = match kind.get_ref() {
        SourceKind::Pattern => "pattern",
        SourceKind::V4l2 => "v4l2",
        SourceKind::Replay => "replay",
    };
    let not_for = |span: Range<usize>, key: &str| {
        doc.at(
            span,
            format!("camera.source.{key}"),
            format!("does not apply to a {kind_name} source"),
        )
    };
    let format = match &s.format {
        Some(f) => Some(
            f.get_ref()
                .parse::<PixelFormat>()
                .map_err(|e| doc.at(f.span(), "camera.source.format", e.to_string()))?,
        ),
        None => None,
    };
    let size = match &s.size {
        Some(z) => Some(
            z.get_ref()
                .parse::<Size>()
                .map_err(|e| doc.at(z.span(), "camera.source.size", e.to_string()))?,
        ),
        None => None,
    };
    let fps = match &s.fps {
        Some(f) => {
            Some(check_fps(*f.get_ref()).map_err(|e| doc.at(f.span(), "camera.source.fps", e))?)
        }
        None => None,
    };
    if let (Some(z), Some(size)) = (&s.size, size) {
        // Without a format (a camera's own), the size limits are those of any format.
        check_frame_size(size, format).map_err(|e| doc.at(z.span(), "camera.source.size", e))?;
    }
    let spec = match kind.get_ref() {
        SourceKind::Pattern => {
            for (field, key) in [
                (s.device.as_ref().map(Spanned::span), "device"),
                (s.path.as_ref().map(Spanned::span), "path"),
                (s.io.as_ref().map(Spanned::span), "io"),
            ] {
                if let Some(span) = field {
                    return Err(not_for(span, key));
                }
            }
            SourceSpec::Pattern {
                size: size.unwrap_or(Size {
                    width: 1280,
                    height: 720,
                }),
                format: format.unwrap_or(PixelFormat::Grey),
                fps: fps.unwrap_or(30.0),
            }
        }
        SourceKind::V4l2 => {
            if let Some(p) = &s.path {
                return Err(not_for(p.span(), "path"));
            }
            let device = s.device.as_ref().ok_or_else(|| {
                doc.at(
                    source.span(),
                    "camera.source.device",
                    "missing: a v4l2 source needs its device node, e.g. device = \"/dev/video0\"",
                )
            })?;
            if device.get_ref().as_os_str().is_empty() {
                return Err(doc.at(
                    device.span(),
                    "camera.source.device",
                    "empty: a v4l2 source needs its device node, e.g. device = \"/dev/video0\"",
                ));
            }
            let io = match &s.io {
                Some(io) => Some(
                    io.get_ref()
                        .parse::<IoMode>()
                        .map_err(|e| doc.at(io.span(), "camera.source.io", e.to_string()))?,
                ),
                None => None,
            };
            SourceSpec::V4l2 {
                device: device.get_ref().clone(),
                format,
                size,
                fps,
                io,
            }
        }
        SourceKind::Replay => {
            for (field, key) in [
                (s.device.as_ref().map(Spanned::span), "device"),
                (s.io.as_ref().map(Spanned::span), "io"),
            ] {
                if let Some(span) = field {
                    return Err(not_for(span, key));
                }
            }
            let path = s.path.as_ref().ok_or_else(|| {
                doc.at(
                    source.span(),
                    "camera.source.path",
                    "missing: a replay source needs a file or directory",
                )
            })?;
            if !path.get_ref().exists() {
                return Err(doc.at(
                    path.span(),
                    "camera.source.path",
                    format!("{}: no such file or directory", path.get_ref().display()),
                ));
            }
            let raw = match (size, format) {
                (Some(size), Some(format)) => Some((size, format)),
                (None, None) => None,
                _ => return Err(doc.at(
                    source.span(),
                    "camera.source",
                    "a raw replay file needs both size and format; a directory of images neither",
                )),
            };
            SourceSpec::Replay {
                path: path.get_ref().clone(),
                raw,
                fps: fps.unwrap_or(30.0),
            }
        }
    };
    Ok(spec)
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
        let mut out = String::new();
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        out.push_str(&format!("[log]\nlevel = {}\n\n", q(&self.log_level)));
        let w = &self.web;
        out.push_str(&format!(
            "[web]\nlisten_address = {}\nsnapshots = {}\nstale_after_seconds = {}\nmax_connections = {}\n",
            q(&w.listen.to_string()),
            w.snapshots,
            w.stale_after.as_secs_f64(),
            w.max_connections
        ));
        if let Some((cert, key)) = &w.tls {
            out.push_str(&format!(
                "tls_cert_file = {}\ntls_key_file = {}\n",
                q(&cert.display().to_string()),
                q(&key.display().to_string())
            ));
        }
        if !w.users.is_empty() {
            out.push_str("[web.basic_auth_users]\n");
            for (user, hash) in &w.users {
                let hash = if hashes { q(hash) } else { q("(bcrypt hash)") };
                out.push_str(&format!("{} = {hash}\n", q(user)));
            }
        }
        out.push_str(&format!(
            "\n[metrics]\nhistogram_bins = {}\n",
            self.histogram_bins
        ));
        for c in &self.cameras {
            out.push_str(&format!(
                "\n[[camera]]\nname = {}\nopencl_device = {}\n",
                q(&c.name),
                q(&c.device.to_string())
            ));
            out.push_str("[camera.source]\n");
            match &c.source {
                SourceSpec::Pattern { size, format, fps } => out.push_str(&format!(
                    "kind = \"pattern\"\nsize = \"{size}\"\nformat = \"{format}\"\nfps = {fps:?}\n"
                )),
                SourceSpec::V4l2 {
                    device,
                    format,
                    size,
                    fps,
                    io,
                } => {
                    out.push_str(&format!(
                        "kind = \"v4l2\"\ndevice = {}\n",
                        q(&device.display().to_string())
                    ));
                    if let Some(f) = format {
                        out.push_str(&format!("format = \"{f}\"\n"));
                    }
                    if let Some(s) = size {
                        out.push_str(&format!("size = \"{s}\"\n"));
                    }
                    if let Some(f) = fps {
                        out.push_str(&format!("fps = {f:?}\n"));
                    }
                    if let Some(io) = io {
                        out.push_str(&format!("io = \"{io}\"\n"));
                    }
                }
                SourceSpec::Replay { path, raw, fps } => {
                    out.push_str(&format!(
                        "kind = \"replay\"\npath = {}\n",
                        q(&path.display().to_string())
                    ));
                    if let Some((size, format)) = raw {
                        out.push_str(&format!("size = \"{size}\"\nformat = \"{format}\"\n"));
                    }
                    out.push_str(&format!("fps = {fps:?}\n"));
                }
            }
            let o = &c.options;
            out.push_str(&format!(
                "[camera.pipeline]\nborder = \"{}\"\nmagnitude = \"{}\"\nedge_threshold = {}\n",
                o.border,
                match o.magnitude {
                    Magnitude::L1 => "l1",
                    Magnitude::L2 => "l2",
                },
                o.edge_threshold
            ));
            for r in &c.regions {
                out.push_str(&format!(
                    "[[camera.roi]]\nname = {}\nx = {}\ny = {}\nw = {}\nh = {}\n",
                    q(&r.name),
                    r.x,
                    r.y,
                    r.width,
                    r.height
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> Result<Settings, ConfigError> {
        let file = parse(Path::new("t.toml"), text)?;
        let doc = Doc {
            path: Some(Path::new("t.toml")),
            text,
        };
        check(&doc, &file, &Overrides::default())
    }

    fn at(err: &ConfigError) -> (usize, usize) {
        match err.origin {
            Origin::File { line, column, .. } => (line, column),
            ref o => panic!("no file position: {o:?}"),
        }
    }

    #[test]
    fn defaults_run_one_pattern_camera_on_loopback() {
        let s = load_text("").unwrap();
        assert_eq!(
            s.web.listen,
            format!("127.0.0.1:{DEFAULT_PORT}").parse().unwrap()
        );
        assert!(!s.web.snapshots);
        assert_eq!(s.cameras.len(), 1);
        assert_eq!(s.cameras[0].name, "default");
        assert_eq!(s.cameras[0].source, SourceSpec::default_pattern());
        assert_eq!(s.histogram_bins, 32);
    }

    #[test]
    fn line_and_column_count_from_one() {
        assert_eq!(line_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("é\nx", 3), (2, 1));
    }

    const GOOD: &str = r#"
[web]
listen_address = "127.0.0.1:9000"

[[camera]]
name = "front"
[camera.source]
kind = "pattern"
size = "320x240"
fps = 10
[camera.pipeline]
edge_threshold = 40
[[camera.roi]]
name = "door"
x = 0
y = 0
w = 320
h = 240
"#;

    #[test]
    fn a_full_camera_section() {
        let s = load_text(GOOD).unwrap();
        let c = &s.cameras[0];
        assert_eq!(c.name, "front");
        assert_eq!(
            c.source,
            SourceSpec::Pattern {
                size: Size {
                    width: 320,
                    height: 240
                },
                format: PixelFormat::Grey,
                fps: 10.0
            }
        );
        assert_eq!(c.options.edge_threshold, 40);
        assert_eq!(c.regions[0].width, 320);
        // What check-config prints reads back as the same settings.
        assert_eq!(load_text(&s.to_toml()).unwrap(), s);
    }

    #[test]
    fn unknown_key_is_placed_and_named() {
        let text = GOOD.replace("h = 240", "heigth = 240");
        let err = load_text(&text).unwrap_err();
        assert_eq!(at(&err), (18, 1));
        assert_eq!(err.key, "camera.roi.heigth");
        assert!(err.message.contains("unknown field `heigth`"), "{err}");
        assert!(
            err.to_string()
                .starts_with("t.toml:18:1: camera.roi.heigth: "),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_is_placed_and_named() {
        let err = load_text(&GOOD.replace("x = 0", "x = \"left\"")).unwrap_err();
        assert_eq!(at(&err), (15, 5));
        assert_eq!(err.key, "camera.roi.x");
        assert!(
            err.message.contains("invalid type: string \"left\""),
            "{err}"
        );
    }

    #[test]
    fn roi_outside_the_frame() {
        let err = load_text(&GOOD.replace("w = 320", "w = 321")).unwrap_err();
        assert_eq!(at(&err), (13, 1));
        assert_eq!(err.key, "camera.roi");
        assert!(err.message.contains("outside the 320x240 frame"), "{err}");
    }

    #[test]
    fn v4l2_without_a_device_or_with_an_absent_one() {
        let text = "[[camera]]\nname = \"c\"\n[camera.source]\nkind = \"v4l2\"\n";
        let err = load_text(text).unwrap_err();
        assert_eq!(
            (at(&err), err.key.as_str()),
            ((3, 1), "camera.source.device")
        );
        // A camera that is not plugged in now is waited for, not refused.
        let settings = load_text(&format!("{text}device = \"/dev/video-none\"\n")).unwrap();
        assert!(matches!(
            &settings.cameras[0].source,
            SourceSpec::V4l2 { device, .. } if device == Path::new("/dev/video-none")
        ));
    }

    /// A throwaway self-signed P-256 certificate and its key (rustls does not check the
    /// dates), and a key of another pair.
    const TEST_CERT: &str = "\
-----BEGIN CERTIFICATE-----\n\
MIIBiTCCAS+gAwIBAgIULRh2PXlsukYs7J2Kl7qfLNe0rHIwCgYIKoZIzj0EAwIw\n\
GTEXMBUGA1UEAwwOZWRnZXNpZ2h0LXRlc3QwIBcNMjYxMTIzMTYyMzUxWhgPMjEy\n\
NjEwMzAxNjIzNTFaMBkxFzAVBgNVBAMMDmVkZ2VzaWdodC10ZXN0MFkwEwYHKoZI\n\
zj0CAQYIKoZIzj0DAQcDQgAEVC2asniYlAZrSE0JV4haIrOfqoIkMpWtYOfUH0og\n\
w5gXvsX7Pq9k/eKuapg8YStz6Pr0TTGnvS9L+UUL4VJ4lKNTMFEwHQYDVR0OBBYE\n\
FDik6ys8KCnmhBYhSGYYJOWX8VJ1MB8GA1UdIwQYMBaAFDik6ys8KCnmhBYhSGYY\n\
JOWX8VJ1MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIgbQnTUAuf\n\
xmRwaL2TuobFfWUpY48FjahkpIJt1tzQ/poCIQCxWYaBNX09WO0GSEEtgPIM+WRQ\n\
3GTfvdwyXWZQb0F1zw==\n\
-----END CERTIFICATE-----
";
    const TEST_KEY: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgQ6HGR9h0bBvscbyg\n\
ajYSoHUk/AtWbvQzrZIeHGZKTsihRANCAARULZqyeJiUBmtITQlXiFois5+qgiQy\n\
la1g59QfSiDDmBe+xfs+r2T94q5qmDxhK3Po+vRNMae9L0v5RQvhUniU\n\
-----END PRIVATE KEY-----
";
    const OTHER_KEY: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgd1Il8fUStfLNY2oF\n\
92OPSGXTtz8vU1uuEGTTJCbsjk6hRANCAARS9s72qgSvY1WfQvSmcPyc4Z1W6XMa\n\
eFI5wNssFJ7TtRqnt+EpkJzH/GEDN+dIHY9n0wOy3/D2pJMkfdcEwo58\n\
-----END PRIVATE KEY-----
";

    /// Writes `files` into a fresh directory; returns its path.
    fn files(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("edgesight-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, text) in files {
            std::fs::write(dir.join(file), text).unwrap();
        }
        dir
    }

    fn tls_section(dir: &Path, cert: &str, key: &str) -> String {
        format!(
            "tls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
            dir.join(cert).display(),
            dir.join(key).display()
        )
    }

    #[test]
    fn snapshots_beyond_loopback_need_auth_even_with_tls() {
        let text = "[web]\nlisten_address = \"0.0.0.0:9000\"\nsnapshots = true\n";
        let err = load_text(text).unwrap_err();
        assert_eq!((at(&err), err.key.as_str()), ((3, 13), "web.snapshots"));
        assert_eq!(
            err.message,
            "snapshots and the status page show camera pictures: listening on 0.0.0.0:9000, \
             beyond loopback, they need basic_auth_users (TLS encrypts them but lets anyone \
             see them)"
        );
        // TLS alone encrypts the pictures for anyone who asks: still refused.
        let dir = files("tls-only", &[("c.pem", TEST_CERT), ("k.pem", TEST_KEY)]);
        let tls = format!("{text}{}", tls_section(&dir, "c.pem", "k.pem"));
        let err = load_text(&tls).unwrap_err();
        assert_eq!((at(&err), err.key.as_str()), ((3, 13), "web.snapshots"));
        let hash = bcrypt::hash("pw", 4).unwrap();
        let users = format!("[web.basic_auth_users]\nprom = \"{hash}\"\n");
        assert!(load_text(&format!("{text}{users}")).unwrap().web.snapshots);
        assert!(load_text(&format!("{tls}{users}")).unwrap().web.snapshots);
        assert!(
            load_text("[web]\nsnapshots = true\n")
                .unwrap()
                .web
                .snapshots
        );
    }

    #[test]
    fn tls_files_are_loaded_as_the_server_loads_them() {
        let dir = files(
            "tls-files",
            &[
                ("c.pem", TEST_CERT),
                ("k.pem", TEST_KEY),
                ("other.pem", OTHER_KEY),
                ("garbage.pem", "not a PEM file\n"),
            ],
        );
        let path = |f: &str| dir.join(f).display().to_string();
        assert!(load_text(&format!("[web]\n{}", tls_section(&dir, "c.pem", "k.pem"))).is_ok());
        for (cert, key, place, expect) in [
            (
                "garbage.pem",
                "k.pem",
                ((2, 17), "web.tls_cert_file"),
                format!("{}: no PEM certificate in it", path("garbage.pem")),
            ),
            (
                "k.pem",
                "k.pem",
                ((2, 17), "web.tls_cert_file"),
                format!("{}: no PEM certificate in it", path("k.pem")),
            ),
            (
                "c.pem",
                "garbage.pem",
                ((3, 16), "web.tls_key_file"),
                format!("{}: no PEM private key in it", path("garbage.pem")),
            ),
            (
                "c.pem",
                "c.pem",
                ((3, 16), "web.tls_key_file"),
                format!("{}: no PEM private key in it", path("c.pem")),
            ),
            (
                "c.pem",
                "other.pem",
                ((3, 16), "web.tls_key_file"),
                format!(
                    "{} and {} do not make a TLS identity",
                    path("c.pem"),
                    path("other.pem")
                ),
            ),
        ] {
            let text = format!("[web]\n{}", tls_section(&dir, cert, key));
            let err = load_text(&text).unwrap_err();
            assert_eq!((at(&err), err.key.as_str()), place, "{cert} {key}: {err}");
            assert!(err.message.starts_with(&expect), "{cert} {key}: {err}");
        }
    }

    #[test]
    fn bcrypt_hashes_are_parsed_as_the_verifier_reads_them() {
        let good = bcrypt::hash("pw", 4).unwrap();
        let tail = &good[7..];
        let bad_chars = tail.replace(|c: char| c.is_ascii_digit(), "!");
        for (hash, expect) in [
            (
                format!("$2y$31${tail}"),
                "bcrypt cost 31 is too slow to serve",
            ),
            (
                format!("$2y$99${tail}"),
                "bcrypt cost 99 is too slow to serve",
            ),
            (
                format!("$2y$04${bad_chars}"),
                "not a bcrypt hash: its salt or hash has characters",
            ),
            (
                "$2y$10$short".to_string(),
                "not a bcrypt hash ($2y$COST$ and 53 characters)",
            ),
        ] {
            let text =
                format!("[web]\n[web.basic_auth_users]\nadmin = \"{good}\"\nprom = \"{hash}\"\n");
            let err = load_text(&text).unwrap_err();
            assert_eq!(
                (at(&err), err.key.as_str()),
                ((4, 8), "web.basic_auth_users.prom"),
                "{hash}: {err}"
            );
            let expect = format!("user 'prom': {expect}");
            assert!(err.message.starts_with(&expect), "{hash}: {err}");
        }
        let cost_14 = format!("$2y$14${tail}");
        let text = format!("[web.basic_auth_users]\nprom = \"{cost_14}\"\n");
        assert_eq!(load_text(&text).unwrap().web.users["prom"], cost_14);
    }

    #[test]
    fn source_override_replaces_the_one_camera_and_rechecks_rois() {
        let file = parse(Path::new("t.toml"), GOOD).unwrap();
        let doc = Doc {
            path: Some(Path::new("t.toml")),
            text: GOOD,
        };
        let small = Overrides {
            source: Some("pattern:160x120@5".parse().unwrap()),
            listen: None,
        };
        let err = check(&doc, &file, &small).unwrap_err();
        assert_eq!(err.origin, Origin::Flag("--source"));
        assert!(err.message.contains("outside the 160x120 frame"), "{err}");
        let listen = Overrides {
            source: None,
            listen: Some("127.0.0.1:1234".into()),
        };
        assert_eq!(check(&doc, &file, &listen).unwrap().web.listen.port(), 1234);
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key, pos) in [
            ("[log]\nlevel = \"loud\"\n", "log.level", (2, 9)),
            ("[metrics]\nhistogram_bins = 24\n", "metrics.histogram_bins", (2, 18)),
            // Found by the config fuzz target: accepted, it became a time of 0.
            ("[web]\nstale_after_seconds = 1e-10\n", "web.stale_after_seconds", (2, 23)),
            ("[web]\nlisten_address = \"localhost\"\n", "web.listen_address", (2, 18)),
            (
                "[[camera]]\nname = \"a b\"\n[camera.source]\nkind = \"pattern\"\n",
                "camera.name",
                (2, 8),
            ),
            (
                "[[camera]]\nname = \"a\"\n[camera.source]\nkind = \"pattern\"\n[camera.pipeline]\nedge_threshold = 0\n",
                "camera.pipeline.edge_threshold",
                (6, 18),
            ),
            (
                "[[camera]]\nname = \"a\"\n[camera.source]\nkind = \"pattern\"\ndevice = \"/dev/video0\"\n",
                "camera.source.device",
                (5, 10),
            ),
        ] {
            let err = load_text(text).unwrap_err();
            assert_eq!((err.key.as_str(), at(&err)), (key, pos), "{err}");
        }
    }

    /// The whole message of a config error, position included.
    fn refusal(text: &str) -> String {
        load_text(text).unwrap_err().to_string()
    }

    fn pattern_camera(source_extra: &str) -> String {
        format!("[[camera]]\nname = \"c\"\n[camera.source]\nkind = \"pattern\"\n{source_extra}")
    }

    #[test]
    fn tiny_and_huge_frame_rates_are_refused_at_their_key() {
        for fps in ["1e-300", "6e-20", "0.001", "1001.0"] {
            assert_eq!(
                refusal(&pattern_camera(&format!("fps = {fps}\n"))),
                format!("t.toml:5:7: camera.source.fps: frame rate {fps} is not a number from 0.01 to 1000")
            );
        }
        let slowest = load_text(&pattern_camera("fps = 0.01\n")).unwrap();
        assert!(
            matches!(slowest.cameras[0].source, SourceSpec::Pattern { fps, .. } if fps == 0.01)
        );
    }

    #[test]
    fn frame_sizes_beyond_the_caps_are_refused_at_their_key() {
        assert_eq!(
            refusal(&pattern_camera("size = \"100000x100000\"\n")),
            "t.toml:5:8: camera.source.size: frame size 100000x100000 is too large (at most 16384 on a side)"
        );
        assert_eq!(
            refusal(&pattern_camera("size = \"16384x16384\"\n")),
            "t.toml:5:8: camera.source.size: frame size 16384x16384 is too large (at most 16843009 pixels and a width of at most 65535)"
        );
        let v4l2 = "[[camera]]\nname = \"c\"\n[camera.source]\nkind = \"v4l2\"\n\
                    device = \"/dev/video-none\"\nsize = \"20000x10\"\n";
        assert_eq!(
            refusal(v4l2),
            "t.toml:6:8: camera.source.size: frame size 20000x10 is too large (at most 16384 on a side)"
        );
        assert!(load_text(&pattern_camera("size = \"16384x1024\"\n")).is_ok());
    }

    #[test]
    fn a_table_defined_twice_is_named() {
        let err = load_text(&format!("{GOOD}[web]\nsnapshots = true\n")).unwrap_err();
        assert_eq!((err.key.as_str(), at(&err)), ("web", (19, 1)), "{err}");
        assert!(err.message.contains("duplicate key"), "{err}");
        let err = load_text("[log]\nlevel = \"info\"\n[ log ] # again\n").unwrap_err();
        assert_eq!((err.key.as_str(), at(&err)), ("log", (3, 1)), "{err}");
        // Found by the config fuzz target: a header without a name named no key.
        let err = load_text("[log]\nlevel = \"info\"\n[\nname = \"x\"\n").unwrap_err();
        assert_eq!(err.key, "(table header)", "{err}");
    }

    #[test]
    fn roi_names_must_be_labels_and_differ() {
        let roi =
            |name: &str| format!("[[camera.roi]]\nname = {name}\nx = 0\ny = 0\nw = 8\nh = 8\n");
        let camera = pattern_camera("size = \"64x48\"\n");
        for (name, message) in [
            (r#""a\"b""#, r#""a\"b": use 1-64 characters"#),
            (r#""a\nb""#, r#""a\nb": use 1-64 characters"#),
            (r#""tab\there""#, r#""tab\there": use 1-64 characters"#),
            (r#""""#, r#""": use 1-64 characters"#),
        ] {
            let err = load_text(&format!("{camera}{}", roi(name))).unwrap_err();
            assert_eq!((err.key.as_str(), at(&err)), ("camera.roi.name", (6, 1)));
            assert!(err.message.starts_with(message), "{name}: {err}");
        }
        let err =
            load_text(&format!("{camera}{}{}", roi("\"door\""), roi("\"door\""))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.toml:12:1: camera.roi.name: ROI 'door' is named twice"
        );
        let mut seen = HashSet::new();
        assert_eq!(check_region_name("ünï cödé", &mut seen), Ok(()));
    }

    fn write_tmp(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("edgesight-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `load` on another thread, so that a read that blocks fails the test instead of
    /// hanging it.
    fn load_within(path: &Path, limit: Duration) -> Result<(), String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let path = path.to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(load(Some(&path), &Overrides::default()).map(drop));
        });
        match rx.recv_timeout(limit) {
            Ok(outcome) => outcome.map_err(|e| e.to_string()),
            Err(_) => panic!("load did not return within {limit:?}"),
        }
    }

    #[test]
    fn only_regular_files_up_to_1_mib_are_read() {
        let fifo = std::env::temp_dir().join(format!("edgesight-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // No writer ever opens it: a blocking read would wait forever.
        let limit = Duration::from_secs(10);
        assert_eq!(
            load_within(&fifo, limit),
            Err(format!(
                "{}:0:0: (file): not a regular file but a FIFO",
                fifo.display()
            ))
        );
        std::fs::remove_file(&fifo).unwrap();
        assert_eq!(
            load_within(Path::new("/dev/zero"), limit),
            Err("/dev/zero:0:0: (file): not a regular file but a character device".into())
        );
        let dir = std::env::temp_dir();
        assert_eq!(
            load_within(&dir, limit),
            Err(format!(
                "{}:0:0: (file): not a regular file but a directory",
                dir.display()
            ))
        );
        // Comments only: valid TOML of any length.
        let line = "# a comment line of 32 bytes ..\n";
        assert_eq!(line.len(), 32);
        let full = write_tmp("full.toml", &line.repeat(32 * 1024));
        assert_eq!(load_within(&full, limit), Ok(()));
        let over = write_tmp("over.toml", &format!("{}\n", line.repeat(32 * 1024)));
        assert_eq!(
            load_within(&over, limit),
            Err(format!(
                "{}:0:0: (file): larger than 1048576 bytes",
                over.display()
            ))
        );
    }

    fn validate_text(name: &str, text: &str) -> Result<Checked, String> {
        let path = write_tmp(name, text);
        validate(Some(&path), &Overrides::default()).map_err(|e| {
            let shown = e.to_string();
            shown.replace(&path.display().to_string(), "FILE")
        })
    }

    #[test]
    fn validate_resolves_opencl_devices_at_their_key() {
        let text = "[[camera]]\nname = \"front\"\nopencl_device = \"99:99\"\n\
                    [camera.source]\nkind = \"pattern\"\n";
        let err = validate_text("device.toml", text).err().expect("refused");
        assert!(
            err.starts_with("FILE:3:17: camera.opencl_device: camera 'front': no OpenCL device matches '99:99'; available: 0:0 "),
            "{err}"
        );
        let err = validate_text(
            "default-device.toml",
            "[opencl]\ndevice = \"no-such-device\"\n",
        )
        .err()
        .expect("refused");
        assert!(
            err.starts_with("FILE:2:10: opencl.device: camera 'default': no OpenCL device matches 'no-such-device'; available: "),
            "{err}"
        );
        assert!(validate_text("good.toml", GOOD).is_ok());
    }

    #[test]
    fn validate_takes_only_video_devices_for_v4l2() {
        let v4l2 = |device: &str| {
            format!("[[camera]]\nname = \"c\"\n[camera.source]\nkind = \"v4l2\"\ndevice = \"{device}\"\n")
        };
        assert_eq!(
            validate_text("null.toml", &v4l2("/dev/null")).err(),
            Some("FILE:5:10: camera.source.device: /dev/null is not a V4L2 device: a character device of major 1, where V4L2's are 81".into())
        );
        let plain = write_tmp("plain-file", "");
        assert_eq!(
            validate_text("plain.toml", &v4l2(&plain.display().to_string())).err(),
            Some(format!("FILE:5:10: camera.source.device: {} is a regular file, not a V4L2 device (a character device such as /dev/video0)", plain.display()))
        );
        let absent = validate_text("absent.toml", &v4l2("/dev/video-edgesight-none")).unwrap();
        assert_eq!(
            absent.warnings,
            ["camera 'c': /dev/video-edgesight-none is not present now; `run` waits for it"]
        );
        assert_eq!(
            refusal(&v4l2("")),
            "t.toml:5:10: camera.source.device: empty: a v4l2 source needs its device node, e.g. device = \"/dev/video0\""
        );
    }

    #[test]
    fn many_cameras_draw_a_warning() {
        let cameras = |n: usize| -> String {
            (0..n)
                .map(|i| format!("[[camera]]\nname = \"c{i}\"\n[camera.source]\nkind = \"pattern\"\nsize = \"64x48\"\n"))
                .collect()
        };
        assert!(validate_text("16.toml", &cameras(16))
            .unwrap()
            .warnings
            .is_empty());
        let warnings = validate_text("17.toml", &cameras(17)).unwrap().warnings;
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("17 cameras: each one is two threads"),
            "{warnings:?}"
        );
    }
}
