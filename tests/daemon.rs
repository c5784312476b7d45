//! `edgesight run` as a user runs it: the real binary on a temporary config and a free
//! loopback port, scraped by `promtool`, a real Prometheus server and `wrk` (Debian's
//! `prometheus` and `wrk` packages; `scripts/install-deps.sh test` installs them).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::daemon::*;

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

#[test]
fn endpoints_snapshots_reload_and_sigterm() {
    let dir = tmp_dir("daemon-e2e");
    let web = "[web]\nsnapshots = true\nstale_after_seconds = 2\n[metrics]\nhistogram_bins = 16\n";
    let config = format!(
        "{web}{}",
        camera(
            "front",
            "320x240",
            &[("door", 10, 20, 100, 80), ("all", 0, 0, 320, 240)],
            64
        )
    );
    let d = Daemon::start(&dir, &config);
    let port = d.port;

    // Metrics: every family there, and promtool's linter has nothing to say.
    let m = d.metrics();
    for family in FAMILIES {
        assert!(
            m.contains(&format!("# TYPE {family} ")),
            "{family} missing:\n{m}"
        );
    }
    let check = run_tool(
        Command::new("promtool").args(["check", "metrics"]),
        Some(m.as_bytes()),
    );
    assert!(
        check.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(
        sample(&m, r#"edgesight_camera_up{camera="front"}"#),
        Some(1.0)
    );
    assert_eq!(
        sample(&m, r#"edgesight_target_frame_rate{camera="front"}"#),
        Some(30.0)
    );
    let bins = m
        .lines()
        .filter(|l| l.starts_with("edgesight_luma_bin_ratio{"))
        .count();
    assert_eq!(bins, 16);
    let total: f64 = m
        .lines()
        .filter(|l| l.starts_with("edgesight_luma_bin_ratio{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    assert!((total - 1.0).abs() < 1e-9, "bins sum to {total}");

    // The latest frame: report.json's fields for a 320x240 frame and its two regions.
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

    // How the camera keeps up: its measured rate (once two frames are in), and its drops
    // by reason, of which a later scrape counts at least as many (counters only grow).
    let latest = wait_until("a frame rate", Duration::from_secs(30), || {
        let l: serde_json::Value = serde_json::from_str(&get_text(port, "/api/v1/latest")).ok()?;
        (l["fps"].as_f64()? > 0.0).then_some(l)
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

    // Snapshots decode as PNGs of the frame's size; the histogram chart has its own.
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
    assert!(page.contains("/snapshot/luma.png?camera=front"), "{page}");
    assert!(page.contains("http-equiv=\"refresh\""));
    // The regions over the luma picture, in frame coordinates; the stage times.
    for part in [
        "viewBox=\"0 0 320 240\"",
        "<rect x=\"10\" y=\"20\" width=\"100\" height=\"80\"></rect>",
        "<rect x=\"0\" y=\"0\" width=\"320\" height=\"240\"></rect>",
        ">door</text>",
        "<tr><td>frame rate</td>",
        "<tr><td>dropped</td>",
        "<tr><td>integral</td>",
        "<tr><td>total</td>",
    ] {
        assert!(page.contains(part), "{part} not in {page}");
    }

    // Only GET (and HEAD); unknown paths 404.
    assert_eq!(request(port, "POST", "/metrics").expect("POST").status, 405);
    assert_eq!(request(port, "DELETE", "/").expect("DELETE").status, 405);
    assert_eq!(get(port, "/nope").status, 404);
    let head = request(port, "HEAD", "/healthz").expect("HEAD");
    assert_eq!((head.status, head.body.len()), (200, 0));

    // SIGHUP: new regions and threshold, same camera (its frames keep counting). A new
    // tuning would take a new pipeline: it is logged as needing a restart, and the rest
    // of the reload is taken.
    assert!(d.log().contains(" tuning="), "{}", d.log());
    let frames_before =
        sample(&d.metrics(), r#"edgesight_frames_total{camera="front"}"#).expect("frames_total");
    let reloaded = format!(
        "[opencl]\ntuning = \"mali\"\n{web}{}",
        camera("front", "320x240", &[("gate", 0, 0, 32, 24)], 200)
    );
    std::fs::write(dir.join("edgesight.toml"), reloaded).expect("rewrite config");
    d.signal(libc::SIGHUP);
    let latest = wait_until("the reload to show", Duration::from_secs(30), || {
        let l: serde_json::Value = serde_json::from_str(&get_text(port, "/api/v1/latest")).ok()?;
        (l["options"]["edge_threshold"] == 200).then_some(l)
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
            .contains("SIGHUP: source, device and tuning changes take a restart"),
        "{}",
        d.log()
    );

    // A reload that does not check is refused whole and the old settings stay.
    let bad = format!(
        "{web}{}",
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
    let l: serde_json::Value =
        serde_json::from_str(&get_text(port, "/api/v1/latest")).expect("JSON");
    assert_eq!(l["options"]["edge_threshold"], 200);
    assert!(d.log().contains("outside the 320x240 frame"), "{}", d.log());

    let log_before = d.log();
    let (status, took) = d.terminate();
    assert_eq!(status.code(), Some(0), "{log_before}");
    // Within the unit's TimeoutStopSec, after which systemd would kill it (the man page's
    // "about 0.1 s" is what an idle machine sees; a loaded one may be slower).
    let stop_timeout = unit_stop_timeout();
    assert!(
        took < stop_timeout,
        "SIGTERM took {took:?}, TimeoutStopSec is {stop_timeout:?}"
    );
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

/// Status of a GET with basic auth as `user` (password `s3cret`); 0 when it fails.
fn get_as(port: u16, path: &str, user: &str) -> u16 {
    let token = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("{user}:s3cret"),
    );
    let auth = format!("Authorization: Basic {token}\r\n");
    TcpStream::connect(("127.0.0.1", port))
        .and_then(|s| exchange(s, "GET", path, &auth, Duration::from_secs(10)))
        .map_or(0, |r| r.status)
}

#[test]
fn basic_auth_guards_everything_and_healthz_goes_stale() {
    let dir = tmp_dir("daemon-auth");
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    // One frame every 4 s and a 1 s staleness: /healthz must turn 503 between frames.
    let config = format!(
        "[web]\nsnapshots = true\nstale_after_seconds = 1\n[web.basic_auth_users]\nprom = \"{hash}\"\n\
         [[camera]]\nname = \"solo\"\n[camera.source]\nkind = \"pattern\"\nsize = \"64x48\"\nfps = 0.25\n"
    );
    let d = Daemon::spawn(&dir, &config);
    let port = d.port;
    wait_until(
        "healthz 200 with the password",
        Duration::from_secs(60),
        || (get_as(port, "/healthz", "prom") == 200).then_some(()),
    );
    wait_until(
        "healthz 503 between frames",
        Duration::from_secs(30),
        || {
            let r = get(port, "/healthz");
            assert_eq!(r.status, 401, "healthz without a password");
            (get_as(port, "/healthz", "prom") == 503).then_some(())
        },
    );
    for path in ["/metrics", "/api/v1/latest", "/snapshot/luma.png", "/"] {
        let r = get(port, path);
        assert_eq!(r.status, 401, "{path} without a password");
        assert!(r.headers.contains("www-authenticate"), "{}", r.headers);
        assert_eq!(
            get_as(port, path, "mallory"),
            401,
            "{path} as an unknown user"
        );
        assert_eq!(get_as(port, path, "prom"), 200, "{path} with the password");
    }
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0));
}

/// A Prometheus server on loopback scraping `target` every second.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Prometheus {
    fn start(dir: &Path, target: u16) -> Prometheus {
        let port = free_port();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
                 - job_name: edgesight\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
            ),
        )
        .expect("prometheus.yml");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).expect("log"))
            .spawn()
            .expect("start prometheus (scripts/install-deps.sh test installs it)");
        Prometheus { child, port }
    }

    /// The result vector of an instant query, or `None` while Prometheus is not up.
    fn query(&self, q: &str) -> Option<Vec<serde_json::Value>> {
        let encoded: String = q
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let r = request(self.port, "GET", &format!("/api/v1/query?query={encoded}")).ok()?;
        let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
        (v["status"] == "success").then(|| v["data"]["result"].as_array().cloned())?
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn value(series: &serde_json::Value) -> f64 {
    series["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

#[test]
fn a_real_prometheus_scrapes_two_cameras() {
    let dir = tmp_dir("daemon-prometheus");
    let config = format!(
        "{}{}",
        camera("front", "160x120", &[("door", 0, 0, 80, 60)], 64),
        camera(
            "rear",
            "96x64",
            &[("sky", 0, 0, 96, 20), ("road", 0, 40, 96, 24)],
            64
        )
    );
    let d = Daemon::start(&dir, &config);
    let prom = Prometheus::start(&dir, d.port);
    // The first scrape lands about 5 s after Prometheus starts.
    let first = wait_until("a first scrape", Duration::from_secs(30), || {
        prom.query("edgesight_frames_total")
            .filter(|r| r.len() == 2)
    });
    let front_first = first
        .iter()
        .find(|s| s["metric"]["camera"] == "front")
        .map(value)
        .expect("front camera");
    wait_until(
        "edgesight_frames_total to grow",
        Duration::from_secs(20),
        || {
            let now = prom.query(r#"edgesight_frames_total{camera="front"}"#)?;
            (now.len() == 1 && value(&now[0]) > front_first).then_some(())
        },
    );
    let rois = prom.query("edgesight_roi_mean_luma").expect("ROI series");
    let mut names: Vec<(String, String)> = rois
        .iter()
        .map(|s| {
            (
                s["metric"]["camera"].as_str().unwrap_or("").to_string(),
                s["metric"]["roi"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("front".into(), "door".into()),
            ("rear".into(), "road".into()),
            ("rear".into(), "sky".into())
        ]
    );
    for s in &rois {
        let v = value(s);
        assert!((0.0..=255.0).contains(&v), "mean luma {v}");
    }
    let up = prom.query(r#"up{job="edgesight"}"#).expect("up");
    assert_eq!(up.len(), 1);
    assert_eq!(value(&up[0]), 1.0);
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn wrk_on_metrics_neither_fails_nor_costs_frames() {
    let dir = tmp_dir("daemon-wrk");
    let d = Daemon::start(
        &dir,
        &camera("front", "320x240", &[("door", 0, 0, 64, 64)], 64),
    );
    let before = d.metrics();
    let frames = |m: &str| sample(m, r#"edgesight_frames_total{camera="front"}"#).expect("frames");
    let backlog = |m: &str| {
        sample(
            m,
            r#"edgesight_frames_dropped_total{camera="front",reason="publish_backlog"}"#,
        )
        .expect("publish_backlog")
    };
    // Clients that pipeline requests and never read their responses: their connections
    // block on a full socket, and nothing else may.
    let stuck: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
            s.set_write_timeout(Some(Duration::from_millis(200)))
                .expect("timeout");
            let burst = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2000);
            // The server stops reading once its replies back up: a short write is the aim.
            let _ = s.write_all(burst.as_bytes());
            s
        })
        .collect();
    // Loopback only, 8 connections for 3 seconds.
    let out = run_tool(
        Command::new("wrk").args([
            "-t2",
            "-c8",
            "-d3s",
            // A reply slower than this counts as a socket error: generous, so that only
            // a stuck server fails, not a loaded machine.
            "--timeout",
            "10s",
            &format!("http://127.0.0.1:{}/metrics", d.port),
        ]),
        None,
    );
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "wrk: {report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!report.contains("Socket errors"), "{report}");
    assert!(!report.contains("Non-2xx"), "{report}");
    let requests: u64 = report
        .lines()
        .find_map(|l| {
            l.trim()
                .split_once(" requests in ")
                .map(|(n, _)| n.parse().ok())
        })
        .flatten()
        .expect("wrk's request count");
    assert!(requests >= 100, "only {requests} requests:\n{report}");
    let after = d.metrics();
    assert!(
        frames(&after) >= frames(&before) + 30.0,
        "frames stalled under load: {} -> {}",
        frames(&before),
        frames(&after)
    );
    assert_eq!(backlog(&after), 0.0, "frames dropped for the publisher");
    assert_eq!(get(d.port, "/healthz").status, 200);
    drop(stuck);
    let served = sample(
        &after,
        r#"edgesight_http_requests_total{code="200",handler="metrics"}"#,
    )
    .expect("request counter");
    assert!(served >= requests as f64, "{served} < {requests}");
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0));
}

/// Writes `text` as `dir/NAME.toml` and checks that `check-config` and `run` both refuse
/// it within a minute (a check that opens a device must not hang) with exit code 2, the
/// file's name followed by `expect` in their message, and that `run` serves nothing.
fn assert_refused(dir: &Path, name: &str, text: &str, expect: &str) {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).expect("write");
    let file = path.display().to_string();
    for args in [vec!["check-config", &file], vec!["run", "--config", &file]] {
        let (code, err) = edgesight_within(&args, Duration::from_secs(60));
        assert_eq!(code, Some(2), "{name} {args:?}: {err}");
        assert!(
            err.contains(&format!("{file}{expect}")),
            "{name} {args:?}: {err}"
        );
        assert!(!err.contains("serving"), "{name} was served: {err}");
    }
}

/// Runs `edgesight ARGS` and returns its exit code and stderr.
fn edgesight(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(bin())
        .args(args)
        .env("POCL_CACHE_DIR", pocl_cache())
        .output()
        .expect("run edgesight");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn bad_configs_are_refused_before_anything_starts() {
    let dir = tmp_dir("daemon-bad-configs");
    let good = camera("front", "320x240", &[("door", 0, 0, 320, 240)], 64);
    let port = free_port().to_string();
    for (name, text, expect) in [
        (
            "unknown-key",
            good.replace("h = 240", "heigth = 240"),
            ":14:1: camera.roi.heigth: unknown field `heigth`",
        ),
        (
            "wrong-type",
            good.replace("fps = 30", "fps = \"fast\""),
            ":6:7: camera.source.fps: invalid type: string \"fast\", expected f64",
        ),
        (
            "roi-outside",
            good.replace("w = 320", "w = 400"),
            ":9:1: camera.roi: ROI 'door' (0,0 400x240) lies outside the 320x240 frame",
        ),
        (
            "no-device",
            "[[camera]]\nname = \"c\"\n[camera.source]\nkind = \"v4l2\"\n".into(),
            ":3:1: camera.source.device: missing",
        ),
        (
            "snapshots-public",
            format!("[web]\nlisten_address = \"0.0.0.0:{port}\"\nsnapshots = true\n"),
            ":3:13: web.snapshots: snapshots and the status page show camera pictures",
        ),
        (
            "unknown-tuning",
            format!("[opencl]\ntuning = \"valhall\"\n{good}"),
            ":2:10: opencl.tuning: unknown tuning 'valhall' (expected auto, gpu, cpu or mali)",
        ),
    ] {
        assert_refused(&dir, name, &text, expect);
    }
    let (code, err) = edgesight(&[
        "run",
        "--listen",
        "0.0.0.0:1",
        "--source",
        "pattern:64x48@1",
        "--config",
        "/nonexistent.toml",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/nonexistent.toml"), "{err}");
    let (code, err) = edgesight(&["run", "--source", "camera:/dev/video0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown kind 'camera'"), "{err}");
}

#[test]
fn an_absent_camera_is_waited_for_and_a_failing_one_restarts_alone() {
    let dir = tmp_dir("daemon-camera-failures");
    let images = dir.join("images");
    std::fs::create_dir_all(&images).expect("mkdir");
    for (i, name) in ["a.pgm", "b.pgm"].iter().enumerate() {
        std::fs::write(images.join(name), pgm(64, 48, i * 40)).expect("write an image");
    }
    let config = format!(
        "[[camera]]\nname = \"absent\"\n[camera.source]\nkind = \"v4l2\"\n\
         device = \"/dev/video-edgesight-none\"\n\
         [[camera]]\nname = \"replay\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\nfps = 50\n\
         [[camera]]\nname = \"steady\"\n[camera.source]\nkind = \"pattern\"\nsize = \"64x48\"\nfps = 50\n",
        images.display()
    );
    // `check-config` takes an absent device: the daemon waits for it.
    let path = dir.join("check.toml");
    std::fs::write(&path, &config).expect("write");
    let (code, err) = edgesight(&["check-config", &path.display().to_string()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("camera 'absent': /dev/video-edgesight-none is not present now"),
        "{err}"
    );

    let d = Daemon::spawn(&dir, &config);
    let frames = |m: &str, cam: &str| {
        sample(m, &format!("edgesight_frames_total{{camera=\"{cam}\"}}")).unwrap_or(0.0)
    };
    let up = |m: &str, cam: &str| sample(m, &format!("edgesight_camera_up{{camera=\"{cam}\"}}"));
    let restarts = |m: &str, cam: &str| {
        sample(
            m,
            &format!("edgesight_camera_restarts_total{{camera=\"{cam}\"}}"),
        )
        .unwrap_or(0.0)
    };
    let m = wait_until(
        "frames from both other cameras",
        Duration::from_secs(60),
        || {
            let m = String::from_utf8(request(d.port, "GET", "/metrics").ok()?.body).ok()?;
            (frames(&m, "replay") >= 3.0 && frames(&m, "steady") >= 3.0).then_some(m)
        },
    );
    assert_eq!(up(&m, "absent"), Some(0.0), "{m}");
    assert_eq!(up(&m, "steady"), Some(1.0));
    assert_eq!(
        restarts(&m, "absent"),
        0.0,
        "absent is waiting, not failing"
    );
    let health = get(d.port, "/healthz");
    assert_eq!(health.status, 503);
    let body = String::from_utf8_lossy(&health.body).to_string();
    assert!(
        body.contains("absent") && !body.contains("steady"),
        "{body}"
    );

    // Every image of the replay directory turns into garbage (one bad image is only
    // skipped): that camera fails and is opened again with a delay, alone; the daemon and
    // the other cameras go on.
    for name in ["a.pgm", "b.pgm"] {
        std::fs::write(images.join(name), b"P5\n64 48\n255\nshort").expect("corrupt");
    }
    let m = wait_until("the replay camera to fail", Duration::from_secs(20), || {
        let m = get_text(d.port, "/metrics");
        (restarts(&m, "replay") >= 1.0).then_some(m)
    });
    let bad_images = "edgesight_frames_dropped_total{camera=\"replay\",reason=\"bad_image\"}";
    assert!(sample(&m, bad_images).unwrap_or(0.0) >= 1.0, "{m}");
    let steady_before = frames(&m, "steady");
    wait_until(
        "the steady camera to go on while the replay one fails",
        Duration::from_secs(30),
        || (frames(&d.metrics(), "steady") >= steady_before + 10.0).then_some(()),
    );
    // Opened again after 1 s and failed again on the same image...
    wait_until(
        "the replay camera to be reopened and fail again",
        Duration::from_secs(30),
        || (restarts(&d.metrics(), "replay") >= 2.0).then_some(()),
    );
    let replay_frames = frames(&d.metrics(), "replay");
    std::fs::write(images.join("b.pgm"), pgm(64, 48, 99)).expect("repair");
    wait_until(
        "the replay camera to come back",
        Duration::from_secs(60),
        || {
            let m = get_text(d.port, "/metrics");
            (frames(&m, "replay") >= replay_frames + 5.0 && up(&m, "replay") == Some(1.0))
                .then_some(())
        },
    );
    let log = d.log();
    assert!(d.child.id() > 0);
    // Logged once per distinct reason, not once per attempt.
    let failed = log.matches("camera failed").count();
    assert!((1..=2).contains(&failed), "{failed} failure lines:\n{log}");
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0), "{log}");
}

#[test]
fn deploy_files_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let deploy = root.join("deploy");
    let (code, err) = edgesight(&[
        "check-config",
        &deploy.join("edgesight.toml").display().to_string(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    for args in [
        vec!["check", "rules", "alerts.yml"],
        vec!["test", "rules", "alerts.test.yml"],
        vec!["check", "config", "prometheus.yml"],
    ] {
        let out = run_tool(
            Command::new("promtool").args(&args).current_dir(&deploy),
            None,
        );
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn tls_serves_https_only() {
    let dir = tmp_dir("daemon-tls");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    self_signed(&cert, &key, "127.0.0.1");
    let tls = format!(
        "[web]\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
        cert.display(),
        key.display()
    );
    // TLS encrypts pictures beyond loopback but does not decide who sees them: it takes
    // basic auth (checked, not bound).
    let public = dir.join("public.toml");
    let public_text = format!("{tls}listen_address = \"0.0.0.0:8947\"\nsnapshots = true\n");
    std::fs::write(&public, &public_text).expect("write");
    let (code, err) = edgesight(&["check-config", &public.display().to_string()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("they need basic_auth_users"), "{err}");
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    let users = format!("[web.basic_auth_users]\nprom = \"{hash}\"\n");
    std::fs::write(&public, format!("{public_text}{users}")).expect("write");
    let (code, err) = edgesight(&["check-config", &public.display().to_string()]);
    assert_eq!(code, Some(0), "{err}");

    let d = Daemon::spawn(&dir, &format!("{tls}{}", camera("c", "64x48", &[], 64)));
    let port = d.port;
    wait_until("healthz over https", Duration::from_secs(60), || {
        (https_status(port, "/healthz", &cert) == "200").then_some(())
    });
    assert_eq!(https_status(port, "/metrics", &cert), "200");
    // Plain HTTP gets no HTTP answer from a TLS port.
    assert!(request(port, "GET", "/healthz").is_err());
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0));
}

/// The status code curl gets for `path` over HTTPS trusting only `ca` ("000" when the
/// handshake or the connection fails).
fn https_status(port: u16, path: &str, ca: &Path) -> String {
    let out = run_tool(
        Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "5",
            ])
            .arg("--cacert")
            .arg(ca)
            .arg(format!("https://127.0.0.1:{port}{path}")),
        None,
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A self-signed certificate for 127.0.0.1 and its key, written to `cert` and `key`.
fn self_signed(cert: &Path, key: &Path, name: &str) {
    let out = run_tool(
        Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args([
                "-subj",
                &format!("/CN={name}"),
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(key)
            .arg("-out")
            .arg(cert),
        None,
    );
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Resilience round 2, item 10: a certificate renewed in place, then SIGHUP: the log said
/// "configuration reloaded" and the old certificate was still served. New handshakes get
/// the renewed one; files that no longer read keep the one served, and the log says so.
#[test]
fn round2_10_a_certificate_renewed_in_place_is_served_after_sighup() {
    let dir = tmp_dir("daemon-tls-renewed");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    self_signed(&cert, &key, "first");
    let (first, renewed) = (dir.join("first.pem"), dir.join("renewed.pem"));
    std::fs::copy(&cert, &first).expect("copy");
    self_signed(&renewed, &dir.join("renewed-key.pem"), "renewed");
    let tls = format!(
        "[web]\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
        cert.display(),
        key.display()
    );
    let d = Daemon::spawn(&dir, &format!("{tls}{}", camera("c", "64x48", &[], 64)));
    // Whether a handshake trusting only `ca` succeeds.
    let trusted_by = |ca: &Path| https_status(d.port, "/healthz", ca) == "200";
    wait_until("the first certificate", Duration::from_secs(60), || {
        trusted_by(&first).then_some(())
    });
    // Renewed in place: the certificate and key files rewritten.
    std::fs::copy(&renewed, &cert).expect("renew the certificate");
    std::fs::copy(dir.join("renewed-key.pem"), &key).expect("renew the key");
    d.signal(libc::SIGHUP);
    wait_until("the renewed certificate", Duration::from_secs(30), || {
        trusted_by(&renewed).then_some(())
    });
    assert!(
        !trusted_by(&first),
        "the old certificate is no longer served"
    );
    assert!(
        d.log()
            .contains("SIGHUP: TLS certificate and key read again"),
        "{}",
        d.log()
    );
    // A broken renewal keeps the certificate served.
    std::fs::write(&cert, "not a certificate\n").expect("break the certificate");
    d.signal(libc::SIGHUP);
    wait_until("the refused certificate", Duration::from_secs(30), || {
        d.log()
            .contains("SIGHUP: keeping the TLS certificate served")
            .then_some(())
    });
    assert!(
        trusted_by(&renewed),
        "the renewed certificate is still served"
    );
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0));
}

/// Runs the command under an open-file limit of `soft` (and `hard`).
fn with_open_files(command: &mut Command, soft: u64, hard: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires; the struct lives
    // across the call.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: soft as libc::rlim_t,
                rlim_max: hard as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Resilience round 2, item 11: `max_connections = 4096` under `ulimit -n 1024` flooded the
/// log with "accept: Too many open files", and under a limit of 24 every scrape failed.
/// The soft limit is raised to the hard one, a `max_connections` beyond it is served as
/// far as it fits (and the log says so), and a limit that leaves no room refuses the start.
#[test]
fn round2_11_max_connections_fits_the_open_file_limit() {
    let dir = tmp_dir("daemon-open-files");
    let config = format!(
        "[web]\nmax_connections = 4096\n{}",
        camera("c", "64x48", &[], 64)
    );
    // The soft limit is raised to the hard one: 4096 fit under a hard limit of 8192.
    let d = Daemon::spawn_with(&dir, &config, |c| with_open_files(c, 1024, 8192));
    wait_until("/healthz", Duration::from_secs(60), || {
        request(d.port, "GET", "/healthz")
            .ok()
            .filter(|r| r.status == 200)
    });
    assert!(!d.log().contains("does not fit"), "{}", d.log());
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.child.id())).expect("limits");
    let files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("the open-file limit");
    assert!(
        files.split_whitespace().filter(|w| *w == "8192").count() == 2,
        "{files}"
    );
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0));

    // A hard limit of 1024: 1024 - 32 - 16 connections, said once.
    let d = Daemon::spawn_with(&dir, &config, |c| with_open_files(c, 1024, 1024));
    wait_until("/healthz", Duration::from_secs(60), || {
        request(d.port, "GET", "/healthz")
            .ok()
            .filter(|r| r.status == 200)
    });
    assert!(
        d.log().contains(
            "web.max_connections = 4096 does not fit the open-file limit: serving at most 976 connections"
        ),
        "{}",
        d.log()
    );
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0));

    // A limit of 24 leaves no room: refused at start, saying why.
    let mut d = Daemon::spawn_with(&dir, &config, |c| with_open_files(c, 24, 24));
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = d.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still running under 24 open files"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_ne!(status.code(), Some(0));
    assert!(
        d.log()
            .contains("web.max_connections: the open-file limit (24) leaves no descriptor"),
        "{}",
        d.log()
    );
}

#[test]
fn systemd_hears_ready_watchdog_and_stopping() {
    const WATCHDOG: Duration = Duration::from_secs(4);
    use std::os::unix::net::UnixDatagram;
    let dir = tmp_dir("daemon-notify");
    let socket_path = dir.join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind the notify socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let port = free_port();
    let started = Instant::now();
    let child = Command::new(bin())
        .args(["run", "--source", "pattern:64x48@30"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("POCL_CACHE_DIR", pocl_cache())
        .env("NOTIFY_SOCKET", &socket_path)
        // A 4 s watchdog: long enough that a loaded machine's scheduling delays stay
        // well inside it, short enough to see several pings.
        .env("WATCHDOG_USEC", WATCHDOG.as_micros().to_string())
        .stderr(Stdio::null())
        .spawn()
        .expect("start");
    let d = Daemon {
        child,
        port,
        log: dir.join("none"),
    };
    let mut buf = [0u8; 256];
    let mut next = || -> String {
        // A signal meant for the test process (another test's child ending) may cut a
        // wait short; only a real error or the timeout counts.
        let n = loop {
            match socket.recv(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other.expect("a notification"),
            }
        };
        String::from_utf8_lossy(&buf[..n]).trim().to_string()
    };
    assert_eq!(next(), "READY=1");
    // READY comes only once a frame is out: /healthz agrees at once.
    assert_eq!(get(port, "/healthz").status, 200);
    let ready_at = started.elapsed();
    let mut pings = 0;
    let mut last_ping = Instant::now();
    let watch_start = Instant::now();
    while watch_start.elapsed() < 2 * WATCHDOG {
        assert_eq!(next(), "WATCHDOG=1");
        // systemd restarts the service when a whole period passes without one.
        assert!(
            last_ping.elapsed() < WATCHDOG,
            "{:?} between pings",
            last_ping.elapsed()
        );
        last_ping = Instant::now();
        pings += 1;
    }
    // At most one a quarter period (the daemon's rule): no flood. How few come is the
    // machine's scheduling; the gap above is systemd's contract.
    assert!(pings <= 9, "{pings} pings in {:?}", 2 * WATCHDOG);
    d.signal(libc::SIGTERM);
    let mut last = next();
    while last == "WATCHDOG=1" {
        last = next();
    }
    assert_eq!(last, "STOPPING=1", "after READY at {ready_at:?}");
    let (status, _) = d.terminate_after_signal();
    assert_eq!(status.code(), Some(0));
}

/// Each thread of `pid` as (name, nice value), from /proc.
fn threads_nice(pid: u32) -> Vec<(String, i64)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc/PID/task");
    tasks
        .filter_map(|t| {
            let dir = t.ok()?.path();
            let name = std::fs::read_to_string(dir.join("comm")).ok()?;
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            // Fields after the ')' that ends the name start at field 3; nice is field 19.
            let nice = stat.rsplit_once(')')?.1.split_whitespace().nth(16)?;
            Some((name.trim().to_string(), nice.parse().ok()?))
        })
        .collect()
}

/// A flood of wrong passwords for a real user (the reporter's `wrk` with a bad
/// `Authorization` header, here 32 connections) ran bcrypt on every request: the camera
/// fell from 30 fps to 0-2 fps and blocking threads grew from 9 to 62. Frames must keep
/// their rate, the HTTP side must stay below the cameras' priority, and an authorized
/// scrape must get through.
#[test]
fn r7_a_bad_password_flood_neither_stops_frames_nor_locks_out_the_scraper() {
    let dir = tmp_dir("daemon-bcrypt-flood");
    // The cost people use (htpasswd -C 10), so that each check costs what it does live.
    let hash = bcrypt::hash("s3cret", 10).expect("bcrypt");
    let config = format!(
        "[web.basic_auth_users]\nprom = \"{hash}\"\n{}",
        camera("front", "320x240", &[], 64)
    );
    let d = Daemon::spawn(&dir, &config);
    let port = d.port;
    wait_until(
        "/healthz with the password",
        Duration::from_secs(60),
        || (get_as(port, "/healthz", "prom") == 200).then_some(()),
    );
    let scrape = || {
        let token =
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "prom:s3cret");
        // The scraper is another host than the flood's, as Prometheus is: one peer holds
        // only its share of the connection slots, and the flood takes all of its own.
        let s = connect_from("127.0.0.2", port).expect("connect");
        let auth = format!("Authorization: Basic {token}\r\n");
        let r = exchange(s, "GET", "/metrics", &auth, Duration::from_secs(10))
            .expect("an authorized scrape");
        let raw = String::from_utf8_lossy(&r.body);
        assert_eq!(r.status, 200, "{}", &raw[..raw.len().min(200)]);
        sample(&raw, r#"edgesight_frames_total{camera="front"}"#).expect("frames")
    };
    let bad = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "prom:wrong");
    let wrk = Command::new("wrk")
        .args(["-t1", "-c32", "-d14s", "--timeout", "5s", "-H"])
        .arg(format!("Authorization: Basic {bad}"))
        .arg(format!("http://127.0.0.1:{port}/metrics"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("start wrk");
    std::thread::sleep(Duration::from_secs(2));
    let (start, first) = (Instant::now(), scrape());
    std::thread::sleep(Duration::from_secs(10));
    let (took, last) = (start.elapsed(), scrape());
    let threads = threads_nice(d.child.id());
    let out = wrk.wait_with_output().expect("wrk");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("Non-2xx"),
        "the flood was not refused:\n{report}"
    );
    // 30 fps asked; half of it under the flood on a loaded 2-core machine is the floor.
    let rate = (last - first) / took.as_secs_f64();
    eprintln!("{rate:.1} fps under the flood");
    assert!(rate >= 15.0, "{rate:.1} fps under the flood\n{report}");
    // tokio's workers, its blocking pool and bcrypt: a bounded set, all below the cameras.
    assert!(threads.len() <= 16, "{threads:?}");
    for (name, nice) in &threads {
        let expect = match name.as_str() {
            n if n.starts_with("es-tokio") || n == "es-bcrypt" => 10,
            n if n.starts_with("es-cam-") || n.starts_with("es-pub-") => 0,
            _ => continue,
        };
        assert_eq!(*nice, expect, "{name}: {threads:?}");
    }
    assert!(threads.iter().any(|(n, _)| n == "es-bcrypt"), "{threads:?}");
    // The flood's own address gets in again once its connections are gone (until then
    // they fill its share of the slots: answers in flight keep theirs).
    wait_until(
        "an authorized scrape from the flood's address",
        Duration::from_secs(20),
        || (get_as(port, "/metrics", "prom") == 200).then_some(()),
    );
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0));
}

/// Whether the server closed `s` (EOF or reset) within `limit`.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut byte = [0u8; 1];
    match s.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// Whether `s` is still open and silent now.
fn still_open(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let open =
        matches!((&mut &*s).read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    s.set_nonblocking(false).unwrap();
    open
}

/// A GET of `/metrics` from the loopback address `from`.
fn scrape_from(from: &str, port: u16) -> std::io::Result<u16> {
    let s = connect_from(from, port)?;
    exchange(s, "GET", "/metrics", "", Duration::from_secs(20)).map(|r| r.status)
}

/// 64 idle connections locked every other client out for up to 10 s: a slowloris that
/// reopened them let a scrape through 7 times in 30 s. Now one peer holds at most a
/// quarter of the slots, and an idle connection's slot goes to a newcomer: a scrape from
/// another peer gets through while the idle connections are still open, and those are
/// closed after the head timeout.
#[test]
fn r8_idle_connections_from_one_peer_leave_room_for_a_scraper() {
    let dir = tmp_dir("daemon-slots");
    let d = Daemon::start(
        &dir,
        &format!(
            "[web]\nmax_connections = 8\n{}",
            camera("c", "64x48", &[], 64)
        ),
    );
    let mut idle: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(("127.0.0.1", d.port)).expect("connect"))
        .collect();
    // Let the server accept them all before the scrape comes.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(scrape_from("127.0.0.2", d.port).expect("scrape"), 200);
    let open = idle.iter().filter(|s| still_open(s)).count();
    assert!(
        open >= 1,
        "the scrape got through only once the idle connections were closed"
    );
    for (i, s) in idle.iter_mut().enumerate() {
        assert!(
            closed_within(s, Duration::from_secs(30)),
            "idle connection {i} still open"
        );
    }
    // The one peer holds its share again and is served as before.
    assert_eq!(get(d.port, "/healthz").status, 200);
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn listen_on_port_0_logs_the_port_bound() {
    let dir = tmp_dir("daemon-port-0");
    let path = dir.join("edgesight.toml");
    std::fs::write(&path, camera("c", "64x48", &[], 64)).expect("write the config");
    let log = dir.join("edgesight.log");
    let child = Command::new(bin())
        .args(["run", "--config"])
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .env("POCL_CACHE_DIR", pocl_cache())
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
    wait_until(
        "/healthz on the logged port",
        Duration::from_secs(60),
        || {
            request(port, "GET", "/healthz")
                .ok()
                .filter(|r| r.status == 200)
        },
    );
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0));
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
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0));
}

/// `check-config` said "ok" to garbage TLS files and to bcrypt hashes that `run` then
/// refused without a FILE:LINE. Both now refuse them alike, at the key's line.
#[test]
fn r12_check_config_and_run_refuse_the_same_web_settings() {
    let dir = tmp_dir("daemon-web-checks");
    let (garbage, cert, key) = (
        dir.join("garbage.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&garbage, "not PEM\n").expect("write");
    let out = run_tool(
        Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
            .args(["-subj", "/CN=127.0.0.1", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert),
        None,
    );
    assert!(out.status.success(), "openssl");
    let hash = bcrypt::hash("pw", 4).expect("bcrypt");
    let tail = &hash[7..];
    let users = |h: &str| format!("[web.basic_auth_users]\nprom = \"{h}\"\n");
    let tls = |c: &Path, k: &Path| {
        format!(
            "[web]\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
            c.display(),
            k.display()
        )
    };
    let garbage_name = garbage.display().to_string();
    for (name, text, expect) in [
        (
            "garbage-key",
            tls(&cert, &garbage),
            format!(":3:16: web.tls_key_file: {garbage_name}: no PEM private key in it"),
        ),
        (
            "garbage-cert",
            tls(&garbage, &key),
            format!(":2:17: web.tls_cert_file: {garbage_name}: no PEM certificate in it"),
        ),
        (
            "cost-31",
            users(&format!("$2y$31${tail}")),
            ":2:8: web.basic_auth_users.prom: user 'prom': bcrypt cost 31 is too slow to serve"
                .to_string(),
        ),
        (
            "cost-99",
            users(&format!("$2y$99${tail}")),
            ":2:8: web.basic_auth_users.prom: user 'prom': bcrypt cost 99 is too slow to serve"
                .to_string(),
        ),
        (
            "bad-characters",
            // The salt's first character made one bcrypt's base64 lacks: replacing its
            // digits left a hash that had none valid, and the config passed.
            users(&format!("$2y$10$#{}", &tail[1..])),
            ":2:8: web.basic_auth_users.prom: user 'prom': not a bcrypt hash".to_string(),
        ),
        (
            "tls-without-auth",
            format!(
                "{}listen_address = \"0.0.0.0:1\"\nsnapshots = true\n",
                tls(&cert, &key)
            ),
            ":5:13: web.snapshots: snapshots and the status page show camera pictures: \
             listening on 0.0.0.0:1, beyond loopback, they need basic_auth_users"
                .to_string(),
        ),
    ] {
        assert_refused(&dir, name, &text, &expect);
    }
}

/// Runs `edgesight ARGS` to its end, or fails the test once `limit` has passed (a command
/// that blocks is killed rather than left to hang the test run).
fn edgesight_within(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    // A file of its own per call: tests run this at the same time.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = tmp_dir(&format!("within-{}-{call}", std::process::id()));
    let err_path = dir.join("stderr");
    let mut child = Command::new(bin())
        .args(args)
        .env("POCL_CACHE_DIR", pocl_cache())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("run edgesight");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("edgesight {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    (status.code(), err)
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Issue "Resilience and security", item 3: a config path that is a FIFO blocked
/// `check-config` and `run` forever, and on SIGHUP the signal loop, so that SIGTERM went
/// unheard until someone wrote to the FIFO.
#[test]
fn r3_a_fifo_or_device_as_config_is_refused_at_once() {
    let dir = tmp_dir("daemon-fifo-config");
    let fifo = dir.join("fifo.toml");
    mkfifo(&fifo);
    let fifo_name = fifo.display().to_string();
    let limit = Duration::from_secs(30);
    for args in [
        vec!["check-config", &fifo_name],
        vec!["run", "--config", &fifo_name],
    ] {
        let (code, err) = edgesight_within(&args, limit);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "{fifo_name}:0:0: (file): not a regular file but a FIFO"
            )),
            "{args:?}: {err}"
        );
    }
    let (code, err) = edgesight_within(&["check-config", "/dev/zero"], limit);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("/dev/zero:0:0: (file): not a regular file but a character device"),
        "{err}"
    );

    // The running daemon's config turns into a FIFO: the reload is refused, and SIGTERM
    // still stops the daemon.
    let d = Daemon::start(&dir, &camera("front", "64x48", &[], 64));
    mkfifo(&dir.join("edgesight.toml"));
    d.signal(libc::SIGHUP);
    wait_until("the refused reload", Duration::from_secs(20), || {
        sample(
            &d.metrics(),
            r#"edgesight_config_reloads_total{result="failure"}"#,
        )
        .filter(|v| *v == 1.0)
    });
    assert!(
        d.log().contains("not a regular file but a FIFO"),
        "{}",
        d.log()
    );
    let log = d.log();
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0), "{log}");
}

/// Resilience round 2, item 1: a raw replay path that is a FIFO passed `check-config`,
/// then blocked the camera thread in open(2) until a writer came (READY never sent,
/// SIGTERM unheard), and `capture --timeout 2` hung on it. It is refused at once now,
/// by `check-config`, `run` and `capture`.
#[test]
fn round2_1_a_raw_replay_path_that_is_a_fifo_is_refused_at_once() {
    let dir = tmp_dir("daemon-fifo-replay");
    let fifo = dir.join("frames.raw");
    mkfifo(&fifo);
    let config = dir.join("edgesight.toml");
    std::fs::write(
        &config,
        format!(
            "[[camera]]\nname = \"c\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\n\
             size = \"64x48\"\nformat = \"grey\"\nfps = 10\n",
            fifo.display()
        ),
    )
    .expect("config");
    let config = config.display().to_string();
    let limit = Duration::from_secs(30);
    let refusal = format!(
        "{}: not a directory of images or a regular file but a FIFO",
        fifo.display()
    );
    for args in [
        vec!["check-config", &config],
        vec!["run", "--config", &config],
    ] {
        let (code, err) = edgesight_within(&args, limit);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(&refusal), "{args:?}: {err}");
    }
    let spec = format!("replay:{}:64x48:grey@10", fifo.display());
    let out = dir.join("out").display().to_string();
    let (code, err) = edgesight_within(&["capture", &spec, "--timeout", "2", "--out", &out], limit);
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "replay {}: not a regular file but a FIFO",
            fifo.display()
        )),
        "{err}"
    );
}

/// Issue "Resilience and security", item 12: `check-config` said "ok" to configs that
/// `run` then refused without a position. Both now refuse them alike, at the key.
#[test]
fn r12_check_config_refuses_what_run_refuses() {
    let dir = tmp_dir("daemon-config-parity");
    let source = |fields: &str| format!("[[camera]]\nname = \"c\"\n[camera.source]\n{fields}");
    for (name, text, expect) in [
        (
            "huge-pattern",
            source("kind = \"pattern\"\nsize = \"100000x100000\"\n"),
            ":5:8: camera.source.size: frame size 100000x100000 is too large (at most 16384 on a side)",
        ),
        (
            "tiny-rate",
            source("kind = \"pattern\"\nfps = 1e-300\n"),
            ":5:7: camera.source.fps: frame rate 1e-300 is not a number from 0.01 to 1000",
        ),
        (
            "v4l2-null",
            source("kind = \"v4l2\"\ndevice = \"/dev/null\"\n"),
            ":5:10: camera.source.device: /dev/null is not a V4L2 device: a character device of major 1, where V4L2's are 81",
        ),
        (
            "no-opencl-device",
            "[[camera]]\nname = \"c\"\nopencl_device = \"99:99\"\n[camera.source]\nkind = \"pattern\"\n"
                .to_string(),
            ":3:17: camera.opencl_device: camera 'c': no OpenCL device matches '99:99'; available: ",
        ),
    ] {
        assert_refused(&dir, name, &text, expect);
    }
    // The same check for a source given on the command line.
    let (code, err) = edgesight_within(
        &["run", "--source", "v4l2:/dev/null"],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("command line --source: source: /dev/null is not a V4L2 device"),
        "{err}"
    );
}

/// Issue "Resilience and security", item 12: 100 cameras took 768 MB and 206 threads
/// without a word; above 16, `check-config` and `run`'s log say what each one costs.
#[test]
fn r12_many_cameras_draw_a_warning() {
    let dir = tmp_dir("daemon-many-cameras");
    let config: String = (0..17)
        .map(|i| camera(&format!("c{i}"), "32x24", &[], 64))
        .collect();
    let path = dir.join("many.toml");
    std::fs::write(&path, &config).expect("write");
    let warning = "17 cameras: each one is two threads (capture and publisher)";
    let (code, err) = edgesight(&["check-config", &path.display().to_string()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!("{}: warning: {warning}", path.display())),
        "{err}"
    );
    let d = Daemon::spawn(&dir, &config);
    wait_until("the warning in the log", Duration::from_secs(60), || {
        d.log().contains(warning).then_some(())
    });
    // Cameras that are still building their pipelines stop once that is done.
    let status = exit_within_after_sigterm(d);
    assert_eq!(status.code(), Some(0));
}

fn exit_within_after_sigterm(d: Daemon) -> std::process::ExitStatus {
    d.signal(libc::SIGTERM);
    exit_within(d, Duration::from_secs(60))
}

/// The signals `run` masks, as `/proc/PID/status` shows a mask (`SigBlk`, `SigIgn`).
fn signal_mask(pid: u32, field: &str) -> Option<u64> {
    u64::from_str_radix(&proc_status(pid, field)?, 16).ok()
}

/// Issue "Resilience and security": a SIGHUP in the first milliseconds after start
/// killed the process (the default action), as the signals were blocked only after the
/// config was read.
#[test]
fn sighup_right_after_start_is_kept_for_the_daemon() {
    let dir = tmp_dir("daemon-early-sighup");
    let path = dir.join("edgesight.toml");
    std::fs::write(&path, camera("c", "32x24", &[], 64)).expect("write");
    let sigpipe = 1u64 << (libc::SIGPIPE - 1);
    for round in 0..10 {
        let log = dir.join(format!("round-{round}.log"));
        let port = free_port();
        let child = Command::new(bin())
            .args(["run", "--config"])
            .arg(&path)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("POCL_CACHE_DIR", pocl_cache())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start edgesight");
        let d = Daemon { child, port, log };
        // The earliest a signal can be aimed: the Rust runtime has started, which sets
        // SIGPIPE to ignored before it calls main. (Before that the dynamic loader runs,
        // and no program can handle a signal yet.)
        let pid = d.child.id();
        let start = Instant::now();
        while signal_mask(pid, "SigIgn").is_none_or(|m| m & sigpipe == 0) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "round {round}: no start"
            );
            std::thread::yield_now();
        }
        for _ in 0..3 {
            d.signal(libc::SIGHUP);
        }
        // Handled once the daemon runs (it checks the config and opens OpenCL first).
        let status = exit_within_after_sigterm(d);
        assert_eq!(
            status.code(),
            Some(0),
            "round {round}: {status:?}\n{}",
            std::fs::read_to_string(dir.join(format!("round-{round}.log"))).unwrap_or_default()
        );
    }
}

/// The exit status of `d`, which must end within `limit`.
fn exit_within(mut d: Daemon, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = d.child.try_wait().expect("wait") {
            return status;
        }
        assert!(
            start.elapsed() < limit,
            "no exit within {limit:?}\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The camera-health kinds, in the order the detectors try them.
const TAMPER_KINDS: [&str; 6] = [
    "overexposed",
    "underexposed",
    "covered",
    "frozen",
    "moved",
    "defocus",
];

/// `/api/v1/latest` of the daemon's camera, once it has published a frame.
fn latest_frame(port: u16) -> Option<serde_json::Value> {
    let r = request(port, "GET", "/api/v1/latest").ok()?;
    (r.status == 200).then(|| serde_json::from_slice(&r.body).expect("JSON"))
}

/// `edgesight_camera_tamper` and `edgesight_camera_tamper_events_total` of each kind.
fn tamper_series(m: &str, camera: &str) -> Vec<(&'static str, Option<f64>, Option<f64>)> {
    TAMPER_KINDS
        .iter()
        .map(|kind| {
            let labels = format!("{{camera=\"{camera}\",kind=\"{kind}\"}}");
            (
                *kind,
                sample(m, &format!("edgesight_camera_tamper{labels}")),
                sample(m, &format!("edgesight_camera_tamper_events_total{labels}")),
            )
        })
        .collect()
}

/// The log lines that contain `what`.
fn log_lines(log: &str, what: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(what))
        .map(str::to_string)
        .collect()
}

/// A camera's health on the test pattern: learned over half a second, then ok on every
/// frame: the pattern's background stands still and its moving disk and bar, and its
/// noise, are the kind of change the detectors must take in their stride.
#[test]
fn camera_health_learns_the_pattern_and_raises_no_tamper() {
    let dir = tmp_dir("daemon-health-pattern");
    // A cold POCL cache builds the kernels on the first frame, seconds during which the
    // test pattern's clock runs on: the half second of learning would pass unseen. One
    // `process` of a frame of the same size fills the cache.
    let still = dir.join("still.pgm");
    std::fs::write(&still, pgm(320, 240, 0)).expect("write an image");
    let (code, err) = edgesight(&[
        "process",
        &still.display().to_string(),
        "--out",
        &dir.join("process").display().to_string(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let config = format!(
        "{}[camera.health]\nlearning_seconds = 0.5\n",
        camera("front", "320x240", &[], 64)
    );
    let d = Daemon::spawn(&dir, &config);

    // From the first frame on: learning (no learned numbers yet), then ok.
    let mut learning_frames = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let learned = loop {
        assert!(Instant::now() < deadline, "never learned:\n{}", d.log());
        let Some(l) = latest_frame(d.port) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let h = &l["health"];
        if h["state"] != "learning" {
            break l;
        }
        assert_eq!(h["learning"], true, "{l}");
        assert!(
            h["sharpness"].is_null() && h["scene_change"].is_null(),
            "{h}"
        );
        learning_frames.push(l["sequence"].as_u64().expect("sequence"));
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        !learning_frames.is_empty(),
        "the first frame seen was past learning: {learned}"
    );
    let check_ok = |l: &serde_json::Value| {
        let h = &l["health"];
        assert_eq!(h["state"], "ok", "{l}");
        assert_eq!(h["learning"], false, "{h}");
        let sharpness = h["sharpness"].as_f64().expect("sharpness once learned");
        assert!((sharpness - 1.0).abs() <= 0.2, "sharpness {sharpness}: {h}");
        let change = h["scene_change"]
            .as_f64()
            .expect("scene change once learned");
        assert!(change < 0.3, "scene change {change}: {h}");
        for kind in TAMPER_KINDS {
            assert_eq!(h["kinds"][kind], "ok", "{kind}: {h}");
        }
    };
    check_ok(&learned);

    // Ok on every frame for 3 s more (and at least 60 frames, however slow the machine).
    let first = learned["sequence"].as_u64().expect("sequence");
    let since = Instant::now();
    let deadline = since + Duration::from_secs(60);
    loop {
        let l = latest_frame(d.port).expect("a frame");
        check_ok(&l);
        let sequence = l["sequence"].as_u64().expect("sequence");
        if since.elapsed() >= Duration::from_secs(3) && sequence >= first + 60 {
            break;
        }
        assert!(Instant::now() < deadline, "frames stopped at {sequence}");
        std::thread::sleep(Duration::from_millis(50));
    }

    let m = d.metrics();
    assert_eq!(
        sample(&m, r#"edgesight_camera_health_learning{camera="front"}"#),
        Some(0.0),
        "{m}"
    );
    for (kind, tamper, events) in tamper_series(&m, "front") {
        assert_eq!((tamper, events), (Some(0.0), Some(0.0)), "{kind}:\n{m}");
    }
    let sharpness = sample(&m, r#"edgesight_camera_sharpness{camera="front"}"#);
    assert!(
        sharpness.is_some_and(|s| (s - 1.0).abs() <= 0.2),
        "sharpness {sharpness:?}"
    );
    let change = sample(&m, r#"edgesight_camera_scene_change{camera="front"}"#);
    assert!(change.is_some_and(|c| c < 0.3), "scene change {change:?}");

    let log = d.log();
    let learned_lines = log_lines(&log, "camera health: baseline learned");
    assert_eq!(learned_lines.len(), 1, "{log}");
    assert!(learned_lines[0].contains("camera=front frame="), "{log}");
    assert!(
        log_lines(&log, "camera health: tampered").is_empty(),
        "{log}"
    );
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0), "{log}");
}

/// A replay camera named "still" whose directory holds one image: frames keep coming and
/// the picture never changes, a frozen camera.
fn frozen_camera(dir: &Path, health: &str) -> String {
    let images = dir.join("images");
    std::fs::create_dir_all(&images).expect("mkdir");
    std::fs::write(images.join("still.pgm"), textured_pgm(64, 48)).expect("write an image");
    format!(
        "[[camera]]\nname = \"still\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\nfps = 30\n\
         [camera.health]\n{health}",
        images.display()
    )
}

/// Waits until the still camera is reported tampered as frozen; returns its latest frame.
fn wait_frozen(d: &Daemon) -> serde_json::Value {
    wait_until("the frozen tamper", Duration::from_secs(60), || {
        latest_frame(d.port).filter(|l| l["health"]["kinds"]["frozen"] == "tampered")
    })
}

/// A replay of one image is a camera whose picture never changes: tampered as frozen, in
/// the report, the metrics and a warning.
#[test]
fn camera_health_a_frozen_replay_is_tampered() {
    let dir = tmp_dir("daemon-health-frozen");
    let d = Daemon::spawn(&dir, &frozen_camera(&dir, "learning_seconds = 0.5\n"));
    wait_frozen(&d);
    // Once learned, the state is the worst kind's; frozen took every frame, before moved
    // or defocus had a say.
    let l = wait_until("the state to say tampered", Duration::from_secs(60), || {
        latest_frame(d.port).filter(|l| l["health"]["state"] == "tampered")
    });
    let h = &l["health"];
    assert_eq!(h["learning"], false, "{h}");
    for kind in TAMPER_KINDS {
        let want = if kind == "frozen" { "tampered" } else { "ok" };
        assert_eq!(h["kinds"][kind], want, "{kind}: {h}");
    }
    let unchanged = h["unchanged_seconds"].as_f64().expect("unchanged_seconds");
    assert!(unchanged > 0.5, "unchanged for {unchanged} s: {h}");

    let m = d.metrics();
    for (kind, tamper, events) in tamper_series(&m, "still") {
        let want = if kind == "frozen" { 1.0 } else { 0.0 };
        assert_eq!((tamper, events), (Some(want), Some(want)), "{kind}:\n{m}");
    }
    let log = d.log();
    let tampered = log_lines(&log, "camera health: tampered");
    assert_eq!(tampered.len(), 1, "{log}");
    let line = &tampered[0];
    assert!(line.contains(" WARN "), "{line}");
    let frame = line
        .split_once("camera health: tampered camera=still kind=frozen frame=")
        .and_then(|(_, n)| n.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("not the frozen camera's line: {line}"));
    // Three identical frames at least: two that match the one before.
    assert!(frame >= 2, "{line}");
    assert!(l["sequence"].as_u64() >= Some(frame), "{l}\n{line}");
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0), "{log}");
}

/// SIGHUP turns a camera's detectors off (no report, NaN numbers, no tamper left
/// standing) and on again (learning from scratch), and a bad health value is refused.
#[test]
fn camera_health_off_and_on_again_by_sighup() {
    let dir = tmp_dir("daemon-health-reload");
    let d = Daemon::spawn(&dir, &frozen_camera(&dir, "learning_seconds = 0.5\n"));
    wait_frozen(&d);
    let frozen = r#"{camera="still",kind="frozen"}"#;
    let tamper = |m: &str| sample(m, &format!("edgesight_camera_tamper{frozen}"));
    let events = |m: &str| sample(m, &format!("edgesight_camera_tamper_events_total{frozen}"));
    let m = d.metrics();
    assert_eq!((tamper(&m), events(&m)), (Some(1.0), Some(1.0)), "{m}");

    let config = dir.join("edgesight.toml");
    std::fs::write(&config, frozen_camera(&dir, "enabled = false\n")).expect("rewrite");
    d.signal(libc::SIGHUP);
    let off = wait_until("the report to go", Duration::from_secs(30), || {
        latest_frame(d.port).filter(|l| l["health"].is_null())
    });
    let m = d.metrics();
    for family in ["sharpness", "scene_change"] {
        let v = sample(
            &m,
            &format!("edgesight_camera_{family}{{camera=\"still\"}}"),
        );
        assert!(v.is_some_and(f64::is_nan), "{family} {v:?} while off");
    }
    for end in ["dark", "bright"] {
        let series = format!("edgesight_camera_clipped_ratio{{camera=\"still\",end=\"{end}\"}}");
        let v = sample(&m, &series);
        assert!(v.is_some_and(f64::is_nan), "{series} {v:?} while off");
    }
    for (kind, tamper, _) in tamper_series(&m, "still") {
        assert_eq!(tamper, Some(0.0), "{kind} while off:\n{m}");
    }
    assert_eq!(events(&m), Some(1.0), "a counter keeps its count");
    assert_eq!(
        sample(&m, r#"edgesight_camera_health_learning{camera="still"}"#),
        Some(0.0)
    );
    assert_eq!(
        sample(&m, r#"edgesight_config_reloads_total{result="success"}"#),
        Some(1.0)
    );
    // Frames go on without a report (and without a tamper event).
    let sequence = off["sequence"].as_u64().expect("sequence");
    wait_until("more frames while off", Duration::from_secs(30), || {
        latest_frame(d.port)
            .filter(|l| l["sequence"].as_u64() >= Some(sequence + 30))
            .map(|l| assert!(l["health"].is_null(), "{l}"))
    });

    // A bad value is refused whole: the detectors stay off.
    std::fs::write(&config, frozen_camera(&dir, "clipped_ratio = 0\n")).expect("rewrite");
    d.signal(libc::SIGHUP);
    wait_until("the refused reload", Duration::from_secs(30), || {
        sample(
            &d.metrics(),
            r#"edgesight_config_reloads_total{result="failure"}"#,
        )
        .filter(|v| *v == 1.0)
    });
    assert!(
        d.log()
            .contains("camera.health.clipped_ratio: 0 is not a share"),
        "{}",
        d.log()
    );
    assert!(latest_frame(d.port).expect("a frame")["health"].is_null());

    // On again: learning from scratch (for a minute, longer than this test), while the
    // still picture is found frozen again from the first frames.
    std::fs::write(&config, frozen_camera(&dir, "learning_seconds = 60\n")).expect("rewrite");
    d.signal(libc::SIGHUP);
    let on = wait_until("the report to come back", Duration::from_secs(30), || {
        latest_frame(d.port).filter(|l| !l["health"].is_null())
    });
    let h = &on["health"];
    assert_eq!(h["state"], "learning", "{h}");
    assert_eq!(h["learning"], true, "{h}");
    assert!(
        h["sharpness"].is_null() && h["scene_change"].is_null(),
        "{h}"
    );
    wait_frozen(&d);
    let m = d.metrics();
    assert_eq!((tamper(&m), events(&m)), (Some(1.0), Some(2.0)), "{m}");
    assert_eq!(
        sample(&m, r#"edgesight_camera_health_learning{camera="still"}"#),
        Some(1.0)
    );
    let log = d.log();
    let tampered = log_lines(&log, "camera health: tampered camera=still kind=frozen");
    assert_eq!(tampered.len(), 2, "{log}");
    assert_eq!(
        log_lines(&log, "camera health: baseline learned").len(),
        1,
        "{log}"
    );
    let (status, _) = d.terminate();
    assert_eq!(status.code(), Some(0), "{log}");
}

/// `check-config` and `run` refuse a bad `[camera.health]` at its key, as any other.
#[test]
fn camera_health_bad_settings_are_refused_at_their_key() {
    let dir = tmp_dir("daemon-health-bad");
    let good = format!(
        "{}[camera.health]\nlearning_seconds = 2\n",
        camera("front", "64x48", &[], 64)
    );
    for (name, text, expect) in [
        (
            "defocus-share",
            format!("{good}defocus_sharpness = 1.5\n"),
            ":11:21: camera.health.defocus_sharpness: 1.5 is not a share above 0 and at most 1",
        ),
        (
            "learning-zero",
            good.replace("learning_seconds = 2", "learning_seconds = 0"),
            ":10:20: camera.health.learning_seconds: 0 is not between 0.1 and 3600 seconds",
        ),
        (
            "unknown-key",
            format!("{good}frozen_secs = 1\n"),
            ":11:1: camera.health.frozen_secs: unknown field `frozen_secs`, expected one of",
        ),
        (
            "wrong-type",
            format!("{good}enabled = \"no\"\n"),
            ":11:11: camera.health.enabled: invalid type: string \"no\", expected a boolean",
        ),
    ] {
        assert_refused(&dir, name, &text, expect);
    }
}

/// An MJPEG camera's path through the daemon, on a recording: a config with
/// `format = "mjpeg"` and `scale = "1/2"` is checked and run; frames are published at
/// half size, the host's decoding is the `decode` stage of the stage-time histogram, a
/// cut image is counted as `corrupt_frame`, and a region in the decoded frame's
/// coordinates is measured.
#[test]
fn an_mjpeg_recording_runs_decoded_at_half_size_with_its_corrupt_frames_counted() {
    let dir = tmp_dir("daemon-mjpeg");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jpeg");
    let mut clip = Vec::new();
    for name in ["scene-420.jpg", "no-huffman-tables.jpg", "restarts.jpg"] {
        clip.extend(std::fs::read(fixtures.join(name)).unwrap());
    }
    let whole = std::fs::read(fixtures.join("progressive.jpg")).unwrap();
    clip.extend(&whole[..whole.len() - 300]);
    let path = dir.join("clip.mjpeg");
    std::fs::write(&path, &clip).unwrap();
    let config = format!(
        "[[camera]]\nname = \"webcam\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\n\
         format = \"mjpeg\"\nscale = \"1/2\"\nfps = 60\n\
         [[camera.roi]]\nname = \"door\"\nx = 10\ny = 10\nw = 60\nh = 40\n",
        path.display()
    );
    std::fs::write(dir.join("check.toml"), &config).unwrap();
    let checked = Command::new(bin())
        .args(["check-config", dir.join("check.toml").to_str().unwrap()])
        .env("POCL_CACHE_DIR", pocl_cache())
        .output()
        .expect("run check-config");
    let printed = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.status.success(), "{printed}");
    assert!(printed.contains("scale = \"1/2\""), "{printed}");
    let d = Daemon::start(&dir, &config);
    let metrics = wait_until(
        "decoded and corrupt frames",
        Duration::from_secs(60),
        || {
            let m = d.metrics();
            let decoded = sample(
                &m,
                r#"edgesight_stage_duration_seconds_count{camera="webcam",stage="decode"}"#,
            )?;
            let corrupt = sample(
                &m,
                r#"edgesight_frames_dropped_total{camera="webcam",reason="corrupt_frame"}"#,
            )?;
            (decoded >= 10.0 && corrupt >= 1.0).then_some(m)
        },
    );
    let frames = sample(&metrics, r#"edgesight_frames_total{camera="webcam"}"#).unwrap();
    assert!(frames >= 10.0, "{frames}");
    assert!(
        sample(
            &metrics,
            r#"edgesight_roi_mean_luma{camera="webcam",roi="door"}"#
        )
        .is_some_and(|v| v > 0.0),
        "{metrics}"
    );
    let latest = latest_frame(d.port).expect("a published frame");
    assert_eq!(
        (latest["width"].as_u64(), latest["height"].as_u64()),
        (Some(80), Some(60))
    );
    let (status, _) = d.terminate();
    assert!(status.success());
}
