//! The Prometheus registry the daemon exports, and the helpers that declare families in
//! it. Each family is declared beside the code that sets it, as node_exporter's
//! collectors do: the camera and stage families beside the camera loop
//! (`daemon::camera_metrics`), the reload family beside the reload (`daemon::reload`),
//! the HTTP family beside the routes (`server::HttpMetrics`). What lives here is only
//! what every one of them shares: the registry, its text rendering, and the process and
//! build families that belong to no part in particular.
//!
//! Updates are atomics on children resolved ahead of time, so a scrape never makes a
//! camera wait.

use prometheus::{
    core::Collector, Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

/// The registry every family registers in; `/metrics` renders it.
pub struct Metrics {
    registry: Registry,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with the process's own families (CPU, memory, descriptors) and
    /// `edgesight_build_info`; the parts of the daemon add theirs.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        #[cfg(target_os = "linux")]
        registry
            .register(Box::new(
                prometheus::process_collector::ProcessCollector::for_self(),
            ))
            .expect("the process collector registers once");
        let metrics = Metrics { registry };
        let build = metrics.int_gauges(
            "edgesight_build_info",
            "Always 1; the labels say which edgesight is running: its version, the source \
             revision it was built from and the Rust compiler's version.",
            &["version", "revision", "rustversion"],
        );
        build
            .with_label_values(&[
                env!("CARGO_PKG_VERSION"),
                env!("EDGESIGHT_REVISION"),
                env!("EDGESIGHT_RUSTC_VERSION"),
            ])
            .set(1);
        metrics
    }

    /// The text exposition of every family.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 * 1024);
        // Encoding into a Vec fails only on families that break the format, which the
        // registry refuses at registration.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!("encoding metrics: {e}");
        }
        out
    }

    /// The OpenMetrics 1.0 exposition of every family (what Prometheus asks for first).
    pub fn encode_openmetrics(&self) -> Vec<u8> {
        openmetrics(&self.encode())
    }

    /// The value of the series `name{labels}`, written exactly so, in a scrape; for the
    /// crate's unit tests.
    #[cfg(test)]
    pub(crate) fn sample(&self, series: &str) -> Option<f64> {
        let text = String::from_utf8(self.encode()).expect("UTF-8");
        text.lines().find_map(|l| {
            let (s, v) = l.rsplit_once(' ')?;
            (s == series).then(|| v.parse().ok())?
        })
    }

    fn register<C: Collector + Clone + 'static>(&self, c: C) -> C {
        // Names are fixed and unique: a failure here is a programming error caught by tests.
        self.registry
            .register(Box::new(c.clone()))
            .expect("metric families are unique");
        c
    }

    pub(crate) fn gauges(&self, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
        self.register(GaugeVec::new(Opts::new(name, help), labels).expect("valid gauge"))
    }

    pub(crate) fn int_gauges(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        self.register(IntGaugeVec::new(Opts::new(name, help), labels).expect("valid gauge"))
    }

    pub(crate) fn counters(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        self.register(IntCounterVec::new(Opts::new(name, help), labels).expect("valid counter"))
    }

    pub fn histograms(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        buckets: &[f64],
    ) -> HistogramVec {
        self.register(
            HistogramVec::new(
                HistogramOpts::new(name, help).buckets(buckets.to_vec()),
                labels,
            )
            .expect("valid histogram"),
        )
    }
}

/// Prometheus' text format 0.0.4, as the registry writes it, in OpenMetrics 1.0: a
/// counter's family is named without its `_total` (its samples keep it), `untyped` is
/// `unknown`, HELP escapes `"` too, and `# EOF` ends it. Samples are the same text.
fn openmetrics(text: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(text);
    let mut out = String::with_capacity(text.len() + 16);
    let mut help: Option<(&str, &str)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (family, kind) = match kind {
                "counter" => (name.strip_suffix("_total").unwrap_or(name), kind),
                "untyped" => (name, "unknown"),
                _ => (name, kind),
            };
            if let Some(doc) = help.take().filter(|(n, _)| *n == name).map(|(_, doc)| doc) {
                out.push_str("# HELP ");
                out.push_str(family);
                out.push(' ');
                // 0.0.4 escapes `\` and newlines in HELP; OpenMetrics also wants `"`.
                out.push_str(&doc.replace('"', "\\\""));
                out.push('\n');
            }
            out.push_str("# TYPE ");
            out.push_str(family);
            out.push(' ');
            out.push_str(kind);
            out.push('\n');
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("# EOF\n");
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The build's labels are filled: a commit of 12 hex digits (this is a git checkout;
    /// an unpacked source says "unknown") and the compiler's version.
    /// Counters lose `_total` in their family's name, HELP escapes quotes, and `# EOF`
    /// ends the exposition; the samples are unchanged.
    #[test]
    fn openmetrics_names_counter_families_without_total_and_ends_with_eof() {
        let text = "# HELP a_total Frames \"seen\\\\n\".\n# TYPE a_total counter\na_total{camera=\"x\"} 3\n\
                    # HELP b Level.\n# TYPE b gauge\nb 1.5\n# HELP c c.\n# TYPE c untyped\nc 2\n";
        let om = String::from_utf8(openmetrics(text.as_bytes())).expect("UTF-8");
        assert_eq!(
            om,
            "# HELP a Frames \\\"seen\\\\n\\\".\n# TYPE a counter\na_total{camera=\"x\"} 3\n\
             # HELP b Level.\n# TYPE b gauge\nb 1.5\n# HELP c c.\n# TYPE c unknown\nc 2\n# EOF\n"
        );
        let whole = String::from_utf8(Metrics::new().encode_openmetrics()).expect("UTF-8");
        assert!(whole.ends_with("# EOF\n"), "{whole}");
        assert!(
            whole.contains("# TYPE edgesight_build_info gauge"),
            "{whole}"
        );
    }

    #[test]
    fn build_info_names_the_revision_and_the_compiler() {
        let metrics = Metrics::new();
        let text = String::from_utf8(metrics.encode()).expect("UTF-8");
        let line = text
            .lines()
            .find(|l| l.starts_with("edgesight_build_info{"))
            .expect("build_info");
        let label = |name: &str| {
            let labels = line.split_once('{').expect("labels").1;
            labels
                .split(',')
                .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                .and_then(|v| v.split('"').next())
                .expect(name)
                .to_string()
        };
        let revision = label("revision");
        assert!(
            revision == "unknown"
                || (revision.len() == 12 && revision.chars().all(|c| c.is_ascii_hexdigit())),
            "{line}"
        );
        let rust = label("rustversion");
        assert_eq!(rust.split('.').count(), 3, "{line}");
        assert!(rust.split('.').all(|n| n.parse::<u32>().is_ok()), "{line}");
        assert_eq!(label("version"), env!("CARGO_PKG_VERSION"));
    }
}
