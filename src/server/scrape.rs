//! `/metrics`: the text format 0.0.4 or OpenMetrics 1.0, as the scraper's `Accept` prefers,
//! gzip-compressed where its `Accept-Encoding` takes it.

use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use super::routes::{response, text, Body};
use crate::metrics::Metrics;

/// The scrape in OpenMetrics where the scraper prefers it (Prometheus asks for it first),
/// else in the text format 0.0.4; gzip-compressed where the scraper accepts it (Prometheus
/// always does): a board with a few cameras sends about a sixth of the bytes.
pub(super) fn metrics(metrics: &Metrics, headers: &hyper::HeaderMap) -> Response<Body> {
    let (text, content_type) = if prefers_openmetrics(headers) {
        (
            metrics.encode_openmetrics(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )
    } else {
        (metrics.encode(), "text/plain; version=0.0.4; charset=utf-8")
    };
    let vary = HeaderValue::from_static("Accept, Accept-Encoding");
    if !accepts_gzip(headers) {
        let mut r = response(StatusCode::OK, content_type, text);
        r.headers_mut().insert(header::VARY, vary);
        return r;
    }
    use std::io::Write as _;
    // The fastest level: on a board the scrape's CPU matters more than its last bytes.
    let mut gz = flate2::write::GzEncoder::new(
        Vec::with_capacity(text.len() / 4),
        flate2::Compression::fast(),
    );
    let body = match gz.write_all(&text).and_then(|()| gz.finish()) {
        Ok(body) => body,
        Err(e) => return text_error(format!("compressing the scrape: {e}\n")),
    };
    let mut r = response(StatusCode::OK, content_type, body);
    r.headers_mut()
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    r.headers_mut().insert(header::VARY, vary);
    r
}

/// Whether `Accept` rates OpenMetrics (version 1.0.0, or none named) above the text
/// format: a scraper that names neither gets the text format.
fn prefers_openmetrics(headers: &hyper::HeaderMap) -> bool {
    let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
    for range in headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let mut parts = range.split(';').map(str::trim);
        let kind = parts.next().unwrap_or_default().to_ascii_lowercase();
        let (mut q, mut version) = (1.0f32, None);
        for p in parts {
            if let Some(v) = p.strip_prefix("q=") {
                q = v.parse().unwrap_or(0.0);
            } else if let Some(v) = p.strip_prefix("version=") {
                version = Some(v.to_string());
            }
        }
        match kind.as_str() {
            "application/openmetrics-text" if version.as_deref().is_none_or(|v| v == "1.0.0") => {
                openmetrics = openmetrics.max(q)
            }
            "text/plain" => text = text.max(q),
            _ => {}
        }
    }
    openmetrics > 0.0 && openmetrics >= text
}

fn text_error(message: String) -> Response<Body> {
    text(StatusCode::INTERNAL_SERVER_ERROR, message)
}

/// Whether `Accept-Encoding` takes gzip: named (or `*`) without `q=0`.
fn accepts_gzip(headers: &hyper::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}
