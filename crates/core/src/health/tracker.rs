//! The hysteresis each detector's state goes through: `ok` -> `suspect` as soon as its
//! condition holds, `suspect` -> `tampered` once it has held for the confirm time (back to
//! `ok` the moment it stops), and `tampered` -> `ok` once it has been away for the clear
//! time. A flicker or an auto-exposure step never gets past `suspect`.

use std::time::{Duration, Instant};

use serde::Serialize;

/// A detector's state; its lower-case name is its JSON form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// The condition does not hold (or, after `tampered`, stayed away for the clear time).
    #[default]
    Ok,
    /// The condition holds, but not yet for the confirm time.
    Suspect,
    /// The condition held for the confirm time, and has not stayed away for the clear time.
    Tampered,
}

impl State {
    /// The lower-case name (`ok`, `suspect`, `tampered`) reports show.
    pub fn name(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Suspect => "suspect",
            State::Tampered => "tampered",
        }
    }
}

/// What a step changed, when it crossed into or out of `tampered`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TamperChange {
    /// Into `tampered`: the condition held for the confirm time.
    Tampered,
    /// Out of `tampered`, back to `ok`: the condition stayed away for the clear time.
    Cleared,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Tracker {
    pub state: State,
    /// When the condition began to hold (ok, suspect) or stopped holding (tampered).
    since: Option<Instant>,
}

impl Tracker {
    pub fn step(
        &mut self,
        holds: bool,
        at: Instant,
        confirm: Duration,
        clear: Duration,
    ) -> Option<TamperChange> {
        match (self.state, holds) {
            (State::Ok | State::Suspect, false) => {
                *self = Tracker::default();
                None
            }
            (State::Ok | State::Suspect, true) => {
                let since = *self.since.get_or_insert(at);
                if at.saturating_duration_since(since) >= confirm {
                    *self = Tracker {
                        state: State::Tampered,
                        since: None,
                    };
                    Some(TamperChange::Tampered)
                } else {
                    self.state = State::Suspect;
                    None
                }
            }
            (State::Tampered, true) => {
                self.since = None;
                None
            }
            (State::Tampered, false) => {
                let since = *self.since.get_or_insert(at);
                if at.saturating_duration_since(since) >= clear {
                    *self = Tracker::default();
                    Some(TamperChange::Cleared)
                } else {
                    None
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirm_and_clear_times_with_a_flicker_in_between() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let (confirm, clear) = (Duration::from_millis(500), Duration::from_millis(2000));
        let mut t = Tracker::default();
        let mut step = |holds: bool, at: u64| {
            let change = t.step(holds, ms(at), confirm, clear);
            (t.state, change)
        };
        assert_eq!(step(true, 0), (State::Suspect, None));
        assert_eq!(step(true, 499), (State::Suspect, None));
        assert_eq!(step(false, 500), (State::Ok, None), "a flicker starts over");
        assert_eq!(step(true, 600), (State::Suspect, None));
        assert_eq!(
            step(true, 1100),
            (State::Tampered, Some(TamperChange::Tampered))
        );
        assert_eq!(step(false, 1200), (State::Tampered, None));
        assert_eq!(
            step(true, 3000),
            (State::Tampered, None),
            "back: the clear restarts"
        );
        assert_eq!(step(false, 3100), (State::Tampered, None));
        assert_eq!(step(false, 5099), (State::Tampered, None));
        assert_eq!(step(false, 5100), (State::Ok, Some(TamperChange::Cleared)));
        assert_eq!(step(false, 9000), (State::Ok, None));
    }

    #[test]
    fn no_confirm_time_tampers_on_the_first_frame() {
        let mut t = Tracker::default();
        let now = Instant::now();
        assert_eq!(
            t.step(true, now, Duration::ZERO, Duration::ZERO),
            Some(TamperChange::Tampered)
        );
        assert_eq!(
            t.step(false, now, Duration::ZERO, Duration::ZERO),
            Some(TamperChange::Cleared)
        );
    }
}
