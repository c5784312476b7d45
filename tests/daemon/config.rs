//! Configs `check-config` and `run` refuse alike, at the key and before anything starts;
//! config and replay paths that are FIFOs or devices; a warning for many cameras; the demo
//! config with other sources.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::daemon::*;
use crate::{assert_refused, edgesight, edgesight_ok, edgesight_within};

#[test]
fn bad_configs_are_refused_before_anything_starts() {
    let dir = tmp_dir("daemon-bad-configs");
    let good = camera("front", "320x240", &[("door", 0, 0, 320, 240)], 64);
    let port = free_port().to_string();
    for (name, text, expect) in [
        (
            "unknown-key",
            good.replace("h = 240", "heigth = 240"),
            ":14:1: camera.roi.heigth: unknown field `heigth`",
        ),
        (
            "wrong-type",
            good.replace("fps = 30", "fps = \"fast\""),
            ":6:7: camera.source.fps: invalid type: string \"fast\", expected f64",
        ),
        (
            "roi-outside",
            good.replace("w = 320", "w = 400"),
            ":9:1: camera.roi: ROI 'door' (0,0 400x240) lies outside the 320x240 frame",
        ),
        (
            "no-device",
            "[[camera]]\nname = \"c\"\n[camera.source]\nkind = \"v4l2\"\n".into(),
            ":3:1: camera.source.device: missing",
        ),
        (
            "snapshots-public",
            format!("[web]\nlisten_address = \"0.0.0.0:{port}\"\nsnapshots = true\n"),
            ":3:13: web.snapshots: snapshots and the status page show camera pictures",
        ),
        (
            "unknown-tuning",
            format!("[opencl]\ntuning = \"valhall\"\n{good}"),
            ":2:10: opencl.tuning: unknown tuning 'valhall' (expected auto, gpu, cpu, mali or midgard)",
        ),
    ] {
        assert_refused(&dir, name, &text, expect);
    }
    let (code, err) = edgesight(&[
        "run",
        "--listen",
        "0.0.0.0:1",
        "--source",
        "pattern:64x48@1",
        "--config",
        "/nonexistent.toml",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/nonexistent.toml"), "{err}");
    let (code, err) = edgesight(&["run", "--source", "camera:/dev/video0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown kind 'camera'"), "{err}");
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Issue "Resilience and security", item 3: a config path that is a FIFO blocked
/// `check-config` and `run` forever, and on SIGHUP the signal loop, so that SIGTERM went
/// unheard until someone wrote to the FIFO.
#[test]
fn r3_a_fifo_or_device_as_config_is_refused_at_once() {
    let dir = tmp_dir("daemon-fifo-config");
    let fifo = dir.join("fifo.toml");
    mkfifo(&fifo);
    let fifo_name = fifo.display().to_string();
    let limit = Duration::from_secs(30);
    for args in [
        vec!["check-config", &fifo_name],
        vec!["run", "--config", &fifo_name],
    ] {
        let (code, err) = edgesight_within(&args, limit);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "{fifo_name}:0:0: (file): not a regular file but a FIFO"
            )),
            "{args:?}: {err}"
        );
    }
    let (code, err) = edgesight_within(&["check-config", "/dev/zero"], limit);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("/dev/zero:0:0: (file): not a regular file but a character device"),
        "{err}"
    );

    // The running daemon's config turns into a FIFO: the reload is refused, and SIGTERM
    // still stops the daemon.
    let d = Daemon::start(&dir, &camera("front", "64x48", &[], 64));
    mkfifo(&dir.join("edgesight.toml"));
    d.signal(libc::SIGHUP);
    wait_until("the refused reload", Duration::from_secs(20), || {
        sample(
            &d.metrics(),
            r#"edgesight_config_reloads_total{result="failure"}"#,
        )
        .filter(|v| *v == 1.0)
    });
    assert!(
        d.log().contains("not a regular file but a FIFO"),
        "{}",
        d.log()
    );
    d.stop();
}

/// Resilience round 2, item 1: a raw replay path that is a FIFO passed `check-config`,
/// then blocked the camera thread in open(2) until a writer came (READY never sent,
/// SIGTERM unheard), and `capture --timeout 2` hung on it. It is refused at once now,
/// by `check-config`, `run` and `capture`.
#[test]
fn round2_1_a_raw_replay_path_that_is_a_fifo_is_refused_at_once() {
    let dir = tmp_dir("daemon-fifo-replay");
    let fifo = dir.join("frames.raw");
    mkfifo(&fifo);
    let config = dir.join("edgesight.toml");
    std::fs::write(
        &config,
        format!(
            "[[camera]]\nname = \"c\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\n\
             size = \"64x48\"\nformat = \"grey\"\nfps = 10\n",
            fifo.display()
        ),
    )
    .expect("config");
    let config = config.display().to_string();
    let limit = Duration::from_secs(30);
    let refusal = format!(
        "{}: not a directory of images or a regular file but a FIFO",
        fifo.display()
    );
    for args in [
        vec!["check-config", &config],
        vec!["run", "--config", &config],
    ] {
        let (code, err) = edgesight_within(&args, limit);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(&refusal), "{args:?}: {err}");
    }
    let spec = format!("replay:{}:64x48:grey@10", fifo.display());
    let out = dir.join("out").display().to_string();
    let (code, err) = edgesight_within(&["capture", &spec, "--timeout", "2", "--out", &out], limit);
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "replay {}: not a regular file but a FIFO",
            fifo.display()
        )),
        "{err}"
    );
}

/// Issue "Resilience and security", item 12: `check-config` said "ok" to configs that
/// `run` then refused without a position. Both now refuse them alike, at the key.
#[test]
fn r12_check_config_refuses_what_run_refuses() {
    let dir = tmp_dir("daemon-config-parity");
    let source = |fields: &str| format!("[[camera]]\nname = \"c\"\n[camera.source]\n{fields}");
    for (name, text, expect) in [
        (
            "huge-pattern",
            source("kind = \"pattern\"\nsize = \"100000x100000\"\n"),
            ":5:8: camera.source.size: frame size 100000x100000 is too large (at most 16384 on a side)",
        ),
        (
            "tiny-rate",
            source("kind = \"pattern\"\nfps = 1e-300\n"),
            ":5:7: camera.source.fps: frame rate 1e-300 is not a number from 0.01 to 1000",
        ),
        (
            "v4l2-null",
            source("kind = \"v4l2\"\ndevice = \"/dev/null\"\n"),
            ":5:10: camera.source.device: /dev/null is not a V4L2 device: a character device of major 1, where V4L2's are 81",
        ),
        (
            "no-opencl-device",
            "[[camera]]\nname = \"c\"\nopencl_device = \"99:99\"\n[camera.source]\nkind = \"pattern\"\n"
                .to_string(),
            ":3:17: camera.opencl_device: camera 'c': no OpenCL device matches '99:99'; available: ",
        ),
    ] {
        assert_refused(&dir, name, &text, expect);
    }
    // The same check for a source given on the command line.
    let (code, err) = edgesight_within(
        &["run", "--source", "v4l2:/dev/null"],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("command line --source: source: /dev/null is not a V4L2 device"),
        "{err}"
    );
}

/// Issue "Resilience and security", item 12: each camera costs two threads and their
/// memory, which a config of a hundred must not spend without a word; above 16,
/// `check-config` and `run`'s log say what each one costs.
#[test]
fn r12_many_cameras_draw_a_warning() {
    let dir = tmp_dir("daemon-many-cameras");
    let config: String = (0..17)
        .map(|i| camera(&format!("c{i}"), "32x24", &[], 64))
        .collect();
    let path = dir.join("many.toml");
    std::fs::write(&path, &config).expect("write");
    let warning = "17 cameras: each one is two threads (capture and publisher)";
    let err = edgesight_ok(&["check-config", &path.display().to_string()]);
    assert!(
        err.contains(&format!("{}: warning: {warning}", path.display())),
        "{err}"
    );
    let d = Daemon::spawn(&dir, &config);
    wait_until("the warning in the log", Duration::from_secs(60), || {
        d.log().contains(warning).then_some(())
    });
    // Cameras that are still building their pipelines stop once that is done: a minute
    // for seventeen of them on a small CPU.
    d.signal(libc::SIGTERM);
    let (status, _) = d.exit_within(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0));
}

/// `make demo`'s config runs with `--source` of another size (its regions fit any frame
/// from 320x240 up) and with a device's bare path, which is waited for while absent.
#[test]
fn the_demo_config_takes_another_source() {
    let demo = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/demo.toml"))
        .expect("deploy/demo.toml");
    for (n, source) in ["pattern:320x240@30", "pattern:1920x1080:yuyv@30"]
        .iter()
        .enumerate()
    {
        let dir = tmp_dir(&format!("demo-source-{n}"));
        let d = Daemon::start_with(&dir, &demo, |c| {
            c.args(["--source", source]);
        });
        let latest = wait_until("a frame", Duration::from_secs(60), || {
            serde_json::from_str::<serde_json::Value>(&get_text(d.port, "/api/v1/latest")).ok()
        });
        let (w, h) = source[8..]
            .split_once('@')
            .unwrap()
            .0
            .split_once('x')
            .unwrap();
        let h = h.split(':').next().unwrap();
        assert_eq!(latest["camera"], "demo", "{source}: {latest}");
        assert_eq!(latest["width"].to_string(), w, "{source}");
        assert_eq!(latest["height"].to_string(), h, "{source}");
        let rois: Vec<&str> = latest["rois"]
            .as_array()
            .expect("rois")
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(rois, ["top", "left"], "{source}");
        d.stop();
    }
    let dir = tmp_dir("demo-source-device");
    // Not healthy while its one camera is away: spawned, not waited for.
    let d = Daemon::spawn_with(&dir, &demo, |c| {
        c.args(["--source", "/dev/edgesight-no-such-camera"]);
    });
    let log = wait_until("the device waited for", Duration::from_secs(10), || {
        let log = d.log();
        log.contains("/dev/edgesight-no-such-camera is not present now")
            .then_some(log)
    });
    assert!(!log.contains("ERROR"), "{log}");
    d.stop();
}

/// Runs `check-config` and `run` on `config` with `--web.config.file web`: both must refuse
/// it within `limit`, with `expect` in the error; returns the slower one's time.
fn assert_web_config_refused(config: &Path, web: &Path, expect: &str, limit: Duration) -> Duration {
    let (config, web) = (config.display().to_string(), web.display().to_string());
    let mut slowest = Duration::ZERO;
    for args in [
        vec!["check-config", "--web.config.file", &web, &config],
        vec!["run", "--config", &config, "--web.config.file", &web],
    ] {
        let start = std::time::Instant::now();
        let (code, err) = edgesight_within(&args, Duration::from_secs(120));
        slowest = slowest.max(start.elapsed());
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert!(!err.contains("serving"), "{args:?} was served: {err}");
    }
    assert!(slowest < limit, "{expect}: refused after {slowest:?}");
    slowest
}

/// Resilience round 3, item 9: a web config of nested sequences parsed in quadratic time
/// (200 KB in 21-42 s, 1 MiB about 10 minutes) in `check-config`, `run` and every SIGHUP.
/// Its nesting and size are bounded before it is parsed, and the error names the file.
#[test]
fn round3_9_a_deeply_nested_web_config_is_refused_before_it_is_parsed() {
    let dir = tmp_dir("round3-9-deep-web-config");
    let config = dir.join("edgesight.toml");
    std::fs::write(&config, camera("front", "64x48", &[], 64)).expect("config");
    // Just under the size limit, so that only the nesting refuses it.
    let deep = dir.join("deep.yml");
    let n = 32_000;
    std::fs::write(
        &deep,
        format!("basic_auth_users: {}{}\n", "[".repeat(n), "]".repeat(n)),
    )
    .expect("deep");
    let expect = format!(
        "{}: nested deeper than 16 levels at line 1: an exporter web config nests 3 deep",
        deep.display()
    );
    assert_web_config_refused(&config, &deep, &expect, Duration::from_secs(2));
    // Block style nests too: a `- ` per level, and indentation.
    let dashes = dir.join("dashes.yml");
    std::fs::write(
        &dashes,
        format!("basic_auth_users:\n  a:\n    {}x\n", "- ".repeat(17)),
    )
    .expect("dashes");
    let expect = format!(
        "{}: nested deeper than 16 levels at line 3: an exporter web config nests 3 deep",
        dashes.display()
    );
    assert_web_config_refused(&config, &dashes, &expect, Duration::from_secs(2));
    let indented = dir.join("indented.yml");
    let text: String = (0..20)
        .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
        .collect();
    std::fs::write(&indented, text).expect("indented");
    let expect = format!(
        "{}: nested deeper than 16 levels at line 17: an exporter web config nests 3 deep",
        indented.display()
    );
    assert_web_config_refused(&config, &indented, &expect, Duration::from_secs(2));
    // A file past the size limit is not read at all (it was read up to 1 MiB).
    let big = dir.join("big.yml");
    std::fs::write(&big, format!("# {}\n", "x".repeat(70_000))).expect("big");
    let expect = format!("{}: larger than 65536 bytes", big.display());
    assert_web_config_refused(&config, &big, &expect, Duration::from_secs(2));
}

/// Resilience round 3, item 14: a web config naming one user twice was accepted, the last
/// hash taking effect; exporter-toolkit refuses it, and so does edgesight now, naming the
/// file and the user.
#[test]
fn round3_14_a_user_named_twice_in_a_web_config_is_refused() {
    let dir = tmp_dir("round3-14-user-twice");
    let config = dir.join("edgesight.toml");
    std::fs::write(&config, camera("front", "64x48", &[], 64)).expect("config");
    let (first, second) = (
        bcrypt::hash("one", 4).expect("hash"),
        bcrypt::hash("two", 4).expect("hash"),
    );
    let web = dir.join("web.yml");
    std::fs::write(
        &web,
        format!("basic_auth_users:\n  prom: {first}\n  other: {first}\n  prom: {second}\n"),
    )
    .expect("web config");
    let expect = format!(
        "basic_auth_users.prom: {}: user 'prom' is given twice: exporter-toolkit refuses it \
         too, and which hash counts would be a guess",
        web.display()
    );
    assert_web_config_refused(&config, &web, &expect, Duration::from_secs(30));
}

/// What `check-config` warns about the addresses of `config` (a file in `dir`): its
/// `warning:` lines naming `web.listen_address`, and the effective settings it printed.
fn exposure_warnings(dir: &Path, name: &str, config: &str) -> (Vec<String>, String) {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config).expect("config");
    let out = edgesight_command()
        .args(["check-config"])
        .arg(&path)
        .output()
        .expect("check-config");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{name}: {err}");
    let warnings = err
        .lines()
        .filter(|l| l.contains("warning: web.listen_address"))
        .map(|l| l.split_once("warning: ").expect("a warning").1.to_string())
        .collect();
    (warnings, String::from_utf8_lossy(&out.stdout).to_string())
}

/// The warning for `address`, beyond loopback without basic auth.
fn exposed(address: &str) -> String {
    format!(
        "web.listen_address {address}: beyond loopback without basic auth, any peer that \
         reaches it reads the live motion per region (presence), the tamper and health \
         states, the status page, error texts with file paths and the build revision: add \
         basic_auth_users (TLS alone does not say who may read) or listen on loopback \
         (guide: deploying.md, What the network sees)"
    )
}

/// Resilience round 3, item 6: the packaged config listened on every address without
/// auth, so every network peer read the motion per region (presence), tamper and health
/// states, the status page, error texts and the build revision. It listens on loopback
/// now; `check-config` and `run` warn for each address beyond loopback served without
/// basic auth, naming what it shows.
#[test]
fn round3_6_addresses_beyond_loopback_without_auth_draw_a_warning() {
    let dir = tmp_dir("round3-6-exposure");
    let body = camera("front", "64x48", &[], 64);
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    for (name, web, expect) in [
        (
            "open",
            "[web]\nlisten_address = [\"127.0.0.1:8947\", \"0.0.0.0:8947\", \":8948\"]\n"
                .to_string(),
            vec![exposed("0.0.0.0:8947"), exposed(":8948")],
        ),
        (
            "auth",
            format!(
                "[web]\nlisten_address = \":8947\"\n[web.basic_auth_users]\nprom = \"{hash}\"\n"
            ),
            vec![],
        ),
        (
            "loopback",
            "[web]\nlisten_address = [\"127.0.0.1:8947\", \"[::1]:8948\"]\n".to_string(),
            vec![],
        ),
    ] {
        let (warnings, _) = exposure_warnings(&dir, name, &format!("{web}{body}"));
        assert_eq!(warnings, expect, "{name}");
    }
    // The packaged config: loopback, so nothing to warn about.
    let packaged = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/edgesight.toml"
    ))
    .expect("deploy/edgesight.toml");
    let (warnings, settings) = exposure_warnings(&dir, "packaged", &packaged);
    assert_eq!(warnings, Vec::<String>::new());
    assert!(
        settings.contains("listen_address = \"127.0.0.1:8947\"\n"),
        "{settings}"
    );
    // `run` logs it at start.
    let d = Daemon::start_with(&dir, &body, |c| {
        c.args(["--listen", "0.0.0.0:0"]);
    });
    let log = d.log();
    assert!(log.contains(&exposed("0.0.0.0:0")), "{log}");
    assert_eq!(
        log.matches("beyond loopback without basic auth").count(),
        1,
        "{log}"
    );
    d.stop();
}

/// A V4L2 camera whose device pattern matches nothing runs as one camera under its own
/// name, waiting for the pattern: not failing, and saying in its log what it waits for.
#[test]
fn a_device_pattern_that_matches_nothing_waits_under_its_name() {
    let dir = tmp_dir("daemon-device-pattern");
    std::fs::create_dir_all(dir.join("by-id")).unwrap();
    let pattern = dir.join("by-id/*-video-index0");
    let config = format!(
        "[[camera]]\nname = \"door\"\n[camera.source]\nkind = \"v4l2\"\ndevice = \"{}\"\n\
         [[camera]]\nname = \"steady\"\n[camera.source]\nkind = \"pattern\"\nsize = \"64x48\"\n\
         fps = 50\n",
        pattern.display()
    );
    let path = dir.join("check.toml");
    std::fs::write(&path, &config).unwrap();
    let path = path.display().to_string();
    let err = edgesight_ok(&["check-config", &path]);
    assert!(
        err.contains(&format!(
            "camera 'door': no device matches {} now; `run` waits for it under this name",
            pattern.display()
        )),
        "{err}"
    );
    // A match is a camera, checked as its device: a regular file is refused at the
    // pattern's key.
    let node = dir.join("by-id/usb-Cam_1-video-index0");
    std::fs::write(&node, "").unwrap();
    assert_eq!(
        edgesight(&["check-config", &path]),
        (
            Some(2),
            format!(
                "edgesight: error: {path}:5:10: camera.source.device: {} is a regular file, \
                 not a V4L2 device (a character device such as /dev/video0)\n",
                node.display()
            )
        )
    );
    std::fs::remove_file(&node).unwrap();

    let d = Daemon::spawn(&dir, &config);
    let m = wait_until(
        "the pattern camera to wait",
        Duration::from_secs(60),
        || {
            let m = String::from_utf8(request(d.port, "GET", "/metrics").ok()?.body).ok()?;
            sample(&m, "edgesight_frames_total{camera=\"steady\"}")
                .is_some_and(|f| f >= 3.0)
                .then_some(m)
        },
    );
    assert_eq!(
        sample(&m, "edgesight_camera_up{camera=\"door\"}"),
        Some(0.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "edgesight_camera_restarts_total{camera=\"door\"}").unwrap_or(0.0),
        0.0
    );
    let log = d.log();
    let waiting = log
        .lines()
        .find(|l| l.contains("camera waiting for its device") && l.contains("door"))
        .unwrap_or_else(|| panic!("no waiting line: {log}"));
    assert!(
        waiting.contains(&pattern.display().to_string()),
        "{waiting}"
    );
    d.stop();
}

/// `conf.d/*.toml` beside the config: `check-config` shows what each drop-in set and the
/// merged settings, and SIGHUP reads the drop-ins again.
#[test]
fn dropins_are_shown_by_check_config_and_read_again_on_sighup() {
    let dir = tmp_dir("daemon-dropins");
    let dropins = dir.join("conf.d");
    std::fs::create_dir_all(&dropins).unwrap();
    let board = dropins.join("50-board.toml");
    let regions = |w: u32| {
        format!("[[camera]]\nname = \"front\"\n[[camera.roi]]\nname = \"gate\"\nx = 0\ny = 0\nw = {w}\nh = 24\n")
    };
    std::fs::write(&board, regions(32)).unwrap();
    let config = camera("front", "320x240", &[("door", 0, 0, 320, 240)], 64);
    let path = dir.join("check.toml");
    std::fs::write(&path, &config).unwrap();
    let out = edgesight_command()
        .args(["check-config", path.to_str().unwrap()])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.starts_with(&format!(
            "# {}, then its drop-ins in order:\n# {}: camera 'front' (roi 'gate' added)\n",
            path.display(),
            board.display()
        )),
        "{printed}"
    );
    assert!(printed.contains("name = \"gate\"\n"), "{printed}");

    let d = Daemon::start(&dir, &config);
    // The regions of the newest frame, as (name, width).
    let regions_now = || -> Option<Vec<(String, u64)>> {
        let latest = crate::latest_frame(d.port)?;
        latest["rois"]
            .as_array()?
            .iter()
            .map(|r| Some((r["name"].as_str()?.to_string(), r["w"].as_u64()?)))
            .collect()
    };
    let want = |w: u64| vec![("door".to_string(), 320), ("gate".to_string(), w)];
    wait_until("the drop-in's region", Duration::from_secs(30), || {
        regions_now().filter(|r| *r == want(32))
    });
    std::fs::write(&board, regions(64)).unwrap();
    d.signal(libc::SIGHUP);
    wait_until(
        "the reloaded drop-in's region",
        Duration::from_secs(30),
        || regions_now().filter(|r| *r == want(64)),
    );
    d.stop();
}
