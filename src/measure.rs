//! What the measuring commands and the daemon's cost figures share: a series' median and
//! spread, and the process's CPU time.

use std::time::Duration;

use serde::Serialize;

/// User plus system CPU time of the whole process so far, all its threads (an OpenCL
/// driver's own threads work for a frame too), to the nanosecond.
pub fn process_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the call writes one timespec into `now`, a live local.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) } != 0 {
        return Duration::ZERO; // Linux always has this clock; zero reads as no time.
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Median and spread of a series of measurements, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
}

impl Spread {
    /// From nanoseconds; the median is the upper middle for an even count.
    pub fn of_nanos(values: &[u64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let mut v = values.to_vec();
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] as f64 / 1e6;
        Spread {
            median: v[v.len() / 2] as f64 / 1e6,
            p10: at(0.1),
            p90: at(0.9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_a_series() {
        let s = Spread::of_nanos(&[5_000_000, 1_000_000, 3_000_000, 2_000_000, 4_000_000]);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.p10, 1.0);
        assert_eq!(s.p90, 5.0);
        assert_eq!(Spread::of_nanos(&[]), Spread::default());
    }
}
