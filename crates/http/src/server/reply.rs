//! The answers' common shape: a whole body, its content type, and `no-store` unless a
//! route says otherwise. Every route's module builds its answers with these.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

pub(super) type Body = Full<Bytes>;

/// An answer of `content_type`, not to be cached.
pub(super) fn response(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// A plain-text answer: a message, an error, `ok`.
pub(super) fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    response(status, "text/plain; charset=utf-8", body)
}
