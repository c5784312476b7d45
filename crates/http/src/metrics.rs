//! The Prometheus registry the daemon exports, and the helpers that declare families in
//! it. Each family is declared beside the code that sets it, as node_exporter's
//! collectors do: a camera's in a file for each concern (`daemon::camera_metrics`), the
//! live-frame checks' beside the verifier (`daemon::verify`), the reload family beside
//! the reload (`daemon::reload`), the HTTP family beside the routes
//! (`server::HttpMetrics`), MQTT's beside its link. What lives here is only
//! what every one of them shares: the registry, its text rendering, and the process and
//! build families that belong to no part in particular.
//!
//! Updates are atomics on children resolved ahead of time, so a scrape never makes a
//! camera wait.
//!
//! A scrape renders one of two tiers ([`Tier`]): the default one holds what the shipped
//! alerts and dashboard read, small enough for a fleet; the detail one adds the series
//! that only a person looking into one board needs (stage buckets, luma bins, per-stage
//! error and mismatch counters). A family's tier is declared with the family
//! ([`Metrics::detail_only`], [`Metrics::summed_in_default`]); the registry only keeps
//! what each declaration said.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use prometheus::proto::{Metric, MetricFamily, MetricType, Summary};
use prometheus::{
    core::Collector, Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

/// Which series a scrape holds: `default` what the shipped alerts and dashboard read,
/// `detail` all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    #[default]
    /// The series the shipped alerts and dashboard read, small enough for a fleet.
    Default,
    /// Every series, with those only a person looking into one board needs (stage
    /// buckets, luma bins, per-stage error and mismatch counters).
    Detail,
}

impl Tier {
    /// The tiers' names, as the messages that refuse a name list them.
    pub const NAMES: &'static str = "default or detail";

    /// The tier's name, as `[metrics] tier` and a scrape's `collect[]` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Default => "default",
            Tier::Detail => "detail",
        }
    }
}

/// A name that is no metrics tier.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown metrics tier '{0}' (expected {names})", names = Tier::NAMES)]
pub struct UnknownTier(pub String);

impl std::str::FromStr for Tier {
    type Err = UnknownTier;

    fn from_str(s: &str) -> Result<Tier, UnknownTier> {
        match s {
            "default" => Ok(Tier::Default),
            "detail" => Ok(Tier::Detail),
            _ => Err(UnknownTier(s.to_string())),
        }
    }
}

/// What the default tier shows of a family declared so; the detail tier shows every
/// series of every family, and the default tier those of a family not declared here.
#[derive(Clone, Copy, Debug)]
enum InDefault {
    Nothing,
    /// The series whose `label` is `value`, as a summary without quantiles: the sum and
    /// count of a histogram without its buckets.
    SumWhere {
        label: &'static str,
        value: &'static str,
    },
}

/// The registry every family registers in; `/metrics` renders it.
pub struct Metrics {
    registry: Registry,
    /// The tier a scrape that names none gets (`[metrics] tier`).
    detail: AtomicBool,
    /// The families the default tier shows less of, by name.
    in_default: Mutex<HashMap<String, InDefault>>,
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
        let metrics = Metrics {
            registry,
            detail: AtomicBool::new(false),
            in_default: Mutex::new(HashMap::new()),
        };
        let build = metrics.int_gauges(
            "edgesight_build_info",
            "Always 1; the labels say which edgesight is running: its version, the source \
             revision it was built from and the Rust compiler's version.",
            &["version", "revision", "rustversion"],
        );
        build
            .with_label_values(&[
                env!("CARGO_PKG_VERSION"),
                crate::REVISION,
                crate::RUSTC_VERSION,
            ])
            .set(1);
        metrics
    }

    /// The tier a scrape that names none gets.
    pub fn tier(&self) -> Tier {
        if self.detail.load(Ordering::Relaxed) {
            Tier::Detail
        } else {
            Tier::Default
        }
    }

    /// Sets the tier a scrape that names none gets (`[metrics] tier`, at start).
    pub fn set_tier(&self, tier: Tier) {
        self.detail.store(tier == Tier::Detail, Ordering::Relaxed);
    }

    /// The text exposition of the detail tier: every series.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_tier(Tier::Detail)
    }

    /// The text exposition of `tier`.
    pub fn encode_tier(&self, tier: Tier) -> Vec<u8> {
        let mut families = self.registry.gather();
        if tier == Tier::Default {
            let in_default = self.in_default.lock().unwrap_or_else(|e| e.into_inner());
            families.retain_mut(|family| match in_default.get(family.name()) {
                None => true,
                Some(InDefault::Nothing) => false,
                Some(&InDefault::SumWhere { label, value }) => {
                    summarise(family, label, value);
                    true
                }
            });
        }
        let mut out = Vec::with_capacity(16 * 1024);
        // Encoding into a Vec fails only on families that break the format, which the
        // registry refuses at registration.
        if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
            tracing::error!("encoding metrics: {e}");
        }
        out
    }

    /// The OpenMetrics 1.0 exposition of `tier` (what Prometheus asks for first).
    pub fn encode_openmetrics(&self, tier: Tier) -> Vec<u8> {
        openmetrics(&self.encode_tier(tier))
    }

    /// The value of the series `name{labels}`, written exactly so, in a scrape; for the
    /// unit tests of this crate and those above it.
    #[cfg(any(test, feature = "test-support"))]
    pub fn sample(&self, series: &str) -> Option<f64> {
        let text = String::from_utf8(self.encode()).expect("UTF-8");
        text.lines().find_map(|l| {
            let (s, v) = l.rsplit_once(' ')?;
            (s == series).then(|| v.parse().ok())?
        })
    }

    /// Keeps `family` out of the default tier: for a breakdown of a total the default tier
    /// has, or series that only a person looking into one board needs.
    pub fn detail_only<C: Collector>(&self, family: C) -> C {
        self.show_in_default(&family, InDefault::Nothing);
        family
    }

    /// Keeps of the histograms `family` in the default tier only the series whose `label`
    /// is `value`, and of those only the sum and count (as a summary without quantiles).
    pub fn summed_in_default(
        &self,
        family: HistogramVec,
        label: &'static str,
        value: &'static str,
    ) -> HistogramVec {
        self.show_in_default(&family, InDefault::SumWhere { label, value });
        family
    }

    fn show_in_default(&self, family: &impl Collector, shown: InDefault) {
        let mut in_default = self.in_default.lock().unwrap_or_else(|e| e.into_inner());
        for desc in family.desc() {
            in_default.insert(desc.fq_name.clone(), shown);
        }
    }

    fn register<C: Collector + Clone + 'static>(&self, c: C) -> C {
        // Names are fixed and unique: a failure here is a programming error caught by tests.
        self.registry
            .register(Box::new(c.clone()))
            .expect("metric families are unique");
        c
    }

    /// Registers the float gauges `name`, described by `help`, with the label names
    /// `labels`; a name taken twice or an invalid name or label panics.
    pub fn gauges(&self, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
        self.register(GaugeVec::new(Opts::new(name, help), labels).expect("valid gauge"))
    }

    /// Registers the integer gauges `name`, described by `help`, with the label names
    /// `labels`; a name taken twice or an invalid name or label panics.
    pub fn int_gauges(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        self.register(IntGaugeVec::new(Opts::new(name, help), labels).expect("valid gauge"))
    }

    /// Registers the integer counters `name`, described by `help`, with the label
    /// names `labels`; a name taken twice or an invalid name or label panics.
    pub fn counters(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        self.register(IntCounterVec::new(Opts::new(name, help), labels).expect("valid counter"))
    }

    /// Registers the histograms `name`, described by `help`, with the label names
    /// `labels` and the bucket upper bounds `buckets` (in the family's unit); a name
    /// taken twice or an invalid name, label or bucket list panics.
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

/// The histograms of `family` whose `label` is `value`, reduced to their sum and count: a
/// summary without quantiles, the form the text formats give a sum and count with no
/// buckets.
fn summarise(family: &mut MetricFamily, label: &str, value: &str) {
    let metrics = family.take_metric();
    let kept = metrics
        .into_iter()
        .filter(|m| {
            m.get_label()
                .iter()
                .any(|l| l.name() == label && l.value() == value)
        })
        .map(|mut m| {
            let h = m.get_histogram();
            let mut summary = Summary::default();
            summary.set_sample_count(h.get_sample_count());
            summary.set_sample_sum(h.get_sample_sum());
            let mut out = Metric::from_label(m.take_label());
            out.set_summary(summary);
            out
        })
        .collect();
    family.set_metric(kept);
    family.set_field_type(MetricType::SUMMARY);
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
        let whole =
            String::from_utf8(Metrics::new().encode_openmetrics(Tier::Default)).expect("UTF-8");
        assert!(whole.ends_with("# EOF\n"), "{whole}");
        assert!(
            whole.contains("# TYPE edgesight_build_info gauge"),
            "{whole}"
        );
    }

    /// The default tier leaves out a family declared detail-only and keeps of one summed
    /// in it only the named series' sum and count, as a summary; the detail tier is every
    /// series.
    #[test]
    fn the_default_tier_shows_each_family_as_it_was_declared() {
        let metrics = Metrics::new();
        let stage = metrics.summed_in_default(
            metrics.histograms("edgesight_test_seconds", "s", &["camera", "stage"], &[0.5]),
            "stage",
            "all",
        );
        stage.with_label_values(&["c", "one"]).observe(0.25);
        stage.with_label_values(&["c", "all"]).observe(0.75);
        stage.with_label_values(&["c", "all"]).observe(0.25);
        let bins =
            metrics.detail_only(metrics.gauges("edgesight_test_bins", "b", &["camera", "bin"]));
        bins.with_label_values(&["c", "0"]).set(1.0);
        let frames = metrics.counters("edgesight_test_total", "f", &["camera"]);
        frames.with_label_values(&["c"]).inc();
        let samples = |tier| -> Vec<String> {
            String::from_utf8(metrics.encode_tier(tier))
                .expect("UTF-8")
                .lines()
                .filter(|l| l.starts_with("edgesight_"))
                .filter(|l| !l.starts_with("edgesight_build_info"))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            samples(Tier::Default),
            [
                r#"edgesight_test_seconds_sum{camera="c",stage="all"} 1"#,
                r#"edgesight_test_seconds_count{camera="c",stage="all"} 2"#,
                r#"edgesight_test_total{camera="c"} 1"#,
            ]
        );
        let default = String::from_utf8(metrics.encode_tier(Tier::Default)).expect("UTF-8");
        assert!(default.contains("# TYPE edgesight_test_seconds summary\n"));
        assert_eq!(samples(Tier::Detail).len(), 1 + 1 + 2 * 4);
        assert_eq!(metrics.encode(), metrics.encode_tier(Tier::Detail));
        assert_eq!(metrics.tier(), Tier::Default);
        metrics.set_tier(Tier::Detail);
        assert_eq!(metrics.tier(), Tier::Detail);
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
