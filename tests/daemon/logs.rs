//! The log formats of a running daemon: every line of `--log.format logfmt` parses with a
//! strict logfmt parser and every line of `--log.format json` is a JSON object, with
//! values that hold spaces, quotes and `=` (a device's name, a replay directory's path).

use std::time::Duration;

use crate::common::daemon::*;
use crate::common::logfmt::parse_logfmt;

#[test]
fn logfmt_and_json_lines_parse_strictly() {
    for format in ["logfmt", "json"] {
        let dir = tmp_dir(&format!("log-{format}"));
        let replay = dir.join(r#"shots "of" a=b"#);
        std::fs::create_dir_all(&replay).expect("mkdir");
        std::fs::write(replay.join("broken.png"), "not a picture").expect("write");
        // A TOML basic string: the path's quotes escaped as Rust's Debug escapes them.
        let config = format!(
            "[[camera]]\nname = \"front\"\n[camera.source]\nkind = \"pattern\"\nsize = \"64x48\"\nfps = 20\n\
             [[camera]]\nname = \"shots\"\n[camera.source]\nkind = \"replay\"\npath = {:?}\nfps = 20\n",
            replay.display().to_string()
        );
        let d = Daemon::spawn_with(&dir, &config, |c| {
            c.args(["--log.format", format]);
        });
        // The failure and the serving line: on a loaded machine the cameras' pipelines
        // (POCL compiling cold) may log after the server has begun, or before.
        wait_until(
            "the replay's failure and the serving line logged",
            Duration::from_secs(20),
            || {
                let log = d.log();
                (log.contains("broken.png") && log.contains("serving")).then_some(())
            },
        );
        let log = d.log();
        d.stop();
        let path = replay.display().to_string();
        let mut values_with_the_path = 0;
        for line in log.lines() {
            let fields: Vec<(String, String)> = if format == "json" {
                let v: serde_json::Value =
                    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                let object = v
                    .as_object()
                    .unwrap_or_else(|| panic!("not an object: {line}"));
                let text = |v: &serde_json::Value| v.as_str().map_or(v.to_string(), str::to_string);
                // serde_json's map is sorted: ts, level and msg first, as written.
                let first = ["ts", "level", "msg"];
                first
                    .iter()
                    .filter_map(|k| object.get(*k).map(|v| (k.to_string(), text(v))))
                    .chain(
                        object
                            .iter()
                            .filter(|(k, _)| !first.contains(&k.as_str()))
                            .map(|(k, v)| (k.clone(), text(v))),
                    )
                    .collect()
            } else {
                parse_logfmt(line).unwrap_or_else(|e| panic!("not logfmt ({e}): {line}"))
            };
            let keys: Vec<&str> = fields.iter().take(3).map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, ["ts", "level", "msg"], "{line}");
            assert!(
                ["error", "warn", "info"].contains(&fields[1].1.as_str()),
                "{line}"
            );
            values_with_the_path += fields.iter().filter(|(_, v)| v.contains(&path)).count();
        }
        assert!(
            values_with_the_path > 0,
            "the replay's path, whole, in a value: {log}"
        );
        assert!(
            log.lines().count() >= 3,
            "a camera opened, the other failed, serving: {log}"
        );
    }
}
