//! What one camera shows at a moment, read from what it hands the HTTP side (its status
//! and `Latest`): the MQTT state topics and the events are both made of it, so that an
//! event and the state that says it agree.

use edgesight_core::health::{HealthReport, Kind, State};
use edgesight_http::server::CameraView;

/// What one camera shows at a moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub camera: String,
    pub state: &'static str,
    /// Each tamper kind and whether it is on; empty while the health detectors are off.
    pub tamper: Vec<(&'static str, bool)>,
    /// Each region, whether it is within a motion event, and its share of moving pixels.
    pub motion: Vec<(String, bool, f64)>,
    pub fps: Option<f64>,
    /// The focus measure and the mean light, as shares of the learned baseline's.
    pub sharpness: Option<f64>,
    pub light_ratio: Option<f64>,
    /// The health detectors' report, for the events' measures.
    pub health: Option<HealthReport>,
}

impl Observed {
    pub fn of(view: &CameraView) -> Observed {
        let (state, _) = view.status();
        let state = state.name();
        let latest = view.latest();
        let mut seen = Observed {
            camera: view.name.clone(),
            state,
            tamper: Vec::new(),
            motion: Vec::new(),
            fps: None,
            sharpness: None,
            light_ratio: None,
            health: None,
        };
        let Some(l) = latest else {
            return seen;
        };
        if let Some(h) = &l.health {
            seen.tamper = h
                .kinds
                .iter()
                .map(|(kind, s)| (Kind::name(*kind), *s == State::Tampered))
                .collect();
            seen.sharpness = h.sharpness;
            seen.light_ratio = h.mean_luma_ratio;
            seen.health = Some(*h);
        }
        seen.motion = l
            .result
            .regions
            .iter()
            .zip(&l.motion.regions)
            .map(|((region, _), m)| (region.name.clone(), m.active, m.ratio))
            .collect();
        // A camera that is not up has a frame rate of its last frames: not said.
        if state == "up" {
            seen.fps = Some(l.activity.fps);
        }
        seen
    }
}
