//! The stages' names and their device time per frame.

use std::time::{Duration, Instant};

use opencl3::event::Event;

use crate::cl::{event_interval, ClError};

/// The stages, in the order they run; their names label timings and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Dense 8-bit luma from the frame (luma.cl, or raw.cl for raw sensor formats); no time
    /// where the stages read luma in place.
    Luma,
    /// The 3x3 Sobel gradient magnitude over luma (sobel.cl), with Otsu beside it on GPUs.
    Sobel,
    /// The 256-bin luma histogram (histogram.cl).
    Histogram,
    /// Otsu's threshold from the histogram: `otsu_threshold`, or the host's arithmetic and its
    /// write; part of Sobel's time where Sobel's launch runs it.
    Otsu,
    /// The 0/255 foreground mask (`binarize`), only in a pipeline that keeps its full images.
    Binarize,
    /// The integrals, and with motion its tiles against the learned background.
    Integral,
    /// Each region's sums, and with motion its moving pixels.
    Regions,
    /// The gradient histogram the camera-health detectors read, every few frames.
    Health,
}

impl Stage {
    /// Every stage, in the order they run; a stage's index here is its slot in [`StageTimings`].
    pub const ALL: [Stage; 8] = [
        Stage::Luma,
        Stage::Sobel,
        Stage::Histogram,
        Stage::Otsu,
        Stage::Binarize,
        Stage::Integral,
        Stage::Regions,
        Stage::Health,
    ];

    /// The stage's lowercase name, as timings, metrics, logs and errors label it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Luma => "luma",
            Stage::Sobel => "sobel",
            Stage::Histogram => "histogram",
            Stage::Otsu => "otsu",
            Stage::Binarize => "binarize",
            Stage::Integral => "integral",
            Stage::Regions => "regions",
            Stage::Health => "health",
        }
    }
}

/// Its [`Stage::name`], as errors and logs say it.
impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Time of each stage for one frame, in nanoseconds: on the device's clock (profiling
/// events) or, where the queue has none, the host's ([`crate::cl::Timing`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimings(pub [u64; Stage::ALL.len()]);

impl StageTimings {
    /// The time of `stage` on this frame, in nanoseconds (0 where it did not run).
    pub fn get(&self, stage: Stage) -> u64 {
        self.0[stage as usize]
    }

    /// A frame's stage times from its commands' events, each command's time added to its
    /// stage's, and the span from the first command's start to the last one's end.
    pub(super) fn of_events(events: &[(Stage, Event)]) -> Result<(StageTimings, u64), ClError> {
        let mut timings = StageTimings::default();
        let (mut first, mut last) = (u64::MAX, 0);
        for (stage, event) in events {
            let (start, end) = event_interval(event)?;
            timings.0[*stage as usize] += end.saturating_sub(start);
            first = first.min(start);
            last = last.max(end);
        }
        Ok((timings, last.saturating_sub(first)))
    }

    /// A frame's stage times from the host's clock ([`Timing::Host`]): each command's
    /// time, from the end of the one before (the first: from `begun`, when the frame
    /// began enqueueing) to when it was seen complete, added to its stage's; and the span
    /// from `begun` to the last one.
    ///
    /// [`Timing::Host`]: crate::cl::Timing::Host
    pub(super) fn of_host_marks(begun: Instant, marks: &[(Stage, Instant)]) -> (StageTimings, u64) {
        let mut timings = StageTimings::default();
        let mut before = begun;
        for &(stage, done) in marks {
            timings.0[stage as usize] += nanos(done.saturating_duration_since(before));
            before = before.max(done);
        }
        (timings, nanos(before.saturating_duration_since(begun)))
    }

    /// Each stage's median over several frames (the upper middle for an even count).
    pub fn median<'a>(runs: impl IntoIterator<Item = &'a StageTimings>) -> StageTimings {
        let runs: Vec<&StageTimings> = runs.into_iter().collect();
        let mut out = StageTimings::default();
        for (i, slot) in out.0.iter_mut().enumerate() {
            let mut values: Vec<u64> = runs.iter().map(|r| r.0[i]).collect();
            values.sort_unstable();
            *slot = values.get(values.len() / 2).copied().unwrap_or(0);
        }
        out
    }

    /// The sum of every stage's time, in nanoseconds (no overlap removed: not the frame's span).
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Each stage with its time in nanoseconds, in the order they run.
    pub fn iter(&self) -> impl Iterator<Item = (Stage, u64)> + '_ {
        Stage::ALL.into_iter().map(|s| (s, self.get(s)))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_marks_give_each_command_the_time_since_the_one_before() {
        let begun = Instant::now();
        let at = |ms| begun + Duration::from_millis(ms);
        let marks = [
            (Stage::Luma, at(2)),
            (Stage::Histogram, at(5)),
            (Stage::Histogram, at(6)),
            (Stage::Sobel, at(10)),
            (Stage::Regions, at(17)),
        ];
        let (timings, span) = StageTimings::of_host_marks(begun, &marks);
        let ms = 1_000_000;
        assert_eq!(
            timings,
            StageTimings([2 * ms, 4 * ms, 4 * ms, 0, 0, 0, 7 * ms, 0])
        );
        assert_eq!(span, 17 * ms);
        assert_eq!(
            StageTimings::of_host_marks(begun, &[]),
            (StageTimings::default(), 0)
        );
    }

    #[test]
    fn median_per_stage() {
        let runs = [
            StageTimings([5, 1, 9, 0, 0, 0, 2, 0]),
            StageTimings([1, 2, 8, 0, 0, 0, 2, 6]),
            StageTimings([3, 3, 7, 0, 0, 4, 2, 0]),
        ];
        assert_eq!(
            StageTimings::median(&runs),
            StageTimings([3, 2, 8, 0, 0, 0, 2, 0])
        );
        assert_eq!(StageTimings::median(&runs[..2]).0[0], 5);
        assert_eq!(StageTimings::median(&[]), StageTimings::default());
    }
}
