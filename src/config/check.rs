//! The checks that turn a parsed [`FileConfig`] (plus command-line overrides) into
//! [`Settings`]: every value in range, every name a valid label, every file the config
//! names present, each refusal placed at its key's FILE:LINE:COLUMN. Nothing here opens a
//! device; [`super::validate`] adds what needs the machine.
//!
//! One room, long as it is: every check from the parsed file to `Settings`, in the order
//! of the file's tables, so that one place says what a config may hold, and their unit
//! tests.

use std::collections::HashSet;
use std::ops::Range;
use std::path::PathBuf;

use toml::Spanned;

use super::schema::*;
use super::{flag, ConfigError, Doc, Overrides};
use edgesight_capture::capture::{IoMode, SourceKind, SourcePart, SourceParts, SourceSpec};
use edgesight_capture::jpeg::Scale;
use edgesight_core::cl::{DeviceSpec, Profiling};
use edgesight_core::health::HealthSettings;
use edgesight_core::motion_events::CameraMotionSettings;
use edgesight_core::pipeline::{Border, Magnitude, PipelineOptions, TuningChoice};
use edgesight_frame::frame::{CaptureFormat, FrameLayout, PixelFormat, Size};
use edgesight_frame::region::Region;

pub(super) fn check(
    doc: &Doc,
    file: &FileConfig,
    overrides: &Overrides,
) -> Result<Settings, ConfigError> {
    check_placed(doc, file, overrides).map(|(settings, _)| settings)
}

/// [`check`], and for each camera of the settings the index of the `[[camera]]` it came
/// from (a device pattern makes several of one), so that later checks can place theirs.
pub(super) fn check_placed(
    doc: &Doc,
    file: &FileConfig,
    overrides: &Overrides,
) -> Result<(Settings, Vec<usize>), ConfigError> {
    let mut placed = Vec::new();
    let unknown_level = |level: &str| {
        format!("unknown level '{level}' (expected error, warn, info, debug or trace)")
    };
    let known = |level: &str| ["error", "warn", "info", "debug", "trace"].contains(&level);
    let level = match &overrides.log_level {
        Some(level) => {
            let level = level.to_ascii_lowercase();
            if !known(&level) {
                return Err(flag("--log.level", "log.level", unknown_level(&level)));
            }
            level
        }
        None => {
            let level = file.log.level.get_ref().to_ascii_lowercase();
            if !known(&level) {
                return Err(doc.at(file.log.level.span(), "log.level", unknown_level(&level)));
            }
            level
        }
    };
    let log_format: LogFormat = match &overrides.log_format {
        Some(format) => format
            .parse()
            .map_err(|e: UnknownLogFormat| flag("--log.format", "log.format", e.to_string()))?,
        None => file
            .log
            .format
            .get_ref()
            .parse()
            .map_err(|e: UnknownLogFormat| {
                doc.at(file.log.format.span(), "log.format", e.to_string())
            })?,
    };
    let bins = *file.metrics.histogram_bins.get_ref();
    if !(1..=256).contains(&bins) || !bins.is_power_of_two() {
        return Err(doc.at(
            file.metrics.histogram_bins.span(),
            "metrics.histogram_bins",
            format!("{bins} is not a power of two from 1 to 256"),
        ));
    }
    let metrics_tier = parse_at(doc, &file.metrics.tier, "metrics.tier")?;
    let web = super::web::check_web(doc, &file.web, overrides)?;
    let mqtt = super::mqtt::check_mqtt(doc, file.mqtt.as_ref(), super::mqtt::host_name)?;
    let events = super::events::check_events(doc, &file.events)?;
    let default_device: DeviceSpec = file.opencl.device.get_ref().parse().unwrap_or_default();
    let default_tuning: TuningChoice = parse_at(doc, &file.opencl.tuning, "opencl.tuning")?;
    let every = *file.opencl.verify_every.get_ref();
    let verify_every = u32::try_from(every).map_err(|_| {
        doc.at(
            file.opencl.verify_every.span(),
            "opencl.verify_every",
            format!("{every} is not between 0 (no frame) and {}", u32::MAX),
        )
    })?;

    let profiling: Profiling = parse_at(doc, &file.opencl.profiling, "opencl.profiling")?;

    let mut cameras = Vec::new();
    let mut names = HashSet::new();
    for (written, camera) in file.cameras.iter().enumerate() {
        let c = check_camera(
            doc,
            camera,
            &default_device,
            default_tuning,
            verify_every,
            profiling,
        )?;
        for c in matched_cameras(doc, camera, c)? {
            if !names.insert(c.name.clone()) {
                return Err(doc.at(
                    camera.get_ref().name.span(),
                    "camera.name",
                    format!("camera '{}' is named twice", c.name),
                ));
            }
            cameras.push(c);
            placed.push(written);
        }
    }
    if let Some(source) = &overrides.source {
        match cameras.len() {
            0 => cameras.push(CameraSettings {
                name: "default".into(),
                device: default_device.clone(),
                tuning: default_tuning,
                verify_every,
                profiling,
                source: source.clone(),
                options: PipelineOptions::default(),
                regions: Vec::new(),
                health: HealthSettings::default(),
                motion: CameraMotionSettings::default(),
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
        check_source_exists(source).map_err(|e| flag("--source", "source", e.to_string()))?;
    }
    if cameras.is_empty() {
        cameras.push(CameraSettings {
            name: "default".into(),
            device: default_device,
            tuning: default_tuning,
            verify_every,
            profiling,
            source: SourceSpec::default_pattern(),
            options: PipelineOptions::default(),
            regions: Vec::new(),
            health: HealthSettings::default(),
            motion: CameraMotionSettings::default(),
        });
    }
    Ok((
        Settings {
            log_level: level,
            log_format,
            web,
            histogram_bins: bins,
            metrics_tier,
            mqtt,
            events,
            cameras,
        },
        placed,
    ))
}

/// `camera` as one camera per node its device pattern matches (see [`super::glob`]), or
/// as it is: a camera with a plain device, or one whose pattern matches nothing yet,
/// which waits under its own name.
fn matched_cameras(
    doc: &Doc,
    written: &Spanned<CameraConfig>,
    camera: CameraSettings,
) -> Result<Vec<CameraSettings>, ConfigError> {
    let SourceSpec::V4l2 { device, .. } = &camera.source else {
        return Ok(vec![camera]);
    };
    if !super::glob::is_pattern(device) {
        return Ok(vec![camera]);
    }
    let span = written
        .get_ref()
        .source
        .as_ref()
        .and_then(|s| s.get_ref().device.as_ref())
        .map_or(written.span(), Spanned::span);
    let found = super::glob::matches(&camera.name, device)
        .map_err(|e| doc.at(span, "camera.source.device", e.to_string()))?;
    if found.is_empty() {
        return Ok(vec![camera]);
    }
    Ok(found
        .into_iter()
        .map(|(node, name)| {
            let mut c = camera.clone();
            c.name = name;
            if let SourceSpec::V4l2 { device, .. } = &mut c.source {
                *device = node;
            }
            c
        })
        .collect())
}

/// The frame layout a source will produce, where the config alone says it (JPEG frames,
/// or a camera's own format, as grey ones).
fn known_layout(spec: &SourceSpec) -> Option<FrameLayout> {
    let (size, format) = match spec {
        SourceSpec::Pattern { size, format, .. } => (*size, *format),
        SourceSpec::V4l2 {
            size: Some(size),
            format,
            scale,
            ..
        } => match format.and_then(CaptureFormat::pixels) {
            Some(format) => (*size, format),
            None => (scale.apply(*size), PixelFormat::Grey),
        },
        SourceSpec::Replay {
            raw: Some((size, format)),
            ..
        } => (*size, *format),
        _ => return None,
    };
    Some(FrameLayout::packed(format, size.width, size.height))
}

fn check_source_exists(spec: &SourceSpec) -> Result<(), BadReplayPath> {
    match spec {
        // A camera absent now is waited for: boards enumerate USB cameras late, and
        // cameras get unplugged.
        SourceSpec::Pattern { .. } | SourceSpec::V4l2 { .. } => Ok(()),
        SourceSpec::Replay { path, .. } => check_replay_path(path),
    }
}

/// Why a replay source's path cannot be replayed.
#[derive(Debug, thiserror::Error)]
enum BadReplayPath {
    /// Nothing at the path.
    #[error("{}: no such file or directory", path.display())]
    Missing { path: PathBuf },
    /// Its metadata cannot be read.
    #[error("{}: {error}", path.display())]
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Something other than a directory or a regular file (`kind`: what).
    #[error(
        "{}: not a directory of images or a regular file but {kind}",
        path.display()
    )]
    NotReplayable { path: PathBuf, kind: &'static str },
}

/// A replay path must name a directory or a regular file: a FIFO would block the
/// camera's open until a writer came, and a device would never end. Looked at without
/// opening it.
fn check_replay_path(path: &std::path::Path) -> Result<(), BadReplayPath> {
    let path_buf = || path.to_path_buf();
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(BadReplayPath::Missing { path: path_buf() })
        }
        Err(error) => Err(BadReplayPath::Unreadable {
            path: path_buf(),
            error,
        }),
        Ok(meta) if meta.is_dir() || meta.is_file() => Ok(()),
        Ok(meta) => Err(BadReplayPath::NotReplayable {
            path: path_buf(),
            kind: edgesight_frame::files::kind_name(meta.file_type()),
        }),
    }
}

fn check_camera(
    doc: &Doc,
    camera: &Spanned<CameraConfig>,
    default_device: &DeviceSpec,
    default_tuning: TuningChoice,
    verify_every: u32,
    profiling: Profiling,
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
    let tuning = match &c.opencl_tuning {
        Some(t) => parse_at(doc, t, "camera.opencl_tuning")?,
        None => default_tuning,
    };
    let written_source = c.source.as_ref().ok_or_else(|| {
        doc.at(
            camera.span(),
            "camera.source",
            format!("camera '{name}' has no [camera.source]"),
        )
    })?;
    let source = check_source(doc, written_source)?;
    let p = &c.pipeline;
    let border: Border =
        p.border
            .get_ref()
            .parse()
            .map_err(|e: edgesight_core::pipeline::UnknownBorder| {
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
            .map_err(|e| doc.at(roi.span(), "camera.roi.name", e.to_string()))?;
        if let Some(layout) = &layout {
            region
                .validate(layout)
                .map_err(|e| doc.at(roi.span(), "camera.roi", e.to_string()))?;
        }
        regions.push(region);
    }
    let health = checked_table(doc, &c.health, "camera.health", HealthSettings::check)?;
    let motion = checked_table(doc, &c.motion, "camera.motion", CameraMotionSettings::check)?;
    Ok(CameraSettings {
        name: name.clone(),
        device: c
            .opencl_device
            .as_ref()
            .map(|d| d.get_ref().parse().unwrap_or_default())
            .unwrap_or_else(|| default_device.clone()),
        tuning,
        verify_every,
        profiling,
        source,
        options: PipelineOptions {
            border,
            magnitude,
            edge_threshold,
        },
        regions,
        health,
        motion,
    })
}

/// A table of settings (`[camera.health]`, `[camera.motion]`) checked by `check`, its
/// refusal placed at the value of the key it names; the defaults where it is absent.
fn checked_table<T: Copy + Default>(
    doc: &Doc,
    table: &Option<Spanned<T>>,
    section: &str,
    check: fn(&T) -> Result<(), (&'static str, String)>,
) -> Result<T, ConfigError> {
    let Some(t) = table else {
        return Ok(T::default());
    };
    check(t.get_ref()).map_err(|(key, message)| {
        let span = doc.value_span(t.span(), key).unwrap_or(t.span());
        doc.at(span, format!("{section}.{key}"), message)
    })?;
    Ok(*t.get_ref())
}

/// Where `key = value` of the table whose header starts at `table` writes its value:
/// serde hands the checks a whole table (`[camera.health]`), and a refusal of one of its
/// values belongs at that value. `None` for a table written inline, where its own
/// position has to do.
pub(super) fn value_span(text: &str, table: Range<usize>, key: &str) -> Option<Range<usize>> {
    let rest = text.get(table.start..)?;
    let mut lines = rest.split_inclusive('\n');
    let header = lines.next()?;
    if !header.trim_start().starts_with('[') {
        return None;
    }
    let mut offset = table.start + header.len();
    for line in lines {
        let start = offset;
        offset += line.len();
        if line.trim_start().starts_with('[') {
            return None;
        }
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        if name.trim().trim_matches(|c| c == '"' || c == '\'') != key {
            continue;
        }
        let value_start = start + name.len() + 1 + (value.len() - value.trim_start().len());
        return Some(value_start..start + line.trim_end().len());
    }
    None
}

/// Why a ROI name is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadRegionName {
    /// Empty, over 64 characters, or with a quote, a backslash or a control character:
    /// not a label value a scraper reads back as written.
    #[error("{0:?}: use 1-64 characters without quotes, backslashes or control characters")]
    NotLabelSafe(String),
    /// Another ROI of the camera has the name.
    #[error("ROI '{0}' is named twice")]
    Twice(String),
}

/// Checks a ROI name as the config and the command line (`--roi`) both take them: it
/// becomes a Prometheus label value and a JSON key, and must differ from the `seen`
/// names of the same camera (it is added to them).
pub fn check_region_name(name: &str, seen: &mut HashSet<String>) -> Result<(), BadRegionName> {
    let label_safe = !name.is_empty()
        && name.chars().count() <= 64
        && !name
            .chars()
            .any(|c| c == '"' || c == '\\' || c.is_control());
    if !label_safe {
        return Err(BadRegionName::NotLabelSafe(name.to_string()));
    }
    if !seen.insert(name.to_string()) {
        return Err(BadRegionName::Twice(name.to_string()));
    }
    Ok(())
}

/// `value` parsed as a `T`, or its refusal placed at `value` under `key`.
fn parse_at<T>(doc: &Doc, value: &Spanned<String>, key: &str) -> Result<T, ConfigError>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    value
        .get_ref()
        .parse::<T>()
        .map_err(|e| doc.at(value.span(), key, e.to_string()))
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
    let format = s
        .format
        .as_ref()
        .map(|f| parse_at::<CaptureFormat>(doc, f, "camera.source.format"))
        .transpose()?;
    let scale = s
        .scale
        .as_ref()
        .map(|f| parse_at::<Scale>(doc, f, "camera.source.scale"))
        .transpose()?;
    let size = s
        .size
        .as_ref()
        .map(|z| parse_at::<Size>(doc, z, "camera.source.size"))
        .transpose()?;
    let io = match &s.io {
        // Read only where it applies: a kind that takes no I/O mode refuses it whatever it
        // says, so elsewhere any mode stands for it.
        Some(io) if *kind.get_ref() == SourceKind::V4l2 => {
            Some(parse_at::<IoMode>(doc, io, "camera.source.io")?)
        }
        Some(_) => Some(IoMode::Mmap),
        None => None,
    };
    let parts = SourceParts {
        device: s.device.as_ref().map(|d| d.get_ref().clone()),
        path: s.path.as_ref().map(|p| p.get_ref().clone()),
        format,
        size,
        fps: s.fps.as_ref().map(|f| *f.get_ref()),
        io,
        scale,
    };
    let spec = parts.build(*kind.get_ref()).map_err(|e| {
        let span = |part: SourcePart| match part {
            SourcePart::Device => s.device.as_ref().map(Spanned::span),
            SourcePart::Path => s.path.as_ref().map(Spanned::span),
            SourcePart::Format => s.format.as_ref().map(Spanned::span),
            SourcePart::Size => s.size.as_ref().map(Spanned::span),
            SourcePart::Fps => s.fps.as_ref().map(Spanned::span),
            SourcePart::Io => s.io.as_ref().map(Spanned::span),
            SourcePart::Scale => s.scale.as_ref().map(Spanned::span),
        };
        match e.part {
            Some(part) if !e.missing => doc.at(
                span(part).unwrap_or_else(|| source.span()),
                format!("camera.source.{}", part.key()),
                e.message,
            ),
            Some(part) => doc.at(
                source.span(),
                format!("camera.source.{}", part.key()),
                e.message,
            ),
            None => doc.at(source.span(), "camera.source", e.message),
        }
    })?;
    if let (SourceSpec::Replay { path, .. }, Some(written)) = (&spec, &s.path) {
        check_replay_path(path)
            .map_err(|e| doc.at(written.span(), "camera.source.path", e.to_string()))?;
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::test_support::{at, load_text, refusal, GOOD};
    use super::super::{parse, Origin};
    use super::*;
    use edgesight_core::pipeline::Tuning;
    use edgesight_http::server::ListenAddress;

    #[test]
    fn a_replay_path_is_a_directory_or_a_regular_file() {
        assert!(check_replay_path(Path::new("/")).is_ok());
        assert!(check_replay_path(Path::new("Cargo.toml")).is_ok());
        let missing = check_replay_path(Path::new("/nonexistent/clip")).unwrap_err();
        assert!(
            matches!(&missing, BadReplayPath::Missing { path } if path == Path::new("/nonexistent/clip"))
        );
        assert_eq!(
            missing.to_string(),
            "/nonexistent/clip: no such file or directory"
        );
        let device = check_replay_path(Path::new("/dev/null")).unwrap_err();
        assert!(
            matches!(
                device,
                BadReplayPath::NotReplayable {
                    kind: "a character device",
                    ..
                }
            ),
            "{device:?}"
        );
        assert_eq!(
            device.to_string(),
            "/dev/null: not a directory of images or a regular file but a character device"
        );
    }

    #[test]
    fn defaults_run_one_pattern_camera_on_loopback() {
        let s = load_text("").unwrap();
        assert_eq!(
            s.web.listen,
            [ListenAddress::parse(&format!("127.0.0.1:{DEFAULT_PORT}")).unwrap()]
        );
        assert!(!s.web.snapshots);
        assert_eq!(s.cameras.len(), 1);
        assert_eq!(s.cameras[0].name, "default");
        assert_eq!(s.cameras[0].source, SourceSpec::default_pattern());
        assert_eq!(s.histogram_bins, 32);
        assert_eq!(s.metrics_tier, edgesight_http::metrics::Tier::Default);
        let s = load_text("[metrics]\ntier = \"detail\"\n").unwrap();
        assert_eq!(s.metrics_tier, edgesight_http::metrics::Tier::Detail);
    }

    #[test]
    fn unknown_tiers_and_log_formats_are_refused_at_their_key() {
        assert_eq!(
            "all".parse::<edgesight_http::metrics::Tier>(),
            Err(edgesight_http::metrics::UnknownTier("all".into()))
        );
        assert_eq!(
            load_text("[metrics]\ntier = \"all\"\n")
                .unwrap_err()
                .to_string(),
            "t.toml:2:8: metrics.tier: unknown metrics tier 'all' (expected default or detail)"
        );
        assert_eq!(
            "xml".parse::<LogFormat>(),
            Err(UnknownLogFormat("xml".into()))
        );
        assert_eq!(
            load_text("[log]\nformat = \"xml\"\n")
                .unwrap_err()
                .to_string(),
            "t.toml:2:10: log.format: unknown log format 'xml' (expected text, logfmt or json)"
        );
    }

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
    fn roi_outside_the_frame() {
        let err = load_text(&GOOD.replace("w = 320", "w = 321")).unwrap_err();
        assert_eq!(at(&err), (13, 1));
        assert_eq!(err.key, "camera.roi");
        assert!(err.message.contains("outside the 320x240 frame"), "{err}");
    }

    /// A directory holding (empty) files of these names, for device patterns.
    fn nodes(name: &str, files: &[&str]) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("edgesight-nodes-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for file in files {
            std::fs::write(dir.join(file), "").unwrap();
        }
        dir
    }

    fn v4l2_glob_camera(name: &str, device: &std::path::Path) -> String {
        format!(
            "[[camera]]\nname = \"{name}\"\n[camera.source]\nkind = \"v4l2\"\n\
             device = \"{}\"\nsize = \"64x48\"\n[[camera.roi]]\nname = \"all\"\n\
             x = 0\ny = 0\nw = 64\nh = 48\n",
            device.display()
        )
    }

    #[test]
    fn a_device_pattern_makes_a_camera_per_match() {
        let dir = nodes(
            "per-match",
            &["usb-B_2-video-index0", "usb-A:1-video-index0"],
        );
        let text = format!(
            "{}{}",
            v4l2_glob_camera("door", &dir.join("usb-*-video-index0")),
            v4l2_glob_camera("yard", &dir.join("pci-*"))
        );
        let s = load_text(&text).unwrap();
        let cameras: Vec<(&str, std::path::PathBuf)> = s
            .cameras
            .iter()
            .map(|c| match &c.source {
                SourceSpec::V4l2 { device, .. } => (c.name.as_str(), device.clone()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            cameras,
            [
                ("door-A_1", dir.join("usb-A:1-video-index0")),
                ("door-B_2", dir.join("usb-B_2-video-index0")),
                // Nothing matches: the camera waits for its pattern under its own name.
                ("yard", dir.join("pci-*")),
            ]
        );
        // Each match keeps the rest of its camera's settings.
        assert_eq!(s.cameras[0].regions, s.cameras[1].regions);
        assert_eq!(s.cameras[0].regions[0].name, "all");
        // The printed settings name the matches, and read back the same.
        assert_eq!(load_text(&s.to_toml()).unwrap(), s);
    }

    #[test]
    fn device_patterns_are_refused_at_their_key() {
        let dir = nodes("refused", &["a:1", "a_1", "door-x"]);
        let pattern = dir.join("a*");
        assert_eq!(
            refusal(&v4l2_glob_camera("c", &pattern)),
            format!(
                "t.toml:5:10: camera.source.device: {}: {} and {} both make camera 'c-_1'; \
                 narrow the pattern",
                pattern.display(),
                dir.join("a:1").display(),
                dir.join("a_1").display()
            )
        );
        assert_eq!(
            refusal(&v4l2_glob_camera(
                "c",
                std::path::Path::new("/dev/*/video0")
            )),
            "t.toml:5:10: camera.source.device: /dev/*/video0: '*' may stand only in the file \
             name, not in a directory"
        );
        // A match's name that another camera has is refused at the pattern's camera.
        let text = format!(
            "{}{}",
            v4l2_glob_camera("door-x", &dir.join("b*")),
            v4l2_glob_camera("door", &dir.join("door-*"))
        );
        assert_eq!(
            refusal(&text),
            "t.toml:14:8: camera.name: camera 'door-x' is named twice"
        );
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

    #[test]
    fn source_override_replaces_the_one_camera_and_rechecks_rois() {
        let expanded = super::super::env::Expanded::verbatim(GOOD);
        let parts = [super::super::Part::new(
            Path::new("t.toml"),
            GOOD.into(),
            expanded,
            None,
        )];
        let doc = Doc {
            path: Some(Path::new("t.toml")),
            parts: &parts,
        };
        let file = parse(&doc, 0).unwrap();
        let small = Overrides {
            source: Some("pattern:160x120@5".parse().unwrap()),
            ..Overrides::default()
        };
        let err = check(&doc, &file, &small).unwrap_err();
        assert_eq!(err.origin, Origin::Flag("--source"));
        assert!(err.message.contains("outside the 160x120 frame"), "{err}");
        let listen = Overrides {
            listen: vec![":1234".into(), "localhost:1235".into()],
            ..Overrides::default()
        };
        let listen = check(&doc, &file, &listen).unwrap().web.listen;
        let listen: Vec<String> = listen.iter().map(|l| l.to_string()).collect();
        assert_eq!(listen, [":1234", "localhost:1235"]);
        let log = Overrides {
            log_level: Some("DEBUG".into()),
            log_format: Some("json".into()),
            ..Overrides::default()
        };
        let settings = check(&doc, &file, &log).unwrap();
        assert_eq!(
            (settings.log_level.as_str(), settings.log_format),
            ("debug", LogFormat::Json)
        );
        for (flag_name, log) in [
            (
                "--log.level",
                Overrides {
                    log_level: Some("loud".into()),
                    ..Overrides::default()
                },
            ),
            (
                "--log.format",
                Overrides {
                    log_format: Some("xml".into()),
                    ..Overrides::default()
                },
            ),
        ] {
            let err = check(&doc, &file, &log).unwrap_err();
            assert_eq!(err.origin, Origin::Flag(flag_name));
            assert!(err.message.contains("unknown"), "{err}");
        }
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key, pos) in [
            ("[log]\nlevel = \"loud\"\n", "log.level", (2, 9)),
            ("[log]\nformat = \"xml\"\n", "log.format", (2, 10)),
            ("[metrics]\nhistogram_bins = 24\n", "metrics.histogram_bins", (2, 18)),
            ("[metrics]\ntier = \"all\"\n", "metrics.tier", (2, 8)),
            // Found by the config fuzz target: accepted, it became a time of 0.
            ("[web]\nstale_after_seconds = 1e-10\n", "web.stale_after_seconds", (2, 23)),
            ("[web]\nlisten_address = \"localhost\"\n", "web.listen_address", (2, 18)),
            ("[opencl]\ntuning = \"fast\"\n", "opencl.tuning", (2, 10)),
            ("[opencl]\nprofiling = \"sometimes\"\n", "opencl.profiling", (2, 13)),
            ("[opencl]\nverify_every = -1\n", "opencl.verify_every", (2, 16)),
            ("[opencl]\nverify_every = 4294967296\n", "opencl.verify_every", (2, 16)),
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

    #[test]
    fn tuning_is_auto_unless_opencl_or_the_camera_names_one() {
        let tunings = |text: &str| -> Vec<TuningChoice> {
            let s = load_text(text).unwrap();
            s.cameras.iter().map(|c| c.tuning).collect()
        };
        assert_eq!(tunings(""), [TuningChoice::Auto]);
        assert_eq!(tunings(GOOD), [TuningChoice::Auto]);
        for (name, tuning) in Tuning::ALL {
            let text = format!("[opencl]\ntuning = \"{}\"\n", name.to_uppercase());
            assert_eq!(tunings(&text), [TuningChoice::Named(tuning)], "{name}");
        }
        assert_eq!(
            tunings("[opencl]\ntuning = \"auto\"\n"),
            [TuningChoice::Auto]
        );
        // A camera's own overrides [opencl]'s, which the others keep.
        let two = format!(
            "[opencl]\ntuning = \"mali\"\n{}{}",
            pattern_camera(""),
            pattern_camera("").replace("name = \"c\"", "name = \"d\"\nopencl_tuning = \"cpu\"")
        );
        assert_eq!(
            tunings(&two),
            [
                TuningChoice::Named(Tuning::FOR_MALI),
                TuningChoice::Named(Tuning::FOR_CPU)
            ]
        );
        // What check-config prints reads back as the same settings.
        let s = load_text(&two).unwrap();
        let printed = s.to_toml();
        assert!(printed.contains("opencl_tuning = \"mali\""), "{printed}");
        assert!(printed.contains("opencl_tuning = \"cpu\""), "{printed}");
        assert_eq!(load_text(&printed).unwrap(), s);
    }

    /// Every camera checks one frame in `[opencl] verify_every`, 1800 unless it says.
    #[test]
    fn verify_every_reaches_every_camera() {
        let every = |text: &str| -> Vec<u32> {
            let s = load_text(text).unwrap();
            s.cameras.iter().map(|c| c.verify_every).collect()
        };
        assert_eq!(every(""), [1800]);
        let two = format!(
            "[opencl]\nverify_every = 0\n{}{}",
            pattern_camera(""),
            pattern_camera("").replace("name = \"c\"", "name = \"d\"")
        );
        assert_eq!(every(&two), [0, 0]);
        assert_eq!(every("[opencl]\nverify_every = 30\n"), [30]);
    }

    /// `[opencl] profiling` reaches every camera (auto unless it says), reads back from
    /// what check-config prints, and an unknown value is refused at its key.
    #[test]
    fn profiling_reaches_every_camera_and_reads_back() {
        use edgesight_core::cl::Profiling;
        let profiling = |text: &str| -> Vec<Profiling> {
            let s = load_text(text).unwrap();
            s.cameras.iter().map(|c| c.profiling).collect()
        };
        assert_eq!(profiling(""), [Profiling::Auto]);
        let two = format!(
            "[opencl]\nprofiling = \"OFF\"\n{}{}",
            pattern_camera(""),
            pattern_camera("").replace("name = \"c\"", "name = \"d\"")
        );
        assert_eq!(profiling(&two), [Profiling::Off, Profiling::Off]);
        let s = load_text(&two).unwrap();
        let printed = s.to_toml();
        assert!(printed.contains("profiling = \"off\""), "{printed}");
        assert_eq!(load_text(&printed).unwrap(), s);
        assert_eq!(profiling("[opencl]\nprofiling = \"on\"\n"), [Profiling::On]);
        assert_eq!(
            refusal("[opencl]\nprofiling = \"sometimes\"\n"),
            "t.toml:2:13: opencl.profiling: unknown profiling 'sometimes' (expected auto, on or off)"
        );
    }

    #[test]
    fn unknown_tunings_are_refused_at_their_key() {
        assert_eq!(
            refusal("[opencl]\ndevice = \"0\"\ntuning = \"bifrost\"\n"),
            "t.toml:3:10: opencl.tuning: unknown tuning 'bifrost' (expected auto, gpu, cpu, mali or midgard)"
        );
        assert_eq!(
            refusal("[[camera]]\nname = \"c\"\nopencl_tuning = \"GPU2\"\n[camera.source]\nkind = \"pattern\"\n"),
            "t.toml:3:17: camera.opencl_tuning: unknown tuning 'GPU2' (expected auto, gpu, cpu, mali or midgard)"
        );
        assert_eq!(
            refusal("[opencl]\ntuning = 64\n"),
            "t.toml:2:10: opencl.tuning: invalid type: integer `64`, expected a string"
        );
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
    fn health_values_are_refused_at_their_key() {
        let camera = pattern_camera("size = \"64x48\"\n");
        for (health, expect) in [
            (
                "[camera.health]\nlearning_seconds = 2\ndefocus_sharpness   =  1.5 # blurred\n",
                "t.toml:8:24: camera.health.defocus_sharpness: 1.5 is not a share above 0 and at most 1",
            ),
            (
                "[ camera.health ]\n\"clear_seconds\" = -1\n",
                "t.toml:7:19: camera.health.clear_seconds: -1 is not between 0 and 3600 seconds",
            ),
        ] {
            assert_eq!(refusal(&format!("{camera}{health}")), expect, "{health}");
        }
        // Written inline: the table's own position.
        assert_eq!(
            refusal("[[camera]]\nname = \"c\"\nhealth = { frozen_seconds = -1 }\n[camera.source]\nkind = \"pattern\"\n"),
            "t.toml:3:10: camera.health.frozen_seconds: -1 is not between 0 and 3600 seconds"
        );
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
        assert_eq!(
            check_region_name("ünï cödé", &mut seen),
            Err(BadRegionName::Twice("ünï cödé".into()))
        );
        let long = "x".repeat(65);
        assert_eq!(
            check_region_name(&long, &mut seen),
            Err(BadRegionName::NotLabelSafe(long.clone()))
        );
        assert_eq!(check_region_name(&long[1..], &mut seen), Ok(()));
    }
}
