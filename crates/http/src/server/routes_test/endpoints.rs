//! Every route but the snapshots: `/metrics`, HEAD, refused methods and paths,
//! `/healthz` and `/api/v1/latest`.

use hyper::header;
use hyper::{Method, Request, StatusCode};

use super::{ask, ask_with, get, open, routes};
use crate::server::page;

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
    // The first request is counted by the time the second renders (in the detail tier:
    // the HTTP family is not the default's).
    let again = get(&s, "/metrics?collect[]=detail").await;
    assert!(again
        .text()
        .contains(r#"edgesight_http_requests_total{code="200",handler="metrics"} 1"#));
}

/// Every route of the one table is answered, and counted under its own label; a path the
/// table lacks is counted as `other`.
#[tokio::test]
async fn every_route_is_answered_and_counted_under_its_label() {
    use routes::Paths;
    let s = open(true);
    // The idle camera has published nothing, so /healthz says 503.
    let want = [
        ("metrics", 200),
        ("healthz", 503),
        ("latest", 200),
        ("cameras", 200),
        ("status", 200),
        ("status_json", 200),
        ("snapshot", 200),
        ("assets", 200),
    ];
    assert_eq!(
        routes::ROUTES.map(|r| r.label),
        want.map(|(label, _)| label)
    );
    for (route, (label, code)) in routes::ROUTES.iter().zip(want) {
        let path = match route.paths {
            Paths::Exact(path) => path.to_string(),
            Paths::Under(prefix) => format!("{prefix}luma.png"),
            Paths::Assets => page::ASSETS[0].0.to_string(),
        };
        assert_eq!(
            get(&s, &path).await.status.as_u16(),
            code,
            "{label}: {path}"
        );
    }
    assert_eq!(get(&s, "/nowhere").await.status, StatusCode::NOT_FOUND);
    let metrics = get(&s, "/metrics?collect[]=detail").await.text();
    for (label, code) in want.into_iter().chain([("other", 404)]) {
        let series =
            format!(r#"edgesight_http_requests_total{{code="{code}",handler="{label}"}} 1"#);
        assert!(metrics.contains(&series), "{series} in\n{metrics}");
    }
}

/// `/metrics` comes gzip-compressed to a scraper that accepts it, as Prometheus does, and
/// as text to one that does not or refuses it with `q=0`; it varies by Accept-Encoding.
#[tokio::test]
async fn metrics_are_gzipped_when_the_scraper_accepts_it() {
    use std::io::Read as _;
    let s = open(false);
    let plain = get(&s, "/metrics").await;
    assert!(plain.headers.get(header::CONTENT_ENCODING).is_none());
    assert_eq!(plain.header(header::VARY), "Accept, Accept-Encoding");
    for accept in ["gzip", "br, GZIP;q=0.5", "*", "identity, gzip"] {
        let gz = ask_with(
            &s,
            Method::GET,
            "/metrics",
            &[(header::ACCEPT_ENCODING, accept)],
        )
        .await;
        assert_eq!(gz.header(header::CONTENT_ENCODING), "gzip", "{accept}");
        assert_eq!(gz.header(header::VARY), "Accept, Accept-Encoding");
        let mut text = String::new();
        flate2::read::GzDecoder::new(&gz.body[..])
            .read_to_string(&mut text)
            .expect("gzip");
        assert!(
            text.contains("# TYPE edgesight_build_info gauge"),
            "{accept}"
        );
        assert!(
            gz.body.len() * 2 < text.len(),
            "{} of {}",
            gz.body.len(),
            text.len()
        );
    }
    for accept in ["gzip;q=0", "identity", "deflate, br"] {
        let r = ask_with(
            &s,
            Method::GET,
            "/metrics",
            &[(header::ACCEPT_ENCODING, accept)],
        )
        .await;
        assert!(
            r.headers.get(header::CONTENT_ENCODING).is_none(),
            "{accept}"
        );
        assert!(r.text().starts_with("# HELP"), "{accept}");
    }
}

/// OpenMetrics to a scraper that prefers it (Prometheus' own Accept header), the text
/// format to one that prefers that, names neither, or only an OpenMetrics version other
/// than 1.0.0.
#[tokio::test]
async fn metrics_are_openmetrics_when_the_scraper_prefers_it() {
    let s = open(false);
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                      version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let om = ask_with(&s, Method::GET, "/metrics", &[(header::ACCEPT, prometheus)]).await;
    assert_eq!(
        om.header(header::CONTENT_TYPE),
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = om.text();
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(text.contains("# TYPE edgesight_build_info gauge"), "{text}");
    assert!(
        !text.contains("_total counter"),
        "counter families lose _total: {text}"
    );
    for accept in [
        "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5",
        "application/openmetrics-text;version=0.0.1",
        "*/*",
    ] {
        let r = ask_with(&s, Method::GET, "/metrics", &[(header::ACCEPT, accept)]).await;
        assert_eq!(
            r.header(header::CONTENT_TYPE),
            "text/plain; version=0.0.4; charset=utf-8",
            "{accept}"
        );
        assert!(!r.text().contains("# EOF"), "{accept}");
    }
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
