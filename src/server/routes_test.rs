//! The routes against fake cameras, in process: no socket, no binary, no OpenCL. A fake
//! camera is the two ends a camera thread would hold (its latest-frame slot and its
//! snapshot requests), answered by a plain thread.
//!
//! Over 500 lines as one room: a test file, every route against the same fake cameras
//! (defined at its top), grouped by route.

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{self, HeaderMap};
use hyper::{Method, Request, StatusCode};
use tokio::sync::watch;

use super::auth::Auth;
use super::page;
use super::routes::{self, CameraView, State};
use super::WebSettings;
use crate::capture::{CaptureStats, DropReason};
use crate::daemon::camera_metrics::CameraFamilies;
use crate::health::{self, HealthReport, Kind};
use crate::mailbox::{Activity, Latest, Snapshot, SnapshotReply, SourceInfo};
use crate::metrics::Metrics;
use crate::pipeline::{FrameResult, PipelineOptions, Stage};
use crate::region::{Region, RegionStats};

const PASSWORD: &str = "s3cret";

fn web(snapshots: bool) -> WebSettings {
    WebSettings {
        listen: "127.0.0.1:0".parse().expect("address"),
        snapshots,
        stale_after: Duration::from_secs(60),
        max_connections: 8,
        tls: None,
        users: BTreeMap::new(),
    }
}

/// Frame 7 of 4x2 pixels, published at 29.5 fps after six frames were dropped.
fn frame_seven() -> Latest {
    Latest {
        sequence: 7,
        published: Instant::now(),
        result: FrameResult {
            width: 4,
            height: 2,
            otsu_threshold: 99,
            ..FrameResult::empty()
        },
        options: PipelineOptions::default(),
        source: Arc::new(SourceInfo {
            format: "GREY",
            device: "fake".into(),
        }),
        activity: Activity {
            fps: 29.5,
            dropped: [3, 0, 0, 1, 0],
            backlog: 2,
        },
        health: Some(covered_report()),
    }
}

/// A camera covered for a while: its health report as the detectors would give it.
fn covered_report() -> HealthReport {
    let mut kinds = Kind::ALL.map(|k| (k, health::State::Ok));
    kinds[2] = (Kind::Covered, health::State::Tampered);
    kinds[5] = (Kind::Defocus, health::State::Suspect);
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

/// A camera that has published frame 7 and answers snapshot requests.
fn published(name: &str) -> CameraView {
    showing(name, frame_seven())
}

/// A camera that has published `latest` and answers snapshot requests (4x2 pictures).
fn showing(name: &str, latest: Latest) -> CameraView {
    let (_tx, latest) = watch::channel(Some(Arc::new(latest)));
    let (requests, taken) = mpsc::channel::<SnapshotReply>();
    std::thread::spawn(move || {
        for reply in taken {
            let _ = reply.send(Arc::new(Snapshot {
                width: 4,
                height: 2,
                luma: vec![10; 8],
                gradient: vec![20; 8],
                mask: vec![255; 8],
                histogram: [1; 256],
                otsu_threshold: 99,
            }));
        }
    });
    CameraView::new(name.into(), latest, requests)
}

/// A camera that has published frame 7 and answers each snapshot request after `delay`
/// (a camera at a low rate); `asked` counts the requests it got.
fn slow(name: &str, delay: Duration, asked: Arc<std::sync::atomic::AtomicUsize>) -> CameraView {
    let (_tx, latest) = watch::channel(Some(Arc::new(frame_seven())));
    let (requests, taken) = mpsc::channel::<SnapshotReply>();
    std::thread::spawn(move || {
        for reply in taken {
            asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::thread::sleep(delay);
            let _ = reply.send(Arc::new(Snapshot {
                width: 64,
                height: 48,
                luma: (0..64 * 48).map(|i| (i * 7 % 251) as u8).collect(),
                gradient: vec![20; 64 * 48],
                mask: vec![255; 64 * 48],
                histogram: [1; 256],
                otsu_threshold: 99,
            }));
        }
    });
    CameraView::new(name.into(), latest, requests)
}

/// A camera that has published nothing and has no pictures to give.
fn silent(name: &str) -> CameraView {
    let (_tx, latest) = watch::channel(None);
    let (requests, taken) = mpsc::channel::<SnapshotReply>();
    // Each request is dropped unanswered, as a camera thread does with no pictures.
    std::thread::spawn(move || taken.into_iter().for_each(drop));
    CameraView::new(name.into(), latest, requests)
}

fn state(web: WebSettings, auth: Auth) -> State {
    let cameras = vec![published("front"), silent("idle")];
    State::new(
        web,
        Arc::new(Metrics::new()),
        Arc::new(cameras),
        Arc::new(auth),
    )
}

/// No users, and `cameras` whose metrics are in `metrics`.
fn open_on(metrics: Arc<Metrics>, cameras: Vec<CameraView>) -> State {
    let auth = Auth::new(BTreeMap::new()).expect("no users");
    State::new(web(true), metrics, Arc::new(cameras), Arc::new(auth))
}

fn open(snapshots: bool) -> State {
    state(
        web(snapshots),
        Auth::new(BTreeMap::new()).expect("no users"),
    )
}

/// Snapshots on and one user, `prom`; `busy` fills the bcrypt queue first, and the
/// second value keeps it full.
fn protected(busy: bool) -> (State, Option<impl Sized>) {
    let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
    let users = BTreeMap::from([("prom".to_string(), hash)]);
    let mut auth = Auth::new(users.clone()).expect("users");
    let queue = busy.then(|| auth.fill_bcrypt_queue(None));
    let mut settings = web(true);
    settings.users = users;
    (state(settings, auth), queue)
}

fn basic(user: &str, password: &str) -> String {
    let raw = format!("{user}:{password}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(&name)
            .unwrap_or_else(|| panic!("no {name} header"))
            .to_str()
            .expect("ASCII header")
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

async fn ask(state: &State, method: Method, uri: &str, authorization: Option<&str>) -> Answer {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(a) = authorization {
        req = req.header(header::AUTHORIZATION, a);
    }
    let resp = routes::handle(state, req.body(()).expect("request")).await;
    let (parts, body) = resp.into_parts();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.expect("body").to_bytes(),
    }
}

async fn get(state: &State, uri: &str) -> Answer {
    ask(state, Method::GET, uri, None).await
}

#[tokio::test]
async fn metrics_are_prometheus_text_never_cached() {
    let s = open(false);
    let a = get(&s, "/metrics").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        a.header(header::CONTENT_TYPE),
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert_eq!(a.header(header::CACHE_CONTROL), "no-store");
    assert!(a.text().contains("# TYPE edgesight_build_info gauge"));
    // The first request is counted by the time the second renders.
    let again = get(&s, "/metrics").await;
    assert!(again
        .text()
        .contains(r#"edgesight_http_requests_total{code="200",handler="metrics"} 1"#));
}

#[tokio::test]
async fn head_gets_the_length_of_get_and_no_body() {
    let s = open(true);
    for path in ["/", "/snapshot/luma.png", "/healthz"] {
        let full = get(&s, path).await;
        let head = ask(&s, Method::HEAD, path, None).await;
        assert_eq!(head.status, full.status, "{path}");
        assert_eq!(
            head.header(header::CONTENT_LENGTH),
            full.body.len().to_string(),
            "{path}"
        );
        assert!(head.body.is_empty(), "{path}");
        assert_eq!(
            head.header(header::CONTENT_TYPE),
            full.header(header::CONTENT_TYPE)
        );
    }
    // The metrics change between two requests; HEAD still says a length.
    let head = ask(&s, Method::HEAD, "/metrics", None).await;
    assert!(
        head.header(header::CONTENT_LENGTH)
            .parse::<usize>()
            .expect("number")
            > 0
    );
    assert!(head.body.is_empty());
}

#[tokio::test]
async fn other_methods_bodies_and_paths_are_refused() {
    let s = open(true);
    let post = ask(&s, Method::POST, "/metrics", None).await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(post.header(header::ALLOW), "GET, HEAD");

    let req = Request::get("/metrics")
        .header(header::CONTENT_LENGTH, "5")
        .body(())
        .expect("request");
    let with_body = routes::handle(&s, req).await;
    assert_eq!(with_body.status(), StatusCode::PAYLOAD_TOO_LARGE);

    let missing = get(&s, "/nothing").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        missing.header(header::CONTENT_TYPE),
        "text/plain; charset=utf-8"
    );
}

#[tokio::test]
async fn healthz_names_the_cameras_without_a_recent_frame() {
    let s = open(false);
    let a = get(&s, "/healthz").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(a.text(), "no recent frames from: idle\n");
}

#[tokio::test]
async fn latest_is_json_for_a_camera_that_published() {
    let s = open(false);
    let a = get(&s, "/api/v1/latest?camera=front").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.header(header::CONTENT_TYPE), "application/json");
    assert_eq!(a.header(header::CACHE_CONTROL), "no-store");
    let json: serde_json::Value = serde_json::from_slice(&a.body).expect("JSON");
    assert_eq!(json["camera"], "front");
    assert_eq!(json["sequence"], 7);
    assert_eq!(json["width"], 4);
    assert_eq!(json["otsu_threshold"], 99);
    assert_eq!(json["fps"], 29.5);
    assert_eq!(
        json["dropped"],
        serde_json::json!({
            "sequence_gap": 3,
            "buffer_error": 0,
            "short_frame": 0,
            "bad_image": 1,
            "corrupt_frame": 0,
            "publish_backlog": 2,
            "total": 6
        })
    );
    assert_eq!(
        json["health"],
        serde_json::json!({
            "state": "tampered",
            "learning": false,
            "sharpness": 0.25,
            "scene_change": 0.5,
            "clipped_dark": 0.125,
            "clipped_bright": 0.0,
            "mean_luma_ratio": 0.5,
            "histogram_band": 0.875,
            "flat_cells": 0.75,
            "unchanged_seconds": 0.0,
            "kinds": {
                "overexposed": "ok",
                "underexposed": "ok",
                "covered": "tampered",
                "frozen": "ok",
                "moved": "ok",
                "defocus": "suspect"
            }
        })
    );
    // Without a camera named, the first one.
    let first: serde_json::Value =
        serde_json::from_slice(&get(&s, "/api/v1/latest").await.body).expect("JSON");
    assert_eq!(first["camera"], "front");

    let idle = get(&s, "/api/v1/latest?camera=idle").await;
    assert_eq!(idle.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(idle.text(), "no frame yet\n");
    let unknown = get(&s, "/api/v1/latest?camera=nope").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.text(), "no camera 'nope'\n");
}

#[tokio::test]
async fn snapshots_of_a_camera_that_published_are_pngs() {
    let s = open(true);
    for picture in ["luma", "edges", "mask"] {
        let a = get(&s, &format!("/snapshot/{picture}.png?camera=front")).await;
        assert_eq!(a.status, StatusCode::OK, "{picture}");
        assert_eq!(a.header(header::CONTENT_TYPE), "image/png");
        assert_eq!(a.header(header::CACHE_CONTROL), "no-store");
        let png = image::load_from_memory(&a.body).expect("a PNG");
        assert_eq!((png.width(), png.height()), (4, 2), "{picture}");
    }
    let chart = get(&s, "/snapshot/histogram.png").await;
    assert_eq!(chart.status, StatusCode::OK);
    image::load_from_memory(&chart.body).expect("a PNG");
    let page = get(&s, "/").await;
    assert_eq!(
        page.header(header::CONTENT_TYPE),
        "text/html; charset=utf-8"
    );
    assert!(page.text().contains("/snapshot/luma.png?camera=front"));
}

#[tokio::test]
async fn snapshots_of_silent_unknown_or_unnamed_things_are_refused() {
    let s = open(true);
    let idle = get(&s, "/snapshot/luma.png?camera=idle").await;
    assert_eq!(idle.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(idle.text(), "camera 'idle' delivers no frames\n");
    assert_eq!(idle.header(header::RETRY_AFTER), "5");
    let unknown = get(&s, "/snapshot/luma.png?camera=nope").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.text(), "no camera 'nope'\n");
    let picture = get(&s, "/snapshot/dx.png?camera=front").await;
    assert_eq!(picture.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn snapshots_off_means_no_pictures_and_the_landing_page() {
    let s = open(false);
    let a = get(&s, "/snapshot/luma.png?camera=front").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    let page = get(&s, "/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page
        .text()
        .contains("Snapshots and the status page are off"));
}

#[tokio::test]
async fn every_path_asks_for_credentials_and_takes_only_the_right_ones() {
    let (s, _) = protected(false);
    let right = basic("prom", PASSWORD);
    for path in [
        "/metrics",
        "/healthz",
        "/api/v1/latest",
        "/",
        "/snapshot/luma.png",
    ] {
        for wrong in [
            None,
            Some(basic("prom", "wrong")),
            Some(basic("mallory", PASSWORD)),
            Some("Bearer abc".to_string()),
        ] {
            let a = ask(&s, Method::GET, path, wrong.as_deref()).await;
            assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{path} {wrong:?}");
            assert_eq!(
                a.header(header::WWW_AUTHENTICATE),
                "Basic realm=\"edgesight\""
            );
            assert_eq!(a.header(header::CACHE_CONTROL), "no-store");
        }
    }
    let a = ask(&s, Method::GET, "/metrics", Some(&right)).await;
    assert_eq!(a.status, StatusCode::OK);
    let head = ask(&s, Method::HEAD, "/", Some(&right)).await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
}

#[tokio::test]
async fn a_full_bcrypt_queue_answers_503_with_retry_after() {
    let (s, _queue) = protected(true);
    for user in ["prom", "mallory"] {
        let a = ask(&s, Method::GET, "/metrics", Some(&basic(user, PASSWORD))).await;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{user}");
        assert_eq!(a.header(header::RETRY_AFTER), "1");
        assert!(a.headers.get(header::WWW_AUTHENTICATE).is_none());
    }
    // No credentials need no bcrypt: still 401, not 503.
    let none = get(&s, "/metrics").await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn latest_fps_and_drops_are_the_numbers_of_metrics() {
    let metrics = Arc::new(Metrics::new());
    let m = CameraFamilies::new(&metrics, 16).camera("front", Some(30.0));
    let mut stats = CaptureStats::default();
    stats.dropped[DropReason::BufferError as usize] = 5;
    stats.dropped[DropReason::ShortFrame as usize] = 1;
    m.capture(true, &stats);
    m.backlog_dropped.inc_by(3);
    m.frame_rate.set(14.75);
    // What the publisher does after each frame.
    let latest = Latest {
        activity: m.activity(),
        ..frame_seven()
    };
    let s = open_on(Arc::clone(&metrics), vec![showing("front", latest)]);
    let json: serde_json::Value =
        serde_json::from_slice(&get(&s, "/api/v1/latest").await.body).expect("JSON");
    let scrape = get(&s, "/metrics").await.text();
    let sample = |series: &str| {
        scrape.lines().find_map(|l| {
            let (s, v) = l.rsplit_once(' ')?;
            (s == series).then(|| v.parse::<f64>().expect("a number"))
        })
    };
    assert_eq!(json["fps"], 14.75);
    assert_eq!(
        json["fps"].as_f64(),
        sample(r#"edgesight_frame_rate{camera="front"}"#)
    );
    let mut total = 0.0;
    for reason in [
        "sequence_gap",
        "buffer_error",
        "short_frame",
        "bad_image",
        "corrupt_frame",
        "publish_backlog",
    ] {
        let series =
            format!(r#"edgesight_frames_dropped_total{{camera="front",reason="{reason}"}}"#);
        let exported = sample(&series).unwrap_or_else(|| panic!("{series} missing"));
        assert_eq!(json["dropped"][reason].as_f64(), Some(exported), "{reason}");
        total += exported;
    }
    assert_eq!(total, 9.0);
    assert_eq!(json["dropped"]["total"].as_f64(), Some(total));
    assert_eq!(json["dropped"].as_object().map(|o| o.len()), Some(7));
}

/// Checks that every element opened is closed, in order, but for HTML's void elements.
fn assert_balanced(html: &str) {
    const VOID: [&str; 4] = ["meta", "img", "br", "hr"];
    let mut open: Vec<&str> = Vec::new();
    let mut rest = html.strip_prefix("<!doctype html>").expect("a doctype");
    while let Some(at) = rest.find('<') {
        let end = rest[at..].find('>').expect("a tag ends") + at;
        let tag = &rest[at + 1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(open.pop(), Some(name), "</{name}> closes another element");
            continue;
        }
        let name = tag.split_whitespace().next().expect("a tag name");
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric()),
            "odd tag <{tag}>"
        );
        if !VOID.contains(&name) {
            open.push(name);
        }
    }
    assert!(open.is_empty(), "left open: {open:?}");
}

#[test]
fn the_status_page_draws_the_regions_and_shows_stage_times_rate_and_drops() {
    let mut latest = frame_seven();
    latest.result.width = 320;
    latest.result.height = 240;
    let region = |name: &str, x, y, width, height| {
        let r = Region {
            name: name.into(),
            x,
            y,
            width,
            height,
        };
        (r, RegionStats::default())
    };
    latest.result.regions = vec![
        region("door", 10, 20, 100, 80),
        region("a<b&\"c\"", 200, 120, 120, 120),
    ];
    for (i, stage) in Stage::ALL.iter().enumerate() {
        // 0.25 ms, 0.5 ms, ... 1.75 ms: 7 ms in all.
        latest.result.timings.0[*stage as usize] = 250_000 * (i as u64 + 1);
    }
    let html = page::status(&[showing("front", latest), silent("idle")]);
    assert_balanced(&html);
    for part in [
        // The luma picture in frame coordinates, the regions over it by name.
        "<svg class=\"frame\" viewBox=\"0 0 320 240\"><title>luma</title>\
         <image href=\"/snapshot/luma.png?camera=front\" width=\"320\" height=\"240\"></image>\
         <rect x=\"10\" y=\"20\" width=\"100\" height=\"80\"></rect>\
         <text x=\"13\" y=\"32\" font-size=\"12\">door</text>\
         <rect x=\"200\" y=\"120\" width=\"120\" height=\"120\"></rect>\
         <text x=\"203\" y=\"132\" font-size=\"12\">a&lt;b&amp;&quot;c&quot;</text></svg>",
        "<tr><td>ROI a&lt;b&amp;&quot;c&quot;</td>",
        "<img src=\"/snapshot/edges.png?camera=front\"",
        "<tr><td>frame rate</td><td>29.5 fps</td></tr>",
        "<tr><td>dropped</td><td>6: sequence_gap 3, buffer_error 0, short_frame 0, \
         bad_image 1, corrupt_frame 0, publish_backlog 2</td></tr>",
        "<table><tr><th>stage</th><th>device time</th></tr>\
         <tr><td>luma</td><td>0.250 ms</td></tr><tr><td>sobel</td><td>0.500 ms</td></tr>\
         <tr><td>histogram</td><td>0.750 ms</td></tr><tr><td>otsu</td><td>1.000 ms</td></tr>\
         <tr><td>binarize</td><td>1.250 ms</td></tr><tr><td>integral</td><td>1.500 ms</td></tr>\
         <tr><td>regions</td><td>1.750 ms</td></tr><tr><td>health</td><td>2.000 ms</td></tr>\
         <tr><td>total</td><td>9.000 ms</td></tr></table>",
        "<table class=\"health\"><tr><th>health</th><th class=\"tampered\">tampered</th></tr>\
         <tr><td>overexposed</td><td class=\"ok\">ok</td></tr>",
        "<tr><td>covered</td><td class=\"tampered\">tampered</td></tr>",
        "<tr><td>defocus</td><td class=\"suspect\">suspect</td></tr>\
         <tr><td>sharpness</td><td>25 %</td></tr><tr><td>scene change</td><td>50 %</td></tr>\
         <tr><td>clipped dark / bright</td><td>12.5 % / 0.0 %</td></tr>\
         <tr><td>unchanged for</td><td>0.0 s</td></tr></table>",
        // A camera with no frame has no size to draw in: its pictures as they come.
        "<h2>camera idle</h2><p>no frame yet</p><img src=\"/snapshot/luma.png?camera=idle\"",
    ] {
        assert!(html.contains(part), "{part}\nnot in\n{html}");
    }
    assert!(!html.contains("a<b"), "a name unescaped");
    assert_eq!(html.matches("<rect ").count(), 2);
}

/// Resilience round 2, item 4: snapshot requests for a down or slow camera held a lock
/// across each 3 s wait, so requests queued behind one another. A camera with no frames
/// answers at once; requests for a slow one share one read-back and hold nothing others
/// need.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round2_4_snapshots_of_a_down_or_slow_camera_lock_out_no_one() {
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let cameras = vec![
        slow("slow", Duration::from_millis(400), Arc::clone(&asked)),
        silent("down"),
    ];
    let s = Arc::new(open_on(Arc::new(Metrics::new()), cameras));
    let start = Instant::now();
    let mut requests = Vec::new();
    for i in 0..64 {
        let s = Arc::clone(&s);
        let camera = if i % 2 == 0 { "slow" } else { "down" };
        requests.push(tokio::spawn(async move {
            let a = get(&s, &format!("/snapshot/luma.png?camera={camera}")).await;
            let retry = a.headers.get(header::RETRY_AFTER).cloned();
            (camera, a.status, retry)
        }));
    }
    // Meanwhile the other endpoints answer.
    assert_eq!(get(&s, "/metrics").await.status, StatusCode::OK);
    assert_eq!(
        get(&s, "/api/v1/latest?camera=slow").await.status,
        StatusCode::OK
    );
    for r in requests {
        let (camera, status, retry) = r.await.expect("no panic");
        match camera {
            "slow" => assert_eq!(status, StatusCode::OK),
            _ => assert_eq!(
                (status, retry),
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    Some("5".parse().expect("value"))
                )
            ),
        }
    }
    // One read-back for all 32 requests (each took 3 s in turn before).
    assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

/// Resilience round 2, item 5: every snapshot request encoded its own PNG, and 64 clients
/// that never read their answers grew a 3840x2160 camera's daemon from 150 to 854 MB. A
/// picture is encoded once per read-back and every answer holds the same bytes; the bytes
/// alive are held to a budget, past which requests get 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round2_5_a_snapshot_is_encoded_once_and_held_to_a_budget() {
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let cameras = vec![slow("front", Duration::from_millis(50), Arc::clone(&asked))];
    let s = Arc::new(open_on(Arc::new(Metrics::new()), cameras));
    let mut requests = Vec::new();
    for _ in 0..16 {
        let s = Arc::clone(&s);
        requests.push(tokio::spawn(async move {
            get(&s, "/snapshot/luma.png?camera=front").await
        }));
    }
    let mut answers = Vec::new();
    for r in requests {
        answers.push(r.await.expect("no panic"));
    }
    assert!(answers.iter().all(|a| a.status == StatusCode::OK));
    // Encoded once: every answer holds the same bytes.
    assert!(answers
        .iter()
        .all(|a| a.body.as_ptr() == answers[0].body.as_ptr()));
    let png = image::load_from_memory(&answers[0].body).expect("a PNG");
    assert_eq!((png.width(), png.height()), (64, 48));
    // Held only by the cache: one copy, however many answers were made of it.
    assert_eq!(s.png_bytes_alive(), answers[0].body.len());
    assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 1);

    // A budget below one picture: the next picture to encode is refused, the cached
    // ones still served.
    let cameras = vec![slow("front", Duration::ZERO, Arc::new(Default::default()))];
    let s = open_on(Arc::new(Metrics::new()), cameras).with_png_limit(1);
    let luma = get(&s, "/snapshot/luma.png?camera=front").await;
    assert_eq!(luma.status, StatusCode::OK);
    let mask = get(&s, "/snapshot/mask.png?camera=front").await;
    assert_eq!(mask.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(mask.header(header::RETRY_AFTER), "1");
    assert_eq!(
        get(&s, "/snapshot/luma.png?camera=front").await.status,
        StatusCode::OK
    );
}
