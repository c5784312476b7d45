//! Basic auth in front of every path, and a full bcrypt queue answered at once.

use hyper::header;
use hyper::{Method, StatusCode};

use super::{ask, basic, get, protected, PASSWORD};

#[tokio::test]
async fn every_path_asks_for_credentials_and_takes_only_the_right_ones() {
    let (s, _) = protected(false);
    let right = basic("prom", PASSWORD);
    for path in [
        "/metrics",
        "/healthz",
        "/api/v1/latest",
        "/api/v1/cameras",
        "/",
        "/status.json",
        "/status.js",
        "/favicon.svg",
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
