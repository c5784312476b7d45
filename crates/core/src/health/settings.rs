//! `[camera.health]`: whether the detectors run, how long the baseline is learned and how
//! fast it adapts, the hysteresis, and each detector's threshold. The defaults were chosen
//! on the evaluation sequences (HEALTH.md) and are meant to work unchanged.

use serde::{Deserialize, Serialize};

/// `[camera.health]`: whether the detectors run, their times (seconds) and thresholds
/// (shares above 0 and at most 1). A key left out takes its default.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthSettings {
    /// Whether the detectors run; turning them on starts learning afresh.
    pub enabled: bool,
    /// Seconds after start (or after the frame size changes, or the detectors are turned
    /// on) over which the baseline is learned.
    pub learning_seconds: f64,
    /// Time constant of the baseline's slow adaptation, in seconds; it adapts only while
    /// every detector says ok.
    pub adapt_seconds: f64,
    /// How long a detector's condition must hold before its state goes from suspect to
    /// tampered.
    pub confirm_seconds: f64,
    /// How long the condition must stay away before tampered goes back to ok.
    pub clear_seconds: f64,
    /// defocus: sharpness at or below this share of the baseline's.
    pub defocus_sharpness: f64,
    /// moved: at least this share of the grid's cells no longer match the reference.
    pub moved_scene_change: f64,
    /// covered: at least this share of the pixels lie within 32 grey levels...
    pub covered_histogram_band: f64,
    /// ...and at least this share of the cells that had detail lost half their contrast.
    pub covered_flat_cells: f64,
    /// underexposed / overexposed: at least this share of the pixels clipped at the dark
    /// (luma <= 8) or bright (luma >= 247) end.
    pub clipped_ratio: f64,
    /// underexposed, without clipping: the mean and the 90th percentile at or below this
    /// share of the learned ones (a scene at an eighth of its light, mean 13 of 104).
    pub darker_ratio: f64,
    /// overexposed, without clipping: the mean and the 10th percentile at least this
    /// share of the way from the learned ones to white.
    pub brighter_share: f64,
    /// frozen: the picture, noise included, unchanged for this long (and at least two
    /// frames).
    pub frozen_seconds: f64,
}

impl Default for HealthSettings {
    fn default() -> Self {
        HealthSettings {
            enabled: true,
            learning_seconds: 3.0,
            adapt_seconds: 600.0,
            confirm_seconds: 0.5,
            clear_seconds: 2.0,
            defocus_sharpness: 0.65,
            moved_scene_change: 0.3,
            covered_histogram_band: 0.75,
            covered_flat_cells: 0.5,
            clipped_ratio: 0.5,
            darker_ratio: 0.3,
            brighter_share: 0.6,
            frozen_seconds: 0.5,
        }
    }
}

impl HealthSettings {
    /// Checks every value's range; the error names the key.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let seconds = [
            ("learning_seconds", self.learning_seconds, 0.1, 3600.0),
            ("adapt_seconds", self.adapt_seconds, 1.0, 86_400.0 * 7.0),
            ("confirm_seconds", self.confirm_seconds, 0.0, 3600.0),
            ("clear_seconds", self.clear_seconds, 0.0, 3600.0),
            ("frozen_seconds", self.frozen_seconds, 0.0, 3600.0),
        ];
        let shares = [
            ("defocus_sharpness", self.defocus_sharpness),
            ("moved_scene_change", self.moved_scene_change),
            ("covered_histogram_band", self.covered_histogram_band),
            ("covered_flat_cells", self.covered_flat_cells),
            ("clipped_ratio", self.clipped_ratio),
            ("darker_ratio", self.darker_ratio),
            ("brighter_share", self.brighter_share),
        ];
        for (key, v, low, high) in seconds {
            if !(low..=high).contains(&v) {
                return Err((key, format!("{v} is not between {low} and {high} seconds")));
            }
        }
        for (key, v) in shares {
            if !(v > 0.0 && v <= 1.0) {
                return Err((key, format!("{v} is not a share above 0 and at most 1")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass_and_each_bad_value_is_named() {
        assert_eq!(HealthSettings::default().check(), Ok(()));
        let bad = |f: fn(&mut HealthSettings)| {
            let mut s = HealthSettings::default();
            f(&mut s);
            s.check().map_err(|(key, _)| key)
        };
        assert_eq!(bad(|s| s.learning_seconds = 0.0), Err("learning_seconds"));
        assert_eq!(bad(|s| s.adapt_seconds = f64::NAN), Err("adapt_seconds"));
        assert_eq!(bad(|s| s.confirm_seconds = -1.0), Err("confirm_seconds"));
        assert_eq!(bad(|s| s.clear_seconds = 1e9), Err("clear_seconds"));
        assert_eq!(
            bad(|s| s.frozen_seconds = f64::INFINITY),
            Err("frozen_seconds")
        );
        assert_eq!(bad(|s| s.defocus_sharpness = 0.0), Err("defocus_sharpness"));
        assert_eq!(
            bad(|s| s.moved_scene_change = 1.5),
            Err("moved_scene_change")
        );
        assert_eq!(
            bad(|s| s.covered_histogram_band = f64::NAN),
            Err("covered_histogram_band")
        );
        assert_eq!(
            bad(|s| s.covered_flat_cells = -0.1),
            Err("covered_flat_cells")
        );
        assert_eq!(bad(|s| s.clipped_ratio = 2.0), Err("clipped_ratio"));
        assert_eq!(bad(|s| s.darker_ratio = 0.0), Err("darker_ratio"));
        assert_eq!(bad(|s| s.brighter_share = 1.01), Err("brighter_share"));
        assert_eq!(bad(|s| s.confirm_seconds = 0.0), Ok(()));
    }
}
