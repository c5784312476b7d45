//! The stages' names and their device time per frame.

use opencl3::event::Event;

use crate::cl::{event_interval, ClError};

/// The stages, in the order they run; their names label timings and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Luma,
    Sobel,
    Histogram,
    Otsu,
    Binarize,
    /// The integrals, and with motion its tiles against the learned background.
    Integral,
    /// Each region's sums, and with motion its moving pixels.
    Regions,
    /// The gradient histogram the camera-health detectors read, every few frames.
    Health,
}

impl Stage {
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

/// Device time of each stage for one frame, from profiling events, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimings(pub [u64; Stage::ALL.len()]);

impl StageTimings {
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

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = (Stage, u64)> + '_ {
        Stage::ALL.into_iter().map(|s| (s, self.get(s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
