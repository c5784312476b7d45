//! What the measuring commands and the daemon's cost figures share: a series' median and
//! spread, and the process's CPU time.

use std::time::Duration;

use serde::Serialize;

/// User plus system CPU time of the whole process so far.
pub fn process_cpu_time() -> Duration {
    // SAFETY: a rusage is integers and timevals; all zero is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into `usage`, a live local.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
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
