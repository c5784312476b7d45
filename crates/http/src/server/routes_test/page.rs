//! The status page (`/`), its data (`/status.json`) and its files: what a person sees of
//! an up, a tampered and a down camera, with pictures on and off, and that every value
//! the page shows is one its script can rewrite.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use hyper::header;
use hyper::StatusCode;

use super::{frame_seven, get, open, open_on, showing, showing_from, silent, status};
use crate::mailbox::Latest;
use crate::metrics::Metrics;
use crate::server::page::{self, Page};
use crate::server::routes::RouterState;
use edgesight_core::pipeline::Stage;
use edgesight_frame::region::{Region, RegionStats};

/// Checks that every element opened is closed, in order, but for HTML's void elements.
fn assert_balanced(html: &str) {
    const VOID: [&str; 5] = ["meta", "img", "br", "hr", "link"];
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

/// Frame 7 at 320x240 with two regions (one named with every character HTML escapes)
/// and stage times of 0.25, 0.5, ... 2 ms.
fn frame_with_regions() -> Latest {
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
        let area = u64::from(width * height);
        let stats = RegionStats {
            area,
            sum: area * 120,
            sqsum: area * 120 * 120,
            edges: area / 10,
            foreground: area / 4,
            motion: 0,
        };
        (r, stats)
    };
    latest.result.regions = vec![
        region("door", 10, 20, 100, 80),
        region("a<b&\"c\"", 200, 120, 120, 120),
    ];
    for (i, stage) in Stage::ALL.iter().enumerate() {
        latest.result.timings.0[*stage as usize] = 250_000 * (i as u64 + 1);
    }
    latest
}

/// Snapshots on, and the cameras given; no users.
fn serving(cameras: Vec<crate::server::CameraView>) -> RouterState {
    open_on(Arc::new(Metrics::new()), cameras)
}

fn assert_has(html: &str, parts: &[&str]) {
    for part in parts {
        assert!(html.contains(part), "{part}\nnot in\n{html}");
    }
}

#[tokio::test]
async fn the_page_fits_a_phone_badges_each_camera_and_draws_the_regions() {
    let s = serving(vec![showing("front", frame_with_regions()), silent("idle")]);
    let a = get(&s, "/").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.header(header::CONTENT_TYPE), "text/html; charset=utf-8");
    let html = a.text();
    assert_balanced(&html);
    let v = crate::VERSION;
    assert_has(
        &html,
        &[
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
            &format!("<link rel=\"icon\" href=\"/favicon.svg?v={v}\" type=\"image/svg+xml\">"),
            &format!("<script src=\"/status.js?v={v}\" defer></script>"),
            // Without a script the page still refreshes itself.
            "<noscript><meta http-equiv=\"refresh\" content=\"5\"></noscript>",
            "<p id=\"summary\" class=\"summary tampered\">2 cameras: 1 up, 1 down, 1 tampered</p>",
            // The tampered camera: its badge names the kind.
            "<article class=\"tile tampered\" data-camera=\"front\" data-sequence=\"7\">\
             <h2><span class=\"name\">front</span> \
             <span class=\"badge tampered\" data-k=\"badge\">tampered: covered</span></h2>\
             <p class=\"reason\" hidden><span data-k=\"reason\"></span></p>",
            // The luma picture by frame, the regions over it in frame coordinates.
            "<figure><div class=\"frame\">\
             <img src=\"/snapshot/luma.png?camera=front&amp;frame=7\" alt=\"luma of camera front\" \
             loading=\"lazy\" data-picture=\"luma\">\
             <svg viewBox=\"0 0 320 240\" preserveAspectRatio=\"none\" aria-hidden=\"true\">\
             <rect x=\"10\" y=\"20\" width=\"100\" height=\"80\"></rect>\
             <text x=\"13\" y=\"32\" font-size=\"12\">door</text>\
             <rect x=\"200\" y=\"120\" width=\"120\" height=\"120\"></rect>\
             <text x=\"203\" y=\"132\" font-size=\"12\">a&lt;b&amp;&quot;c&quot;</text></svg>\
             </div><figcaption>luma, with the regions</figcaption></figure>",
            "<img src=\"/snapshot/edges.png?camera=front&amp;frame=7\"",
            "<figcaption>histogram and Otsu threshold</figcaption>",
            "<tr><th>frame</th><td data-k=\"frame\">7 (320x240 GREY)</td></tr>",
            "<tr><th>frame rate</th><td data-k=\"fps\">29.5 fps</td></tr>",
            // The drops in all, then only the reasons that happened.
            "<tr><th>dropped</th><td data-k=\"dropped\">6</td></tr>\
             <tr><th>dropped: sequence gap</th><td data-k=\"dropped.sequence_gap\">3</td></tr>\
             <tr><th>dropped: bad image</th><td data-k=\"dropped.bad_image\">1</td></tr>\
             <tr><th>dropped: publish backlog</th>\
             <td data-k=\"dropped.publish_backlog\">2</td></tr></table>",
            "<tr><th>Otsu threshold</th><td data-k=\"otsu\">99</td></tr>",
            "<tr><th>overexposed</th><td class=\"ok\" data-k=\"health.overexposed\">ok</td></tr>",
            "<tr><th>covered</th><td class=\"tampered\" data-k=\"health.covered\">tampered</td></tr>",
            "<tr><th>defocus</th><td class=\"suspect\" data-k=\"health.defocus\">suspect</td></tr>\
             <tr><th>sharpness</th><td data-k=\"sharpness\">25 %</td></tr>\
             <tr><th>scene change</th><td data-k=\"scene_change\">50 %</td></tr>\
             <tr><th>light vs learned</th><td data-k=\"light\">50 %</td></tr>\
             <tr><th>clipped dark / bright</th><td data-k=\"clipped\">12.5 % / 0.0 %</td></tr>\
             <tr><th>unchanged for</th><td data-k=\"unchanged\">0.0 s</td></tr></table></details>",
            "<details><summary>health detectors</summary><table>\
             <tr><th>overexposed</th>",
            "<table><caption>regions</caption>\
             <tr><th>door</th><td data-k=\"roi.0\">mean 120.0, edges 10.0 %, foreground 25.0 %</td></tr>\
             <tr><th>a&lt;b&amp;&quot;c&quot;</th>",
            // The detail behind the badge and the totals, folded.
            "<details><summary>device time per stage</summary><table>\
             <tr><th>luma</th><td data-k=\"stage.luma\">0.250 ms</td></tr>",
            "<tr><th>health</th><td data-k=\"stage.health\">2.000 ms</td></tr>\
             <tr><th>total</th><td data-k=\"stage.total\">9.000 ms</td></tr></table></details>",
            // The camera with no frame: down, why, and no pictures to break.
            "<article class=\"tile down\" data-camera=\"idle\" data-sequence=\"\">\
             <h2><span class=\"name\">idle</span> \
             <span class=\"badge down\" data-k=\"badge\">starting</span></h2>\
             <p class=\"reason\"><span class=\"down\" data-k=\"reason\">\
             being opened (for 0.0 s); no frame yet</span></p></article>",
        ],
    );
    assert!(!html.contains("a<b"), "a name unescaped");
    assert!(
        !html.contains("camera=idle"),
        "a picture of a camera with none"
    );
    assert_eq!(html.matches("<rect ").count(), 2);
    assert_eq!(html.matches("<img ").count(), 5);
}

#[tokio::test]
async fn with_pictures_off_the_numbers_stay() {
    let s = open(false);
    let html = get(&s, "/").await.text();
    assert_balanced(&html);
    assert_has(
        &html,
        &[
            "<tr><th>frame rate</th><td data-k=\"fps\">29.5 fps</td></tr>",
            "<tr><th>total</th><td data-k=\"stage.total\">",
            "<p class=\"note\">Pictures are off ([web] snapshots = true shows them).</p>",
        ],
    );
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("/snapshot/"), "{html}");
}

/// A camera that failed says with what and when it is tried again; one whose device is
/// absent says so; one that is open but silent past `stale_after` is down too.
#[tokio::test]
async fn a_down_camera_says_why() {
    let failed = silent("porch").with_status(status(|s| {
        s.restarting(
            "/dev/video2: VIDIOC_STREAMON: No such device".into(),
            Duration::from_secs(8),
        )
    }));
    let absent = silent("yard").with_status(status(|s| s.waiting_for_device()));
    let mut old = frame_seven();
    old.published -= Duration::from_secs(90);
    let stalled = showing("gate", old);
    let starved = silent("shed").with_status(status(|s| {
        s.no_usb_bandwidth(|| "VIDIOC_STREAMON: No space left on device: use MJPEG".into())
    }));
    let s = serving(vec![failed, absent, stalled, starved]);
    let html = get(&s, "/").await.text();
    assert_has(
        &html,
        &[
            "<p id=\"summary\" class=\"summary tampered\">4 cameras: 0 up, 4 down, 0 tampered</p>",
            "<span class=\"badge down\" data-k=\"badge\">no USB bandwidth</span></h2>\
             <p class=\"reason\"><span class=\"down\" data-k=\"reason\">\
             VIDIOC_STREAMON: No space left on device: use MJPEG (for 0.0 s); retrying; \
             no frame yet</span>",
            "<span class=\"badge down\" data-k=\"badge\">restarting</span></h2>\
             <p class=\"reason\"><span class=\"down\" data-k=\"reason\">\
             failed: /dev/video2: VIDIOC_STREAMON: No such device; retrying in ",
            "<span class=\"badge down\" data-k=\"badge\">waiting for device</span></h2>\
             <p class=\"reason\"><span class=\"down\" data-k=\"reason\">\
             device absent: waiting for it to appear (for 0.0 s); no frame yet</span>",
            "<span class=\"badge down\" data-k=\"badge\">stalled</span></h2>\
             <p class=\"reason\"><span class=\"down\" data-k=\"reason\">\
             open, but delivers no frames; last frame 1 min 30 s ago</span>",
            // Its last numbers stay, its pictures go.
            "<tr><th>frame rate</th><td data-k=\"fps\">29.5 fps</td></tr>",
        ],
    );
    assert!(!html.contains("<img"), "{html}");
    let api: serde_json::Value =
        serde_json::from_str(&get(&s, "/api/v1/cameras").await.text()).expect("JSON");
    let shed = &api[3];
    assert_eq!(shed["name"], "shed");
    assert_eq!(shed["state"], "no_usb_bandwidth");
    assert_eq!(
        shed["error"],
        "VIDIOC_STREAMON: No space left on device: use MJPEG"
    );
    assert_eq!(shed["retry_in_seconds"], serde_json::Value::Null);
    assert_eq!(api[1]["state"], "waiting_for_device");
}

/// The keys of the values in `html`, by camera.
fn keys_in_html(html: &str) -> Vec<(String, BTreeSet<String>)> {
    html.split("<article ")
        .skip(1)
        .map(|tile| {
            let name = tile
                .split("data-camera=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .expect("a camera name");
            let keys = tile
                .split("data-k=\"")
                .skip(1)
                .map(|r| r.split('"').next().expect("a key").to_string())
                .collect();
            (name.to_string(), keys)
        })
        .collect()
}

/// Everything the page shows, the script can rewrite: `/status.json` has a value for
/// each `data-k` of each tile and no other, the page's layout, and the summary.
#[tokio::test]
async fn status_json_has_a_value_for_every_key_on_the_page() {
    let s = serving(vec![showing("front", frame_with_regions()), silent("idle")]);
    let html = get(&s, "/").await.text();
    let a = get(&s, "/status.json").await;
    assert_eq!(a.header(header::CONTENT_TYPE), "application/json");
    assert_eq!(a.header(header::CACHE_CONTROL), "no-store");
    let json: serde_json::Value = serde_json::from_slice(&a.body).expect("JSON");
    let layout = json["layout"].as_str().expect("a layout");
    assert!(
        html.contains(&format!("data-layout=\"{layout}\"")),
        "{html}"
    );
    assert_eq!(json["summary"], "2 cameras: 1 up, 1 down, 1 tampered");
    assert_eq!(json["summary_class"], "tampered");
    assert_eq!(
        json["counts"],
        serde_json::json!({"cameras": 2, "up": 1, "down": 1, "tampered": 1})
    );
    let cameras = json["cameras"].as_array().expect("cameras");
    let in_html = keys_in_html(&html);
    assert_eq!(in_html.len(), 2);
    for ((name, keys), camera) in in_html.iter().zip(cameras) {
        assert_eq!(camera["name"], name.as_str());
        let values = camera["values"].as_object().expect("values");
        let in_json: BTreeSet<String> = values.keys().cloned().collect();
        assert_eq!(&in_json, keys, "{name}");
    }
    let front = &cameras[0]["values"];
    assert_eq!(cameras[0]["sequence"], 7);
    assert_eq!(
        front["badge"],
        serde_json::json!(["tampered: covered", "tampered"])
    );
    assert_eq!(front["fps"], serde_json::json!(["29.5 fps", ""]));
    assert_eq!(
        front["health.defocus"],
        serde_json::json!(["suspect", "suspect"])
    );
    assert_eq!(front["stage.total"], serde_json::json!(["9.000 ms", ""]));
    assert_eq!(cameras[1]["sequence"], serde_json::Value::Null);
    assert_eq!(
        cameras[1]["values"]["badge"],
        serde_json::json!(["starting", "down"])
    );
}

/// New numbers keep the layout (the script writes them in place); a camera coming up, a
/// region added or the frame size changed give a new one (the script fetches the page).
#[test]
fn the_layout_changes_with_what_is_shown_not_with_the_numbers() {
    let (tx, view) = showing_from("front", frame_with_regions());
    let cameras = [view];
    let layout = |cameras: &[_]| Page::new(cameras, true, Duration::from_secs(60)).layout();
    let first = layout(&cameras);
    let mut next = frame_with_regions();
    next.sequence = 8;
    next.activity.fps = 12.0;
    next.result.otsu_threshold = 3;
    tx.send_replace(Some(Arc::new(next.clone())));
    assert_eq!(layout(&cameras), first, "numbers alone");
    next.result.regions.pop();
    tx.send_replace(Some(Arc::new(next.clone())));
    let fewer = layout(&cameras);
    assert_ne!(fewer, first, "a region less");
    next.result.width = 640;
    tx.send_replace(Some(Arc::new(next.clone())));
    assert_ne!(layout(&cameras), fewer, "another frame size");
    let without_pictures = Page::new(&cameras, false, Duration::from_secs(60)).layout();
    assert_ne!(without_pictures, layout(&cameras), "pictures off");
}

#[tokio::test]
async fn the_page_files_are_served_and_cached() {
    let s = open(true);
    for (path, content_type, starts) in [
        (
            "/status.js",
            "text/javascript; charset=utf-8",
            "// Keeps the status page",
        ),
        (
            "/status.css",
            "text/css; charset=utf-8",
            "/* The status page",
        ),
        ("/favicon.svg", "image/svg+xml", "<svg xmlns="),
    ] {
        let a = get(&s, &format!("{path}?v=1")).await;
        assert_eq!(a.status, StatusCode::OK, "{path}");
        assert_eq!(a.header(header::CONTENT_TYPE), content_type, "{path}");
        assert_eq!(a.header(header::CACHE_CONTROL), "public, max-age=86400");
        assert!(a.text().starts_with(starts), "{path}");
    }
    assert_eq!(page::ASSETS.len(), 3);
    assert_eq!(get(&s, "/status.jsx").await.status, StatusCode::NOT_FOUND);
    let metrics = get(&s, "/metrics?collect[]=detail").await.text();
    assert!(
        metrics.contains(r#"edgesight_http_requests_total{code="200",handler="assets"} 3"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"edgesight_http_requests_total{code="404",handler="other"} 1"#));
}

/// A camera watching motion: the page's motion table and each region's share and events
/// (the one within an event coloured), and `/api/v1/latest`'s motion by region name.
#[tokio::test]
async fn motion_is_shown_per_region_and_in_the_latest_frame() {
    let mut latest = frame_with_regions();
    latest.motion = edgesight_core::motion_events::MotionReport {
        state: "watching",
        ratio: 0.125,
        threshold: 2.0,
        noise: 0.25,
        gain: 1.05,
        regions: vec![
            edgesight_core::motion_events::RegionMotion::new(0.4, true, 3),
            edgesight_core::motion_events::RegionMotion::default(),
        ],
    };
    let s = serving(vec![showing("front", latest)]);
    let html = get(&s, "/").await.text();
    assert_has(
        &html,
        &[
            "<table><caption>motion</caption>\
             <tr><th>motion</th><td data-k=\"motion\">watching</td></tr>\
             <tr><th>moving</th><td class=\"moving\" data-k=\"motion.ratio\">12.5 %</td></tr>\
             <tr><th>threshold</th><td data-k=\"motion.threshold\">2.0 (noise 0.25), light x1.05</td></tr></table>",
            "<tr><th>door</th><td class=\"moving\" data-k=\"roi.0\">mean 120.0, edges 10.0 %, \
             foreground 25.0 %, motion 40.0 % (3 events)</td></tr>",
            "data-k=\"roi.1\">mean 120.0, edges 10.0 %, foreground 25.0 %, motion 0.0 % (0 events)</td>",
            "<img src=\"/snapshot/motion.png?camera=front&amp;frame=7\"",
        ],
    );
    let json: serde_json::Value =
        serde_json::from_slice(&get(&s, "/api/v1/latest").await.body).expect("json");
    assert_eq!(
        json["motion"],
        serde_json::json!({
            "state": "watching", "ratio": 0.125, "threshold": 2.0, "noise": 0.25, "gain": 1.05,
            "regions": {
                "door": {"ratio": 0.4, "active": true, "events": 3},
                "a<b&\"c\"": {"ratio": 0.0, "active": false, "events": 0},
            },
        })
    );
}
