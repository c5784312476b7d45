//! The endpoints: `/metrics`, `/healthz`, `/api/v1/latest`, `/api/v1/cameras`,
//! `/snapshot/*.png`, and the status page (`/`, `/status.json` and the page's files).
//! GET (and HEAD) only; a request that carries a body is refused.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Body as _;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use prometheus::IntCounterVec;

use super::api;
use super::auth::{Auth, Verdict};
use super::page;
use super::reply::{response, text, Body};
use super::snapshots::{NoPicture, Picture, Png, PngBudget, DOWN_AFTER, PNG_BUDGET};
use super::view::{find, CameraView};
use super::WebSettings;
use crate::metrics::Metrics;

/// `edgesight_http_requests_total`, the family the routes set.
pub struct HttpMetrics {
    requests: IntCounterVec,
}

impl HttpMetrics {
    /// Registers `edgesight_http_requests_total` in `metrics`, in the detail tier only.
    pub fn new(metrics: &Metrics) -> HttpMetrics {
        HttpMetrics {
            // Every client probing the board adds series; the scraper sees its own
            // answers in `up` and the scrape's duration.
            requests: metrics.detail_only(metrics.counters(
                "edgesight_http_requests_total",
                "HTTP requests answered, by handler and status code.",
                &["handler", "code"],
            )),
        }
    }

    /// Counts one answer; `handler` is one of a fixed set (a label of [`ROUTES`], or `other`).
    pub fn answered(&self, handler: &'static str, status: StatusCode) {
        self.requests
            .with_label_values(&[handler, status.as_str()])
            .inc();
    }
}

pub(crate) struct RouterState {
    web: WebSettings,
    metrics: Arc<Metrics>,
    http: HttpMetrics,
    pub(super) cameras: Arc<Vec<CameraView>>,
    auth: Arc<Auth>,
    /// The encoded pictures alive, held to [`PNG_BUDGET`].
    png_budget: PngBudget,
}

impl RouterState {
    pub fn new(
        web: WebSettings,
        metrics: Arc<Metrics>,
        cameras: Arc<Vec<CameraView>>,
        auth: Arc<Auth>,
    ) -> RouterState {
        RouterState {
            web,
            http: HttpMetrics::new(&metrics),
            metrics,
            cameras,
            auth,
            png_budget: PngBudget::new(PNG_BUDGET),
        }
    }

    /// This state with `limit` PNG bytes alive at most (for tests).
    #[cfg(test)]
    pub(super) fn with_png_limit(self, limit: usize) -> RouterState {
        RouterState {
            png_budget: PngBudget::new(limit),
            ..self
        }
    }

    /// PNG bytes alive now (for tests).
    #[cfg(test)]
    pub(super) fn png_bytes_alive(&self) -> usize {
        self.png_budget.alive()
    }
}

/// The address a request came from, put in its extensions by the connection.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub std::net::IpAddr);

pub async fn handle<B>(state: &RouterState, req: Request<B>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let handler = handler_label(&path);
    let mut resp = route(state, &req, &path).await;
    for (name, value) in &state.web.headers {
        // Both checked when the config was read.
        if let (Ok(name), Ok(value)) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            resp.headers_mut().insert(name, value);
        }
    }
    if req.method() == Method::HEAD {
        // The length a GET would get, as HTTP asks of HEAD; the body goes.
        let length = resp.body().size_hint().exact().unwrap_or(0);
        resp.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        *resp.body_mut() = Full::new(Bytes::new());
    }
    state.http.answered(handler, resp.status());
    resp
}

/// How a route's paths are matched.
#[derive(Clone, Copy, Debug)]
pub(super) enum Paths {
    /// This path alone.
    Exact(&'static str),
    /// Every path under this prefix; the rest names what is asked for.
    Under(&'static str),
    /// The status page's files (`page::ASSETS`).
    Assets,
}

/// What answers a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Endpoint {
    Metrics,
    /// `/healthz`: whether every camera delivers (liveness; "health" in the code is the
    /// tamper detectors, `edgesight_core::health`).
    Liveness,
    Latest,
    Cameras,
    StatusPage,
    StatusJson,
    Snapshot,
    Asset,
}

/// One route: its paths, the `handler` label of `edgesight_http_requests_total` it is
/// counted under, and what answers it.
#[derive(Debug)]
pub(super) struct Route {
    pub paths: Paths,
    pub label: &'static str,
    pub endpoint: Endpoint,
}

const fn route_of(paths: Paths, label: &'static str, endpoint: Endpoint) -> Route {
    Route {
        paths,
        label,
        endpoint,
    }
}

/// Every route, each listed once: the dispatch ([`route`]) and the request counter's
/// labels ([`handler_label`]) both read this table, so no path is answered under another
/// route's label or counted under a route that does not answer it.
pub(super) const ROUTES: [Route; 8] = [
    route_of(Paths::Exact("/metrics"), "metrics", Endpoint::Metrics),
    route_of(Paths::Exact("/healthz"), "healthz", Endpoint::Liveness),
    route_of(Paths::Exact("/api/v1/latest"), "latest", Endpoint::Latest),
    route_of(
        Paths::Exact("/api/v1/cameras"),
        "cameras",
        Endpoint::Cameras,
    ),
    route_of(Paths::Exact("/"), "status", Endpoint::StatusPage),
    route_of(
        Paths::Exact("/status.json"),
        "status_json",
        Endpoint::StatusJson,
    ),
    route_of(Paths::Under("/snapshot/"), "snapshot", Endpoint::Snapshot),
    route_of(Paths::Assets, "assets", Endpoint::Asset),
];

impl Paths {
    /// Whether `path` is one of these, and its rest after an [`Paths::Under`] prefix.
    fn rest<'p>(&self, path: &'p str) -> Option<&'p str> {
        match *self {
            Paths::Exact(p) => (path == p).then_some(""),
            Paths::Under(prefix) => path.strip_prefix(prefix),
            Paths::Assets => page::ASSETS.iter().any(|(p, ..)| *p == path).then_some(""),
        }
    }
}

/// The route that answers `path`, with the path's rest after its prefix.
fn find_route(path: &str) -> Option<(&'static Route, &str)> {
    ROUTES
        .iter()
        .find_map(|r| r.paths.rest(path).map(|rest| (r, rest)))
}

/// A fixed set of label values, whatever paths clients make up.
fn handler_label(path: &str) -> &'static str {
    find_route(path).map_or("other", |(r, _)| r.label)
}

async fn route<B>(state: &RouterState, req: &Request<B>, path: &str) -> Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let has_body = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .is_some_and(|v| v.as_bytes() != b"0")
        || req.headers().contains_key(header::TRANSFER_ENCODING);
    if has_body {
        return text(StatusCode::PAYLOAD_TOO_LARGE, "requests carry no body\n");
    }
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let peer = req.extensions().get::<Peer>().map(|p| p.0);
    match state.auth.check(authorization, peer).await {
        Verdict::Allowed => {}
        Verdict::Denied => {
            let mut r = text(StatusCode::UNAUTHORIZED, "unauthorized\n");
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"edgesight\""),
            );
            return r;
        }
        Verdict::Busy => {
            let mut r = text(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many password checks at once; retry\n",
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return r;
        }
    }
    let query = req.uri().query();
    let not_found = || text(StatusCode::NOT_FOUND, "not found\n");
    let Some((route, rest)) = find_route(path) else {
        return not_found();
    };
    match route.endpoint {
        Endpoint::Metrics => super::scrape::metrics(&state.metrics, req.headers(), query),
        Endpoint::Liveness => liveness(state),
        Endpoint::Latest => api::latest(&state.cameras, query),
        Endpoint::Cameras => api::cameras(&state.cameras),
        Endpoint::StatusPage => response(
            StatusCode::OK,
            "text/html; charset=utf-8",
            page::html(&status_page(state)),
        ),
        Endpoint::StatusJson => match status_page(state).json() {
            Ok(json) => response(StatusCode::OK, "application/json", json),
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
        },
        Endpoint::Snapshot if state.web.snapshots => {
            snapshot(state, rest, query, req.headers()).await
        }
        Endpoint::Snapshot => not_found(),
        Endpoint::Asset => match page::ASSETS.iter().find(|(p, ..)| *p == path) {
            Some((_, content_type, bytes)) => {
                let mut r = response(StatusCode::OK, content_type, *bytes);
                // Their URLs name the build (`?v=`), so a day's caching is safe.
                r.headers_mut().insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("public, max-age=86400"),
                );
                r
            }
            None => not_found(),
        },
    }
}

fn status_page(state: &RouterState) -> page::Page {
    page::Page::new(&state.cameras, state.web.snapshots, state.web.stale_after)
}

/// 200 while every camera published a frame within the configured staleness.
fn liveness(state: &RouterState) -> Response<Body> {
    let stale: Vec<String> = state
        .cameras
        .iter()
        .filter(|c| {
            c.latest()
                .is_none_or(|l| l.published.elapsed() > state.web.stale_after)
        })
        .map(|c| c.name.clone())
        .collect();
    if stale.is_empty() {
        text(StatusCode::OK, "ok\n")
    } else {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("no recent frames from: {}\n", stale.join(", ")),
        )
    }
}

async fn snapshot(
    state: &RouterState,
    name: &str,
    query: Option<&str>,
    request_headers: &header::HeaderMap,
) -> Response<Body> {
    let Some(kind) = Picture::from_name(name) else {
        return text(StatusCode::NOT_FOUND, "not found\n");
    };
    let camera = match find(&state.cameras, query) {
        Ok(c) => c,
        Err(e) => return text(StatusCode::NOT_FOUND, format!("{e}\n")),
    };
    let last_frame = camera.latest().map(|l| l.published.elapsed());
    let (message, retry) = match camera
        .snapshots()
        .png(
            kind,
            last_frame,
            state.web.stale_after.max(DOWN_AFTER),
            &state.png_budget,
        )
        .await
    {
        Ok(png) => return picture(png, request_headers),
        Err(NoPicture::Down(message)) => (message, "5"),
        Err(NoPicture::OverBudget) => (
            "snapshot answers not yet read by their clients hold the memory set aside \
             for them\n"
                .to_string(),
            "1",
        ),
        Err(NoPicture::Failed(message)) => (message, "1"),
    };
    let mut r = text(StatusCode::SERVICE_UNAVAILABLE, message);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static(retry));
    r
}

/// A picture, or 304 when the browser holds it already (its `If-None-Match` names this
/// read-back's ETag). Cached for a second: no newer one is read back sooner.
fn picture(png: Png, request_headers: &header::HeaderMap) -> Response<Body> {
    let held = !png.etag.is_empty()
        && request_headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|tags| tags.split(',').any(|t| t.trim() == png.etag));
    let mut r = if held {
        let mut r = response(StatusCode::NOT_MODIFIED, "image/png", Bytes::new());
        r.headers_mut().remove(header::CONTENT_TYPE);
        r
    } else {
        response(StatusCode::OK, "image/png", png.bytes)
    };
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=1"),
    );
    if let Ok(etag) = HeaderValue::from_str(&png.etag) {
        if !png.etag.is_empty() {
            r.headers_mut().insert(header::ETAG, etag);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_labels_are_a_fixed_set() {
        assert_eq!(handler_label("/snapshot/luma.png"), "snapshot");
        assert_eq!(handler_label("/../etc/passwd"), "other");
        assert_eq!(handler_label("/metrics"), "metrics");
    }
}
