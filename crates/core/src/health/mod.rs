//! Camera health: is the camera still seeing what it should? Six detectors read each
//! frame's results (the luma histogram, a gradient histogram counted on every few frames,
//! and a 16 x 12 grid of cell sums from the integral images; no image is read back) and
//! compare them with a baseline learned after start:
//!
//! - overexposed / underexposed: most pixels clipped at the bright / dark end;
//! - covered: most pixels within 32 grey levels and most detailed cells gone flat;
//! - frozen: the picture, sensor noise included, unchanged frame after frame;
//! - moved: most cells no longer match the reference once a global gain is taken out;
//! - defocus: the mean gradient, corrected for the light level, fallen well below the
//!   baseline's.
//!
//! They are tried in that order and a frame counts for the first that holds: a black
//! frame is underexposed, not also covered, moved and out of focus. Each has its own
//! `ok` / `suspect` / `tampered` state ([`tracker`]). The baseline adapts slowly, and only
//! while every state is ok.

mod measures;
mod settings;
mod tracker;

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::pipeline::FrameResult;
pub use measures::Measures;
pub use settings::HealthSettings;
use tracker::Tracker;
pub use tracker::{State, TamperChange};

/// The grid of cells the pipeline measures for the detectors.
pub const GRID: (u32, u32) = (16, 12);

/// A kind of tamper, one per detector; its lower-case name is its JSON form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Most pixels clipped at the bright end, or the picture far brighter than learned.
    Overexposed,
    /// Most pixels clipped at the dark end, or the picture far darker than learned.
    Underexposed,
    /// Most pixels within 32 grey levels and most detailed cells gone flat: a cover.
    Covered,
    /// The picture, sensor noise included, unchanged frame after frame.
    Frozen,
    /// Most grid cells no longer match the learned view once a global gain is taken out.
    Moved,
    /// The mean gradient, corrected for the light level, fallen well below the baseline's.
    Defocus,
}

impl Kind {
    /// In the order the detectors are tried.
    pub const ALL: [Kind; 6] = [
        Kind::Overexposed,
        Kind::Underexposed,
        Kind::Covered,
        Kind::Frozen,
        Kind::Moved,
        Kind::Defocus,
    ];

    /// The lower-case name reports and logs use (`overexposed`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Overexposed => "overexposed",
            Kind::Underexposed => "underexposed",
            Kind::Covered => "covered",
            Kind::Frozen => "frozen",
            Kind::Moved => "moved",
            Kind::Defocus => "defocus",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What `/api/v1/latest` and the status page show of a camera's health.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HealthReport {
    /// `learning`, or the worst of the detectors' states.
    pub state: &'static str,
    /// Whether the baseline is still being learned (no baseline to compare with yet).
    pub learning: bool,
    /// The focus measure as a share of the baseline's (none while learning).
    pub sharpness: Option<f64>,
    /// The share of the grid's cells that no longer match the reference (none while
    /// learning).
    pub scene_change: Option<f64>,
    /// Share of the pixels clipped at the dark end (luma <= 8), 0 to 1.
    pub clipped_dark: f64,
    /// Share of the pixels clipped at the bright end (luma >= 247), 0 to 1.
    pub clipped_bright: f64,
    /// Mean luma as a share of the baseline's (none while learning).
    pub mean_luma_ratio: Option<f64>,
    /// The largest share of the pixels within 32 consecutive grey levels, 0 to 1.
    pub histogram_band: f64,
    /// Of the cells that had detail in the baseline, the share that lost half their
    /// contrast (none while learning).
    pub flat_cells: Option<f64>,
    /// How long the picture has not changed at all.
    pub unchanged_seconds: f64,
    /// Each kind's state, in [`Kind::ALL`] order (an object of kind -> state in JSON).
    #[serde(serialize_with = "kinds_as_object")]
    pub kinds: [(Kind, State); 6],
}

impl Default for HealthReport {
    fn default() -> Self {
        HealthReport {
            state: "learning",
            learning: true,
            sharpness: None,
            scene_change: None,
            clipped_dark: 0.0,
            clipped_bright: 0.0,
            mean_luma_ratio: None,
            histogram_band: 0.0,
            flat_cells: None,
            unchanged_seconds: 0.0,
            kinds: Kind::ALL.map(|k| (k, State::Ok)),
        }
    }
}

fn kinds_as_object<S: serde::Serializer>(
    kinds: &[(Kind, State); 6],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(kinds.len()))?;
    for (kind, state) in kinds {
        map.serialize_entry(kind.name(), state.name())?;
    }
    map.end()
}

/// What the baseline holds: the learned view.
#[derive(Clone, Debug, Default)]
struct Baseline {
    mean: f64,
    p10: f64,
    p90: f64,
    gradient: f64,
    cell_means: Vec<f64>,
    cell_stddevs: Vec<f64>,
}

/// The correlation of the cells' means with the learned ones above which the scene is
/// still there, in whatever light.
const PATTERN_KEPT: f64 = 0.8;

/// Gradient samples (one in [`GRADIENT_SAMPLE_FRAMES`](crate::pipeline::GRADIENT_SAMPLE_FRAMES)
/// frames) the baseline needs besides the learning period.
const MIN_LEARNING_GRADIENTS: u32 = 2;

/// Sums over the learning period.
#[derive(Clone, Debug, Default)]
struct Learning {
    started: Option<Instant>,
    frames: u32,
    mean: f64,
    p10: f64,
    p90: f64,
    gradient: f64,
    gradients: u32,
    cell_means: Vec<f64>,
    cell_stddevs: Vec<f64>,
}

impl Learning {
    fn add(&mut self, m: &Measures, at: Instant) {
        self.started.get_or_insert(at);
        if self.cell_means.len() != m.cell_means.len() {
            self.cell_means = vec![0.0; m.cell_means.len()];
            self.cell_stddevs = vec![0.0; m.cell_means.len()];
        }
        self.frames += 1;
        self.mean += m.mean;
        self.p10 += m.p10;
        self.p90 += m.p90;
        if let Some(g) = m.gradient {
            self.gradient += g;
            self.gradients += 1;
        }
        for (sum, v) in self.cell_means.iter_mut().zip(&m.cell_means) {
            *sum += v;
        }
        for (sum, v) in self.cell_stddevs.iter_mut().zip(&m.cell_stddevs) {
            *sum += v;
        }
    }

    /// The baseline, once the period is over and a gradient was seen.
    fn learned(&self, at: Instant, period: Duration) -> Option<Baseline> {
        let started = self.started?;
        // At least a few frames and two gradient samples, however slow the first ones.
        if at.saturating_duration_since(started) < period || self.gradients < MIN_LEARNING_GRADIENTS
        {
            return None;
        }
        let n = f64::from(self.frames);
        Some(Baseline {
            mean: self.mean / n,
            p10: self.p10 / n,
            p90: self.p90 / n,
            gradient: self.gradient / f64::from(self.gradients),
            cell_means: self.cell_means.iter().map(|s| s / n).collect(),
            cell_stddevs: self.cell_stddevs.iter().map(|s| s / n).collect(),
        })
    }
}

/// What [`Health::update`] saw change on a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The baseline was learned: the detectors that compare with it start.
    Learned,
    /// This kind's detector went to `tampered`.
    Tampered(Kind),
    /// This kind's detector went from `tampered` back to `ok`.
    Cleared(Kind),
}

/// One camera's detectors, fed every published frame.
pub struct Health {
    settings: HealthSettings,
    size: (u32, u32, usize),
    learning: Learning,
    baseline: Option<Baseline>,
    measures: Measures,
    /// The last gradient sample and the mean luma of its frame: frames without a sample
    /// are judged by it.
    last_gradient: Option<(f64, f64)>,
    last_frame: Option<Instant>,
    last_fingerprint: Option<u64>,
    unchanged_since: Option<Instant>,
    unchanged_frames: u32,
    trackers: [Tracker; 6],
    report: HealthReport,
    events: Vec<Event>,
    scratch: Vec<f64>,
}

impl Health {
    /// Detectors judging by `settings`, with nothing learned yet: the baseline is learned
    /// from the first frames.
    pub fn new(settings: HealthSettings) -> Health {
        Health {
            settings,
            size: (0, 0, 0),
            learning: Learning::default(),
            baseline: None,
            measures: Measures::default(),
            last_gradient: None,
            last_frame: None,
            last_fingerprint: None,
            unchanged_since: None,
            unchanged_frames: 0,
            trackers: [Tracker::default(); 6],
            report: HealthReport::default(),
            events: Vec::with_capacity(8),
            scratch: Vec::new(),
        }
    }

    /// The settings the detectors judge by now.
    pub fn settings(&self) -> &HealthSettings {
        &self.settings
    }

    /// New settings from a reload, judged from the next frame on. The learned view, a
    /// learning under way and every detector's state are kept: the settings are
    /// thresholds and times the view is judged by, and none of them changes what the
    /// view was, so none makes the baseline stale. Learning again would take whatever is
    /// in front of the camera now (a cover, a new view) as normal, clear the alarm it
    /// raised, and read the real view as a tamper once the cover is gone. A tamper the
    /// new thresholds no longer see clears as any other, after `clear_seconds`.
    ///
    /// Turning the detectors on starts afresh: nothing was measured while they were off,
    /// so the old view may be long gone, and no alarm stood to be kept.
    pub fn set_settings(&mut self, settings: HealthSettings) {
        if settings.enabled != self.settings.enabled {
            *self = Health::new(settings);
        } else {
            self.settings = settings;
        }
    }

    /// What the frames so far came to, for the status page and `/api/v1/latest`.
    pub fn report(&self) -> &HealthReport {
        &self.report
    }

    /// Reads one frame captured at `at`; returns what changed.
    pub fn update(&mut self, r: &FrameResult, at: Instant) -> &[Event] {
        self.events.clear();
        if r.frame.area == 0 {
            return &self.events;
        }
        let size = (r.width, r.height, r.cells.len());
        if size != self.size {
            // Another size or grid: the learned view no longer applies.
            let settings = self.settings;
            *self = Health::new(settings);
            self.size = size;
        }
        self.measures.fill(r);
        let m = &self.measures;
        let dt = self
            .last_frame
            .map_or(Duration::ZERO, |t| at.saturating_duration_since(t));
        self.last_frame = Some(at);

        let now = m.fingerprint;
        if self.last_fingerprint == Some(now) {
            self.unchanged_frames += 1;
            self.unchanged_since.get_or_insert(at);
        } else {
            self.unchanged_frames = 0;
            self.unchanged_since = None;
        }
        self.last_fingerprint = Some(now);

        if self.baseline.is_none() {
            self.learning.add(m, at);
            let period = Duration::from_secs_f64(self.settings.learning_seconds);
            if let Some(b) = self.learning.learned(at, period) {
                self.baseline = Some(b);
                self.events.push(Event::Learned);
            }
        }
        if let Some(g) = m.gradient {
            self.last_gradient = Some((g, m.mean));
        }
        let holds = self.conditions(at);
        let s = &self.settings;
        let (confirm, clear) = (
            Duration::from_secs_f64(s.confirm_seconds),
            Duration::from_secs_f64(s.clear_seconds),
        );
        for (i, kind) in Kind::ALL.into_iter().enumerate() {
            match self.trackers[i].step(holds[i], at, confirm, clear) {
                Some(TamperChange::Tampered) => self.events.push(Event::Tampered(kind)),
                Some(TamperChange::Cleared) => self.events.push(Event::Cleared(kind)),
                None => {}
            }
        }
        if self.trackers.iter().all(|t| t.state == State::Ok) {
            self.adapt(dt);
        }
        self.fill_report(at);
        &self.events
    }
}

impl Health {
    /// Whether each kind's condition holds on this frame, in [`Kind::ALL`] order; the
    /// first that holds takes the frame.
    fn conditions(&mut self, at: Instant) -> [bool; 6] {
        let s = self.settings;
        let m = &self.measures;
        let mut holds = [false; 6];
        let unchanged = self.unchanged_since.is_some_and(|since| {
            self.unchanged_frames >= 2
                && at.saturating_duration_since(since).as_secs_f64() >= s.frozen_seconds
        });
        let (mut covered, mut moved, mut defocus) = (false, false, false);
        let (mut darker, mut brighter) = (false, false);
        if let Some(b) = &self.baseline {
            // Light, not clipping: the whole picture, its bright parts with its mean, far
            // darker than learned, or its dark parts with its mean most of the way to
            // white (a dark object or a glare spot moves the mean but not both), with the
            // scene's pattern still there (a cover of any shade replaces it).
            let pattern =
                measures::pattern_correlation(&m.cell_means, &b.cell_means) >= PATTERN_KEPT;
            darker =
                pattern && m.mean <= s.darker_ratio * b.mean && m.p90 <= s.darker_ratio * b.p90;
            let towards_white = |now: f64, learned: f64| {
                now - learned >= s.brighter_share * (255.0 - learned).max(1.0)
            };
            brighter = pattern && towards_white(m.mean, b.mean) && towards_white(m.p10, b.p10);
            let sharpness = self.last_gradient.and_then(|(g, mean)| {
                // A gain on the light scales gradients as much as the mean: take it out.
                let light = (mean / b.mean.max(1.0)).max(0.05);
                (b.gradient > 0.5).then(|| g / b.gradient / light)
            });
            let flat = measures::flat_cells(&m.cell_stddevs, &b.cell_stddevs);
            covered = m.band >= s.covered_histogram_band && flat >= s.covered_flat_cells;
            let change = measures::scene_change(&m.cell_means, &b.cell_means, &mut self.scratch);
            moved = change >= s.moved_scene_change;
            defocus = sharpness.is_some_and(|v| v <= s.defocus_sharpness);
            // Set only once a baseline is learned; a new baseline starts a new report.
            self.report.sharpness = sharpness;
            self.report.flat_cells = Some(flat);
            self.report.scene_change = Some(change);
            self.report.mean_luma_ratio = Some(m.mean / b.mean.max(1.0));
        }
        let candidates = [
            m.bright >= s.clipped_ratio || brighter,
            m.dark >= s.clipped_ratio || darker,
            covered,
            unchanged,
            moved,
            defocus,
        ];
        if let Some(first) = candidates.iter().position(|&c| c) {
            holds[first] = true;
        }
        holds
    }

    /// Lets the baseline follow slow changes (dusk, a parked car): an average with a time
    /// constant of `adapt_seconds`.
    fn adapt(&mut self, dt: Duration) {
        let Some(b) = self.baseline.as_mut() else {
            return;
        };
        let m = &self.measures;
        let a = (dt.as_secs_f64() / self.settings.adapt_seconds).min(1.0);
        let follow = |base: &mut f64, v: f64| *base += a * (v - *base);
        follow(&mut b.mean, m.mean);
        follow(&mut b.p10, m.p10);
        follow(&mut b.p90, m.p90);
        if let Some(g) = m.gradient {
            // Sampled on every few frames: a step for each frame since the last sample.
            let a = (a * crate::pipeline::GRADIENT_SAMPLE_FRAMES as f64).min(1.0);
            b.gradient += a * (g - b.gradient);
        }
        for (base, v) in b.cell_means.iter_mut().zip(&m.cell_means) {
            follow(base, *v);
        }
        for (base, v) in b.cell_stddevs.iter_mut().zip(&m.cell_stddevs) {
            follow(base, *v);
        }
    }

    fn fill_report(&mut self, at: Instant) {
        let learning = self.baseline.is_none();
        let r = &mut self.report;
        let m = &self.measures;
        for (slot, (kind, tracker)) in r
            .kinds
            .iter_mut()
            .zip(Kind::ALL.into_iter().zip(&self.trackers))
        {
            *slot = (kind, tracker.state);
        }
        let worst = self
            .trackers
            .iter()
            .map(|t| t.state)
            .max_by_key(|s| *s as u8);
        // Exposure and frozen work while learning: a live tamper shows over "learning".
        r.state = match worst.unwrap_or_default() {
            State::Ok if learning => "learning",
            state => state.name(),
        };
        r.learning = learning;
        r.clipped_dark = m.dark;
        r.clipped_bright = m.bright;
        r.histogram_band = m.band;
        r.unchanged_seconds = self
            .unchanged_since
            .map_or(0.0, |t| at.saturating_duration_since(t).as_secs_f64());
    }
}

#[cfg(test)]
mod tests;
