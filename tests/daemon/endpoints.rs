//! Every route of a running daemon on one camera, its reload by SIGHUP and its stop by
//! SIGTERM; HEAD on every route; `--listen` on port 0; every listen address given.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::daemon::*;
use crate::latest_frame;

const FAMILIES: [&str; 22] = [
    "edgesight_build_info",
    "edgesight_opencl_device_info",
    "edgesight_camera_up",
    "edgesight_frames_total",
    "edgesight_frames_dropped_total",
    "edgesight_camera_reconnects_total",
    "edgesight_pipeline_errors_total",
    "edgesight_stage_duration_seconds",
    "edgesight_frame_latency_seconds",
    "edgesight_frame_rate",
    "edgesight_target_frame_rate",
    "edgesight_otsu_threshold",
    "edgesight_mean_luma",
    "edgesight_luma_stddev",
    "edgesight_foreground_ratio",
    "edgesight_edge_ratio",
    "edgesight_luma_bin_ratio",
    "edgesight_roi_mean_luma",
    "edgesight_roi_luma_stddev",
    "edgesight_roi_edge_ratio",
    "edgesight_roi_foreground_ratio",
    "process_resident_memory_bytes",
];

/// The `[web]` and `[metrics]` of the one-camera daemon, kept across its reloads.
const WEB: &str =
    "[web]\nsnapshots = true\nstale_after_seconds = 2\n[metrics]\nhistogram_bins = 16\n";

/// One daemon through its life: each step below checks one side of it, in the order a
/// user meets them; the reloads come last, as they change what the others see.
#[test]
fn endpoints_snapshots_reload_and_sigterm() {
    let dir = tmp_dir("daemon-e2e");
    let rois = [("door", 10, 20, 100, 80), ("all", 0, 0, 320, 240)];
    let config = format!("{WEB}{}", camera("front", "320x240", &rois, 64));
    let d = Daemon::start(&dir, &config);

    metrics_have_every_family_and_pass_promtool(&d);
    latest_is_the_report_of_the_frame_and_its_regions(d.port);
    drops_in_latest_are_counted_in_metrics(&d);
    snapshots_and_the_status_page_show_the_frame(d.port);
    only_get_and_head_are_served(d.port);
    sighup_takes_new_regions_and_threshold_on_the_same_camera(&d, &dir);
    a_reload_that_does_not_check_is_refused_whole(&d, &dir);

    // Within the unit's TimeoutStopSec, after which systemd would kill it (the man page's
    // "about 0.1 s" is what an idle machine sees; a loaded one may be slower).
    let took = d.stop();
    let stop_timeout = unit_stop_timeout();
    assert!(
        took < stop_timeout,
        "SIGTERM took {took:?}, TimeoutStopSec is {stop_timeout:?}"
    );
}

/// Every family is there, promtool's linter has nothing to say, and the luma histogram
/// has the configured 16 bins summing to 1.
fn metrics_have_every_family_and_pass_promtool(d: &Daemon) {
    let m = d.metrics();
    for family in FAMILIES {
        assert!(
            m.contains(&format!("# TYPE {family} ")),
            "{family} missing:\n{m}"
        );
    }
    run_tool_ok(
        Command::new("promtool").args(["check", "metrics"]),
        Some(m.as_bytes()),
    );
    assert_eq!(
        sample(&m, r#"edgesight_camera_up{camera="front"}"#),
        Some(1.0)
    );
    assert_eq!(
        sample(&m, r#"edgesight_target_frame_rate{camera="front"}"#),
        Some(30.0)
    );
    let bins: Vec<f64> = m
        .lines()
        .filter(|l| l.starts_with("edgesight_luma_bin_ratio{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .collect();
    assert_eq!(bins.len(), 16);
    let total: f64 = bins.iter().sum();
    assert!((total - 1.0).abs() < 1e-9, "bins sum to {total}");
}

/// The latest frame: report.json's fields for a 320x240 frame and its two regions.
fn latest_is_the_report_of_the_frame_and_its_regions(port: u16) {
    let latest: serde_json::Value =
        serde_json::from_str(&get_text(port, "/api/v1/latest")).expect("JSON");
    assert_eq!(latest["camera"], "front");
    assert_eq!(
        (latest["width"].as_u64(), latest["height"].as_u64()),
        (Some(320), Some(240))
    );
    assert_eq!(latest["format"], "grey");
    let histogram: Vec<u64> = latest["histogram"]
        .as_array()
        .expect("histogram")
        .iter()
        .filter_map(|v| v.as_u64())
        .collect();
    assert_eq!(histogram.len(), 256);
    assert_eq!(histogram.iter().sum::<u64>(), 320 * 240);
    let rois: Vec<&str> = latest["rois"]
        .as_array()
        .expect("rois")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(rois, ["door", "all"]);
    // The whole-frame region agrees with the frame's own figures.
    let all = &latest["rois"][1];
    assert_eq!(all["mean"], latest["mean_luma"]);
    assert_eq!(all["edge_ratio"], latest["edge_ratio"]);
    assert_eq!(latest["options"]["edge_threshold"], 64);
    for key in [
        "otsu_threshold",
        "luma_stddev",
        "foreground_ratio",
        "timings_ms",
        "sequence",
    ] {
        assert!(!latest[key].is_null(), "{key} missing");
    }
    assert_eq!(get(port, "/api/v1/latest?camera=nope").status, 404);
}

/// How the camera keeps up: its measured rate (once two frames are in), and its drops
/// by reason, of which a later scrape counts at least as many (counters only grow).
fn drops_in_latest_are_counted_in_metrics(d: &Daemon) {
    let latest = wait_until("a frame rate", Duration::from_secs(30), || {
        latest_frame(d.port).filter(|l| l["fps"].as_f64().is_some_and(|fps| fps > 0.0))
    });
    let later = d.metrics();
    let mut dropped = 0;
    for reason in [
        "sequence_gap",
        "buffer_error",
        "short_frame",
        "bad_image",
        "publish_backlog",
    ] {
        let n = latest["dropped"][reason]
            .as_u64()
            .unwrap_or_else(|| panic!("dropped.{reason} missing: {latest}"));
        let series =
            format!(r#"edgesight_frames_dropped_total{{camera="front",reason="{reason}"}}"#);
        let exported = sample(&later, &series).unwrap_or_else(|| panic!("{series} missing"));
        assert!(
            n as f64 <= exported,
            "{reason}: {n} in latest, {exported} scraped later"
        );
        dropped += n;
    }
    assert_eq!(latest["dropped"]["total"].as_u64(), Some(dropped));
}

/// Snapshots decode as PNGs of the frame's size (the histogram chart has its own), the
/// mask is black and white, and the status page draws the regions over the luma picture
/// in frame coordinates beside the stage times.
fn snapshots_and_the_status_page_show_the_frame(port: u16) {
    for (pic, size) in [
        ("luma", (320, 240)),
        ("edges", (320, 240)),
        ("mask", (320, 240)),
        ("histogram", (528, 216)),
    ] {
        let r = get(port, &format!("/snapshot/{pic}.png"));
        assert_eq!(r.status, 200, "{pic}");
        assert!(r.headers.contains("image/png"), "{}", r.headers);
        let img = image::load_from_memory_with_format(&r.body, image::ImageFormat::Png)
            .unwrap_or_else(|e| panic!("{pic}.png: {e}"));
        assert_eq!((img.width(), img.height()), size, "{pic}.png");
    }
    let mask = image::load_from_memory(&get(port, "/snapshot/mask.png").body)
        .expect("mask")
        .into_luma8();
    assert!(mask.pixels().all(|p| p.0[0] == 0 || p.0[0] == 255));
    let page = get_text(port, "/");
    for part in [
        "<meta name=\"viewport\"",
        "<img src=\"/snapshot/luma.png?camera=front&amp;frame=",
        "<svg viewBox=\"0 0 320 240\"",
        "<rect x=\"10\" y=\"20\" width=\"100\" height=\"80\"></rect>",
        "<rect x=\"0\" y=\"0\" width=\"320\" height=\"240\"></rect>",
        ">door</text>",
        "<th>frame rate</th>",
        "<th>dropped</th>",
        "<th>integral</th>",
        "<th>total</th>",
    ] {
        assert!(page.contains(part), "{part} not in {page}");
    }
    // The page's data names the same camera, with a layout the page carries.
    let data: serde_json::Value =
        serde_json::from_str(&get_text(port, "/status.json")).expect("/status.json");
    assert_eq!(data["cameras"][0]["name"], "front");
    let layout = data["layout"].as_str().expect("a layout");
    assert!(
        page.contains(&format!("data-layout=\"{layout}\"")),
        "{page}"
    );
}

/// Only GET (and HEAD); unknown paths 404.
fn only_get_and_head_are_served(port: u16) {
    assert_eq!(request(port, "POST", "/metrics").expect("POST").status, 405);
    assert_eq!(request(port, "DELETE", "/").expect("DELETE").status, 405);
    assert_eq!(get(port, "/nope").status, 404);
    let head = request(port, "HEAD", "/healthz").expect("HEAD");
    assert_eq!((head.status, head.body.len()), (200, 0));
}

/// SIGHUP: new regions and threshold, same camera (its frames keep counting). A new
/// tuning would take a new pipeline: it is logged as needing a restart, and the rest of
/// the reload is taken.
fn sighup_takes_new_regions_and_threshold_on_the_same_camera(d: &Daemon, dir: &Path) {
    assert!(d.log().contains(" tuning="), "{}", d.log());
    let frames_before =
        sample(&d.metrics(), r#"edgesight_frames_total{camera="front"}"#).expect("frames_total");
    let reloaded = format!(
        "[opencl]\ntuning = \"mali\"\n{WEB}{}",
        camera("front", "320x240", &[("gate", 0, 0, 32, 24)], 200)
    );
    std::fs::write(dir.join("edgesight.toml"), reloaded).expect("rewrite config");
    d.signal(libc::SIGHUP);
    let latest = wait_until("the reload to show", Duration::from_secs(30), || {
        latest_frame(d.port).filter(|l| l["options"]["edge_threshold"] == 200)
    });
    assert_eq!(latest["rois"][0]["name"], "gate");
    assert_eq!(latest["rois"].as_array().map(Vec::len), Some(1));
    let m = d.metrics();
    assert!(m.contains(r#"edgesight_roi_mean_luma{camera="front",roi="gate"}"#));
    assert!(!m.contains(r#"roi="door""#), "removed ROI still exported");
    assert_eq!(
        sample(&m, r#"edgesight_config_reloads_total{result="success"}"#),
        Some(1.0)
    );
    let frames_after = sample(&m, r#"edgesight_frames_total{camera="front"}"#).expect("frames");
    assert!(frames_after > frames_before);
    assert_eq!(
        sample(&m, r#"edgesight_camera_reconnects_total{camera="front"}"#),
        Some(0.0)
    );
    assert!(
        d.log()
            .contains("SIGHUP: source, device, tuning and profiling changes take a restart"),
        "{}",
        d.log()
    );
}

/// A reload that does not check is refused whole and the old settings stay.
fn a_reload_that_does_not_check_is_refused_whole(d: &Daemon, dir: &Path) {
    let bad = format!(
        "{WEB}{}",
        camera("front", "320x240", &[("big", 0, 0, 321, 10)], 10)
    );
    std::fs::write(dir.join("edgesight.toml"), bad).expect("rewrite config");
    d.signal(libc::SIGHUP);
    wait_until(
        "the refused reload to count",
        Duration::from_secs(30),
        || {
            sample(
                &d.metrics(),
                r#"edgesight_config_reloads_total{result="failure"}"#,
            )
            .filter(|v| *v == 1.0)
        },
    );
    let l = latest_frame(d.port).expect("a frame");
    assert_eq!(l["options"]["edge_threshold"], 200);
    assert!(d.log().contains("outside the 320x240 frame"), "{}", d.log());
}

/// `TimeoutStopSec` of systemd/edgesight.service: how long systemd waits for the daemon
/// to stop before it kills it.
fn unit_stop_timeout() -> Duration {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/edgesight.service");
    let text = std::fs::read_to_string(&unit).expect("read the systemd unit");
    let value = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("TimeoutStopSec="))
        .expect("TimeoutStopSec in the unit");
    let seconds = value.strip_suffix('s').unwrap_or(value);
    Duration::from_secs(seconds.parse().expect("TimeoutStopSec in whole seconds"))
}

#[test]
fn listen_on_port_0_logs_the_port_bound() {
    let dir = tmp_dir("daemon-port-0");
    let path = dir.join("edgesight.toml");
    std::fs::write(&path, camera("c", "64x48", &[], 64)).expect("write the config");
    let log = dir.join("edgesight.log");
    let child = edgesight_command()
        .args(["run", "--config"])
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start edgesight");
    let d = Daemon {
        child,
        port: 0,
        log,
    };
    let port: u16 = wait_until("the serving line", Duration::from_secs(60), || {
        let text = d.log();
        let line = text.lines().find(|l| l.contains("serving"))?.to_string();
        let (_, addr) = line.split_once("listen=127.0.0.1:")?;
        Some(addr.split_whitespace().next()?.parse().expect("a port"))
    });
    assert_ne!(port, 0, "{}", d.log());
    wait_healthy(port);
    d.stop();
}

/// `--web.listen-address` in every form exporters take, given more than once: the daemon
/// serves on each address (`:PORT` to IPv4 clients too, a host name on what it resolves
/// to) and logs them all.
#[test]
fn every_listen_address_given_is_served() {
    let dir = tmp_dir("daemon-listen-addresses");
    let (any, named) = (free_port(), free_port());
    let d = Daemon::start_with(&dir, &camera("c", "64x48", &[], 64), |c| {
        c.args(["--web.listen-address", &format!(":{any}")])
            .args(["--web.listen-address", &format!("localhost:{named}")]);
    });
    for port in [d.port, any, named] {
        let r = get(port, "/healthz");
        assert_eq!(r.status, 200, "127.0.0.1:{port}");
    }
    let log = d.log();
    let line = log
        .lines()
        .find(|l| l.contains("serving"))
        .expect("the serving line");
    assert!(line.contains(&format!("127.0.0.1:{},", d.port)), "{line}");
    assert!(line.contains(&format!(":{any},")), "{line}");
    assert!(line.contains(&format!("127.0.0.1:{named}")), "{line}");
    d.stop();
}

#[test]
fn head_answers_every_route_with_the_get_length() {
    let dir = tmp_dir("daemon-head");
    let d = Daemon::start(
        &dir,
        &format!("[web]\nsnapshots = true\n{}", camera("c", "64x48", &[], 64)),
    );
    let length = |r: &Response| -> Option<usize> {
        r.headers
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
    };
    for path in [
        "/metrics",
        "/healthz",
        "/api/v1/latest",
        "/",
        "/snapshot/histogram.png",
        "/snapshot/nope.png",
        "/nope",
    ] {
        let head = request(d.port, "HEAD", path).expect("HEAD");
        let get = get(d.port, path);
        assert_eq!(head.status, get.status, "{path}");
        assert!(head.body.is_empty(), "{path}: HEAD with a body");
        let told = length(&head).unwrap_or_else(|| panic!("{path}: {}", head.headers));
        assert!(told > 0, "{path}: {}", head.headers);
        // These answer the same bytes every time; the others change with each frame.
        if ["/healthz", "/snapshot/nope.png", "/nope"].contains(&path) {
            assert_eq!(told, get.body.len(), "{path}");
        }
    }
    d.stop();
}

/// The sample lines of `scrape`: those of camera `name`, the others (the board's) but
/// the HTTP answers, and those.
fn series_of(scrape: &str, name: &str) -> (usize, usize, usize) {
    let label = format!("camera=\"{name}\"");
    let samples: Vec<&str> = scrape.lines().filter(|l| !l.starts_with('#')).collect();
    let camera = samples.iter().filter(|l| l.contains(&label)).count();
    let http = samples
        .iter()
        .filter(|l| l.starts_with("edgesight_http_requests_total{"))
        .count();
    (camera, samples.len() - camera - http, http)
}

/// Issue 47: the default scrape of a camera with two regions holds at most 64 series, and
/// the board at most 20 beside them; the detail tier, by `collect[]` (as Prometheus
/// sends it, percent-encoded) adds the stage buckets, the luma bins and the per-stage
/// counters; `exclude[]=detail` is the default tier; an unknown group is refused.
/// Health and motion series are exported whether their detectors run or not.
#[test]
fn a_camera_with_two_regions_exports_63_series_by_default() {
    let dir = tmp_dir("daemon-series");
    let rois = [("door", 0, 0, 80, 60), ("gate", 80, 60, 80, 60)];
    let d = Daemon::start(&dir, &camera("front", "160x120", &rois, 64));
    let timed = r#"edgesight_stage_duration_seconds_count{camera="front",stage="pipeline"}"#;
    wait_until("a timed frame", Duration::from_secs(60), || {
        let m = get_text(d.port, "/metrics");
        (sample(&m, timed).unwrap_or(0.0) >= 1.0).then_some(())
    });
    // The board: the process's seven, build info, five of the reloads and the one OpenCL
    // device; the detail tier adds the HTTP answers (the start's /healthz, the scrapes
    // before: how many depends on how soon the daemon was ready).
    let default = get_text(d.port, "/metrics");
    assert_eq!(series_of(&default, "front"), (63, 14, 0), "{default}");
    let detail = get_text(d.port, "/metrics?collect%5B%5D=detail");
    let (camera, board, http) = series_of(&detail, "front");
    assert_eq!((camera, board), (242, 14), "{detail}");
    assert!(http >= 2, "{detail}");
    let excluded = get_text(d.port, "/metrics?exclude[]=detail");
    assert_eq!(series_of(&excluded, "front"), (63, 14, 0), "{excluded}");
    let r = request(d.port, "GET", "/metrics?collect[]=all").expect("a scrape");
    assert_eq!(r.status, 400);
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        "collect[]: unknown group 'all' (expected default or detail)\n"
    );
    d.stop();
}
