//! Each camera's retained state topics, under `<topic_prefix>/<camera>/`: `state` (up,
//! starting, waiting_for_device, restarting, no_usb_bandwidth), `availability` (`online`
//! while up), `tamper/<kind>` and `motion/<region>` (`ON`/`OFF`, Home Assistant's binary
//! sensor payloads), and `fps`, `sharpness` and `light_ratio` (numbers). A topic is
//! published when its value changes, the numbers at most once per [`NUMBERS_EVERY`] and
//! rounded, so that an idle camera sends nothing.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::outbox::Message;
use crate::events::Observed;

/// The numeric sensors change a little every frame: once a second is enough for a graph.
pub(super) const NUMBERS_EVERY: Duration = Duration::from_secs(1);

/// What each topic was last published as.
#[derive(Default)]
pub(super) struct States {
    prefix: String,
    published: HashMap<String, String>,
    numbers_at: HashMap<String, Instant>,
}

impl States {
    pub fn new(prefix: &str) -> States {
        States {
            prefix: prefix.to_string(),
            ..States::default()
        }
    }

    /// Forgets what was published: every topic is sent again (after a reconnection, to
    /// a broker that may have restarted without its retained messages).
    pub fn forget(&mut self) {
        self.published.clear();
        self.numbers_at.clear();
    }

    /// The messages that `seen` at `now` makes: the topics whose value changed.
    pub fn changes(&mut self, seen: &Observed, now: Instant) -> Vec<Message> {
        let on = |b: bool| if b { "ON" } else { "OFF" };
        let mut values: Vec<(String, String)> = vec![
            ("state".into(), seen.state.into()),
            (
                "availability".into(),
                if seen.state == "up" {
                    "online"
                } else {
                    "offline"
                }
                .into(),
            ),
        ];
        values.extend(
            seen.tamper
                .iter()
                .map(|(kind, b)| (format!("tamper/{kind}"), on(*b).into())),
        );
        values.extend(
            seen.motion
                .iter()
                .map(|(region, b, _)| (format!("motion/{region}"), on(*b).into())),
        );
        let numbers_due = self
            .numbers_at
            .get(&seen.camera)
            .is_none_or(|at| now.duration_since(*at) >= NUMBERS_EVERY);
        if numbers_due {
            self.numbers_at.insert(seen.camera.clone(), now);
            let numbers = [
                ("fps", seen.fps.map(|v| format!("{v:.1}"))),
                ("sharpness", seen.sharpness.map(|v| format!("{v:.2}"))),
                ("light_ratio", seen.light_ratio.map(|v| format!("{v:.2}"))),
            ];
            values.extend(
                numbers
                    .into_iter()
                    .filter_map(|(name, v)| Some((name.to_string(), v?))),
            );
        }
        let mut out = Vec::new();
        for (name, value) in values {
            let topic = format!("{}/{}/{name}", self.prefix, seen.camera);
            if self.published.get(&topic) != Some(&value) {
                self.published.insert(topic.clone(), value.clone());
                out.push(Message::retained(topic, value));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen() -> Observed {
        Observed {
            camera: "front".into(),
            state: "up",
            tamper: vec![("covered", false), ("frozen", false)],
            motion: vec![("door".into(), false, 0.0)],
            fps: Some(29.97),
            sharpness: None,
            light_ratio: Some(1.004),
            health: None,
        }
    }

    fn topics(messages: &[Message]) -> Vec<(&str, &str)> {
        messages
            .iter()
            .map(|m| (m.topic.as_str(), m.payload.as_str()))
            .collect()
    }

    #[test]
    fn every_topic_first_then_only_what_changed() {
        let mut states = States::new("es/b7");
        let t0 = Instant::now();
        let first = states.changes(&seen(), t0);
        assert_eq!(
            topics(&first),
            [
                ("es/b7/front/state", "up"),
                ("es/b7/front/availability", "online"),
                ("es/b7/front/tamper/covered", "OFF"),
                ("es/b7/front/tamper/frozen", "OFF"),
                ("es/b7/front/motion/door", "OFF"),
                ("es/b7/front/fps", "30.0"),
                ("es/b7/front/light_ratio", "1.00"),
            ]
        );
        assert!(first.iter().all(|m| m.retain));
        assert!(states.changes(&seen(), t0).is_empty());
        let mut next = seen();
        next.tamper[0].1 = true;
        next.motion[0].1 = true;
        next.fps = Some(12.0);
        // The frame rate waits for its second; the on/off topics do not.
        assert_eq!(
            topics(&states.changes(&next, t0 + Duration::from_millis(300))),
            [
                ("es/b7/front/tamper/covered", "ON"),
                ("es/b7/front/motion/door", "ON")
            ]
        );
        assert_eq!(
            topics(&states.changes(&next, t0 + NUMBERS_EVERY)),
            [("es/b7/front/fps", "12.0")]
        );
        next.state = "restarting";
        next.fps = None;
        assert_eq!(
            topics(&states.changes(&next, t0 + 2 * NUMBERS_EVERY)),
            [
                ("es/b7/front/state", "restarting"),
                ("es/b7/front/availability", "offline")
            ]
        );
        states.forget();
        assert_eq!(states.changes(&next, t0 + 2 * NUMBERS_EVERY).len(), 6);
    }
}
