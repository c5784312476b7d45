//! A tile's badge: a camera's health while it delivers frames, or why it does not.

use std::time::Duration;

use super::{duration, row, Row};
use crate::mailbox::CameraState;
use edgesight_core::health::{HealthReport, State};

/// The badge of a camera that delivers frames: its health, or `up` with health off.
pub(super) fn health_badge(health: Option<&HealthReport>) -> Row {
    let Some(h) = health else {
        return Row {
            class: "ok",
            ..row("badge", "state", "up")
        };
    };
    let named = |wanted: State| -> Vec<&str> {
        h.kinds
            .iter()
            .filter(|(_, s)| *s == wanted)
            .map(|(k, _)| k.name())
            .collect()
    };
    let (tampered, suspect) = (named(State::Tampered), named(State::Suspect));
    // A tamper confirmed while the view is still being learned (frozen needs no learned
    // view) is shown: learning must not hide it.
    let (class, text) = if !tampered.is_empty() {
        ("tampered", format!("tampered: {}", tampered.join(", ")))
    } else if h.learning {
        ("learning", "learning".to_string())
    } else if !suspect.is_empty() {
        ("suspect", format!("suspect: {}", suspect.join(", ")))
    } else {
        ("ok", "ok".to_string())
    };
    Row {
        class,
        ..row("badge", "state", text)
    }
}

/// The badge of a camera that delivers no frames, and why.
pub(super) fn down_badge(
    state: &CameraState,
    since: Duration,
    age: Option<Duration>,
) -> (Row, String) {
    let last = match age {
        Some(a) => format!("; last frame {} ago", duration(a.as_secs_f64())),
        None => "; no frame yet".to_string(),
    };
    let for_ = duration(since.as_secs_f64());
    let (text, reason) = match state {
        CameraState::Starting => ("starting", format!("being opened (for {for_}){last}")),
        CameraState::WaitingForDevice => (
            "waiting for device",
            format!("device absent: waiting for it to appear (for {for_}){last}"),
        ),
        CameraState::Restarting { error, retry_at } => {
            let left = retry_at.saturating_duration_since(std::time::Instant::now());
            (
                "restarting",
                format!(
                    "failed: {error}; retrying in {}{last}",
                    duration(left.as_secs_f64())
                ),
            )
        }
        CameraState::NoUsbBandwidth { error } => (
            "no USB bandwidth",
            format!("{error} (for {for_}); retrying{last}"),
        ),
        CameraState::Up => ("stalled", format!("open, but delivers no frames{last}")),
    };
    (
        Row {
            class: "down",
            ..row("badge", "state", text)
        },
        reason,
    )
}
