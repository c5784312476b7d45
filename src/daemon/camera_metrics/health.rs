//! The camera-health collector: the detectors' numbers (`edgesight_camera_sharpness`,
//! `edgesight_camera_scene_change`, `edgesight_camera_light_ratio`,
//! `edgesight_camera_clipped_ratio`), whether the baseline is being learned
//! (`edgesight_camera_health_learning`), each kind's tamper state
//! (`edgesight_camera_tamper`), set by the publisher from [`HealthReport`]s, and the
//! tamper events (`edgesight_camera_tamper_events_total`), counted as they happen.

use prometheus::{Gauge, GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec};

use edgesight_core::health::{HealthReport, Kind, State};
use edgesight_http::metrics::Metrics;

pub struct HealthFamilies {
    sharpness: GaugeVec,
    scene_change: GaugeVec,
    light: GaugeVec,
    clipped: GaugeVec,
    tamper: IntGaugeVec,
    events: IntCounterVec,
    learning: IntGaugeVec,
}

impl HealthFamilies {
    pub fn new(metrics: &Metrics) -> HealthFamilies {
        let m = metrics;
        let cam = &["camera"];
        HealthFamilies {
            sharpness: m.gauges(
                "edgesight_camera_sharpness",
                "Focus measure (mean gradient, corrected for the light level) as a share of the learned baseline's; NaN while learning.",
                cam,
            ),
            scene_change: m.gauges(
                "edgesight_camera_scene_change",
                "Share of the view's 16x12 cells that no longer match the learned reference once a global gain is taken out; NaN while learning.",
                cam,
            ),
            light: m.gauges(
                "edgesight_camera_light_ratio",
                "Mean luma as a share of the learned baseline's (which follows slow changes such as dusk); NaN while learning.",
                cam,
            ),
            clipped: m.gauges(
                "edgesight_camera_clipped_ratio",
                "Share of the pixels clipped at the dark (luma <= 8) or bright (luma >= 247) end.",
                &["camera", "end"],
            ),
            tamper: m.int_gauges(
                "edgesight_camera_tamper",
                "1 while the camera is tampered with in this way (defocus, covered, moved, frozen, underexposed, overexposed), after the confirm time; else 0.",
                &["camera", "kind"],
            ),
            events: m.counters(
                "edgesight_camera_tamper_events_total",
                "Times the camera entered the tampered state of each kind.",
                &["camera", "kind"],
            ),
            learning: m.int_gauges(
                "edgesight_camera_health_learning",
                "1 while the camera-health baseline is being learned (after start, a size change or new health settings), else 0.",
                cam,
            ),
        }
    }

    /// One camera's series, resolved once.
    pub fn camera(&self, name: &str) -> HealthMetrics {
        let l = &[name];
        let health = HealthMetrics {
            sharpness: self.sharpness.with_label_values(l),
            scene_change: self.scene_change.with_label_values(l),
            light: self.light.with_label_values(l),
            clipped: ["dark", "bright"].map(|end| self.clipped.with_label_values(&[name, end])),
            tamper: Kind::ALL.map(|k| self.tamper.with_label_values(&[name, k.name()])),
            events: Kind::ALL.map(|k| self.events.with_label_values(&[name, k.name()])),
            learning: self.learning.with_label_values(l),
        };
        health.off();
        health
    }
}

/// One camera's health series.
pub struct HealthMetrics {
    sharpness: Gauge,
    scene_change: Gauge,
    light: Gauge,
    clipped: [Gauge; 2],
    tamper: [IntGauge; Kind::ALL.len()],
    events: [IntCounter; Kind::ALL.len()],
    learning: IntGauge,
}

impl HealthMetrics {
    /// Copies a frame's report in.
    pub fn set(&self, r: &HealthReport) {
        self.sharpness.set(r.sharpness.unwrap_or(f64::NAN));
        self.scene_change.set(r.scene_change.unwrap_or(f64::NAN));
        self.light.set(r.mean_luma_ratio.unwrap_or(f64::NAN));
        self.clipped[0].set(r.clipped_dark);
        self.clipped[1].set(r.clipped_bright);
        for (gauge, (_, state)) in self.tamper.iter().zip(&r.kinds) {
            gauge.set(i64::from(*state == State::Tampered));
        }
        self.learning.set(i64::from(r.learning));
    }

    /// Counts a camera entering the tampered state of `kind`.
    pub fn tampered(&self, kind: Kind) {
        if let Some(i) = Kind::ALL.iter().position(|&k| k == kind) {
            self.events[i].inc();
        }
    }

    /// What a camera whose detectors do not run shows: no numbers, no tamper.
    pub fn off(&self) {
        self.sharpness.set(f64::NAN);
        self.scene_change.set(f64::NAN);
        self.light.set(f64::NAN);
        for g in &self.clipped {
            g.set(f64::NAN);
        }
        for g in &self.tamper {
            g.set(0);
        }
        self.learning.set(0);
    }
}
