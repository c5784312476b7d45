//! The push path of deploy/agent: Debian's Prometheus in agent mode, on the shipped
//! agent.yml (only its ports, paths and intervals rewritten) and the shipped unit's feature
//! flags, scrapes a daemon serving the detail tier and pushes to a second Prometheus
//! receiving remote writes. On the receiver: the board's labels from the environment,
//! exactly the default tier's series, every alert and dashboard expression, and every
//! sample the agent scraped while the receiver was down for a minute. And the unit's
//! start scripts: the board's identity required, node_exporter's target written only
//! where it is enabled.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::daemon::*;
use crate::prometheus::{every_deploy_expression_runs_on_the_scrape, Prometheus};

const SITE: &str = "site-7";
const BOARD: &str = "board-42";
/// The scrape interval the test runs the agent at (the shipped one is 15 s).
const INTERVAL: f64 = 1.0;

/// `text` with the `count` occurrences of `from` replaced by `to`: a shipped value the
/// test no longer finds fails here, not in a confusing later check.
fn replace(text: &str, from: &str, to: &str, count: usize) -> String {
    assert_eq!(
        text.matches(from).count(),
        count,
        "{from:?} in the shipped file"
    );
    text.replace(from, to)
}

/// The feature flag of the shipped unit's ExecStart.
fn unit_features() -> String {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/agent/edgesight-agent.service");
    let unit = std::fs::read_to_string(unit).expect("edgesight-agent.service");
    unit.split_whitespace()
        .find(|w| w.starts_with("--enable-feature="))
        .expect("the unit's --enable-feature")
        .to_string()
}

/// The shipped agent.yml pointed at the daemon on `target`, the receiver on `receiver`
/// and node_exporter's targets file in `dir`, scraping every second.
fn agent_config(dir: &Path, target: u16, receiver: u16) -> String {
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/agent/agent.yml"),
    )
    .expect("agent.yml");
    let text = replace(&shipped, "scrape_interval: 15s", "scrape_interval: 1s", 1);
    let text = replace(&text, "scrape_timeout: 5s", "scrape_timeout: 1s", 2);
    let text = replace(
        &text,
        "'127.0.0.1:8947'",
        &format!("'127.0.0.1:{target}'"),
        1,
    );
    let text = replace(
        &text,
        "https://metrics.example.com/api/v1/write",
        &format!("http://127.0.0.1:{receiver}/api/v1/write"),
        1,
    );
    replace(
        &text,
        "/run/edgesight-agent/node.yml",
        &dir.join("node.yml").display().to_string(),
        1,
    )
}

/// Series per metric name in a text exposition.
fn names_in_exposition(text: &str) -> BTreeMap<String, usize> {
    let mut names = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        *names.entry(name.to_string()).or_default() += 1;
    }
    names
}

/// Series per metric name on `prom` from the daemon's job (its own `up` and `scrape_*`
/// series apart).
fn names_on(prom: &Prometheus) -> BTreeMap<String, usize> {
    prom.query(r#"count by (__name__) ({job="edgesight", __name__!~"up|scrape_.+"})"#)
        .unwrap_or_default()
        .iter()
        .map(|s| {
            let name = s["metric"]["__name__"].as_str().unwrap_or_default();
            (name.to_string(), crate::prometheus::value(s) as usize)
        })
        .collect()
}

/// The raw samples (time in s, value) of `series` within the last `seconds`.
fn samples(prom: &Prometheus, series: &str, seconds: u64) -> Vec<(f64, f64)> {
    let result = prom
        .query(&format!("{series}[{seconds}s]"))
        .unwrap_or_default();
    assert!(result.len() <= 1, "{series}: {result:?}");
    result
        .first()
        .and_then(|s| s["values"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|v| {
            let value = v[1].as_str().and_then(|v| v.parse().ok());
            (v[0].as_f64().expect("a time"), value.expect("a value"))
        })
        .collect()
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

/// Sleeps until half an interval from the agent's scrapes (they start at `phase` into
/// each second), so that a scrape is either well before or well after what comes next.
fn between_scrapes(phase: f64) {
    let wait = (phase + INTERVAL / 2.0 - now()).rem_euclid(INTERVAL);
    std::thread::sleep(Duration::from_secs_f64(wait));
}

/// The daemon's count of the /metrics requests it answered, read by one request more.
fn scrapes_answered(port: u16) -> f64 {
    let text = get_text(port, "/metrics");
    sample(
        &text,
        r#"edgesight_http_requests_total{code="200",handler="metrics"}"#,
    )
    .expect("the detail tier's request counter")
}

fn start_receiver(dir: &Path, port: u16) -> Prometheus {
    let config = dir.join("receiver.yml");
    std::fs::write(&config, "global:\n  evaluation_interval: 1s\n").expect("receiver.yml");
    Prometheus::spawn(
        dir,
        "receiver",
        port,
        &[
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", dir.join("receiver").display()),
            "--web.enable-remote-write-receiver".into(),
        ],
        &[],
    )
}

#[test]
fn an_agent_pushes_the_default_tier_through_a_receiver_outage() {
    let dir = tmp_dir("daemon-agent");
    let config = format!(
        "[metrics]\ntier = \"detail\"\n{}{}",
        camera("front", "160x120", &[("door", 0, 0, 80, 60)], 64),
        camera(
            "rear",
            "96x64",
            &[("sky", 0, 0, 96, 20), ("road", 0, 40, 96, 24)],
            64
        )
    );
    let d = Daemon::start(&dir, &config);
    let detail = get_text(d.port, "/metrics");
    for family in [
        "edgesight_luma_bin_ratio{",
        "edgesight_stage_duration_seconds_bucket{",
    ] {
        assert!(detail.contains(family), "the daemon serves no {family}");
    }
    let default = names_in_exposition(&get_text(d.port, "/metrics?exclude[]=detail"));

    let receiver_port = free_port();
    let mut receiver = start_receiver(&dir, receiver_port);
    let agent_yml = dir.join("agent.yml");
    std::fs::write(&agent_yml, agent_config(&dir, d.port, receiver_port)).expect("agent.yml");
    let agent = Prometheus::spawn(
        &dir,
        "agent",
        free_port(),
        &[
            unit_features(),
            format!("--config.file={}", agent_yml.display()),
            format!("--storage.agent.path={}", dir.join("agent").display()),
        ],
        &[("SITE", SITE), ("BOARD", BOARD)],
    );

    // The series arrive, each with the board's labels, and they are the default tier's.
    let up = wait_until("the agent's first push", Duration::from_secs(60), || {
        receiver
            .query(r#"up{job="edgesight"}"#)
            .filter(|r| r.len() == 1)
    });
    assert_eq!(crate::prometheus::value(&up[0]), 1.0, "{}", agent.log());
    assert_eq!(up[0]["metric"]["site"], SITE, "{:?}", up[0]["metric"]);
    assert_eq!(up[0]["metric"]["board"], BOARD, "{:?}", up[0]["metric"]);
    for (label, value) in [("site", SITE), ("board", BOARD)] {
        let strays = receiver
            .query(&format!(r#"{{__name__=~".+", {label}!="{value}"}}"#))
            .expect("a query for series without the label");
        assert!(
            strays.is_empty(),
            "series without the board's {label}: {strays:?}"
        );
    }
    let limit = Instant::now() + Duration::from_secs(30);
    while names_on(&receiver) != default && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        names_on(&receiver),
        default,
        "the default tier at the receiver"
    );
    // The stage times left are the pipeline's, and the relabelling leaves no label behind.
    for series in receiver
        .query("edgesight_stage_duration_seconds_count")
        .unwrap_or_default()
    {
        let mut labels: Vec<&String> = series["metric"]
            .as_object()
            .expect("labels")
            .keys()
            .collect();
        labels.sort();
        assert_eq!(
            labels,
            ["__name__", "board", "camera", "instance", "job", "site", "stage"],
            "{series}"
        );
        assert_eq!(series["metric"]["stage"], "pipeline", "{series}");
    }
    // No node_exporter on this machine's agent: no node job, not even its up.
    assert_eq!(receiver.query(r#"up{job="node"}"#), Some(vec![]));
    every_deploy_expression_runs_on_the_scrape(&receiver);

    // The receiver away for a minute: the agent holds what it scrapes meanwhile and
    // sends it when the receiver is back, on the same storage. Every scrape leaves a
    // sample of `up`, and one the daemon answered in time a sample of its counters.
    let (up, counter) = (
        r#"up{job="edgesight"}"#,
        r#"edgesight_frames_total{camera="front"}"#,
    );
    let recent = samples(&receiver, counter, 10);
    assert!(
        recent.len() >= 2,
        "the receiver is behind the scrapes: {recent:?}"
    );
    let phase = recent[recent.len() - 1].0.rem_euclid(INTERVAL);
    between_scrapes(phase);
    let (before, from) = (scrapes_answered(d.port), now());
    std::thread::sleep(Duration::from_secs(2));
    receiver.stop();
    std::thread::sleep(Duration::from_secs(60));
    receiver = start_receiver(&dir, receiver_port);
    std::thread::sleep(Duration::from_secs(2));
    between_scrapes(phase);
    let (after, to) = (scrapes_answered(d.port), now());
    wait_until(
        "the samples after the outage",
        Duration::from_secs(60),
        || {
            let last = samples(&receiver, counter, 5).last()?.0;
            (last > to + INTERVAL).then_some(())
        },
    );
    let window = (now() - from).ceil() as u64 + 5;
    let held = |series| -> Vec<(f64, f64)> {
        samples(&receiver, series, window)
            .into_iter()
            .filter(|(t, _)| (from..to).contains(t))
            .collect()
    };
    let scrapes = held(up);
    let mut edges = vec![from];
    edges.extend(scrapes.iter().map(|(t, _)| t));
    edges.push(to);
    let widest = edges.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    assert!(
        widest <= 1.5 * INTERVAL,
        "a gap of {widest:.3} s in {scrapes:?}\n{}",
        agent.log()
    );
    // The one request that read `before` is counted between the two reads too.
    assert_eq!(
        scrapes.len() as f64,
        after - before - 1.0,
        "scrapes held over the outage against those the daemon answered: {scrapes:?}"
    );
    let answered: Vec<f64> = scrapes
        .iter()
        .filter(|(_, v)| *v == 1.0)
        .map(|(t, _)| *t)
        .collect();
    let counted: Vec<f64> = held(counter).iter().map(|(t, _)| *t).collect();
    assert_eq!(
        counted, answered,
        "{counter} against the scrapes that were up"
    );
    assert!(
        answered.len() + 2 >= scrapes.len(),
        "scrapes failing (the daemon slow past the timeout?): {scrapes:?}"
    );

    // A node_exporter appearing (here the daemon stands in for it) is scraped as job node.
    std::fs::write(
        dir.join("node.yml"),
        format!("- targets: ['127.0.0.1:{}']\n", d.port),
    )
    .expect("node.yml");
    let node = wait_until("the node job", Duration::from_secs(30), || {
        receiver
            .query(&format!(r#"up{{job="node", board="{BOARD}"}}"#))
            .filter(|r| r.len() == 1)
    });
    assert_eq!(crate::prometheus::value(&node[0]), 1.0);
    drop(agent);
    receiver.stop();
    d.stop();
}

/// The script of the unit's `ExecStartPre=PREFIX -c '...'` as systemd hands it to the
/// shell: `$$` made `$` and `%%` made `%`.
fn unit_script(prefix: &str) -> String {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/agent/edgesight-agent.service");
    let unit = std::fs::read_to_string(unit).expect("edgesight-agent.service");
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStartPre=")?.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no ExecStartPre={prefix}"));
    line.strip_prefix(" -c '")
        .and_then(|l| l.strip_suffix('\''))
        .expect("one single-quoted script")
        .replace("$$", "$")
        .replace("%%", "%")
}

/// Runs `script` under `sh` with only `env` (and a PATH with `bin` first); its exit code
/// and stderr.
fn run_script(script: &str, bin: &Path, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", &format!("umask 077; {script}")])
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .envs(env.iter().copied())
        .output()
        .expect("sh");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn the_agent_unit_wants_an_identity_and_scrapes_node_exporter_where_enabled() {
    let dir = tmp_dir("daemon-agent-unit");
    let identity = unit_script("/bin/sh");
    assert_eq!(
        run_script(&identity, &dir, &[("SITE", SITE), ("BOARD", BOARD)]),
        (Some(0), String::new())
    );
    for (env, unset) in [
        (&[("SITE", ""), ("BOARD", BOARD)][..], "SITE"),
        (&[("SITE", SITE)], "BOARD"),
    ] {
        assert_eq!(
            run_script(&identity, &dir, env),
            (
                Some(1),
                format!("/etc/default/edgesight-agent: {unset} is unset or empty\n")
            ),
            "{env:?}"
        );
    }

    // systemctl answering is-enabled for the units listed in $ENABLED.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let systemctl = bin.join("systemctl");
    std::fs::write(
        &systemctl,
        "#!/bin/sh\nfor u; do :; done\ncase \" $ENABLED \" in *\" $u \"*) exit 0;; esac\nexit 1\n",
    )
    .expect("systemctl");
    std::fs::set_permissions(
        &systemctl,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let targets = dir.join("node.yml");
    let node = replace(
        &unit_script("+/bin/sh"),
        "/run/edgesight-agent/node.yml",
        &targets.display().to_string(),
        1,
    );
    for enabled in ["prometheus-node-exporter.service", "node_exporter.service"] {
        assert_eq!(
            run_script(&node, &bin, &[("ENABLED", enabled)]),
            (Some(0), String::new())
        );
        assert_eq!(
            std::fs::read_to_string(&targets).expect("node.yml"),
            "- targets: [127.0.0.1:9100]\n",
            "{enabled}"
        );
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&targets).expect("stat").permissions(),
        );
        assert_eq!(
            format!("{:o}", mode & 0o777),
            "644",
            "{enabled}: the agent's user reads it"
        );
    }
    assert_eq!(
        run_script(&node, &bin, &[("ENABLED", "ssh.service")]),
        (Some(0), String::new())
    );
    assert!(
        !targets.exists(),
        "node.yml left where node_exporter is not enabled"
    );
}
