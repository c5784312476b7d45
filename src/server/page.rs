//! The HTML pages: a landing page with links, and (with snapshots on) a status page that
//! shows each camera's pictures, histogram and numbers and reloads itself.

use std::fmt::Write;

use super::routes::CameraView;

const STYLE: &str = "body{font-family:sans-serif;margin:1em;background:#f4f4f4}\
img{max-width:32%;margin:2px;background:#000}table{border-collapse:collapse}\
td{padding:2px 8px}section{background:#fff;padding:8px;margin-bottom:1em}";

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
        match c.latest() {
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
            }
        }
        let cam = q(&c.name);
        for pic in ["luma", "edges", "mask", "histogram"] {
            let _ = write!(
                html,
                "<img src=\"/snapshot/{pic}.png?camera={cam}\" alt=\"{pic}\" title=\"{pic}\">"
            );
        }
        html.push_str("</section>");
    }
    html.push_str("</body></html>");
    html
}
