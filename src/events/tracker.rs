//! The JSON events: one message when a tamper kind, a region's motion event or a camera
//! coming back begins, and one when it ends.
//!
//! They are read from the same observations as the MQTT state topics, so an event's times
//! are those of the round that saw it (within its tick of the frame). A camera coming back
//! is a moment, not a span: its one message has `ended` equal to `started` and says how
//! long the camera was away.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::Observed;
use edgesight_core::health::HealthReport;

/// An event that has begun and not yet ended.
struct Open {
    kind: String,
    region: Option<String>,
    started: SystemTime,
}

/// One message of an event, and the stem of its files in `[events] dir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventMessage {
    pub stem: String,
    pub json: String,
}

/// One round's event messages of a camera, and the stems of the events that began (the
/// camera's picture is then wanted for them).
pub(super) struct Round {
    pub messages: Vec<EventMessage>,
    pub began: Vec<String>,
}

/// The events open and what each camera was last seen doing.
#[derive(Default)]
pub(super) struct Events {
    /// By camera, then by kind and region.
    open: HashMap<String, Vec<Open>>,
    /// Whether each camera was up at the last round, and since when it was not.
    down_since: HashMap<String, Option<SystemTime>>,
}

impl Events {
    /// The event messages that `seen` at `now` makes.
    pub fn changes(&mut self, seen: &Observed, now: SystemTime) -> Round {
        let mut out = Vec::new();
        let mut began = Vec::new();
        let health = measures_of_health(seen.health.as_ref());
        let on: Vec<(String, Option<String>, Value)> = seen
            .tamper
            .iter()
            .filter(|(_, on)| *on)
            .map(|(kind, _)| (format!("tamper_{kind}"), None, health.clone()))
            .chain(
                seen.motion
                    .iter()
                    .filter(|(_, on, _)| *on)
                    .map(|(region, _, ratio)| {
                        (
                            "motion".to_string(),
                            Some(region.clone()),
                            json!({ "ratio": round(*ratio, 3) }),
                        )
                    }),
            )
            .collect();
        let open = self.open.entry(seen.camera.clone()).or_default();
        // Those that ended: no longer on (or no longer watched: health off, a region gone).
        open.retain(|o| {
            let still = on.iter().find(|(k, r, _)| *k == o.kind && *r == o.region);
            if still.is_some() {
                return true;
            }
            let measures = match &o.region {
                Some(region) => json!({ "ratio": seen.motion.iter()
                    .find(|(r, _, _)| r == region)
                    .map(|(_, _, ratio)| round(*ratio, 3)) }),
                None => health.clone(),
            };
            out.push(message(
                &seen.camera,
                &o.kind,
                o.region.as_deref(),
                o.started,
                Some(now),
                measures,
            ));
            false
        });
        for (kind, region, measures) in on {
            if open.iter().any(|o| o.kind == kind && o.region == region) {
                continue;
            }
            let m = message(&seen.camera, &kind, region.as_deref(), now, None, measures);
            began.push(m.stem.clone());
            out.push(m);
            open.push(Open {
                kind,
                region,
                started: now,
            });
        }
        let up = seen.state == "up";
        match (self.down_since.get(&seen.camera), up) {
            // Back: up again after it had been up, then down.
            (Some(Some(since)), true) => {
                let away = now.duration_since(*since).unwrap_or(Duration::ZERO);
                let m = message(
                    &seen.camera,
                    "camera_back",
                    None,
                    now,
                    Some(now),
                    json!({ "away_seconds": round(away.as_secs_f64(), 1) }),
                );
                began.push(m.stem.clone());
                out.push(m);
                self.down_since.insert(seen.camera.clone(), None);
            }
            (Some(None), false) => {
                self.down_since.insert(seen.camera.clone(), Some(now));
            }
            (None, true) => {
                self.down_since.insert(seen.camera.clone(), None);
            }
            _ => {}
        }
        Round {
            messages: out,
            began,
        }
    }
}

fn message(
    camera: &str,
    kind: &str,
    region: Option<&str>,
    started: SystemTime,
    ended: Option<SystemTime>,
    measures: Value,
) -> EventMessage {
    let mut event = json!({
        "camera": camera,
        "kind": kind,
        "started": rfc3339(started),
        "ended": ended.map(rfc3339),
        "measures": measures,
    });
    if let Some(region) = region {
        event["region"] = region.into();
    }
    EventMessage {
        stem: super::store::stem(&rfc3339(started), kind, region),
        json: event.to_string(),
    }
}

/// The health detectors' measures, as `/api/v1/latest` names them.
fn measures_of_health(h: Option<&HealthReport>) -> Value {
    let Some(h) = h else {
        return Value::Null;
    };
    let r = |v: f64| round(v, 3);
    json!({
        "sharpness": h.sharpness.map(r),
        "scene_change": h.scene_change.map(r),
        "mean_luma_ratio": h.mean_luma_ratio.map(r),
        "clipped_dark": r(h.clipped_dark),
        "clipped_bright": r(h.clipped_bright),
        "flat_cells": h.flat_cells.map(r),
        "unchanged_seconds": round(h.unchanged_seconds, 1),
    })
}

fn round(v: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (v * scale).round() / scale
}

/// `t` as RFC 3339 in UTC, to the millisecond: `2026-11-29T19:40:00.123Z`.
fn rfc3339(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = since.as_secs() as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil, for the proleptic Gregorian calendar.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgesight_core::health::{Kind, State};

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(at(1_700_000_000) + Duration::from_millis(42)),
            "2023-11-14T22:13:20.042Z"
        );
        assert_eq!(rfc3339(at(951_782_400)), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(at(4_107_542_399)), "2100-02-28T23:59:59.000Z");
    }

    fn seen() -> Observed {
        let mut health = HealthReport {
            learning: false,
            unchanged_seconds: 12.04,
            ..HealthReport::default()
        };
        health.kinds[3] = (Kind::Frozen, State::Tampered);
        Observed {
            camera: "front".into(),
            state: "up",
            tamper: vec![("covered", false), ("frozen", false)],
            motion: vec![("door".into(), false, 0.0), ("sky".into(), false, 0.0)],
            fps: Some(30.0),
            sharpness: None,
            light_ratio: None,
            health: Some(health),
        }
    }

    fn payloads(round: &Round) -> Vec<Value> {
        round
            .messages
            .iter()
            .map(|m| serde_json::from_str(&m.json).expect("JSON"))
            .collect()
    }

    fn stems(round: &Round) -> Vec<&str> {
        round.messages.iter().map(|m| m.stem.as_str()).collect()
    }

    #[test]
    fn each_event_begins_once_and_ends_with_its_start() {
        let mut events = Events::default();
        assert!(events.changes(&seen(), at(100)).messages.is_empty());
        let mut s = seen();
        s.motion[0] = ("door".into(), true, 0.41234);
        s.tamper[1].1 = true;
        let began = events.changes(&s, at(101));
        assert_eq!(
            began.began,
            [
                "19700101T000141.000Z-tamper_frozen",
                "19700101T000141.000Z-motion-door"
            ]
        );
        assert_eq!(stems(&began), began.began);
        assert_eq!(
            payloads(&began),
            [
                json!({"camera": "front", "kind": "tamper_frozen", "started":
                    "1970-01-01T00:01:41.000Z", "ended": null, "measures": {
                    "sharpness": null, "scene_change": null, "mean_luma_ratio": null,
                    "clipped_dark": 0.0, "clipped_bright": 0.0, "flat_cells": null,
                    "unchanged_seconds": 12.0}}),
                json!({"camera": "front", "kind": "motion", "region": "door", "started":
                    "1970-01-01T00:01:41.000Z", "ended": null, "measures": {"ratio": 0.412}}),
            ]
        );
        // Still on: nothing more.
        assert!(events.changes(&s, at(102)).messages.is_empty());
        s.motion[0] = ("door".into(), false, 0.01);
        let ended = events.changes(&s, at(103));
        assert!(ended.began.is_empty());
        assert_eq!(stems(&ended), ["19700101T000141.000Z-motion-door"]);
        assert_eq!(
            payloads(&ended),
            [
                json!({"camera": "front", "kind": "motion", "region": "door", "started":
                    "1970-01-01T00:01:41.000Z", "ended": "1970-01-01T00:01:43.000Z",
                    "measures": {"ratio": 0.01}})
            ]
        );
        // The health detectors turned off: the tamper ends with nothing to measure.
        s.tamper.clear();
        s.health = None;
        let ended = payloads(&events.changes(&s, at(104)));
        assert_eq!(
            (&ended[0]["kind"], &ended[0]["ended"], &ended[0]["measures"]),
            (
                &json!("tamper_frozen"),
                &json!("1970-01-01T00:01:44.000Z"),
                &Value::Null
            )
        );
        assert_eq!(ended.len(), 1);
    }

    #[test]
    fn a_camera_back_is_one_message_with_how_long_it_was_away() {
        let mut events = Events::default();
        let mut s = seen();
        // Down from the start, then up: it arrived, it did not come back.
        s.state = "waiting_for_device";
        assert!(events.changes(&s, at(10)).messages.is_empty());
        s.state = "up";
        assert!(events.changes(&s, at(11)).messages.is_empty());
        s.state = "restarting";
        assert!(events.changes(&s, at(20)).messages.is_empty());
        assert!(events.changes(&s, at(21)).messages.is_empty());
        s.state = "up";
        let back = events.changes(&s, at(27));
        assert_eq!(back.began, ["19700101T000027.000Z-camera_back"]);
        assert_eq!(
            payloads(&back),
            [json!({"camera": "front", "kind": "camera_back",
                "started": "1970-01-01T00:00:27.000Z", "ended": "1970-01-01T00:00:27.000Z",
                "measures": {"away_seconds": 7.0}})]
        );
        assert!(events.changes(&s, at(28)).messages.is_empty());
    }
}
