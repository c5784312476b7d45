//! Motion per region: `[camera.motion]`, and what each frame's motion comes to once the
//! camera's health has had its say: each region's share of moving pixels and its motion
//! events (entered at `min_ratio` held for `min_seconds`, left below half of it held as
//! long). The motion itself is measured on the device (`pipeline`'s motion stage).
//!
//! Motion and health agree: while the `moved`, `covered` or `defocus` detector is not ok
//! (the camera was turned or shaken, covered, or blurred: every tile changes with the
//! view, not with the scene), no region moves and no event begins; a change of more
//! than half the tiles at once (a light switched, the infrared switch) is taken by the
//! pipeline as a change of scene, not motion. Motion never raises a tamper: the health
//! detectors do not read it.

use std::time::Instant;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use crate::health::{Kind, State};
use crate::pipeline::{FrameResult, MotionSettings, MotionState, MotionThreshold};
use edgesight_frame::region::{Region, RegionStats};

/// The tampers that take the camera's view away: while one of their detectors is not ok
/// (suspect already, so a blur or a cover sliding in begins no event), nothing is taken
/// as motion. The exposure tampers leave the scene in view (a dark yard at night still
/// has its motion), and a frozen picture has none.
pub const VIEW_LOST: [Kind; 3] = [Kind::Moved, Kind::Covered, Kind::Defocus];

/// The first [`VIEW_LOST`] kind whose detector is not ok, of a health report's kinds.
pub fn view_lost(kinds: &[(Kind, State)]) -> Option<Kind> {
    kinds
        .iter()
        .find(|&&(kind, state)| VIEW_LOST.contains(&kind) && state != State::Ok)
        .map(|&(kind, _)| kind)
}

/// The report's state while a [`VIEW_LOST`] tamper holds.
fn view_lost_state(kind: Kind) -> &'static str {
    match kind {
        Kind::Covered => "camera_covered",
        Kind::Defocus => "camera_defocus",
        _ => "camera_moved",
    }
}

/// `[camera.motion]`: the device's motion stage and the regions' motion events.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CameraMotionSettings {
    /// Whether motion is measured; off, the device's motion stage does not run.
    pub enabled: bool,
    /// "auto" (from the camera's noise) or luma levels a tile's mean must change by.
    #[serde(deserialize_with = "threshold", serialize_with = "threshold_out")]
    pub threshold: MotionThreshold,
    /// Something that stays put this long becomes background.
    pub background_seconds: f64,
    /// A region's share of moving pixels that begins an event.
    pub min_ratio: f64,
    /// How long that share must hold to begin an event (and be gone to end it).
    pub min_seconds: f64,
}

impl Default for CameraMotionSettings {
    fn default() -> CameraMotionSettings {
        let pipeline = MotionSettings::default();
        CameraMotionSettings {
            enabled: true,
            threshold: pipeline.threshold,
            background_seconds: pipeline.background_seconds,
            min_ratio: 0.05,
            min_seconds: 0.5,
        }
    }
}

fn threshold<'de, D: Deserializer<'de>>(d: D) -> Result<MotionThreshold, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Word(String),
        Luma(f64),
    }
    match Given::deserialize(d)? {
        Given::Word(w) if w == "auto" => Ok(MotionThreshold::Auto),
        Given::Word(w) => Err(de::Error::custom(format!(
            "{w:?} is not \"auto\" or a number of luma levels"
        ))),
        Given::Luma(l) => Ok(MotionThreshold::Luma(l)),
    }
}

fn threshold_out<S: serde::Serializer>(t: &MotionThreshold, s: S) -> Result<S::Ok, S::Error> {
    match t {
        MotionThreshold::Auto => s.serialize_str("auto"),
        MotionThreshold::Luma(l) => s.serialize_f64(*l),
    }
}

impl CameraMotionSettings {
    /// Checks every value's range; the error names the key.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if let MotionThreshold::Luma(l) = self.threshold {
            if !(0.25..=255.0).contains(&l) {
                return Err((
                    "threshold",
                    format!("{l} is not \"auto\" or 0.25 to 255 luma levels"),
                ));
            }
        }
        if !(1.0..=86_400.0).contains(&self.background_seconds) {
            let v = self.background_seconds;
            return Err((
                "background_seconds",
                format!("{v} is not between 1 and 86400 seconds"),
            ));
        }
        if !(self.min_ratio > 0.0 && self.min_ratio <= 1.0) {
            let v = self.min_ratio;
            return Err((
                "min_ratio",
                format!("{v} is not a share above 0 and at most 1"),
            ));
        }
        if !(0.0..=3600.0).contains(&self.min_seconds) {
            let v = self.min_seconds;
            return Err((
                "min_seconds",
                format!("{v} is not between 0 and 3600 seconds"),
            ));
        }
        Ok(())
    }

    /// What the pipeline measures with, or `None` when motion is off.
    pub fn pipeline(&self) -> Option<MotionSettings> {
        self.enabled.then_some(MotionSettings {
            threshold: self.threshold,
            background_seconds: self.background_seconds,
        })
    }
}

/// What a frame's motion came to.
#[derive(Debug, PartialEq, Serialize)]
pub struct MotionReport {
    /// `off`, `learning`, `watching`, `scene_change`, or `camera_moved`,
    /// `camera_covered`, `camera_defocus` (a [`VIEW_LOST`] detector is not ok: nothing is
    /// taken as motion).
    pub state: &'static str,
    /// The whole frame's share of moving pixels.
    pub ratio: f64,
    /// The threshold in luma levels, the noise it came from, and the light against the
    /// learned background's.
    pub threshold: f64,
    /// The camera's noise an automatic threshold comes from (the median tile's
    /// difference), in luma levels.
    pub noise: f64,
    /// The frame's light against the learned background's (1: as learned).
    pub gain: f64,
    /// Each configured region's, in order.
    pub regions: Vec<RegionMotion>,
}

impl Clone for MotionReport {
    fn clone(&self) -> MotionReport {
        let mut copy = MotionReport::default();
        copy.clone_from(self);
        copy
    }

    /// In the memory `self` has: the publisher refills a report on every frame.
    fn clone_from(&mut self, other: &MotionReport) {
        let MotionReport {
            state,
            ratio,
            threshold,
            noise,
            gain,
            regions,
        } = other;
        (self.state, self.ratio, self.threshold) = (state, *ratio, *threshold);
        (self.noise, self.gain) = (*noise, *gain);
        self.regions.clear();
        self.regions.extend_from_slice(regions);
    }
}

impl Default for MotionReport {
    fn default() -> MotionReport {
        MotionReport {
            state: MotionState::Off.name(),
            ratio: 0.0,
            threshold: 0.0,
            noise: 0.0,
            gain: 0.0,
            regions: Vec::new(),
        }
    }
}

/// One region's motion on a frame, and its events so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RegionMotion {
    /// The region's share of moving pixels, 0 to 1 (0 while not watching).
    pub ratio: f64,
    /// Within an event.
    pub active: bool,
    /// Events begun since the camera started.
    pub events: u64,
    #[serde(skip)]
    above_since: Option<Instant>,
    #[serde(skip)]
    below_since: Option<Instant>,
}

impl RegionMotion {
    /// A region's motion as a report shows it (its timers at rest).
    pub fn new(ratio: f64, active: bool, events: u64) -> RegionMotion {
        RegionMotion {
            ratio,
            active,
            events,
            ..RegionMotion::default()
        }
    }
}

/// An event that began or ended, for the log; the index is the region's in the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MotionChange {
    /// An event began in the region at this index.
    Began(usize),
    /// The event of the region at this index ended.
    Ended(usize),
    /// The event of a region a reload removed or redefined, ended with its old
    /// definition (not in the frame's regions, or there with another rectangle).
    Withdrawn,
}

/// Each region's events, kept across frames.
pub struct MotionEvents {
    settings: CameraMotionSettings,
    report: MotionReport,
    /// The regions `report.regions` are of, as defined: a reload that leaves a region's
    /// definition alone leaves its events alone.
    regions: Vec<Region>,
}

impl MotionEvents {
    /// Events judged by `settings`, with no region seen yet.
    pub fn new(settings: CameraMotionSettings) -> MotionEvents {
        MotionEvents {
            settings,
            report: MotionReport::default(),
            regions: Vec::new(),
        }
    }

    /// New settings from a reload, used from the next frame on; events under way are kept.
    pub fn set_settings(&mut self, settings: CameraMotionSettings) {
        self.settings = settings;
    }

    /// What the last frame's motion came to.
    pub fn report(&self) -> &MotionReport {
        &self.report
    }

    /// Takes a frame captured at `at`; `view_lost` when a [`VIEW_LOST`] detector is not
    /// ok. Calls `changed` for each event that began or ended, with its region's name.
    /// Allocates only when the regions change.
    pub fn update(
        &mut self,
        result: &FrameResult,
        at: Instant,
        view_lost: Option<Kind>,
        mut changed: impl FnMut(MotionChange, &str),
    ) {
        let m = result.motion;
        let watching = m.state == MotionState::Watching && view_lost.is_none();
        let r = &mut self.report;
        r.state = match view_lost {
            Some(kind) if m.state != MotionState::Off => view_lost_state(kind),
            _ => m.state.name(),
        };
        r.threshold = m.threshold;
        r.noise = m.noise;
        r.gain = m.gain;
        r.ratio = if watching {
            result.frame.motion_ratio()
        } else {
            0.0
        };
        let same = self.regions.len() == result.regions.len()
            && self
                .regions
                .iter()
                .zip(&result.regions)
                .all(|(held, (region, _))| held == region);
        if !same {
            self.follow_regions(&result.regions, &mut changed);
        }
        let r = &mut self.report;
        r.regions
            .resize(result.regions.len(), RegionMotion::default());
        let (enter, leave) = (self.settings.min_ratio, self.settings.min_ratio / 2.0);
        let hold = std::time::Duration::from_secs_f64(self.settings.min_seconds);
        for (i, (region, (def, stats))) in r.regions.iter_mut().zip(&result.regions).enumerate() {
            region.ratio = if watching { stats.motion_ratio() } else { 0.0 };
            if m.state == MotionState::Off {
                *region = RegionMotion {
                    events: region.events,
                    ..RegionMotion::default()
                };
                continue;
            }
            if !watching {
                // Learning, a change of scene or the view lost: no event begins or ends.
                continue;
            }
            if !region.active {
                if region.ratio >= enter {
                    let since = *region.above_since.get_or_insert(at);
                    if at.saturating_duration_since(since) >= hold {
                        region.active = true;
                        region.events += 1;
                        region.below_since = None;
                        changed(MotionChange::Began(i), &def.name);
                    }
                } else {
                    region.above_since = None;
                }
            } else if region.ratio < leave {
                let since = *region.below_since.get_or_insert(at);
                if at.saturating_duration_since(since) >= hold {
                    region.active = false;
                    region.above_since = None;
                    changed(MotionChange::Ended(i), &def.name);
                }
            } else {
                region.below_since = None;
            }
        }
    }

    /// Takes the regions of a reload. A region defined as before keeps its motion as it
    /// was (its event, when it began, its count); an added or redefined one starts
    /// afresh, where a region of the same name keeps its count (its counter in the
    /// metrics is the same series); the event of one removed or redefined ends, as its
    /// log needs to close what it opened.
    fn follow_regions(
        &mut self,
        regions: &[(Region, RegionStats)],
        changed: &mut impl FnMut(MotionChange, &str),
    ) {
        let held = std::mem::take(&mut self.report.regions);
        let before: Vec<(&Region, RegionMotion)> = self.regions.iter().zip(held).collect();
        let mut taken = vec![false; before.len()];
        let followed = regions
            .iter()
            .map(|(region, _)| {
                if let Some(j) = (0..before.len()).find(|&j| !taken[j] && before[j].0 == region) {
                    taken[j] = true;
                    return before[j].1;
                }
                let events = before
                    .iter()
                    .find(|(held, _)| held.name == region.name)
                    .map_or(0, |(_, motion)| motion.events);
                RegionMotion {
                    events,
                    ..RegionMotion::default()
                }
            })
            .collect();
        for ((region, motion), taken) in before.iter().zip(&taken) {
            if !taken && motion.active {
                changed(MotionChange::Withdrawn, &region.name);
            }
        }
        self.report.regions = followed;
        self.regions = regions.iter().map(|(region, _)| region.clone()).collect();
    }
}

#[cfg(test)]
mod tests;
