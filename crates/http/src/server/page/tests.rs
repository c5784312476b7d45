//! The page model's pieces: durations, the summary, a down camera's reason.

use super::*;

#[test]
fn durations_read_as_a_person_says_them() {
    assert_eq!(duration(0.04), "0.0 s");
    assert_eq!(duration(3.25), "3.2 s");
    assert_eq!(duration(42.4), "42 s");
    assert_eq!(duration(200.0), "3 min 20 s");
    assert_eq!(duration(7500.0), "2 h 5 min");
    assert_eq!(duration(-1.0), "0.0 s");
}

#[test]
fn the_summary_counts_and_colours() {
    let c = Counts {
        cameras: 3,
        up: 2,
        down: 1,
        tampered: 1,
    };
    assert_eq!(c.text(), "3 cameras: 2 up, 1 down, 1 tampered");
    assert_eq!(c.class(), "tampered");
    let one = Counts {
        cameras: 1,
        up: 1,
        ..Counts::default()
    };
    assert_eq!(one.text(), "1 camera: 1 up, 0 down, 0 tampered");
    assert_eq!(one.class(), "ok");
}

#[test]
fn a_down_camera_says_why() {
    let (badge, reason) = down_badge(
        &CameraState::Restarting {
            error: "/dev/video3: No such device".into(),
            retry_at: std::time::Instant::now() + Duration::from_millis(4_050),
        },
        Duration::from_secs(1),
        Some(Duration::from_secs(75)),
    );
    assert_eq!((badge.class, badge.value.as_str()), ("down", "restarting"));
    assert_eq!(
        reason,
        "failed: /dev/video3: No such device; retrying in 4.0 s; last frame 1 min 15 s ago"
    );
    let (badge, reason) = down_badge(
        &CameraState::WaitingForDevice,
        Duration::from_secs(12),
        None,
    );
    assert_eq!(badge.value, "waiting for device");
    assert_eq!(
        reason,
        "device absent: waiting for it to appear (for 12 s); no frame yet"
    );
}
