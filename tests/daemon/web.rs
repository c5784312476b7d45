//! The `[web]` side of a running daemon: basic auth in front of every route, TLS and a
//! certificate renewed in place, `max_connections` against the open-file limit, and the
//! `[web]` settings `check-config` and `run` both refuse.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::daemon::*;
use crate::{assert_refused, edgesight, edgesight_ok, get_as};

#[test]
fn basic_auth_guards_everything_and_healthz_goes_stale() {
    let dir = tmp_dir("daemon-auth");
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    // One frame every 4 s and a 1 s staleness: /healthz must turn 503 between frames.
    let config = format!(
        "[web]\nsnapshots = true\nstale_after_seconds = 1\n[web.basic_auth_users]\nprom = \"{hash}\"\n\
         [[camera]]\nname = \"solo\"\n[camera.source]\nkind = \"pattern\"\nsize = \"64x48\"\nfps = 0.25\n"
    );
    let d = Daemon::spawn(&dir, &config);
    let port = d.port;
    wait_until(
        "healthz 200 with the password",
        Duration::from_secs(60),
        || (get_as(port, "/healthz", "prom") == 200).then_some(()),
    );
    wait_until(
        "healthz 503 between frames",
        Duration::from_secs(30),
        || {
            let r = get(port, "/healthz");
            assert_eq!(r.status, 401, "healthz without a password");
            (get_as(port, "/healthz", "prom") == 503).then_some(())
        },
    );
    for path in ["/metrics", "/api/v1/latest", "/snapshot/luma.png", "/"] {
        let r = get(port, path);
        assert_eq!(r.status, 401, "{path} without a password");
        assert!(r.headers.contains("www-authenticate"), "{}", r.headers);
        assert_eq!(
            get_as(port, path, "mallory"),
            401,
            "{path} as an unknown user"
        );
        assert_eq!(get_as(port, path, "prom"), 200, "{path} with the password");
    }
    d.stop();
}

/// The `[web]` lines that serve TLS from `cert` and `key`.
pub(crate) fn tls(cert: &Path, key: &Path) -> String {
    format!(
        "[web]\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
        cert.display(),
        key.display()
    )
}

#[test]
fn tls_serves_https_only() {
    let dir = tmp_dir("daemon-tls");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    self_signed(&cert, &key, "127.0.0.1");
    let tls = tls(&cert, &key);
    // TLS encrypts pictures beyond loopback but does not decide who sees them: it takes
    // basic auth (checked, not bound).
    let public = dir.join("public.toml");
    let public_text = format!("{tls}listen_address = \"0.0.0.0:8947\"\nsnapshots = true\n");
    std::fs::write(&public, &public_text).expect("write");
    let (code, err) = edgesight(&["check-config", &public.display().to_string()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("they need basic_auth_users"), "{err}");
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    let users = format!("[web.basic_auth_users]\nprom = \"{hash}\"\n");
    std::fs::write(&public, format!("{public_text}{users}")).expect("write");
    edgesight_ok(&["check-config", &public.display().to_string()]);

    let d = Daemon::spawn(&dir, &format!("{tls}{}", camera("c", "64x48", &[], 64)));
    let port = d.port;
    wait_until("healthz over https", Duration::from_secs(60), || {
        (https_status(port, "/healthz", &cert) == "200").then_some(())
    });
    assert_eq!(https_status(port, "/metrics", &cert), "200");
    // Plain HTTP gets no HTTP answer from a TLS port.
    assert!(request(port, "GET", "/healthz").is_err());
    d.stop();
}

/// The status code curl gets for `path` over HTTPS trusting only `ca` ("000" when the
/// handshake or the connection fails).
fn https_status(port: u16, path: &str, ca: &Path) -> String {
    let out = run_tool(
        Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "5",
            ])
            .arg("--cacert")
            .arg(ca)
            .arg(format!("https://127.0.0.1:{port}{path}")),
        None,
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A self-signed certificate for 127.0.0.1 named `name` and its key, written to `cert`
/// and `key`.
pub(crate) fn self_signed(cert: &Path, key: &Path, name: &str) {
    run_tool_ok(
        Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args([
                "-subj",
                &format!("/CN={name}"),
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(key)
            .arg("-out")
            .arg(cert),
        None,
    );
}

/// Resilience round 2, item 10: a certificate renewed in place, then SIGHUP: the log said
/// "configuration reloaded" and the old certificate was still served. New handshakes get
/// the renewed one; files that no longer read keep the one served, and the log says so.
#[test]
fn round2_10_a_certificate_renewed_in_place_is_served_after_sighup() {
    let dir = tmp_dir("daemon-tls-renewed");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    self_signed(&cert, &key, "first");
    let (first, renewed) = (dir.join("first.pem"), dir.join("renewed.pem"));
    std::fs::copy(&cert, &first).expect("copy");
    self_signed(&renewed, &dir.join("renewed-key.pem"), "renewed");
    let config = format!("{}{}", tls(&cert, &key), camera("c", "64x48", &[], 64));
    let d = Daemon::spawn(&dir, &config);
    // Whether a handshake trusting only `ca` succeeds.
    let trusted_by = |ca: &Path| https_status(d.port, "/healthz", ca) == "200";
    wait_until("the first certificate", Duration::from_secs(60), || {
        trusted_by(&first).then_some(())
    });
    // Renewed in place: the certificate and key files rewritten.
    std::fs::copy(&renewed, &cert).expect("renew the certificate");
    std::fs::copy(dir.join("renewed-key.pem"), &key).expect("renew the key");
    d.signal(libc::SIGHUP);
    wait_until("the renewed certificate", Duration::from_secs(30), || {
        trusted_by(&renewed).then_some(())
    });
    assert!(
        !trusted_by(&first),
        "the old certificate is no longer served"
    );
    assert!(
        d.log()
            .contains("SIGHUP: TLS certificate and key read again"),
        "{}",
        d.log()
    );
    // A broken renewal keeps the certificate served.
    std::fs::write(&cert, "not a certificate\n").expect("break the certificate");
    d.signal(libc::SIGHUP);
    wait_until("the refused certificate", Duration::from_secs(30), || {
        d.log()
            .contains("SIGHUP: keeping the TLS certificate served")
            .then_some(())
    });
    assert!(
        trusted_by(&renewed),
        "the renewed certificate is still served"
    );
    d.stop();
}

/// Runs the command under an open-file limit of `soft` (and `hard`).
fn with_open_files(command: &mut Command, soft: u64, hard: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires; the struct lives
    // across the call.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: soft as libc::rlim_t,
                rlim_max: hard as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Resilience round 2, item 11: `max_connections = 4096` under `ulimit -n 1024` flooded the
/// log with "accept: Too many open files", and under a limit of 24 every scrape failed.
/// The soft limit is raised to the hard one, a `max_connections` beyond it is served as
/// far as it fits (and the log says so), and a limit that leaves no room refuses the start.
#[test]
fn round2_11_max_connections_fits_the_open_file_limit() {
    let dir = tmp_dir("daemon-open-files");
    let config = format!(
        "[web]\nmax_connections = 4096\n{}",
        camera("c", "64x48", &[], 64)
    );
    // The soft limit is raised to the hard one: 4096 fit under a hard limit of 8192.
    let d = Daemon::start_with(&dir, &config, |c| with_open_files(c, 1024, 8192));
    assert!(!d.log().contains("does not fit"), "{}", d.log());
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.child.id())).expect("limits");
    let files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("the open-file limit");
    assert!(
        files.split_whitespace().filter(|w| *w == "8192").count() == 2,
        "{files}"
    );
    d.stop();

    // A hard limit of 1024: 1024 - 32 - 16 descriptors, four fifths of them slots and a
    // fifth for connections retiring beside them, said once.
    let d = Daemon::start_with(&dir, &config, |c| with_open_files(c, 1024, 1024));
    assert!(
        d.log().contains(
            "web.max_connections = 4096 does not fit the open-file limit: serving at most 781 connections"
        ),
        "{}",
        d.log()
    );
    d.stop();

    // A limit of 24 leaves no room: refused at start, saying why.
    let d = Daemon::spawn_with(&dir, &config, |c| with_open_files(c, 24, 24));
    let log = d.log.clone();
    let (status, _) = d.exit_within(Duration::from_secs(30));
    assert_ne!(status.code(), Some(0));
    let log = std::fs::read_to_string(log).expect("the log");
    assert!(
        log.contains("web.max_connections: the open-file limit (24) leaves no descriptor"),
        "{log}"
    );
}

/// `check-config` said "ok" to garbage TLS files and to bcrypt hashes that `run` then
/// refused without a FILE:LINE. Both now refuse them alike, at the key's line.
#[test]
fn r12_check_config_and_run_refuse_the_same_web_settings() {
    let dir = tmp_dir("daemon-web-checks");
    let (garbage, cert, key) = (
        dir.join("garbage.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&garbage, "not PEM\n").expect("write");
    run_tool_ok(
        Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
            .args(["-subj", "/CN=127.0.0.1", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert),
        None,
    );
    let hash = bcrypt::hash("pw", 4).expect("bcrypt");
    let tail = &hash[7..];
    let users = |h: &str| format!("[web.basic_auth_users]\nprom = \"{h}\"\n");
    let garbage_name = garbage.display().to_string();
    for (name, text, expect) in [
        (
            "garbage-key",
            tls(&cert, &garbage),
            format!(":3:16: web.tls_key_file: {garbage_name}: no PEM private key in it"),
        ),
        (
            "garbage-cert",
            tls(&garbage, &key),
            format!(":2:17: web.tls_cert_file: {garbage_name}: no PEM certificate in it"),
        ),
        (
            "cost-31",
            users(&format!("$2y$31${tail}")),
            ":2:8: web.basic_auth_users.prom: user 'prom': bcrypt cost 31 is too slow to serve"
                .to_string(),
        ),
        (
            "cost-99",
            users(&format!("$2y$99${tail}")),
            ":2:8: web.basic_auth_users.prom: user 'prom': bcrypt cost 99 is too slow to serve"
                .to_string(),
        ),
        (
            "bad-characters",
            // The salt's first character made one bcrypt's base64 lacks: replacing its
            // digits left a hash that had none valid, and the config passed.
            users(&format!("$2y$10$#{}", &tail[1..])),
            ":2:8: web.basic_auth_users.prom: user 'prom': not a bcrypt hash".to_string(),
        ),
        (
            "tls-without-auth",
            format!(
                "{}listen_address = \"0.0.0.0:1\"\nsnapshots = true\n",
                tls(&cert, &key)
            ),
            ":5:13: web.snapshots: snapshots and the status page show camera pictures: \
             listening on 0.0.0.0:1, beyond loopback, they need basic_auth_users"
                .to_string(),
        ),
    ] {
        assert_refused(&dir, name, &text, &expect);
    }
}

/// curl's status code and headers for `path` over HTTPS trusting `ca`, with a client
/// certificate and a user `prom` with password `s3cret` where given ("000" when the
/// handshake fails).
fn https_as(
    port: u16,
    path: &str,
    ca: &Path,
    client: Option<(&Path, &Path)>,
    password: bool,
) -> (String, String) {
    let mut curl = Command::new("curl");
    curl.args([
        "-s",
        "-o",
        "/dev/null",
        "-D",
        "-",
        "-w",
        "%{http_code}",
        "--max-time",
        "5",
    ])
    .arg("--cacert")
    .arg(ca);
    if let Some((cert, key)) = client {
        curl.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    if password {
        curl.args(["-u", "prom:s3cret"]);
    }
    let out = run_tool(curl.arg(format!("https://127.0.0.1:{port}{path}")), None);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = text
        .get(text.len().saturating_sub(3)..)
        .unwrap_or("")
        .to_string();
    (code, text.to_lowercase())
}

/// A node_exporter web config file, unchanged (relative paths, client certificates
/// required and verified against a CA, TLS 1.2 at least, a bcrypt user, a header), serves
/// with `--web.config.file`: no client certificate, no handshake; a certificate and the
/// password, 200 with the header; the certificate alone, 401. `[web]` TLS beside it is
/// refused, naming both.
#[test]
fn an_exporter_web_config_file_serves_unchanged() {
    let dir = tmp_dir("daemon-web-config-file");
    let openssl = |args: &[&str]| {
        run_tool_ok(Command::new("openssl").args(args).current_dir(&dir), None);
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=edgesight test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=prometheus",
        "-keyout",
        "client.key",
        "-out",
        "client.csr",
    ]);
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").expect("ext");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "client.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "client.ext",
        "-out",
        "client.crt",
    ]);
    self_signed(
        &dir.join("server.crt"),
        &dir.join("server.key"),
        "edgesight",
    );
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    let web_config = dir.join("web-config.yml");
    std::fs::write(
        &web_config,
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
             client_auth_type: \"RequireAndVerifyClientCert\"\n  client_ca_file: ca.crt\n  \
             min_version: TLS12\n\
             http_server_config:\n  headers:\n    X-Frame-Options: deny\n\
             basic_auth_users:\n  prom: {hash}\n"
        ),
    )
    .expect("web config");
    // check-config takes the file as run does: it loads its certificates and keys.
    let config = dir.join("c.toml");
    std::fs::write(&config, camera("c", "64x48", &[], 64)).expect("config");
    let checked = run_tool(
        edgesight_command()
            .arg("check-config")
            .arg(&config)
            .arg("--web.config.file")
            .arg(&web_config),
        None,
    );
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(checked.status.success(), "{stderr}");
    assert!(
        stderr.ends_with(&format!("{}: ok\n", config.display())),
        "{stderr}"
    );
    std::fs::write(
        dir.join("broken.yml"),
        "tls_server_config:\n  cert_file: nope.crt\n",
    )
    .expect("broken web config");
    let broken = run_tool(
        edgesight_command()
            .arg("check-config")
            .arg(&config)
            .arg("--web.config.file")
            .arg(dir.join("broken.yml")),
        None,
    );
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert_eq!(broken.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("tls_server_config"), "{stderr}");
    let d = Daemon::spawn_with(&dir, &camera("c", "64x48", &[], 64), |c| {
        c.arg("--web.config.file").arg(&web_config);
    });
    let server = dir.join("server.crt");
    let (cert, key) = (dir.join("client.crt"), dir.join("client.key"));
    let client = Some((cert.as_path(), key.as_path()));
    let (code, headers) = wait_until("metrics over mutual TLS", Duration::from_secs(60), || {
        let (code, headers) = https_as(d.port, "/metrics", &server, client, true);
        (code == "200").then_some((code, headers))
    });
    assert_eq!(code, "200");
    assert!(headers.contains("x-frame-options: deny"), "{headers}");
    assert_eq!(
        https_as(d.port, "/metrics", &server, None, true).0,
        "000",
        "no client certificate"
    );
    assert_eq!(
        https_as(d.port, "/metrics", &server, client, false).0,
        "401",
        "no password"
    );
    d.stop();
    // TLS in [web] as well: refused, naming the key and the flag.
    let path = dir.join("both.toml");
    std::fs::write(
        &path,
        format!(
            "[web]\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
            server.display(),
            dir.join("server.key").display()
        ),
    )
    .expect("write");
    let out = run_tool(
        edgesight_command()
            .args(["run", "--config"])
            .arg(&path)
            .arg("--web.config.file")
            .arg(&web_config),
        None,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("web.tls_cert_file: set here and --web.config.file"),
        "{stderr}"
    );
}

/// Resilience round 3, item 7: a basic-auth user removed from the config kept working
/// after SIGHUP, and the reload counted as a success. Users and hashes are taken by the
/// reload now: a removed user, and a user whose hash changed, are refused at once (a
/// password remembered under the old hash does not pass), a new user is let in.
#[test]
fn round3_7_users_removed_or_changed_by_sighup_are_refused() {
    let dir = tmp_dir("round3-7-users-reload");
    let s3cret = bcrypt::hash("s3cret", 4).expect("bcrypt");
    let other = bcrypt::hash("other", 4).expect("bcrypt");
    let users = |list: &[(&str, &str)]| -> String {
        let mut text = String::from("[web]\n[web.basic_auth_users]\n");
        for (user, hash) in list {
            text += &format!("{user} = \"{hash}\"\n");
        }
        text + &camera("c", "64x48", &[], 64)
    };
    let d = Daemon::spawn(
        &dir,
        &users(&[("prom", s3cret.as_str()), ("old", s3cret.as_str())]),
    );
    let port = d.port;
    wait_until("healthz with the password", Duration::from_secs(60), || {
        (get_as(port, "/healthz", "prom") == 200).then_some(())
    });
    for user in ["prom", "old", "new"] {
        let expect = if user == "new" { 401 } else { 200 };
        assert_eq!(get_as(port, "/metrics", user), expect, "{user} before");
    }
    std::fs::write(
        dir.join("edgesight.toml"),
        users(&[("prom", other.as_str()), ("new", s3cret.as_str())]),
    )
    .expect("rewrite the config");
    d.signal(libc::SIGHUP);
    wait_until("the reload", Duration::from_secs(30), || {
        d.log()
            .contains("SIGHUP: configuration reloaded")
            .then_some(())
    });
    for (user, expect) in [("old", 401), ("prom", 401), ("new", 200)] {
        assert_eq!(get_as(port, "/metrics", user), expect, "{user} after");
    }
    let log = d.log();
    assert!(
        log.contains("SIGHUP: basic-auth users read again: 2 users"),
        "{log}"
    );
    assert!(!log.contains("take a restart"), "{log}");
    assert_eq!(
        sample(
            &metrics_as(port, "new"),
            r#"edgesight_config_reloads_total{result="success"}"#
        ),
        Some(1.0)
    );
    d.stop();
}

/// `/metrics` fetched with basic auth as `user` (password `s3cret`).
fn metrics_as(port: u16, user: &str) -> String {
    let token = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("{user}:s3cret"),
    );
    let auth = format!("Authorization: Basic {token}\r\n");
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let r = exchange(stream, "GET", "/metrics", &auth, Duration::from_secs(10)).expect("metrics");
    assert_eq!(r.status, 200, "/metrics as {user}");
    String::from_utf8(r.body).expect("text")
}
