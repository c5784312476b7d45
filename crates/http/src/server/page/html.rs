//! The status page's HTML, and the files it loads (script, style sheet, icon). They are
//! files of their own, not inline, so that a `Content-Security-Policy: default-src 'self'`
//! header (`http_server_config.headers`) leaves the page working.

use std::fmt::Write;

use super::{Page, Row, Tile};

/// The page's files: path, content type, bytes. Their URLs carry the build's revision, so
/// a browser may keep them for a day and still gets an upgrade's at once.
pub(crate) const ASSETS: [(&str, &str, &[u8]); 3] = [
    (
        "/status.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/status.js"),
    ),
    (
        "/status.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/status.css"),
    ),
    (
        "/favicon.svg",
        "image/svg+xml",
        include_bytes!("assets/favicon.svg"),
    ),
];

/// The pictures of a camera, in the order shown, with their captions.
const PICTURES: [(&str, &str); 5] = [
    ("luma", "luma, with the regions"),
    ("edges", "Sobel gradient"),
    ("mask", "Otsu foreground"),
    ("histogram", "histogram and Otsu threshold"),
    ("motion", "motion: the still tiles dimmed"),
];

/// Camera and region names are checked to be plain, but escape them anyway.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Query values: camera names are letters, digits, `_-.` (the config checks it).
fn q(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || "_-.".contains(*c))
        .collect()
}

pub(crate) fn html(page: &Page) -> String {
    let version = crate::VERSION;
    let mut out = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>edgesight: {summary}</title>\
         <link rel=\"icon\" href=\"/favicon.svg?v={version}\" type=\"image/svg+xml\">\
         <link rel=\"stylesheet\" href=\"/status.css?v={version}\">\
         <script src=\"/status.js?v={version}\" defer></script>\
         <noscript><meta http-equiv=\"refresh\" content=\"5\"></noscript></head><body>\
         <header><h1>edgesight {pkg}</h1>\
         <p id=\"summary\" class=\"summary {class}\">{summary}</p>\
         <nav><a href=\"/metrics\">metrics</a> <a href=\"/api/v1/cameras\">cameras</a> \
         <a href=\"/api/v1/latest\">latest</a> <a href=\"/healthz\">healthz</a></nav></header>\
         <main id=\"cameras\" data-layout=\"{layout}\">",
        summary = page.counts.text(),
        class = page.counts.class(),
        pkg = env!("CARGO_PKG_VERSION"),
        layout = page.layout(),
    );
    for t in &page.tiles {
        tile(&mut out, t);
    }
    if !page.snapshots {
        out.push_str("<p class=\"note\">Pictures are off ([web] snapshots = true shows them).</p>");
    }
    out.push_str("</main></body></html>");
    out
}

fn tile(out: &mut String, t: &Tile) {
    let name = escape(&t.name);
    let _ = write!(
        out,
        "<article class=\"tile {class}\" data-camera=\"{name}\" data-sequence=\"{seq}\">\
         <h2><span class=\"name\">{name}</span> ",
        class = t.badge.class,
        seq = t.sequence.map_or(String::new(), |s| s.to_string()),
    );
    value(out, "span", "badge", &t.badge);
    out.push_str("</h2>");
    // Kept while the camera is up, hidden, so the script can fill it in place.
    let hidden = if t.reason.value.is_empty() {
        " hidden"
    } else {
        ""
    };
    let _ = write!(out, "<p class=\"reason\"{hidden}>");
    value(out, "span", "", &t.reason);
    out.push_str("</p>");
    if let (Some(p), Some(seq)) = (&t.pictures, t.sequence) {
        pictures(out, &q(&t.name), seq, p);
    }
    for g in &t.groups {
        if g.folded {
            let _ = write!(out, "<details><summary>{}</summary><table>", g.title);
        } else {
            let _ = write!(out, "<table><caption>{}</caption>", g.title);
        }
        for r in &g.rows {
            let _ = write!(out, "<tr><th>{}</th>", escape(&r.label));
            value(out, "td", "", r);
            out.push_str("</tr>");
        }
        out.push_str(if g.folded {
            "</table></details>"
        } else {
            "</table>"
        });
    }
    out.push_str("</article>");
}

/// A row's value in an element the script finds by `data-k` and rewrites.
fn value(out: &mut String, element: &str, base_class: &str, r: &Row) {
    let class = match (base_class, r.class) {
        ("", "") => String::new(),
        (base, "") | ("", base) => format!(" class=\"{base}\""),
        (base, class) => format!(" class=\"{base} {class}\""),
    };
    let _ = write!(
        out,
        "<{element}{class} data-k=\"{}\">{}</{element}>",
        escape(&r.key),
        escape(&r.value)
    );
}

/// The four pictures; the luma with the regions drawn over it in frame coordinates, so
/// they scale with it. Loaded lazily (only when scrolled to) and by frame, so a browser
/// fetches a picture again only for a new frame.
fn pictures(out: &mut String, cam: &str, seq: u64, p: &super::TilePictures) {
    let (w, h) = (p.width, p.height);
    // Names a twentieth of the frame high, so they read alike on any frame size.
    let font = (h / 20).max(8);
    out.push_str("<div class=\"pictures\">");
    for (i, (pic, caption)) in PICTURES.iter().enumerate() {
        let _ = write!(
            out,
            "<figure><div class=\"frame\"><img src=\"/snapshot/{pic}.png?camera={cam}&amp;frame={seq}\" \
             alt=\"{pic} of camera {cam}\" loading=\"lazy\" data-picture=\"{pic}\">"
        );
        if i == 0 {
            let _ = write!(
                out,
                "<svg viewBox=\"0 0 {w} {h}\" preserveAspectRatio=\"none\" aria-hidden=\"true\">"
            );
            for r in &p.regions {
                let _ = write!(
                    out,
                    "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"></rect>\
                     <text x=\"{}\" y=\"{}\" font-size=\"{font}\">{}</text>",
                    r.x,
                    r.y,
                    r.width,
                    r.height,
                    r.x + font / 4,
                    r.y + font,
                    escape(&r.name)
                );
            }
            out.push_str("</svg>");
        }
        let _ = write!(out, "</div><figcaption>{caption}</figcaption></figure>");
    }
    out.push_str("</div>");
}
