//! The daemon and its supervisor: systemd's notifications (READY, the watchdog, STOPPING)
//! and a SIGHUP sent the moment the process exists.

use std::os::unix::net::UnixDatagram;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::daemon::*;

/// The watchdog period the test asks for: long enough that a loaded machine's scheduling
/// delays stay well inside it, short enough to see several pings.
const WATCHDOG: Duration = Duration::from_secs(4);

/// A wall clock is the contract here: systemd restarts a service that lets a whole
/// watchdog period pass without a ping, so the gap between pings is what is held to.
#[test]
fn systemd_hears_ready_watchdog_and_stopping() {
    let dir = tmp_dir("daemon-notify");
    let socket_path = dir.join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind the notify socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let port = free_port();
    let started = Instant::now();
    let child = edgesight_command()
        .args(["run", "--source", "pattern:64x48@30"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("NOTIFY_SOCKET", &socket_path)
        .env("WATCHDOG_USEC", WATCHDOG.as_micros().to_string())
        .stderr(Stdio::null())
        .spawn()
        .expect("start");
    let d = Daemon {
        child,
        port,
        log: dir.join("none"),
    };
    let mut buf = [0u8; 256];
    let mut next = || -> String {
        // A signal meant for the test process (another test's child ending) may cut a
        // wait short; only a real error or the timeout counts.
        let n = loop {
            match socket.recv(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other.expect("a notification"),
            }
        };
        String::from_utf8_lossy(&buf[..n]).trim().to_string()
    };
    // While programs build before READY, the start timeout is extended a minute at a time.
    let mut first = next();
    while first == "EXTEND_TIMEOUT_USEC=60000000" {
        first = next();
    }
    assert_eq!(first, "READY=1");
    // READY comes only once a frame is out: /healthz agrees at once.
    assert_eq!(get(port, "/healthz").status, 200);
    let ready_at = started.elapsed();
    let mut pings = 0;
    let mut last_ping = Instant::now();
    let watch_start = Instant::now();
    while watch_start.elapsed() < 2 * WATCHDOG {
        assert_eq!(next(), "WATCHDOG=1");
        // systemd restarts the service when a whole period passes without one.
        assert!(
            last_ping.elapsed() < WATCHDOG,
            "{:?} between pings",
            last_ping.elapsed()
        );
        last_ping = Instant::now();
        pings += 1;
    }
    // At most one a quarter period (the daemon's rule): no flood. How few come is the
    // machine's scheduling; the gap above is systemd's contract.
    assert!(pings <= 9, "{pings} pings in {:?}", 2 * WATCHDOG);
    d.signal(libc::SIGTERM);
    let mut last = next();
    while last == "WATCHDOG=1" {
        last = next();
    }
    assert_eq!(last, "STOPPING=1", "after READY at {ready_at:?}");
    let (status, _) = d.terminate_after_signal();
    assert_eq!(status.code(), Some(0));
}

/// The signals `run` masks, as `/proc/PID/status` shows a mask (`SigBlk`, `SigIgn`).
fn signal_mask(pid: u32, field: &str) -> Option<u64> {
    u64::from_str_radix(&proc_status(pid, field)?, 16).ok()
}

/// Issue "Resilience and security": a SIGHUP in the first milliseconds after start
/// killed the process (the default action), as the signals were blocked only after the
/// config was read.
#[test]
fn sighup_right_after_start_is_kept_for_the_daemon() {
    let dir = tmp_dir("daemon-early-sighup");
    let config = camera("c", "32x24", &[], 64);
    let sigpipe = 1u64 << (libc::SIGPIPE - 1);
    for round in 0..10 {
        let d = Daemon::spawn(&dir, &config);
        // The earliest a signal can be aimed: the Rust runtime has started, which sets
        // SIGPIPE to ignored before it calls main. (Before that the dynamic loader runs,
        // and no program can handle a signal yet.) A state to wait on, not a time: the
        // signal goes at once.
        let pid = d.child.id();
        let start = Instant::now();
        while signal_mask(pid, "SigIgn").is_none_or(|m| m & sigpipe == 0) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "round {round}: no start"
            );
            std::thread::yield_now();
        }
        for _ in 0..3 {
            d.signal(libc::SIGHUP);
        }
        // Handled once the daemon runs (it checks the config and opens OpenCL first).
        let log = d.log.clone();
        d.signal(libc::SIGTERM);
        let (status, _) = d.exit_within(Duration::from_secs(60));
        assert_eq!(
            status.code(),
            Some(0),
            "round {round}: {status:?}\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
}

/// Resilience round 3, item 13: SIGHUP ignored `[log]` and `[metrics]` changes and said
/// "configuration reloaded", where `[web]`, source, device and tuning changes said they
/// take a restart. The log format and `[metrics]` say so too now, and the running ones
/// are kept; a level that `RUST_LOG` overrides (the tests' daemons run with
/// `RUST_LOG=info`) says why it is not applied.
#[test]
fn round3_13_log_and_metrics_changes_say_they_take_a_restart() {
    let dir = tmp_dir("round3-13-log-metrics-reload");
    let body = camera("c", "32x24", &[], 64);
    let d = Daemon::start(&dir, &format!("[log]\nformat = \"text\"\n{body}"));
    let bins = || {
        d.metrics()
            .lines()
            .filter(|l| l.starts_with("edgesight_luma_bin_ratio{"))
            .count()
    };
    wait_until("the histogram", Duration::from_secs(30), || {
        (bins() == 32).then_some(())
    });
    let changed = format!(
        "[log]\nlevel = \"debug\"\nformat = \"json\"\n[metrics]\nhistogram_bins = 64\n{body}"
    );
    std::fs::write(dir.join("edgesight.toml"), changed).expect("rewrite the config");
    d.signal(libc::SIGHUP);
    let log = wait_until("the reload", Duration::from_secs(30), || {
        let log = d.log();
        log.contains("SIGHUP: configuration reloaded")
            .then_some(log)
    });
    assert!(
        log.contains("SIGHUP: [log] level not applied: RUST_LOG=INFO wins over the config's level"),
        "{log}"
    );
    for what in ["[log] format changes", "[metrics] changes"] {
        assert!(
            log.contains(&format!(
                "SIGHUP: {what} take a restart; keeping the running ones"
            )),
            "{what}: {log}"
        );
    }
    // Kept: the text format and 32 buckets.
    assert!(!log.contains("{\""), "{log}");
    assert_eq!(bins(), 32);
    d.stop();
}

/// Resilience round 3, item 13: a new `[log] level` is taken by SIGHUP. At `warn` the
/// reload's own info line is no longer written; back at `info` it is again.
#[test]
fn round3_13_sighup_applies_the_log_level() {
    let dir = tmp_dir("round3-13-log-level");
    let body = camera("c", "32x24", &[], 64);
    let write = |level: &str| {
        std::fs::write(
            dir.join("edgesight.toml"),
            format!("[log]\nlevel = \"{level}\"\n{body}"),
        )
        .expect("config")
    };
    let d = Daemon::start_with(&dir, &format!("[log]\nlevel = \"info\"\n{body}"), |c| {
        c.env_remove("RUST_LOG");
    });
    let reloaded = |n: f64| {
        d.signal(libc::SIGHUP);
        wait_until("the reload", Duration::from_secs(30), || {
            sample(
                &d.metrics(),
                r#"edgesight_config_reloads_total{result="success"}"#,
            )
            .filter(|v| *v == n)
        });
        d.log()
    };
    let said = |log: &str| log.matches("SIGHUP: configuration reloaded").count();
    write("warn");
    let log = reloaded(1.0);
    assert!(log.contains("SIGHUP: log level now warn"), "{log}");
    assert_eq!(said(&log), 0, "{log}");
    let log = reloaded(2.0);
    assert_eq!(said(&log), 0, "at warn: {log}");
    write("info");
    let log = reloaded(3.0);
    assert!(log.contains("SIGHUP: log level now info"), "{log}");
    assert_eq!(said(&log), 1, "{log}");
    assert!(!log.contains("take a restart"), "{log}");
    d.stop();
}
