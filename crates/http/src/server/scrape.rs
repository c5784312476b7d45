//! `/metrics`: the text format 0.0.4 or OpenMetrics 1.0, as the scraper's `Accept` prefers,
//! gzip-compressed where its `Accept-Encoding` takes it; of the tier the query names
//! (node_exporter's `collect[]` and `exclude[]`), else the configured one.

use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use super::reply::{response, text, Body};
use crate::metrics::{Metrics, Tier};

/// The scrape in OpenMetrics where the scraper prefers it (Prometheus asks for it first),
/// else in the text format 0.0.4; gzip-compressed where the scraper accepts it (Prometheus
/// always does): a board with a few cameras sends about a sixth of the bytes.
pub(super) fn metrics(
    metrics: &Metrics,
    headers: &hyper::HeaderMap,
    query: Option<&str>,
) -> Response<Body> {
    let tier = match tier(query, metrics.tier()) {
        Ok(tier) => tier,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    let (text, content_type) = if prefers_openmetrics(headers) {
        (
            metrics.encode_openmetrics(tier),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )
    } else {
        (
            metrics.encode_tier(tier),
            "text/plain; version=0.0.4; charset=utf-8",
        )
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

/// Why a scrape's query names no tier.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum TierQueryError {
    /// `collect[]` or `exclude[]` (`key`) names a group that does not exist.
    #[error("{key}: unknown group '{value}' (expected {names})", names = Tier::NAMES)]
    UnknownGroup { key: String, value: String },
    /// `exclude[]=default`: the default group is in every scrape.
    #[error(
        "exclude[]: the default group is in every scrape; exclude[]=detail leaves the \
         detail out"
    )]
    DefaultExcluded,
}

/// The tier a scrape's query asks for, node_exporter's way: `collect[]=GROUP` (repeated)
/// names the groups to export, `exclude[]=GROUP` those to leave out, and a query naming
/// neither gets `configured`. The groups are `default` and `detail`, the detail one
/// holding the default's series too, so `collect[]=detail` is the whole detail tier and
/// `exclude[]=detail` the default tier whatever the config says.
pub(super) fn tier(query: Option<&str>, configured: Tier) -> Result<Tier, TierQueryError> {
    let (mut collect, mut excluded) = (None, false);
    for pair in query.unwrap_or_default().split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        // Prometheus sends `params` percent-encoded: `collect%5B%5D=detail`.
        let key = key.replace("%5B", "[").replace("%5b", "[");
        let key = key.replace("%5D", "]").replace("%5d", "]");
        let exclude = match key.as_str() {
            "collect[]" => false,
            "exclude[]" => true,
            _ => continue,
        };
        let group: Tier = value.parse().map_err(|_| TierQueryError::UnknownGroup {
            key: key.clone(),
            value: value.to_string(),
        })?;
        match (exclude, group) {
            (false, group) => collect = collect.max(Some(group)),
            (true, Tier::Detail) => excluded = true,
            (true, Tier::Default) => return Err(TierQueryError::DefaultExcluded),
        }
    }
    let tier = collect.unwrap_or(configured);
    Ok(if excluded { Tier::Default } else { tier })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_the_tier_as_node_exporter_names_collectors() {
        use Tier::{Default, Detail};
        for (query, configured, want) in [
            (None, Default, Default),
            (None, Detail, Detail),
            (Some("collect[]=detail"), Default, Detail),
            (Some("collect%5B%5D=detail"), Default, Detail),
            (Some("collect%5b%5d=detail"), Default, Detail),
            (Some("collect[]=default"), Detail, Default),
            (Some("collect[]=default&collect[]=detail"), Default, Detail),
            (Some("exclude[]=detail"), Detail, Default),
            (Some("collect[]=detail&exclude[]=detail"), Default, Default),
            // Other parameters are not the tier's.
            (Some("camera=front&debug"), Detail, Detail),
        ] {
            assert_eq!(tier(query, configured), Ok(want), "{query:?}");
        }
        let refusal = |query| {
            let e = tier(Some(query), Default).unwrap_err();
            (e.to_string(), e)
        };
        let unknown = |key: &str, value: &str| TierQueryError::UnknownGroup {
            key: key.into(),
            value: value.into(),
        };
        assert_eq!(
            refusal("collect[]=all"),
            (
                "collect[]: unknown group 'all' (expected default or detail)".into(),
                unknown("collect[]", "all")
            )
        );
        assert_eq!(
            refusal("exclude%5B%5D="),
            (
                "exclude[]: unknown group '' (expected default or detail)".into(),
                unknown("exclude[]", "")
            )
        );
        assert_eq!(
            refusal("exclude[]=default"),
            (
                "exclude[]: the default group is in every scrape; exclude[]=detail leaves the \
                 detail out"
                    .into(),
                TierQueryError::DefaultExcluded
            )
        );
    }
}
