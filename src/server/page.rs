//! The HTML pages: a landing page with links, and (with snapshots on) a status page that
//! shows each camera's pictures (its regions drawn over the luma picture), histogram,
//! numbers, stage times, frame rate and drops, and reloads itself.

use std::fmt::Write;

use super::routes::CameraView;
use crate::health::HealthReport;
use crate::mailbox::Activity;
use crate::pipeline::{FrameResult, StageTimings};

const STYLE: &str = "body{font-family:sans-serif;margin:1em;background:#f4f4f4}\
img{max-width:32%;margin:2px;background:#000}table{border-collapse:collapse}\
td,th{padding:2px 8px;text-align:left}section{background:#fff;padding:8px;margin-bottom:1em}\
svg.frame{width:32%;height:auto;margin:2px;vertical-align:top;background:#000}\
svg.frame rect{fill:none;stroke:#ff0;stroke-width:2px;vector-effect:non-scaling-stroke}\
svg.frame text{fill:#ff0;font-family:sans-serif}";

/// Camera and ROI names are checked to be plain, but escape them anyway.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Query values: camera names are letters, digits, `_-.` (config checks it).
fn q(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || "_-.".contains(*c))
        .collect()
}

pub(crate) fn landing() -> String {
    format!(
        "<!doctype html><html><head><title>edgesight</title><style>{STYLE}</style></head><body>\
         <h1>edgesight {}</h1><ul><li><a href=\"/metrics\">/metrics</a></li>\
         <li><a href=\"/healthz\">/healthz</a></li>\
         <li><a href=\"/api/v1/latest\">/api/v1/latest</a></li></ul>\
         <p>Snapshots and the status page are off ([web] snapshots = true turns them on).</p>\
         </body></html>",
        env!("CARGO_PKG_VERSION")
    )
}

pub fn status(cameras: &[CameraView]) -> String {
    let mut html = format!(
        "<!doctype html><html><head><title>edgesight status</title>\
         <meta http-equiv=\"refresh\" content=\"2\"><style>{STYLE}</style></head><body>\
         <h1>edgesight {}</h1><p><a href=\"/metrics\">/metrics</a> · \
         <a href=\"/api/v1/latest\">/api/v1/latest</a> · <a href=\"/healthz\">/healthz</a></p>",
        env!("CARGO_PKG_VERSION")
    );
    for c in cameras {
        let name = escape(&c.name);
        let _ = write!(html, "<section><h2>camera {name}</h2>");
        let latest = c.latest();
        match &latest {
            None => html.push_str("<p>no frame yet</p>"),
            Some(l) => {
                let r = &l.result;
                let _ = write!(
                    html,
                    "<table><tr><td>frame</td><td>{} ({}x{} {}, {:.1} s ago)</td></tr>\
                     <tr><td>Otsu threshold</td><td>{}</td></tr>\
                     <tr><td>mean luma</td><td>{:.1}</td></tr>\
                     <tr><td>edges</td><td>{:.1} %</td></tr>\
                     <tr><td>foreground</td><td>{:.1} %</td></tr>",
                    l.sequence,
                    r.width,
                    r.height,
                    escape(l.source.format),
                    l.published.elapsed().as_secs_f64(),
                    r.otsu_threshold,
                    r.frame.mean(),
                    100.0 * r.frame.edge_ratio(),
                    100.0 * r.frame.foreground_ratio()
                );
                activity_rows(&mut html, &l.activity);
                for (region, s) in &r.regions {
                    let _ = write!(
                        html,
                        "<tr><td>ROI {}</td><td>mean {:.1}, edges {:.1} %, foreground {:.1} %</td></tr>",
                        escape(&region.name),
                        s.mean(),
                        100.0 * s.edge_ratio(),
                        100.0 * s.foreground_ratio()
                    );
                }
                html.push_str("</table>");
                if let Some(h) = &l.health {
                    health_table(&mut html, h);
                }
                stage_table(&mut html, &r.timings);
            }
        }
        let cam = q(&c.name);
        match &latest {
            Some(l) => luma_with_regions(&mut html, &cam, &l.result),
            None => picture(&mut html, &cam, "luma"),
        }
        for pic in ["edges", "mask", "histogram"] {
            picture(&mut html, &cam, pic);
        }
        html.push_str("</section>");
    }
    html.push_str("</body></html>");
    html
}

fn picture(html: &mut String, cam: &str, pic: &str) {
    let _ = write!(
        html,
        "<img src=\"/snapshot/{pic}.png?camera={cam}\" alt=\"{pic}\" title=\"{pic}\">"
    );
}

/// The measured frame rate and the drops, in total and by reason, as `/metrics` has them.
fn activity_rows(html: &mut String, a: &Activity) {
    let _ = write!(
        html,
        "<tr><td>frame rate</td><td>{:.1} fps</td></tr><tr><td>dropped</td><td>{}:",
        a.fps,
        a.dropped_total()
    );
    for (i, (reason, n)) in a.dropped_by_reason().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(html, "{sep} {reason} {n}");
    }
    html.push_str("</td></tr>");
}

/// The camera's health: the overall state, each kind's, and the numbers behind them.
fn health_table(html: &mut String, h: &HealthReport) {
    let percent = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.0} %", 100.0 * v));
    let _ = write!(
        html,
        "<table class=\"health\"><tr><th>health</th><th class=\"{0}\">{0}</th></tr>",
        h.state
    );
    for (kind, state) in &h.kinds {
        let state = state.name();
        let _ = write!(
            html,
            "<tr><td>{}</td><td class=\"{state}\">{state}</td></tr>",
            kind.name()
        );
    }
    let _ = write!(
        html,
        "<tr><td>sharpness</td><td>{}</td></tr>\
         <tr><td>scene change</td><td>{}</td></tr>\
         <tr><td>clipped dark / bright</td><td>{:.1} % / {:.1} %</td></tr>\
         <tr><td>unchanged for</td><td>{:.1} s</td></tr></table>",
        percent(h.sharpness),
        percent(h.scene_change),
        100.0 * h.clipped_dark,
        100.0 * h.clipped_bright,
        h.unchanged_seconds
    );
}

/// The device time of each stage of the frame, in milliseconds, and their sum.
fn stage_table(html: &mut String, timings: &StageTimings) {
    html.push_str("<table><tr><th>stage</th><th>device time</th></tr>");
    let rows = timings.iter().map(|(s, ns)| (s.name(), ns));
    for (stage, ns) in rows.chain([("total", timings.total())]) {
        let _ = write!(
            html,
            "<tr><td>{stage}</td><td>{:.3} ms</td></tr>",
            ns as f64 / 1e6
        );
    }
    html.push_str("</table>");
}

/// The luma picture with the frame's regions drawn over it and named; in frame
/// coordinates (the view box), so they scale with the picture.
fn luma_with_regions(html: &mut String, cam: &str, r: &FrameResult) {
    let (w, h) = (r.width, r.height);
    // Names a twentieth of the frame high, so they read alike on any frame size.
    let font = (h / 20).max(8);
    let _ = write!(
        html,
        "<svg class=\"frame\" viewBox=\"0 0 {w} {h}\"><title>luma</title>\
         <image href=\"/snapshot/luma.png?camera={cam}\" width=\"{w}\" height=\"{h}\"></image>"
    );
    for (region, _) in &r.regions {
        let _ = write!(
            html,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"></rect>\
             <text x=\"{}\" y=\"{}\" font-size=\"{font}\">{}</text>",
            region.x,
            region.y,
            region.width,
            region.height,
            region.x + font / 4,
            region.y + font,
            escape(&region.name)
        );
    }
    html.push_str("</svg>");
}
