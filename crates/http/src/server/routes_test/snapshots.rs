//! `/snapshot/*.png`: pictures of a camera that published, refusals, snapshots off, and
//! what a down or slow camera may not cost the other requests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use hyper::header;
use hyper::{Method, StatusCode};

use super::{ask_with, get, held, open, open_on, silent, slow};
use crate::metrics::Metrics;

#[tokio::test]
async fn snapshots_of_a_camera_that_published_are_pngs() {
    let s = open(true);
    for picture in ["luma", "edges", "mask"] {
        let a = get(&s, &format!("/snapshot/{picture}.png?camera=front")).await;
        assert_eq!(a.status, StatusCode::OK, "{picture}");
        assert_eq!(a.header(header::CONTENT_TYPE), "image/png");
        // No newer picture is read back within a second.
        assert_eq!(a.header(header::CACHE_CONTROL), "private, max-age=1");
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

/// A picture carries its read-back's ETag: a browser that holds it gets 304 and no body
/// until a newer read-back; another tag, or one of a newer read-back, gets the picture.
#[tokio::test]
async fn a_picture_the_browser_holds_is_not_sent_again() {
    let s = open(true);
    let first = get(&s, "/snapshot/luma.png?camera=front&frame=7").await;
    let etag = first.header(header::ETAG).to_string();
    assert!(etag.starts_with('"') && etag.ends_with("-1\""), "{etag}");
    let held = ask_with(
        &s,
        Method::GET,
        "/snapshot/luma.png?camera=front&frame=7",
        &[(header::IF_NONE_MATCH, &format!("\"x\", {etag}"))],
    )
    .await;
    assert_eq!(held.status, StatusCode::NOT_MODIFIED);
    assert!(held.body.is_empty());
    assert_eq!(held.header(header::ETAG), etag);
    assert!(held.headers.get(header::CONTENT_TYPE).is_none());
    let other = ask_with(
        &s,
        Method::GET,
        "/snapshot/edges.png?camera=front",
        &[(header::IF_NONE_MATCH, "\"0-1\"")],
    )
    .await;
    assert_eq!(other.status, StatusCode::OK);
    // A second later the camera is asked again: a new read-back, a new tag.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let _asked = get(&s, "/snapshot/luma.png?camera=front").await;
    let mut newer = get(&s, "/snapshot/luma.png?camera=front").await;
    for _ in 0..50 {
        if newer.header(header::ETAG) != etag {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        newer = get(&s, "/snapshot/luma.png?camera=front").await;
    }
    assert!(
        newer.header(header::ETAG).ends_with("-2\""),
        "{}",
        newer.header(header::ETAG)
    );
    let stale = ask_with(
        &s,
        Method::GET,
        "/snapshot/luma.png?camera=front",
        &[(header::IF_NONE_MATCH, &etag)],
    )
    .await;
    assert_eq!(stale.status, StatusCode::OK);
    assert!(!stale.body.is_empty());
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
async fn snapshots_off_means_no_pictures() {
    let s = open(false);
    let a = get(&s, "/snapshot/luma.png?camera=front").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    let page = get(&s, "/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text().contains("Pictures are off"));
}

/// Resilience round 2, item 4: snapshot requests for a down or slow camera held a lock
/// across each 3 s wait, so requests queued behind one another. A camera with no frames
/// answers at once; requests for a slow one share one read-back and hold nothing others
/// need: while that read-back is held, every other request is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round2_4_snapshots_of_a_down_or_slow_camera_lock_out_no_one() {
    let asked = Arc::new(AtomicUsize::new(0));
    let (release, gate) = mpsc::channel::<()>();
    let cameras = vec![held("slow", Arc::clone(&asked), gate), silent("down")];
    let s = Arc::new(open_on(Arc::new(Metrics::new()), cameras));
    let snapshot = |camera: &'static str| {
        let s = Arc::clone(&s);
        tokio::spawn(async move {
            let a = get(&s, &format!("/snapshot/luma.png?camera={camera}")).await;
            (a.status, a.headers.get(header::RETRY_AFTER).cloned())
        })
    };
    let (mut slow_requests, mut down_requests) = (Vec::new(), Vec::new());
    for _ in 0..32 {
        slow_requests.push(snapshot("slow"));
        down_requests.push(snapshot("down"));
    }
    // While the slow camera's read-back is held, the down camera's requests and the other
    // endpoints are answered. Had they waited behind a lock held across a read-back, they
    // would have come one 3 s timeout after another; the minute is a failure timeout.
    let others = async {
        assert_eq!(get(&s, "/metrics").await.status, StatusCode::OK);
        assert_eq!(
            get(&s, "/api/v1/latest?camera=slow").await.status,
            StatusCode::OK
        );
        for r in down_requests {
            assert_eq!(
                r.await.expect("no panic"),
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    Some("5".parse().expect("value"))
                )
            );
        }
    };
    tokio::time::timeout(Duration::from_secs(60), others)
        .await
        .expect("the other requests answered while a read-back was held");
    // Meanwhile the slow camera got its one request, and no answer has gone out for it.
    let deadline = Instant::now() + Duration::from_secs(60);
    while asked.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "the slow camera was never asked");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        slow_requests.iter().all(|r| !r.is_finished()),
        "a request for the slow camera was answered before its read-back"
    );
    drop(release);
    for r in slow_requests {
        assert_eq!(r.await.expect("no panic").0, StatusCode::OK);
    }
    // One read-back for all 32 requests.
    assert_eq!(asked.load(Ordering::Relaxed), 1);
}

/// Resilience round 2, item 5: clients that never read their answers must not grow the
/// daemon towards its memory limit (bench/notes/http-resilience.md#snapshot-flood has
/// what they did when every request encoded its own PNG). A picture is encoded once per
/// read-back and every answer holds the same bytes; the bytes alive are held to a budget,
/// past which requests get 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round2_5_a_snapshot_is_encoded_once_and_held_to_a_budget() {
    let asked = Arc::new(AtomicUsize::new(0));
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
    assert_eq!(asked.load(Ordering::Relaxed), 1);

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

/// A read-back's pictures and PNGs are let go once kept their time with no newer one:
/// nothing of them stays alive, and the next request reads the camera again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pictures_nobody_asks_for_again_are_let_go() {
    let asked = Arc::new(AtomicUsize::new(0));
    let keep = Duration::from_millis(300);
    let camera = slow("front", Duration::ZERO, Arc::clone(&asked)).keeping_pictures(keep);
    let s = open_on(Arc::new(Metrics::new()), vec![camera]);
    let first = get(&s, "/snapshot/luma.png?camera=front").await;
    let served = Instant::now();
    assert_eq!(first.status, StatusCode::OK);
    let len = first.body.len();
    drop(first);
    assert_eq!(s.png_bytes_alive(), len, "kept by the cache");
    while s.png_bytes_alive() > 0 {
        assert!(served.elapsed() < Duration::from_secs(10), "never let go");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The read-back came just before the answer.
    let kept = served.elapsed();
    assert!(
        kept >= keep - Duration::from_millis(100),
        "let go after {kept:?}"
    );
    let again = get(&s, "/snapshot/luma.png?camera=front").await;
    assert_eq!(again.status, StatusCode::OK);
    assert!(again.header(header::ETAG).ends_with("-2\""));
    assert_eq!(asked.load(Ordering::Relaxed), 2);
}
