//! What the motion kernels are told each frame, decided on the host from the time between
//! frames and the last frame's counts: how fast the background follows the picture
//! (`background_seconds`), when it is learned afresh (at the start, and after a change of
//! scene), and the threshold, fixed or from the camera's noise.

use std::time::{Duration, Instant};

use super::FrameMotion;
use crate::pipeline::motion_tiles::{DIFF_BINS, RATE_ONE};

/// How the background is learned and what counts as moving.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MotionSettings {
    /// How far a tile's mean must differ from the background's to move: fixed, or from the noise.
    pub threshold: MotionThreshold,
    /// The background follows the picture with this time constant: something that stays
    /// put this long becomes background.
    pub background_seconds: f64,
}

impl Default for MotionSettings {
    fn default() -> MotionSettings {
        MotionSettings {
            threshold: MotionThreshold::Auto,
            background_seconds: 60.0,
        }
    }
}

/// A tile moves when its mean differs from the background's by more than this.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MotionThreshold {
    /// [`AUTO_FACTOR`] times the camera's noise (the median difference of the tiles), at
    /// least [`AUTO_MIN`] and at most [`AUTO_MAX`] luma levels.
    Auto,
    /// Luma levels.
    Luma(f64),
}

/// The automatic threshold's multiple of the noise, and its bounds (luma levels).
pub const AUTO_FACTOR: f64 = 6.0;
/// The automatic threshold's lower bound, in luma levels.
pub const AUTO_MIN: f64 = 2.0;
/// The automatic threshold's upper bound, in luma levels.
pub const AUTO_MAX: f64 = 40.0;
/// After a (re)start the background is learned for this long, and no motion is reported
/// meanwhile: the first frame sets it, then it follows the frames with the time constant
/// [`LEARN_FOLLOW_SECONDS`] (the running mean of the frames so far while that is faster),
/// so that what settled in its last second is what it holds.
pub const LEARN_SECONDS: f64 = 2.0;
/// The background's time constant while it is learned: a cover sliding away or a light's
/// flicker at the start of learning is down to under 1 % of it at the end.
pub const LEARN_FOLLOW_SECONDS: f64 = 0.4;
/// While watching, a still tile's background follows the picture with this time constant,
/// and only a moving one's with `background_seconds`: real light changes unevenly (the sun
/// on one facade brightening it by a tenth in 12 s while the frame's light changes by
/// 2 %), which the slow rate let drift past the threshold for a minute; something that is
/// there (a person, a parked car) still takes `background_seconds` to become background.
pub const STILL_FOLLOW_SECONDS: f64 = 0.5;
/// More than this share of the tiles moving at once is a change of scene (the light
/// switched, the camera moved or switched to infrared), not motion: the background is
/// learned afresh.
pub const SCENE_CHANGE_SHARE: f64 = 0.5;
/// The light changing by more than this share from one frame to the next (a lamp switched
/// on, an auto-exposure step) is a change of scene too: its spread over the picture (the
/// lamp's falloff) is no motion either.
pub const SUDDEN_LIGHT: f64 = 0.08;
/// Frames learned before the noise is followed (the background is their running mean).
const LEARN_NOISE_FROM: u32 = 8;
/// The noise estimate follows the frames' medians with this time constant (seconds).
const NOISE_SECONDS: f64 = 5.0;

/// What a frame's motion means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MotionState {
    /// Not measured (switched off, or the frame has no whole tile).
    #[default]
    Off,
    /// The background is being learned: nothing is reported.
    Learning,
    /// The background is learned: tiles beyond the threshold from it are reported as moving.
    Watching,
    /// Over half the tiles changed at once: no motion is reported, and the background is
    /// learned afresh.
    SceneChange,
}

impl MotionState {
    /// The state's name as reports give it: "off", "learning", "watching" or "scene_change".
    pub fn name(self) -> &'static str {
        match self {
            MotionState::Off => "off",
            MotionState::Learning => "learning",
            MotionState::Watching => "watching",
            MotionState::SceneChange => "scene_change",
        }
    }
}

/// A frame's motion besides each region's moving pixels.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MotionResult {
    /// What the frame's motion means: off, still learning, watching, or a change of scene.
    pub state: MotionState,
    /// The threshold the frame was measured with, and the noise it came from (luma levels).
    pub threshold: f64,
    /// The camera's noise before this frame: the median tile's difference from the background,
    /// followed over a few seconds, in luma levels (0 until first measured).
    pub noise: f64,
    /// The frame's light against the background's (1: as learned).
    pub gain: f64,
    /// Whole tiles whose mean differed from the background's by more than the threshold.
    pub moving_tiles: u32,
    /// Whole tiles the frame was measured over (those that fit inside the frame).
    pub tiles: u32,
}

/// The counts the region sums copied out for a frame.
pub(crate) struct FrameCounts<'a> {
    pub diff_histogram: &'a [u32],
    pub moving: u32,
    pub gain: u32,
}

pub(crate) struct MotionControl {
    settings: MotionSettings,
    /// When learning began, and the frames learned since.
    learning_since: Option<Instant>,
    learned_frames: u32,
    last_frame: Option<Instant>,
    /// Seconds between the last two frames.
    last_dt: f64,
    /// Luma levels; none before the first frame watched.
    noise: Option<f64>,
    /// What the last frame was told.
    told: FrameMotion,
    told_learning: bool,
    /// The last frame's light gain (1/65536), none after learning afresh.
    last_gain: Option<u32>,
}

impl MotionControl {
    pub(crate) fn new(settings: MotionSettings) -> MotionControl {
        MotionControl {
            settings,
            learning_since: None,
            learned_frames: 0,
            last_frame: None,
            last_dt: 0.0,
            noise: None,
            told: FrameMotion {
                rate: RATE_ONE,
                still_rate: RATE_ONE,
                threshold: 0,
            },
            told_learning: true,
            last_gain: None,
        }
    }

    /// New settings from the next frame on; the background is kept.
    pub(crate) fn set_settings(&mut self, settings: MotionSettings) {
        self.settings = settings;
    }

    /// Learn the background afresh from the next frame.
    pub(crate) fn relearn(&mut self) {
        self.learning_since = None;
        self.last_gain = None;
    }

    /// What the frame processed at `now` is told.
    pub(crate) fn next(&mut self, now: Instant) -> FrameMotion {
        let tau = self.settings.background_seconds.max(1e-3);
        let dt = self
            .last_frame
            .map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64())
            .min(tau);
        self.last_frame = Some(now);
        self.last_dt = dt;
        let mut rate = follow_rate(dt, tau);
        let mut still_rate = follow_rate(dt, tau.min(STILL_FOLLOW_SECONDS));
        let since = *self.learning_since.get_or_insert_with(|| {
            self.learned_frames = 0;
            now
        });
        self.told_learning =
            now.saturating_duration_since(since) < Duration::from_secs_f64(LEARN_SECONDS.min(tau));
        if self.told_learning || self.learned_frames == 0 {
            // The first frame sets the background; then the faster of the running mean
            // and the learning's own time constant.
            rate = rate
                .max(RATE_ONE / (self.learned_frames + 1))
                .max(follow_rate(dt, LEARN_FOLLOW_SECONDS));
            still_rate = rate;
            self.told_learning = true;
        }
        self.learned_frames = self.learned_frames.saturating_add(1);
        self.told = FrameMotion {
            rate,
            still_rate,
            threshold: (self.threshold_luma() * 256.0).round() as u32,
        };
        self.told
    }

    fn threshold_luma(&self) -> f64 {
        match self.settings.threshold {
            MotionThreshold::Luma(l) => l,
            MotionThreshold::Auto => {
                (AUTO_FACTOR * self.noise.unwrap_or(0.0)).clamp(AUTO_MIN, AUTO_MAX)
            }
        }
    }

    /// What the frame last told came to, from its counts over `tiles` whole tiles; a
    /// change of scene makes the next frame learn afresh.
    pub(crate) fn observe(&mut self, counts: &FrameCounts, tiles: u32) -> MotionResult {
        let threshold = f64::from(self.told.threshold) / 256.0;
        let noise_before = self.noise.unwrap_or(0.0);
        let gain = f64::from(counts.gain);
        let sudden = self
            .last_gain
            .is_some_and(|last| (gain / f64::from(last.max(1)) - 1.0).abs() > SUDDEN_LIGHT);
        self.last_gain = Some(counts.gain);
        let state = if self.told_learning {
            // The noise from the learning's second half on, so that the first frame
            // watched has its threshold: the running mean has settled by then.
            if self.learned_frames >= LEARN_NOISE_FROM {
                self.follow_noise(counts.diff_histogram, tiles);
            }
            MotionState::Learning
        } else if sudden || f64::from(counts.moving) > SCENE_CHANGE_SHARE * f64::from(tiles) {
            self.relearn();
            MotionState::SceneChange
        } else {
            self.follow_noise(counts.diff_histogram, tiles);
            MotionState::Watching
        };
        MotionResult {
            state,
            threshold,
            noise: noise_before,
            gain: f64::from(counts.gain) / 65536.0,
            moving_tiles: counts.moving,
            tiles,
        }
    }

    /// The noise: the median tile's difference (the upper edge of its bin), followed over
    /// [`NOISE_SECONDS`]. The median, as long as under half the tiles move, is a still
    /// tile's.
    fn follow_noise(&mut self, histogram: &[u32], tiles: u32) {
        debug_assert_eq!(histogram.len(), DIFF_BINS);
        let half = u64::from(tiles).div_ceil(2);
        let mut seen = 0u64;
        let bin = histogram
            .iter()
            .position(|&c| {
                seen += u64::from(c);
                seen >= half
            })
            .unwrap_or(DIFF_BINS - 1);
        let sample = (bin + 1) as f64 / 4.0;
        let weight = (1.0 - (-self.last_dt / NOISE_SECONDS).exp()).max(0.01);
        self.noise = Some(match self.noise {
            None => sample,
            Some(n) => n + (sample - n) * weight,
        });
    }
}

/// The share of the way, in 1/65536, that an exponential moving average with time
/// constant `tau` moves in `dt` seconds: 1 - e^(-dt / tau), at least 1.
pub(crate) fn follow_rate(dt: f64, tau: f64) -> u32 {
    let share = 1.0 - (-dt / tau).exp();
    ((share * f64::from(RATE_ONE)).round() as u32).clamp(1, RATE_ONE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a frame of 100 tiles came to: `moving` of them moving, the still ones'
    /// difference in bin `median`, the light gain `gain`.
    fn observe(c: &mut MotionControl, median: usize, moving: u32, gain: f64) -> MotionResult {
        let mut h = [0; DIFF_BINS];
        h[median] = 100 - moving;
        h[DIFF_BINS - 1] = moving;
        let frame = FrameCounts {
            diff_histogram: &h,
            moving,
            gain: (gain * 65536.0) as u32,
        };
        c.observe(&frame, 100)
    }

    #[test]
    fn the_follow_rate_is_the_share_of_an_exponential_average() {
        assert_eq!(follow_rate(0.0, 60.0), 1);
        // 1 - e^(-1/1800) of 65536 at 30 fps over 60 s.
        assert_eq!(follow_rate(1.0 / 30.0, 60.0), 36);
        assert_eq!(follow_rate(60.0, 60.0), 41427);
        assert_eq!(follow_rate(1e9, 1.0), RATE_ONE);
    }

    /// The first frame sets the background, the learning follows the frames fast for
    /// LEARN_SECONDS with nothing reported, then the background follows over
    /// background_seconds and the threshold is 6 times the noise the learning measured.
    #[test]
    fn learning_then_watching_with_the_threshold_from_the_noise() {
        let mut c = MotionControl::new(MotionSettings::default());
        let t0 = Instant::now();
        let at = |n: u32| t0 + Duration::from_millis(33 * u64::from(n));
        let first = c.next(at(0));
        assert_eq!((first.rate, first.still_rate), (RATE_ONE, RATE_ONE));
        assert_eq!(observe(&mut c, 1, 0, 1.0).state, MotionState::Learning);
        let second = c.next(at(1));
        assert_eq!(second.rate, RATE_ONE / 2);
        let mut n = 2;
        while at(n) < t0 + Duration::from_secs_f64(LEARN_SECONDS) {
            let told = c.next(at(n));
            assert!(
                told.rate >= follow_rate(0.033, LEARN_FOLLOW_SECONDS),
                "{told:?}"
            );
            // Learning moves every tile alike.
            assert_eq!(told.still_rate, told.rate);
            // The median in bin 3: noise 1 luma level.
            assert_eq!(observe(&mut c, 3, 0, 1.0).state, MotionState::Learning);
            n += 1;
        }
        let watched = c.next(at(n));
        assert_eq!(watched.rate, follow_rate(0.033, 60.0));
        // The still tiles follow within a second: 1 - e^(-0.033 / 0.5).
        assert_eq!(watched.still_rate, follow_rate(0.033, STILL_FOLLOW_SECONDS));
        assert_eq!(watched.still_rate, 4186);
        // 6 x 1.0 luma levels, in 1/256.
        assert_eq!(watched.threshold, 6 * 256);
        let r = observe(&mut c, 3, 10, 1.0);
        assert_eq!(
            (r.state, r.threshold, r.noise),
            (MotionState::Watching, 6.0, 1.0)
        );
        // A fixed threshold is told as it is.
        c.set_settings(MotionSettings {
            threshold: MotionThreshold::Luma(2.5),
            ..MotionSettings::default()
        });
        assert_eq!(c.next(at(n + 1)).threshold, 640);
    }

    /// Over half the tiles at once, or the light jumping by more than SUDDEN_LIGHT between
    /// two frames, is a change of scene, and the next frame learns afresh; a slow change of
    /// light is not.
    #[test]
    fn a_change_of_scene_learns_afresh() {
        for (moving, gain, want) in [
            (51, 1.0, MotionState::SceneChange),
            (50, 1.0, MotionState::Watching),
            (0, 1.10, MotionState::SceneChange),
            (0, 1.05, MotionState::Watching),
        ] {
            let mut c = MotionControl::new(MotionSettings::default());
            let t0 = Instant::now();
            let mut n = 0;
            let mut at = || {
                n += 1;
                t0 + Duration::from_millis(100 * n)
            };
            for _ in 0..25 {
                c.next(at());
                observe(&mut c, 0, 0, 1.0);
            }
            c.next(at());
            assert_eq!(observe(&mut c, 0, 0, 1.0).state, MotionState::Watching);
            c.next(at());
            let r = observe(&mut c, 0, moving, gain);
            assert_eq!(r.state, want, "{moving} moving, gain {gain}");
            let next = c.next(at());
            let learning = want == MotionState::SceneChange;
            assert_eq!(
                next.rate == RATE_ONE,
                learning,
                "{moving} moving, gain {gain}"
            );
        }
    }

    /// The automatic threshold stays within its bounds however quiet or noisy the camera.
    #[test]
    fn the_automatic_threshold_is_bounded() {
        for (median, want) in [(0, AUTO_MIN), (5, 9.0), (40, AUTO_MAX)] {
            let mut c = MotionControl::new(MotionSettings::default());
            let t0 = Instant::now();
            for n in 0..40 {
                c.next(t0 + Duration::from_millis(100 * n));
                observe(&mut c, median, 0, 1.0);
            }
            let told = c.next(t0 + Duration::from_millis(4000));
            assert_eq!(
                f64::from(told.threshold) / 256.0,
                want,
                "median bin {median}"
            );
        }
    }
}
