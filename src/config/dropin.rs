//! `conf.d/*.toml` beside the config file: drop-ins merged into it in name order, so that
//! every board runs one shipped file and a board's own file says what differs (its
//! regions, its listen address).
//!
//! How a drop-in merges: a key it sets in `[log]`, `[opencl]`, `[web]` or `[metrics]`
//! replaces that key (`[web] basic_auth_users` as a whole); a `[[camera]]` whose name no
//! earlier file has is added; one whose name an earlier file has changes that camera: a
//! key or table it sets (`opencl_device`, `opencl_tuning`, `[camera.source]`,
//! `[camera.health]`, `[camera.motion]`, each key of `[camera.pipeline]`) replaces the
//! earlier one, and each `[[camera.roi]]` replaces the region of its name or is added
//! after the others. Nothing is removed. A name twice in one drop-in is refused, as in
//! the file.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::schema::*;
use super::{ConfigError, Doc};

/// The drop-in directory of the config `path`.
pub(super) fn dir(path: &Path) -> PathBuf {
    path.parent().unwrap_or(Path::new(".")).join("conf.d")
}

/// The drop-ins of the config `path`, in name order: the `*.toml` files of its
/// `conf.d`, none when there is no such directory. Names starting with '.' (an editor's
/// swap files) are left out.
pub(super) fn files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let dir = dir(path);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in entries {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".toml") && !name.starts_with('.') {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names.into_iter().map(|name| dir.join(name)).collect())
}

/// Whether a value was written (a default has no span).
fn written<T>(value: &Spanned<T>) -> bool {
    value.span().end > 0
}

/// Takes `from` into `into` where `from` was written, noting `key` in `set`.
fn take<T>(into: &mut Spanned<T>, from: Spanned<T>, key: &str, set: &mut Vec<String>) {
    if written(&from) {
        *into = from;
        set.push(key.to_string());
    }
}

/// Takes `from` into `into` where it is there, noting `key` in `set`.
fn take_some<T>(into: &mut Option<T>, from: Option<T>, key: &str, set: &mut Vec<String>) {
    if from.is_some() {
        *into = from;
        set.push(key.to_string());
    }
}

/// Merges the drop-in `from` into `into` and says what it set.
pub(super) fn merge(
    doc: &Doc,
    into: &mut FileConfig,
    from: FileConfig,
) -> Result<Vec<String>, ConfigError> {
    let mut set = Vec::new();
    let FileConfig {
        log,
        opencl,
        web,
        metrics,
        mqtt,
        events,
        cameras,
    } = from;
    take(&mut into.log.level, log.level, "log.level", &mut set);
    take(&mut into.log.format, log.format, "log.format", &mut set);
    let o = &mut into.opencl;
    take(&mut o.device, opencl.device, "opencl.device", &mut set);
    take(&mut o.tuning, opencl.tuning, "opencl.tuning", &mut set);
    let key = "opencl.verify_every";
    take(&mut o.verify_every, opencl.verify_every, key, &mut set);
    take(
        &mut o.profiling,
        opencl.profiling,
        "opencl.profiling",
        &mut set,
    );
    let w = &mut into.web;
    let key = "web.listen_address";
    take(&mut w.listen_address, web.listen_address, key, &mut set);
    take(&mut w.snapshots, web.snapshots, "web.snapshots", &mut set);
    let key = "web.stale_after_seconds";
    take(
        &mut w.stale_after_seconds,
        web.stale_after_seconds,
        key,
        &mut set,
    );
    let key = "web.max_connections";
    take(&mut w.max_connections, web.max_connections, key, &mut set);
    let key = "web.tls_cert_file";
    take_some(&mut w.tls_cert_file, web.tls_cert_file, key, &mut set);
    let key = "web.tls_key_file";
    take_some(&mut w.tls_key_file, web.tls_key_file, key, &mut set);
    let key = "web.basic_auth_users";
    take(&mut w.basic_auth_users, web.basic_auth_users, key, &mut set);
    // Destructured whole, so that a key added to a table cannot be left out of the merge.
    let MetricsConfig {
        histogram_bins,
        tier,
    } = metrics;
    let key = "metrics.histogram_bins";
    take(
        &mut into.metrics.histogram_bins,
        histogram_bins,
        key,
        &mut set,
    );
    take(&mut into.metrics.tier, tier, "metrics.tier", &mut set);
    if let Some(mqtt) = mqtt {
        merge_mqtt(&mut into.mqtt, mqtt, &mut set);
    }
    let EventsConfig {
        dir,
        max_files,
        max_age_days,
    } = events;
    let e = &mut into.events;
    take_some(&mut e.dir, dir, "events.dir", &mut set);
    take_some(&mut e.max_files, max_files, "events.max_files", &mut set);
    let key = "events.max_age_days";
    take_some(&mut e.max_age_days, max_age_days, key, &mut set);

    let mut named = HashSet::new();
    for camera in cameras {
        let name = camera.get_ref().name.get_ref().clone();
        if !named.insert(name.clone()) {
            return Err(doc.at(
                camera.get_ref().name.span(),
                "camera.name",
                format!("camera '{name}' is named twice"),
            ));
        }
        match into
            .cameras
            .iter_mut()
            .find(|c| *c.get_ref().name.get_ref() == name)
        {
            Some(earlier) => {
                let changed = merge_camera(doc, earlier.get_mut(), camera.into_inner())?;
                set.push(format!("camera '{name}' ({})", changed.join(", ")));
            }
            None => {
                set.push(format!("camera '{name}' added"));
                into.cameras.push(camera);
            }
        }
    }
    Ok(set)
}

/// A drop-in's `[mqtt]`: each key it sets replaces the earlier one; the table is taken
/// whole when the file had none.
fn merge_mqtt(
    into: &mut Option<Spanned<MqttConfig>>,
    from: Spanned<MqttConfig>,
    set: &mut Vec<String>,
) {
    let Some(into) = into else {
        set.push("mqtt".into());
        *into = Some(from);
        return;
    };
    let into = into.get_mut();
    // Destructured whole, so that a key added to the table cannot be left out of the merge.
    let MqttConfig {
        url,
        ca_file,
        cert_file,
        key_file,
        username,
        password_file,
        client_id,
        board,
        topic_prefix,
        discovery_prefix,
        qos,
        keepalive_seconds,
    } = from.into_inner();
    take_some(&mut into.url, url, "mqtt.url", set);
    take_some(&mut into.ca_file, ca_file, "mqtt.ca_file", set);
    take_some(&mut into.cert_file, cert_file, "mqtt.cert_file", set);
    take_some(&mut into.key_file, key_file, "mqtt.key_file", set);
    take_some(&mut into.username, username, "mqtt.username", set);
    take_some(
        &mut into.password_file,
        password_file,
        "mqtt.password_file",
        set,
    );
    take_some(&mut into.client_id, client_id, "mqtt.client_id", set);
    take_some(&mut into.board, board, "mqtt.board", set);
    take_some(
        &mut into.topic_prefix,
        topic_prefix,
        "mqtt.topic_prefix",
        set,
    );
    take_some(
        &mut into.discovery_prefix,
        discovery_prefix,
        "mqtt.discovery_prefix",
        set,
    );
    take_some(&mut into.qos, qos, "mqtt.qos", set);
    take_some(
        &mut into.keepalive_seconds,
        keepalive_seconds,
        "mqtt.keepalive_seconds",
        set,
    );
}

/// Merges a drop-in's `[[camera]]` into the earlier camera of its name; what it changed.
fn merge_camera(
    doc: &Doc,
    into: &mut CameraConfig,
    from: CameraConfig,
) -> Result<Vec<String>, ConfigError> {
    let mut set = Vec::new();
    let CameraConfig {
        name: _,
        opencl_device,
        opencl_tuning,
        source,
        pipeline,
        rois,
        health,
        motion,
    } = from;
    take_some(
        &mut into.opencl_device,
        opencl_device,
        "opencl_device",
        &mut set,
    );
    take_some(
        &mut into.opencl_tuning,
        opencl_tuning,
        "opencl_tuning",
        &mut set,
    );
    take_some(&mut into.source, source, "source", &mut set);
    let p = &mut into.pipeline;
    take(&mut p.border, pipeline.border, "pipeline.border", &mut set);
    take(
        &mut p.magnitude,
        pipeline.magnitude,
        "pipeline.magnitude",
        &mut set,
    );
    let key = "pipeline.edge_threshold";
    take(
        &mut p.edge_threshold,
        pipeline.edge_threshold,
        key,
        &mut set,
    );
    take_some(&mut into.health, health, "health", &mut set);
    take_some(&mut into.motion, motion, "motion", &mut set);
    let mut named = HashSet::new();
    for roi in rois {
        let name = roi.get_ref().name.clone();
        if !named.insert(name.clone()) {
            return Err(doc.at(
                roi.span(),
                "camera.roi.name",
                format!("ROI '{name}' is named twice"),
            ));
        }
        match into.rois.iter_mut().find(|r| r.get_ref().name == name) {
            Some(earlier) => {
                *earlier = roi;
                set.push(format!("roi '{name}' replaced"));
            }
            None => {
                into.rois.push(roi);
                set.push(format!("roi '{name}' added"));
            }
        }
    }
    if set.is_empty() {
        set.push("nothing".into());
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::super::{load, Overrides, Settings};
    use super::*;

    const MAIN: &str = r#"[log]
level = "warn"

[[camera]]
name = "door"
[camera.source]
kind = "pattern"
size = "320x240"
[camera.pipeline]
edge_threshold = 40
[[camera.roi]]
name = "step"
x = 0
y = 0
w = 10
h = 10
[[camera.roi]]
name = "gate"
x = 0
y = 0
w = 20
h = 20
"#;

    /// A config directory holding `edgesight.toml` and these drop-ins; its path.
    fn config(name: &str, dropins: &[(&str, &str)]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("edgesight-dropin-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        for (file, text) in dropins {
            std::fs::write(dir.join("conf.d").join(file), text).unwrap();
        }
        let path = dir.join("edgesight.toml");
        std::fs::write(&path, MAIN).unwrap();
        path
    }

    fn loaded(path: &Path) -> Result<(Settings, Vec<String>), String> {
        load(Some(path), &Overrides::default())
            .map(|l| (l.settings, l.origins))
            .map_err(|e| e.to_string())
    }

    fn region(settings: &Settings, camera: usize) -> Vec<(String, u32)> {
        settings.cameras[camera]
            .regions
            .iter()
            .map(|r| (r.name.clone(), r.width))
            .collect()
    }

    #[test]
    fn dropins_merge_in_name_order() {
        let path = config(
            "merge",
            &[
                (
                    "20-board.toml",
                    "[web]\nlisten_address = \"127.0.0.1:9002\"\n\
                     [[camera]]\nname = \"door\"\n[camera.pipeline]\nedge_threshold = 90\n\
                     [[camera.roi]]\nname = \"gate\"\nx = 0\ny = 0\nw = 30\nh = 30\n\
                     [[camera.roi]]\nname = \"exit\"\nx = 0\ny = 0\nw = 40\nh = 40\n",
                ),
                (
                    "10-site.toml",
                    "[web]\nlisten_address = \"127.0.0.1:9001\"\nsnapshots = false\n\
                     [metrics]\ntier = \"detail\"\n\
                     [[camera]]\nname = \"yard\"\n[camera.source]\nkind = \"pattern\"\n",
                ),
                ("notes.txt", "not toml"),
                (".20-board.toml.swp.toml", "not toml"),
            ],
        );
        let (s, origins) = loaded(&path).unwrap();
        assert_eq!(s.log_level, "warn");
        assert_eq!(s.web.listen[0].to_string(), "127.0.0.1:9002");
        assert_eq!(s.metrics_tier, edgesight_http::metrics::Tier::Detail);
        let names: Vec<&str> = s.cameras.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["door", "yard"]);
        assert_eq!(s.cameras[0].options.edge_threshold, 90);
        assert_eq!(
            region(&s, 0),
            [
                ("step".into(), 10),
                ("gate".into(), 30),
                ("exit".into(), 40)
            ]
        );
        let dir = path.parent().unwrap().join("conf.d");
        assert_eq!(
            origins,
            [
                format!(
                    "{}: web.listen_address, web.snapshots, metrics.tier, camera 'yard' added",
                    dir.join("10-site.toml").display()
                ),
                format!(
                    "{}: web.listen_address, camera 'door' (pipeline.edge_threshold, \
                     roi 'gate' replaced, roi 'exit' added)",
                    dir.join("20-board.toml").display()
                ),
            ]
        );
    }

    #[test]
    fn at_most_64_dropins() {
        let many: Vec<(String, &str)> = (0..65)
            .map(|i| (format!("{i:02}.toml"), "[log]\nlevel = \"info\"\n"))
            .collect();
        let refs: Vec<(&str, &str)> = many.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let path = config("many", &refs[..64]);
        assert_eq!(loaded(&path).unwrap().1.len(), 64);
        let path = config("too-many", &refs);
        assert_eq!(
            loaded(&path).unwrap_err(),
            format!(
                "{}:0:0: (file): one drop-in too many: a config and its drop-ins are at most \
                 64 drop-ins and 4194304 bytes",
                path.parent().unwrap().join("conf.d/64.toml").display()
            )
        );
    }

    #[test]
    fn at_most_4_mib_with_the_dropins() {
        let mib = format!("#{}\n", " ".repeat((1 << 20) - 2));
        let files = [("a.toml", mib.as_str()), ("b.toml", &mib), ("c.toml", &mib)];
        assert!(loaded(&config("3-mib", &files)).is_ok());
        let path = config("4-mib", &[files[0], files[1], files[2], ("d.toml", &mib)]);
        let err = loaded(&path).unwrap_err();
        let dropin = path.parent().unwrap().join("conf.d/d.toml");
        assert!(
            err.starts_with(&format!(
                "{}:0:0: (file): one drop-in too many",
                dropin.display()
            )),
            "{err}"
        );
    }

    #[test]
    fn errors_in_a_dropin_name_the_dropin() {
        let refused = |name: &str, text: &str| {
            let path = config(
                name,
                &[
                    ("10-a.toml", "[log]\nformat = \"json\"\n"),
                    ("50-b.toml", text),
                ],
            );
            let dropin = path.parent().unwrap().join("conf.d/50-b.toml");
            loaded(&path)
                .unwrap_err()
                .replace(&dropin.display().to_string(), "DROPIN")
        };
        assert_eq!(
            refused("unknown", "[web]\nsnapshots = false\nlisten = \"x\"\n"),
            "DROPIN:3:1: web.listen: unknown field `listen`, expected one of `listen_address`, \
             `snapshots`, `stale_after_seconds`, `max_connections`, `tls_cert_file`, \
             `tls_key_file`, `basic_auth_users`"
        );
        assert_eq!(
            refused(
                "outside",
                "[[camera]]\nname = \"door\"\n[[camera.roi]]\nname = \"far\"\n\
                     x = 300\ny = 0\nw = 40\nh = 40\n"
            ),
            "DROPIN:3:1: camera.roi: ROI 'far' (300,0 40x40) lies outside the 320x240 frame"
        );
        assert_eq!(
            refused("no-source", "\n[[camera]]\nname = \"yard\"\n"),
            "DROPIN:2:1: camera.source: camera 'yard' has no [camera.source]"
        );
        assert_eq!(
            refused(
                "twice",
                "[[camera]]\nname = \"door\"\n[[camera]]\nname = \"door\"\n"
            ),
            "DROPIN:4:8: camera.name: camera 'door' is named twice"
        );
        assert_eq!(
            refused(
                "variable",
                "[web]\nlisten_address = \"${ES_DROPIN_TEST_UNSET}\"\n"
            ),
            "DROPIN:2:19: web.listen_address: ${ES_DROPIN_TEST_UNSET}: ES_DROPIN_TEST_UNSET \
             is not set in the environment (give it, or a default: ${ES_DROPIN_TEST_UNSET:-...})"
        );
        assert_eq!(
            refused("bad-value", "\n\n[log]\nlevel = \"loud\"\n"),
            "DROPIN:4:9: log.level: unknown level 'loud' (expected error, warn, info, debug or trace)"
        );
    }

    /// A drop-in's `[mqtt]` is taken whole by a config without one; over one, each key
    /// it sets replaces the earlier.
    #[test]
    fn a_dropins_mqtt_keys_replace_the_earlier_ones() {
        let path = config(
            "mqtt",
            &[
                (
                    "10-broker.toml",
                    "[mqtt]\nurl = \"mqtt://broker.lan\"\nboard = \"b7\"\nqos = 1\n",
                ),
                ("20-board.toml", "[mqtt]\nboard = \"porch\"\n"),
            ],
        );
        let (s, origins) = loaded(&path).unwrap();
        let m = s.mqtt.unwrap();
        assert_eq!(
            (m.host.as_str(), m.board.as_str(), m.qos),
            ("broker.lan", "porch", 1)
        );
        assert_eq!(m.topic_prefix, "edgesight/porch");
        assert!(origins[0].ends_with(": mqtt"), "{origins:?}");
        assert!(origins[1].ends_with(": mqtt.board"), "{origins:?}");
    }
}
