//! The routes against fake cameras, in process: no socket, no binary, no OpenCL, and
//! nothing of the daemon. A fake camera is the two ends a camera thread would hold (its
//! latest-frame slot and its snapshot requests), answered by a plain thread; what the
//! daemon's publisher would put in the slot (a `Latest` with its `Activity`) is made here
//! by hand. That the activity says what `/metrics` says is the daemon's side, tested
//! beside `CameraMetrics::activity`.
//!
//! The fakes and the request helpers are here; the tests, by topic, in `endpoints`
//! (metrics, HEAD, refusals, healthz, latest), `page` (the status page, its data and
//! files), `credentials` (basic auth and its bcrypt queue) and `snapshots` (pictures, and what slow or down cameras
//! may not cost anyone else).

mod credentials;
mod endpoints;
mod page;
mod snapshots;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{self, HeaderMap};
use hyper::{Method, Request, StatusCode};
use tokio::sync::watch;

use super::auth::Auth;
use super::routes::{self, RouterState};
use super::view::CameraView;
use super::{ListenAddress, WebSettings};
use crate::mailbox::{Activity, CameraStatus, Latest, Snapshot, SnapshotReply, SourceInfo};
use crate::metrics::Metrics;
use edgesight_core::health::{self, HealthReport, Kind};
use edgesight_core::pipeline::{FrameResult, PipelineOptions};

const PASSWORD: &str = "s3cret";

fn web(snapshots: bool) -> WebSettings {
    WebSettings {
        listen: vec![ListenAddress::parse("127.0.0.1:0").expect("address")],
        snapshots,
        stale_after: Duration::from_secs(60),
        max_connections: 8,
        tls: None,
        headers: Vec::new(),
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
        motion: Default::default(),
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

/// A camera's status, set by `set` as its thread would.
fn status(set: impl FnOnce(&CameraStatus)) -> Arc<CameraStatus> {
    let status = Arc::new(CameraStatus::default());
    set(&status);
    status
}

/// A camera that is up, has published `latest` and answers snapshot requests (4x2
/// pictures).
fn showing(name: &str, latest: Latest) -> CameraView {
    let (tx, view) = showing_from(name, latest);
    // The view keeps the last frame sent, whoever holds the sender.
    drop(tx);
    view
}

/// As [`showing`], with the sender that publishes its next frames.
fn showing_from(name: &str, latest: Latest) -> (watch::Sender<Option<Arc<Latest>>>, CameraView) {
    let (tx, latest) = watch::channel(Some(Arc::new(latest)));
    let (requests, taken) = mpsc::channel::<SnapshotReply>();
    std::thread::spawn(move || {
        for reply in taken {
            let _ = reply.send(Arc::new(Snapshot {
                width: 4,
                height: 2,
                luma: vec![10; 8],
                gradient: vec![20; 8],
                mask: vec![255; 8],
                motion: vec![3; 8],
                histogram: [1; 256],
                otsu_threshold: 99,
                jpeg: None,
            }));
        }
    });
    let view = CameraView::new(name.into(), latest, requests).with_status(status(|s| s.up()));
    (tx, view)
}

/// The 64x48 pictures a slower camera answers with.
fn pictures_64x48() -> Arc<Snapshot> {
    Arc::new(Snapshot {
        width: 64,
        height: 48,
        luma: (0..64 * 48).map(|i| (i * 7 % 251) as u8).collect(),
        gradient: vec![20; 64 * 48],
        mask: vec![255; 64 * 48],
        motion: vec![30; 64 * 48],
        histogram: [1; 256],
        otsu_threshold: 99,
        jpeg: None,
    })
}

/// A camera that has published frame 7 and answers each snapshot request after `delay`
/// (a camera at a low rate); `asked` counts the requests it got.
fn slow(name: &str, delay: Duration, asked: Arc<AtomicUsize>) -> CameraView {
    let (_tx, latest) = watch::channel(Some(Arc::new(frame_seven())));
    let (requests, taken) = mpsc::channel::<SnapshotReply>();
    std::thread::spawn(move || {
        for reply in taken {
            asked.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(delay);
            let _ = reply.send(pictures_64x48());
        }
    });
    CameraView::new(name.into(), latest, requests)
}

/// A camera that has published frame 7 and holds each snapshot request until the sender
/// of `release` is dropped (a read-back in progress for as long as the test likes);
/// `asked` counts the requests it got.
fn held(name: &str, asked: Arc<AtomicUsize>, release: mpsc::Receiver<()>) -> CameraView {
    let (_tx, latest) = watch::channel(Some(Arc::new(frame_seven())));
    let (requests, taken) = mpsc::channel::<SnapshotReply>();
    std::thread::spawn(move || {
        for reply in taken {
            asked.fetch_add(1, Ordering::Relaxed);
            // Err once released: every request from then on is answered at once.
            let _ = release.recv();
            let _ = reply.send(pictures_64x48());
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

fn state(web: WebSettings, auth: Auth) -> RouterState {
    let cameras = vec![published("front"), silent("idle")];
    RouterState::new(
        web,
        Arc::new(Metrics::new()),
        Arc::new(cameras),
        Arc::new(auth),
    )
}

/// No users, and `cameras` whose metrics are in `metrics`.
fn open_on(metrics: Arc<Metrics>, cameras: Vec<CameraView>) -> RouterState {
    let auth = Auth::new(BTreeMap::new()).expect("no users");
    RouterState::new(web(true), metrics, Arc::new(cameras), Arc::new(auth))
}

fn open(snapshots: bool) -> RouterState {
    state(
        web(snapshots),
        Auth::new(BTreeMap::new()).expect("no users"),
    )
}

/// Snapshots on and one user, `prom`; `busy` fills the bcrypt queue first, and the
/// second value keeps it full.
fn protected(busy: bool) -> (RouterState, Option<impl Sized>) {
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

async fn ask(
    state: &RouterState,
    method: Method,
    uri: &str,
    authorization: Option<&str>,
) -> Answer {
    let headers: Vec<(header::HeaderName, &str)> = authorization
        .map(|a| (header::AUTHORIZATION, a))
        .into_iter()
        .collect();
    ask_with(state, method, uri, &headers).await
}

async fn ask_with(
    state: &RouterState,
    method: Method,
    uri: &str,
    headers: &[(header::HeaderName, &str)],
) -> Answer {
    let mut req = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        req = req.header(name, *value);
    }
    let resp = routes::handle(state, req.body(()).expect("request")).await;
    let (parts, body) = resp.into_parts();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.expect("body").to_bytes(),
    }
}

async fn get(state: &RouterState, uri: &str) -> Answer {
    ask(state, Method::GET, uri, None).await
}
