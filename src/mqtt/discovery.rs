//! Home Assistant's MQTT discovery: one device per camera, its entities' configs published
//! retained under `<discovery_prefix>/<component>/<board>/<object>/config` at each
//! connection and again when Home Assistant says it is back (`<discovery_prefix>/status`
//! = `online`). The entities read the state topics of [`super::states`] and the camera
//! entity the last event's picture; each is available while the daemon is (the last
//! will) and, but for the connectivity sensor and the picture, while its camera is up
//! (`availability_mode: all`).

use serde_json::{json, Value};

use super::outbox::Message;
use super::MqttSettings;
use edgesight_core::health::Kind;

/// What discovery needs of each camera: made from the config by
/// `config::discovery_cameras`, so that this room reads no config of its own.
#[derive(Clone, Debug)]
pub struct Cameras {
    cameras: Vec<Camera>,
    /// The status page, for each device's `configuration_url`.
    status_url: String,
}

/// One camera as discovery shows it: its name, its regions' names and whether its
/// health is watched (its tamper entities then exist).
#[derive(Clone, Debug)]
pub struct Camera {
    pub name: String,
    pub regions: Vec<String>,
    pub health: bool,
}

impl Cameras {
    pub fn new(cameras: Vec<Camera>, status_url: String) -> Cameras {
        Cameras {
            cameras,
            status_url,
        }
    }
}

/// A name as a discovery topic's level and a `unique_id` take it.
fn id(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Every entity's config message, in the cameras' order.
pub(super) fn messages(s: &MqttSettings, cameras: &Cameras) -> Vec<Message> {
    if s.discovery_prefix.is_empty() {
        return Vec::new();
    }
    let daemon = json!({ "topic": s.availability_topic() });
    let mut out = Vec::new();
    for c in &cameras.cameras {
        let topic = |what: &str| format!("{}/{}/{what}", s.topic_prefix, c.name);
        let device = json!({
            "identifiers": [format!("edgesight_{}_{}", id(&s.board), id(&c.name))],
            "name": format!("{} {}", s.board, c.name),
            "manufacturer": "edgesight",
            "model": "edgesight camera",
            "sw_version": env!("CARGO_PKG_VERSION"),
            "configuration_url": cameras.status_url,
        });
        let available = json!([daemon, { "topic": topic("availability") }]);
        let mut entity = |component: &str, object: &str, mut config: Value| {
            let unique = format!("edgesight_{}_{}_{}", id(&s.board), id(&c.name), id(object));
            let fields = config.as_object_mut().expect("an object");
            fields.insert("unique_id".into(), unique.into());
            fields.insert("device".into(), device.clone());
            fields.insert(
                "origin".into(),
                json!({ "name": "edgesight", "sw_version": env!("CARGO_PKG_VERSION") }),
            );
            fields
                .entry("availability")
                .or_insert_with(|| available.clone());
            fields
                .entry("availability_mode")
                .or_insert_with(|| "all".into());
            out.push(Message::retained(
                format!(
                    "{}/{component}/{}/{}_{}/config",
                    s.discovery_prefix,
                    id(&s.board),
                    id(&c.name),
                    id(object)
                ),
                config.to_string(),
            ));
        };
        // Up or not is what it says: available whenever the daemon is.
        entity(
            "binary_sensor",
            "connectivity",
            json!({
                "name": "Connected",
                "state_topic": topic("state"),
                "value_template": "{{ 'ON' if value == 'up' else 'OFF' }}",
                "device_class": "connectivity",
                "entity_category": "diagnostic",
                "availability": [daemon],
            }),
        );
        if c.health {
            for kind in Kind::ALL {
                entity(
                    "binary_sensor",
                    &format!("tamper_{}", kind.name()),
                    json!({
                        "name": format!("Tamper {}", kind.name()),
                        "state_topic": topic(&format!("tamper/{}", kind.name())),
                        "device_class": "tamper",
                    }),
                );
            }
        }
        for region in &c.regions {
            entity(
                "binary_sensor",
                &format!("motion_{region}"),
                json!({
                    "name": format!("Motion {region}"),
                    "state_topic": topic(&format!("motion/{region}")),
                    "device_class": "motion",
                }),
            );
        }
        entity(
            "sensor",
            "fps",
            json!({
                "name": "Frame rate",
                "state_topic": topic("fps"),
                "unit_of_measurement": "fps",
                "state_class": "measurement",
                "suggested_display_precision": 1,
                "entity_category": "diagnostic",
            }),
        );
        if c.health {
            // Shares of the learned baseline's, shown as percentages.
            for (object, name) in [("sharpness", "Sharpness"), ("light_ratio", "Light")] {
                entity(
                    "sensor",
                    object,
                    json!({
                        "name": name,
                        "state_topic": topic(object),
                        "value_template": "{{ (value | float * 100) | round(0) }}",
                        "unit_of_measurement": "%",
                        "state_class": "measurement",
                    }),
                );
            }
        }
        // The last event's picture, raw JPEG bytes (no `image_encoding`): still worth
        // seeing while the camera is down, so available whenever the daemon is.
        entity(
            "camera",
            "event_picture",
            json!({
                "name": "Event picture",
                "topic": topic("picture"),
                "availability": [daemon],
            }),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{check_text, discovery_cameras, Settings};

    fn settings(mqtt: &str, listen: &str) -> Settings {
        let text = format!(
            "[web]\nlisten_address = \"{listen}\"\n[mqtt]\nurl = \"mqtt://h\"\nboard = \"b7\"\n{mqtt}\
             [[camera]]\nname = \"front.door\"\n[camera.source]\nkind = \"pattern\"\n\
             size = \"64x48\"\n[[camera.roi]]\nname = \"lane\"\nx = 0\ny = 0\nw = 8\nh = 8\n\
             [[camera]]\nname = \"yard\"\n[camera.source]\nkind = \"pattern\"\n\
             size = \"64x48\"\n[camera.health]\nenabled = false\n"
        );
        check_text(std::path::Path::new("t.toml"), &text).unwrap()
    }

    fn configs(mqtt: &str, listen: &str) -> Vec<(String, Value)> {
        let s = settings(mqtt, listen);
        let m = s.mqtt.clone().unwrap();
        messages(&m, &discovery_cameras(&s, &m.board))
            .into_iter()
            .map(|msg| {
                assert!(msg.retain, "{}", msg.topic);
                (msg.topic, serde_json::from_str(&msg.payload).unwrap())
            })
            .collect()
    }

    #[test]
    fn one_device_per_camera_with_its_entities() {
        let all = configs("", "0.0.0.0:8947");
        let topics: Vec<&str> = all.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            topics,
            [
                "homeassistant/binary_sensor/b7/front_door_connectivity/config",
                "homeassistant/binary_sensor/b7/front_door_tamper_overexposed/config",
                "homeassistant/binary_sensor/b7/front_door_tamper_underexposed/config",
                "homeassistant/binary_sensor/b7/front_door_tamper_covered/config",
                "homeassistant/binary_sensor/b7/front_door_tamper_frozen/config",
                "homeassistant/binary_sensor/b7/front_door_tamper_moved/config",
                "homeassistant/binary_sensor/b7/front_door_tamper_defocus/config",
                "homeassistant/binary_sensor/b7/front_door_motion_lane/config",
                "homeassistant/sensor/b7/front_door_fps/config",
                "homeassistant/sensor/b7/front_door_sharpness/config",
                "homeassistant/sensor/b7/front_door_light_ratio/config",
                "homeassistant/camera/b7/front_door_event_picture/config",
                "homeassistant/binary_sensor/b7/yard_connectivity/config",
                "homeassistant/sensor/b7/yard_fps/config",
                "homeassistant/camera/b7/yard_event_picture/config",
            ]
        );
        let (_, picture) = &all[11];
        assert_eq!(
            (
                &picture["topic"],
                &picture["availability"],
                &picture["name"]
            ),
            (
                &json!("edgesight/b7/front.door/picture"),
                &json!([{ "topic": "edgesight/b7/availability" }]),
                &json!("Event picture")
            )
        );
        assert!(picture.get("image_encoding").is_none(), "raw JPEG bytes");
        let (_, covered) = &all[3];
        assert_eq!(
            covered,
            &json!({
                "name": "Tamper covered",
                "state_topic": "edgesight/b7/front.door/tamper/covered",
                "device_class": "tamper",
                "unique_id": "edgesight_b7_front_door_tamper_covered",
                "device": {
                    "identifiers": ["edgesight_b7_front_door"],
                    "name": "b7 front.door",
                    "manufacturer": "edgesight",
                    "model": "edgesight camera",
                    "sw_version": env!("CARGO_PKG_VERSION"),
                    "configuration_url": "http://b7:8947/",
                },
                "origin": { "name": "edgesight", "sw_version": env!("CARGO_PKG_VERSION") },
                "availability": [
                    { "topic": "edgesight/b7/availability" },
                    { "topic": "edgesight/b7/front.door/availability" },
                ],
                "availability_mode": "all",
            })
        );
        // The connectivity sensor says OFF while the camera is down: only the daemon's
        // availability.
        let (_, up) = &all[0];
        assert_eq!(
            up["availability"],
            json!([{ "topic": "edgesight/b7/availability" }])
        );
        assert_eq!(up["state_topic"], "edgesight/b7/front.door/state");
        let (_, fps) = &all[8];
        assert_eq!(
            (&fps["unit_of_measurement"], &fps["state_class"]),
            (&json!("fps"), &json!("measurement"))
        );
    }

    #[test]
    fn the_status_page_is_linked_and_an_empty_prefix_sends_nothing() {
        let all = configs("", "10.0.0.5:9000");
        assert_eq!(
            all[0].1["device"]["configuration_url"],
            "http://10.0.0.5:9000/"
        );
        let all = configs("", ":9000");
        assert_eq!(all[0].1["device"]["configuration_url"], "http://b7:9000/");
        assert!(configs("discovery_prefix = \"\"\n", ":9000").is_empty());
        let custom = configs("discovery_prefix = \"ha\"\n", ":9000");
        assert!(
            custom[0].0.starts_with("ha/binary_sensor/b7/"),
            "{}",
            custom[0].0
        );
    }
}
