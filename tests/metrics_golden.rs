//! `/metrics` against fixtures: every family declared in the daemon, fed a fixed set of
//! frame results, captures, errors, reloads and HTTP answers (no camera, no clock), and
//! rendered in each tier, the default one to `metrics.golden`, the detail one to
//! `metrics.detail.golden`. A family renamed, dropped, relabelled, described anew or
//! moved between tiers changes the text and fails the test;
//! `EDGESIGHT_UPDATE_GOLDEN=1 cargo test --test metrics_golden` writes the new text to
//! the fixtures, for review in the diff.
//!
//! The alert rules and the dashboard in `deploy/` are checked to use only families the
//! default tier's fixture has.
//!
//! `docs/src/metrics.md`, the metrics reference, is made from the same text: a family
//! added, renamed or described anew fails the test until the page is written again
//! (with the fixtures, by the same variable).
//!
//! The process families measure this test process, so their values are set to 0; the
//! build's version is written as `VERSION`. Everything else is as rendered.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use edgesight::capture::{CaptureStats, DropReason};
use edgesight::cl::{ClDeviceInfo, ClError};
use edgesight::daemon::camera_metrics::CameraFamilies;
use edgesight::daemon::reload::{ReloadMetrics, ReloadResult};
use edgesight::health::{HealthReport, Kind, State};
use edgesight::metrics::{Metrics, Tier};
use edgesight::pipeline::{FrameResult, PipelineError, Stage, StageTimings};
use edgesight::region::{Region, RegionStats};
use edgesight::server::HttpMetrics;
use hyper::StatusCode;

/// Each tier's fixture.
const FIXTURES: [(Tier, &str); 2] = [
    (Tier::Default, "tests/fixtures/metrics.golden"),
    (Tier::Detail, "tests/fixtures/metrics.detail.golden"),
];

fn device() -> ClDeviceInfo {
    ClDeviceInfo {
        platform: "Portable Computing Language".into(),
        platform_version: "OpenCL 3.0 PoCL".into(),
        name: "cpu".into(),
        vendor: "test".into(),
        kind: "CPU",
        version: "OpenCL 3.0".into(),
        driver_version: "6.0".into(),
        opencl_c_version: "OpenCL C 1.2".into(),
        compute_units: 2,
        local_mem_bytes: 32768,
        global_mem_bytes: 1 << 30,
        max_work_group_size: 4096,
        unified_memory: Some(true),
        fp64: true,
    }
}

/// A 64x48 frame: its luma all in two histogram bins, one region, fixed stage times.
fn frame(otsu: u8, luma_sum: u64) -> FrameResult {
    let area = 64 * 48;
    let mut histogram = [0u32; 256];
    histogram[40] = area as u32 / 4;
    histogram[200] = area as u32 - histogram[40];
    let mut timings = StageTimings::default();
    for (i, stage) in Stage::ALL.iter().enumerate() {
        // 40 µs, 80 µs, ... : each stage lands in its own bucket range.
        timings.0[*stage as usize] = 40_000 * (i as u64 + 1);
    }
    let region = Region {
        name: "door".into(),
        x: 8,
        y: 8,
        width: 16,
        height: 16,
    };
    FrameResult {
        width: 64,
        height: 48,
        histogram,
        otsu_threshold: otsu,
        frame: RegionStats {
            area,
            sum: luma_sum,
            sqsum: luma_sum * 200,
            edges: area / 8,
            foreground: area * 3 / 4,
            motion: 0,
        },
        regions: vec![(
            region,
            RegionStats {
                area: 256,
                sum: 256 * 100,
                sqsum: 256 * 100 * 100,
                edges: 64,
                foreground: 128,
                motion: 0,
            },
        )],
        timings,
        timed: true,
        ..FrameResult::empty()
    }
}

/// A camera covered for a while, after it had once been moved.
fn covered() -> HealthReport {
    let mut kinds = Kind::ALL.map(|k| (k, State::Ok));
    kinds[2].1 = State::Tampered;
    HealthReport {
        state: "tampered",
        learning: false,
        sharpness: Some(0.25),
        scene_change: Some(0.5),
        clipped_dark: 0.125,
        clipped_bright: 0.0,
        mean_luma_ratio: Some(0.5),
        histogram_band: 0.875,
        flat_cells: Some(0.75),
        unchanged_seconds: 0.0,
        kinds,
    }
}

/// Every family, fed a fixed history, as `tier` has them.
fn rendered(tier: Tier) -> String {
    let metrics = Metrics::new();
    let cameras = CameraFamilies::new(&metrics, 16);
    let reloads = ReloadMetrics::new(&metrics);
    let http = HttpMetrics::new(&metrics);
    // Board-level and never set here: each shows as its zero.
    let _mqtt = edgesight::mqtt::MqttMetrics::new(&metrics);

    let front = cameras.camera("front", Some(30.0));
    front.set_device(&device(), edgesight::cl::Timing::Host);
    let mut stats = CaptureStats {
        frames: 3,
        reconnects: 1,
        ..CaptureStats::default()
    };
    stats.dropped[DropReason::SequenceGap as usize] = 2;
    front.capture(true, &stats);
    front.frame(&frame(120, 64 * 48 * 160), Duration::from_millis(12), None);
    // A JPEG frame's decoding is timed on the host, on every frame.
    front.frame(
        &frame(121, 64 * 48 * 161),
        Duration::from_millis(45),
        Some(Duration::from_micros(3500)),
    );
    front.set_frame_rate(29.5);
    front.backlog_dropped(1);
    front.pipeline_error(&PipelineError::Stage {
        stage: Stage::Sobel,
        source: ClError::NoPlatform,
    });
    front.restarted();
    front.health.tampered(Kind::Moved);
    front.health.tampered(Kind::Covered);
    front.health.set(&covered());
    // Motion: an eighth of the frame, half the door, in its second event.
    let motion = edgesight::motion_events::MotionReport {
        state: "watching",
        ratio: 0.125,
        regions: vec![edgesight::motion_events::RegionMotion::new(0.5, true, 2)],
        ..Default::default()
    };
    front.motion(&motion, [0].into_iter());
    front.motion(&motion, [0].into_iter());

    // A camera whose device is absent: down, no rate set, nothing published.
    let idle = cameras.camera("idle", None);
    idle.set_up(false);
    // A camera configured without a rate: its target is the rate its driver reports.
    idle.set_target_rate(15.0);

    reloads.count(ReloadResult::Success);
    reloads.count(ReloadResult::Partial);
    reloads.count(ReloadResult::Failure);
    http.answered("metrics", StatusCode::OK);
    http.answered("snapshot", StatusCode::SERVICE_UNAVAILABLE);

    normalise(&String::from_utf8(metrics.encode_tier(tier)).expect("UTF-8"))
}

/// The values that depend on the process, the build and the clock, made fixed.
fn normalise(text: &str) -> String {
    let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
    let mut out = String::new();
    for line in text.lines() {
        let line = if line.starts_with("process_") {
            let (series, _) = line.rsplit_once(' ').expect("a sample line");
            format!("{series} 0")
        } else if line.starts_with("edgesight_build_info{") {
            line.replace(&version, "version=\"VERSION\"")
                .replace(
                    &format!("revision=\"{}\"", edgesight::REVISION),
                    "revision=\"REVISION\"",
                )
                .replace(
                    &format!("rustversion=\"{}\"", edgesight::RUSTC_VERSION),
                    "rustversion=\"RUSTVERSION\"",
                )
        } else if line.starts_with("edgesight_config_last_reload_success_timestamp_seconds ") {
            "edgesight_config_last_reload_success_timestamp_seconds 0".to_string()
        } else {
            line.to_string()
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn updating() -> bool {
    std::env::var_os("EDGESIGHT_UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

/// The fixture's text of `tier`; while it is being updated, the text it is being given
/// (the tests run at once, and may not read a fixture half written).
fn golden(tier: Tier) -> String {
    if updating() {
        return rendered(tier);
    }
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture(tier)))
        .expect("reading the fixture")
}

fn fixture(tier: Tier) -> &'static str {
    FIXTURES
        .iter()
        .find(|(t, _)| *t == tier)
        .expect("a fixture")
        .1
}

#[test]
fn metrics_match_the_fixtures() {
    for (tier, fixture) in FIXTURES {
        match_fixture(tier, fixture);
    }
}

fn match_fixture(tier: Tier, fixture: &str) {
    let now = rendered(tier);
    if updating() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture);
        std::fs::write(&path, &now).expect("writing the fixture");
        return;
    }
    let golden = golden(tier);
    if now != golden {
        let (line, (want, got)) = golden
            .lines()
            .zip(now.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .unwrap_or((
                golden.lines().count().min(now.lines().count()),
                ("(end)", "(end)"),
            ));
        panic!(
            "/metrics differs from {fixture} at line {}:\n  fixture:  {want}\n  rendered: {got}\n\
             ({} lines in the fixture, {} rendered). If the change is meant, rerun with \
             EDGESIGHT_UPDATE_GOLDEN=1 and review the fixture's diff.",
            line + 1,
            golden.lines().count(),
            now.lines().count()
        );
    }
}

fn families(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect()
}

#[test]
fn the_fixtures_name_every_family_with_its_help_and_type() {
    for (tier, _) in FIXTURES {
        let golden = golden(tier);
        for family in families(&golden) {
            assert!(
                golden.contains(&format!("# HELP {family} ")),
                "{family} has no HELP line"
            );
        }
    }
    let default = golden(Tier::Default);
    for family in [
        "edgesight_pipeline_errors_total",
        "edgesight_kernel_mismatched_frames_total",
        "edgesight_config_reloads_total",
        "edgesight_roi_mean_luma",
        "process_resident_memory_bytes",
    ] {
        assert!(families(&default).contains(&family), "{family} missing");
    }
}

/// The detail tier is the default one and more: every default series is in it with
/// the same value, except the stage times' summary, which is the detail tier's histogram
/// of the same sum and count.
#[test]
fn the_detail_tier_holds_every_default_series() {
    let (default, detail) = (golden(Tier::Default), golden(Tier::Detail));
    let samples = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    let detail = samples(&detail);
    let default = samples(&default);
    for line in &default {
        assert!(detail.contains(line), "{line} is not in the detail tier");
    }
    for family in [
        "edgesight_stage_errors_total",
        "edgesight_kernel_mismatch_total",
        "edgesight_luma_bin_ratio",
        "edgesight_http_requests_total",
        "edgesight_stage_duration_seconds_bucket",
    ] {
        let prefix = format!("{family}{{");
        assert!(!default.iter().any(|l| l.starts_with(&prefix)), "{family}");
        assert!(detail.iter().any(|l| l.starts_with(&prefix)), "{family}");
    }
}

/// Prometheus's own linter.
#[test]
fn promtool_finds_nothing_in_the_fixtures() {
    for (tier, _) in FIXTURES {
        promtool_check_metrics(&golden(tier));
    }
}

fn promtool_check_metrics(golden: &str) {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        // A check that cannot run is a failure, not a pass.
        Err(e) => panic!(
            "starting promtool: {e} (Debian's prometheus package has it; \
             scripts/install-deps.sh test installs it)"
        ),
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(golden.as_bytes())
        .expect("writing to promtool");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every edgesight metric the alert rules and the dashboard use is one the daemon exports
/// by default: a family in the default tier's fixture.
#[test]
fn deploy_rules_and_dashboard_use_only_exported_families() {
    let exported = golden(Tier::Default);
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let dashboard =
        std::fs::read_to_string(deploy.join("grafana-dashboard.json")).expect("dashboard");
    let parsed: serde_json::Value = serde_json::from_str(&dashboard).expect("dashboard JSON");
    assert!(parsed["panels"].as_array().is_some_and(|p| p.len() >= 8));
    let alerts = std::fs::read_to_string(deploy.join("alerts.yml")).expect("alerts");
    for text in [&dashboard, &alerts] {
        for (i, _) in text.match_indices("edgesight_") {
            let name: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|b| b.ends_with("_seconds")))
                .unwrap_or(&name);
            assert!(
                exported.contains(&format!("# TYPE {base} ")),
                "{base} is not exported"
            );
        }
    }
}

/// The metrics reference page.
const REFERENCE: &str = "docs/src/metrics.md";

/// The reference page for the families of both tiers: each family's type, labels, tier
/// and help, in the order `/metrics` has them.
fn reference(default: &str, detail: &str) -> String {
    let mut out = String::from(
        "# Metrics\n\n\
         Every family the daemon exports, made from its registry by \
         `tests/metrics_golden.rs` (do not edit by hand: \
         `EDGESIGHT_UPDATE_GOLDEN=1 cargo test --test metrics_golden` writes it again).\n\n\
         `/metrics` serves the default tier; `/metrics?collect[]=detail`, or \
         `[metrics] tier = \"detail\"` in the config, serves the detail tier: every default \
         series and the families and labels marked *detail* below. A camera with two \
         regions has 63 series in the default tier.\n",
    );
    let default_families = families(default);
    for family in families(detail) {
        let kind = detail
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# TYPE {family} ")))
            .expect("a TYPE line");
        let help = detail
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# HELP {family} ")))
            .expect("a HELP line");
        let labels = |text: &str| -> Vec<String> {
            let mut names: Vec<String> = Vec::new();
            for line in text.lines().filter(|l| l.starts_with(family)) {
                let Some((_, rest)) = line.split_once('{') else {
                    continue;
                };
                let inside = rest.rsplit_once('}').map_or(rest, |(a, _)| a);
                for pair in inside.split("\",") {
                    let name = pair.split('=').next().unwrap_or("").trim();
                    if !name.is_empty()
                        && name != "le"
                        && name != "quantile"
                        && !names.iter().any(|n| n == name)
                    {
                        names.push(name.to_string());
                    }
                }
            }
            names
        };
        let all = labels(detail);
        let tier = if default_families.contains(&family) {
            let fewer = labels(default);
            if fewer.len() < all.len() {
                "default (the detail tier adds labels)"
            } else {
                "default"
            }
        } else {
            "*detail*"
        };
        let labels = if all.is_empty() {
            "none".to_string()
        } else {
            all.iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "\n## `{family}`\n\n{kind}; labels: {labels}; tier: {tier}.\n\n{help}\n"
        ));
    }
    out
}

#[test]
fn the_metrics_reference_is_the_registry() {
    let detail = rendered(Tier::Detail);
    let page = reference(&rendered(Tier::Default), &detail);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(REFERENCE);
    if updating() {
        std::fs::write(&path, &page).expect("writing the metrics reference");
        return;
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == page,
        "{REFERENCE} is not what the registry exports (a family added, renamed or \
         described anew): rerun with EDGESIGHT_UPDATE_GOLDEN=1 and review its diff"
    );
    // The page names every family and says which tier each is in.
    for family in families(&detail) {
        assert!(page.contains(&format!("## `{family}`")), "{family}");
    }
    assert!(page.contains(
        "## `edgesight_luma_bin_ratio`\n\ngauge; labels: `bin`, `camera`; tier: *detail*."
    ));
}
