//! The daemon under load and hostile clients: wrk on `/metrics` beside clients that never
//! read, a flood of wrong passwords, idle connections from one peer, and the attacks on
//! the connection slots (slowloris, incomplete heads, a flood of cheap answers, churn).
//! In each the cameras must keep their pace and a scraper must get through.
//!
//! How fast frames come under these loads is measured, not asserted, by
//! `python3 bench/http_load.py pace` (BENCHMARKS.md#http-pace); here the camera's own
//! counters say whether it kept up: a test pattern that falls behind skips the frames it
//! is late for and counts them as sequence gaps, so its share of frames published is read
//! from the daemon, whatever the speed of the machine running the test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::daemon::*;
use crate::get_as;

/// A camera's counters in a scrape: frames published, and frames its source's clock made
/// due (published or dropped for any reason).
struct Pace {
    published: f64,
    due: f64,
}

impl Pace {
    fn of(metrics: &str, camera: &str) -> Pace {
        let published = sample(
            metrics,
            &format!("edgesight_frames_total{{camera=\"{camera}\"}}"),
        )
        .unwrap_or_else(|| panic!("no frames_total of {camera}"));
        let drops = format!("edgesight_frames_dropped_total{{camera=\"{camera}\",");
        let dropped: f64 = metrics
            .lines()
            .filter(|l| l.starts_with(&drops))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum();
        Pace {
            published,
            due: published + dropped,
        }
    }
}

/// Scrapes until the camera's clock has made `frames` more frames due than in `from`, and
/// asserts that it published at least half of them under `load` (a loaded 2-core machine
/// keeps over nine tenths, BENCHMARKS.md#http-pace; the flood of r7 below once left a
/// fifteenth).
/// The minute is a failure timeout for a camera that stopped.
/// Returns the last scrape.
fn keeps_pace(load: &str, from: &str, frames: f64, mut scrape: impl FnMut() -> String) -> String {
    let start = Pace::of(from, "front");
    let what = format!("{frames} frames due under {load}");
    let end = wait_until(&what, Duration::from_secs(60), || {
        let m = scrape();
        (Pace::of(&m, "front").due >= start.due + frames).then_some(m)
    });
    let now = Pace::of(&end, "front");
    let (published, due) = (now.published - start.published, now.due - start.due);
    eprintln!("{published} of {due} frames published under {load}");
    assert!(
        2.0 * published >= due,
        "{published} of {due} frames published under {load}"
    );
    end
}

/// wrk in the background, for as long as the test needs its load.
struct Wrk(Option<Child>);

impl Wrk {
    /// wrk with `args` on `url` until [`Wrk::finish`] (its own duration is only a bound).
    fn start(args: &[&str], url: &str) -> Wrk {
        let child = Command::new("wrk")
            .args(args)
            .args(["-d600s", url])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start wrk (scripts/install-deps.sh test installs it)");
        Wrk(Some(child))
    }

    /// Stops wrk as Ctrl-C does and returns its report, which it prints then.
    fn finish(mut self) -> String {
        let child = self.0.take().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        assert_eq!(rc, 0, "SIGINT to wrk");
        let out = child.wait_with_output().expect("wrk");
        let report = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "wrk: {}\n{report}", out.status);
        report
    }
}

impl Drop for Wrk {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A scrape of every series (the HTTP answers are the detail tier's) from 127.0.0.2
/// with `auth` (header lines), which must be answered 200. The scraper is another host
/// than the load's, as Prometheus is: one peer holds only its share of the connection
/// slots, and the load takes all of its own.
fn scrape_from_another_peer(port: u16, auth: &str) -> String {
    let s = connect_from("127.0.0.2", port).expect("connect");
    let path = "/metrics?collect[]=detail";
    let r = exchange(s, "GET", path, auth, Duration::from_secs(10)).expect("a scrape");
    let text = String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!(r.status, 200, "{}", &text[..text.len().min(200)]);
    text
}

/// `edgesight_http_requests_total` of `/metrics` answered with `code`.
fn answered(m: &str, code: u16) -> f64 {
    let series = format!(r#"edgesight_http_requests_total{{code="{code}",handler="metrics"}}"#);
    sample(m, &series).unwrap_or(0.0)
}

#[test]
fn wrk_on_metrics_neither_fails_nor_costs_frames() {
    let dir = tmp_dir("daemon-wrk");
    let d = Daemon::start(
        &dir,
        &camera("front", "320x240", &[("door", 0, 0, 64, 64)], 64),
    );
    let backlog = |m: &str| {
        sample(
            m,
            r#"edgesight_frames_dropped_total{camera="front",reason="publish_backlog"}"#,
        )
        .expect("publish_backlog")
    };
    // Clients that pipeline requests and never read their responses: their connections
    // block on a full socket, and nothing else may.
    let stuck: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
            s.set_write_timeout(Some(Duration::from_millis(200)))
                .expect("timeout");
            let burst = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2000);
            // The server stops reading once its replies back up: a short write is the aim.
            let _ = s.write_all(burst.as_bytes());
            s
        })
        .collect();
    let before = answered(&d.metrics(), 200);
    // Loopback only, 8 connections. A reply slower than the timeout counts as a socket
    // error: generous, so that only a stuck server fails, not a loaded machine.
    let wrk = Wrk::start(
        &["-t2", "-c8", "--timeout", "10s"],
        &format!("http://127.0.0.1:{}/metrics", d.port),
    );
    let scrape = || scrape_from_another_peer(d.port, "");
    let loaded = wait_until(
        "wrk's first hundred answers",
        Duration::from_secs(60),
        || {
            let m = scrape();
            (answered(&m, 200) >= before + 100.0).then_some(m)
        },
    );
    // Three seconds of the camera's clock under the load.
    let after = keeps_pace("wrk", &loaded, 90.0, scrape);
    let report = wrk.finish();
    assert!(!report.contains("Socket errors"), "{report}");
    assert!(!report.contains("Non-2xx"), "{report}");
    let requests: u64 = report
        .lines()
        .find_map(|l| {
            l.trim()
                .split_once(" requests in ")
                .map(|(n, _)| n.parse().ok())
        })
        .flatten()
        .expect("wrk's request count");
    assert!(requests >= 100, "only {requests} requests:\n{report}");
    assert_eq!(backlog(&after), 0.0, "frames dropped for the publisher");
    assert_eq!(get(d.port, "/healthz").status, 200);
    drop(stuck);
    let served = answered(&d.metrics(), 200);
    assert!(served >= requests as f64, "{served} < {requests}");
    d.stop();
}

/// Each thread of `pid` as (name, nice value), from /proc.
fn threads_nice(pid: u32) -> Vec<(String, i64)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc/PID/task");
    tasks
        .filter_map(|t| {
            let dir = t.ok()?.path();
            let name = std::fs::read_to_string(dir.join("comm")).ok()?;
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            // Fields after the ')' that ends the name start at field 3; nice is field 19.
            let nice = stat.rsplit_once(')')?.1.split_whitespace().nth(16)?;
            Some((name.trim().to_string(), nice.parse().ok()?))
        })
        .collect()
}

/// A flood of wrong passwords for a real user (the reporter's `wrk` with a bad
/// `Authorization` header, here 32 connections) must neither starve the camera of CPU
/// nor grow the threads, as bcrypt on every request did
/// (bench/notes/http-resilience.md#regression-tests has the figures).
/// Frames must keep their pace, the HTTP side must stay below the cameras' priority, and
/// an authorized scrape must get through.
#[test]
fn r7_a_bad_password_flood_neither_stops_frames_nor_locks_out_the_scraper() {
    let dir = tmp_dir("daemon-bcrypt-flood");
    // The cost people use (htpasswd -C 10), so that each check costs what it does live.
    let hash = bcrypt::hash("s3cret", 10).expect("bcrypt");
    let config = format!(
        "[web.basic_auth_users]\nprom = \"{hash}\"\n{}",
        camera("front", "320x240", &[], 64)
    );
    let d = Daemon::spawn(&dir, &config);
    let port = d.port;
    wait_until(
        "/healthz with the password",
        Duration::from_secs(60),
        || (get_as(port, "/healthz", "prom") == 200).then_some(()),
    );
    let token = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "prom:s3cret");
    let auth = format!("Authorization: Basic {token}\r\n");
    let scrape = || scrape_from_another_peer(port, &auth);
    let bad = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "prom:wrong");
    let wrk = Wrk::start(
        &[
            "-t1",
            "-c32",
            "--timeout",
            "5s",
            "-H",
            &format!("Authorization: Basic {bad}"),
        ],
        &format!("http://127.0.0.1:{port}/metrics"),
    );
    // The flood is on once the daemon has refused a hundred of its requests (401 after a
    // check, or 503 when its peer's bcrypt queue is full).
    let refused = |m: &str| answered(m, 401) + answered(m, 503);
    let flooded = wait_until(
        "the flood's first hundred refusals",
        Duration::from_secs(60),
        || {
            let m = scrape();
            (refused(&m) >= 100.0).then_some(m)
        },
    );
    // Ten seconds of the camera's clock under the flood.
    let after = keeps_pace("the flood", &flooded, 300.0, scrape);
    let threads = threads_nice(d.child.id());
    let report = wrk.finish();
    assert!(
        report.contains("Non-2xx"),
        "the flood was not refused:\n{report}"
    );
    assert!(refused(&after) > refused(&flooded), "{report}");
    // tokio's workers, its blocking pool and bcrypt: a bounded set, all below the cameras,
    // and the verifier of live frames below them all.
    assert!(threads.len() <= 16, "{threads:?}");
    for (name, nice) in &threads {
        let expect = match name.as_str() {
            n if n.starts_with("es-tokio") || n == "es-bcrypt" => 10,
            n if n.starts_with("es-cam-") || n.starts_with("es-pub-") => 0,
            "es-verify" => 19,
            _ => continue,
        };
        assert_eq!(*nice, expect, "{name}: {threads:?}");
    }
    for name in ["es-bcrypt", "es-verify"] {
        assert!(
            threads.iter().any(|(n, _)| n == name),
            "{name}: {threads:?}"
        );
    }
    // The flood's own address gets in: its newcomer retires one of the flood's busy
    // connections, whose answer goes out first.
    wait_until(
        "an authorized scrape from the flood's address",
        Duration::from_secs(20),
        || (get_as(port, "/metrics", "prom") == 200).then_some(()),
    );
    d.stop();
}

/// Whether the server closed `s` (EOF or reset) within `limit`.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut byte = [0u8; 1];
    match s.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// Whether `s` is still open and silent now.
fn still_open(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let open =
        matches!((&mut &*s).read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    s.set_nonblocking(false).unwrap();
    open
}

/// A GET of `/metrics` from the loopback address `from`.
fn scrape_from(from: &str, port: u16) -> std::io::Result<u16> {
    let s = connect_from(from, port)?;
    exchange(s, "GET", "/metrics", "", Duration::from_secs(20)).map(|r| r.status)
}

/// Idle connections from one peer must not lock other clients out until the head timeout
/// closes them (a slowloris that reopens them would hold the daemon for good). One peer
/// holds at most a quarter of the slots, and an idle connection's slot goes to a
/// newcomer: a scrape from another peer gets through while the idle connections are
/// still open, and those are closed after the head timeout.
#[test]
fn r8_idle_connections_from_one_peer_leave_room_for_a_scraper() {
    let dir = tmp_dir("daemon-slots");
    let d = Daemon::start(
        &dir,
        &format!(
            "[web]\nmax_connections = 8\n{}",
            camera("c", "64x48", &[], 64)
        ),
    );
    let mut idle: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(("127.0.0.1", d.port)).expect("connect"))
        .collect();
    // The scrape comes once the server has taken every idle connection in (none left in
    // the kernel's accept queue), so that they hold what they can of the slots.
    wait_until(
        "the server to accept the idle connections",
        Duration::from_secs(30),
        || (unaccepted(d.port) == Some(0)).then_some(()),
    );
    assert_eq!(scrape_from("127.0.0.2", d.port).expect("scrape"), 200);
    let open = idle.iter().filter(|s| still_open(s)).count();
    assert!(
        open >= 1,
        "the scrape got through only once the idle connections were closed"
    );
    for (i, s) in idle.iter_mut().enumerate() {
        assert!(
            closed_within(s, Duration::from_secs(30)),
            "idle connection {i} still open"
        );
    }
    // The one peer holds its share again and is served as before.
    assert_eq!(get(d.port, "/healthz").status, 200);
    d.stop();
}

/// Hostile clients on threads of their own, stopped (and joined) when dropped.
struct Attack {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Attack {
    /// Runs `client` on a thread for each of `from`, until the attack is dropped; each
    /// call gets its address and whether to stop.
    fn start(
        from: &[&'static str],
        client: impl Fn(&'static str, &std::sync::atomic::AtomicBool) + Send + Sync + 'static,
    ) -> Attack {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let client = std::sync::Arc::new(client);
        let threads = from
            .iter()
            .map(|addr| {
                let (stop, client, addr) = (stop.clone(), client.clone(), *addr);
                std::thread::spawn(move || client(addr, &stop))
            })
            .collect();
        Attack { stop, threads }
    }

    fn stopped(stop: &std::sync::atomic::AtomicBool) -> bool {
        stop.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Attack {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Whether the server closed `s` (EOF, reset), asked without waiting.
fn closed_now(s: &TcpStream) -> bool {
    let _ = s.set_nonblocking(true);
    let mut byte = [0u8; 1];
    let closed = !matches!((&mut &*s).read(&mut byte),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    let _ = s.set_nonblocking(false);
    closed
}

const SLOW_HEAD: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow\r\n";

/// A slowloris from one address: `count` connections, each sending a request head a
/// byte at a time every `every` (or `first` only, when `None`); it checks its
/// connections every `check` and opens anew those the server closed.
fn slow_heads(
    port: u16,
    count: usize,
    first: &'static [u8],
    every: Option<Duration>,
    check: Duration,
) -> impl Fn(&'static str, &std::sync::atomic::AtomicBool) + Send + Sync {
    move |from, stop| {
        let connect = || {
            let mut s = connect_from(from, port).ok()?;
            let _ = s.write_all(first);
            Some((s, first.len()))
        };
        let mut conns: Vec<(TcpStream, usize)> = (0..count).filter_map(|_| connect()).collect();
        let mut last_byte = std::time::Instant::now();
        while !Attack::stopped(stop) {
            std::thread::sleep(check);
            let byte_due = every.is_some_and(|e| last_byte.elapsed() >= e);
            if byte_due {
                last_byte = std::time::Instant::now();
            }
            for conn in conns.iter_mut() {
                if closed_now(&conn.0) {
                    if let Some(c) = connect() {
                        *conn = c;
                    }
                } else if byte_due {
                    let (s, sent) = conn;
                    // The head never ends: it starts over before its blank line.
                    let _ = s.write_all(&SLOW_HEAD[*sent % SLOW_HEAD.len()..][..1]);
                    *sent += 1;
                }
            }
        }
    }
}

/// Whether a scrape from `from` was answered 200 whole within `limit`; its request is
/// sent `delay` after the connection is made.
fn scraped_whole(from: &str, port: u16, limit: Duration, delay: Duration) -> bool {
    let start = std::time::Instant::now();
    let Ok(s) = connect_from(from, port) else {
        return false;
    };
    std::thread::sleep(delay);
    let Ok(r) = exchange(s, "GET", "/metrics", "", limit) else {
        return false;
    };
    let length = r
        .headers
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    r.status == 200
        && length.is_none_or(|n| n == r.body.len())
        && r.body.ends_with(b"\n")
        && start.elapsed() <= limit
}

/// Of `n` scrapes from `from`, each given `limit`, how many were answered whole.
fn scrapes_answered(from: &str, port: u16, n: usize, limit: Duration) -> usize {
    scrapes_answered_after(from, port, n, limit, Duration::ZERO)
}

/// [`scrapes_answered`], each request sent `delay` after its connection is made.
fn scrapes_answered_after(
    from: &str,
    port: u16,
    n: usize,
    limit: Duration,
    delay: Duration,
) -> usize {
    let answered = (0..n)
        .filter(|_| scraped_whole(from, port, limit, delay))
        .count();
    eprintln!("{answered} of {n} scrapes from {from} answered whole");
    answered
}

/// The slot count of the issue's figures: a quarter, 16, per peer.
const SLOTS: &str = "[web]\nmax_connections = 64\n";

/// Resilience round 3, regression of round 1: 64 connections from the scraper's own
/// address trickling request heads (a byte every half second) held its share of the
/// slots, each "receiving its request": 0 of 10 scrapes from that address answered
/// within 3 s. Behind NAT or a proxy every client shares one address. Heads incomplete
/// past the grace give their slots up.
#[test]
fn round3_a_slowloris_from_the_scrapers_own_address_leaves_it_room() {
    let dir = tmp_dir("daemon-slowloris-own");
    let d = Daemon::start(&dir, &format!("{SLOTS}{}", camera("c", "64x48", &[], 64)));
    let attack = Attack::start(
        &["127.0.0.1"],
        slow_heads(
            d.port,
            64,
            &SLOW_HEAD[..1],
            Some(Duration::from_millis(500)),
            Duration::from_millis(50),
        ),
    );
    // Heads past the grace, as a slowloris keeps them.
    std::thread::sleep(Duration::from_secs(2));
    let answered = scrapes_answered("127.0.0.1", d.port, 10, Duration::from_secs(3));
    drop(attack);
    assert_eq!(answered, 10);
    d.stop();
}

/// Resilience round 3, item 1: 4 addresses x 16 connections that each send one byte of a
/// request head and nothing more held all 64 slots (scrapes from a fifth: 0 of 30); the
/// attacker opens anew what the server closes, at about 25 connections a second.
#[test]
fn round3_1_one_byte_heads_from_four_peers_leave_room_for_a_fifth() {
    let dir = tmp_dir("daemon-one-byte-heads");
    let d = Daemon::start(&dir, &format!("{SLOTS}{}", camera("c", "64x48", &[], 64)));
    let attack = Attack::start(
        &["127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14"],
        slow_heads(
            d.port,
            16,
            &SLOW_HEAD[..1],
            None,
            Duration::from_millis(160),
        ),
    );
    std::thread::sleep(Duration::from_secs(2));
    let answered = scrapes_answered("127.0.0.15", d.port, 30, Duration::from_secs(3));
    drop(attack);
    assert_eq!(answered, 30);
    d.stop();
}

/// A client that takes any server certificate: the attacker's (webpki refuses the
/// tests' self-signed certificate, a CA, as a server's).
#[derive(Debug)]
struct AnyServer;

impl tokio_rustls::rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        _: &[tokio_rustls::rustls::pki_types::CertificateDer<'_>],
        _: &tokio_rustls::rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: tokio_rustls::rustls::pki_types::UnixTime,
    ) -> Result<tokio_rustls::rustls::client::danger::ServerCertVerified, tokio_rustls::rustls::Error>
    {
        Ok(tokio_rustls::rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        _: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<
        tokio_rustls::rustls::client::danger::HandshakeSignatureValid,
        tokio_rustls::rustls::Error,
    > {
        Ok(tokio_rustls::rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        _: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<
        tokio_rustls::rustls::client::danger::HandshakeSignatureValid,
        tokio_rustls::rustls::Error,
    > {
        Ok(tokio_rustls::rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<tokio_rustls::rustls::SignatureScheme> {
        tokio_rustls::rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Like [`slow_heads`] with one byte of a head and nothing more, over TLS: `count`
/// connections from one address, each through its handshake, then one byte of a
/// request; checked every `check`, those the server closed opened anew.
fn tls_one_byte_heads(
    port: u16,
    count: usize,
    check: Duration,
) -> impl Fn(&'static str, &std::sync::atomic::AtomicBool) + Send + Sync {
    use std::future::poll_fn;
    use std::pin::Pin;
    use tokio::io::{AsyncRead, AsyncWrite};
    use tokio_rustls::rustls::pki_types::ServerName;
    move |from, stop| {
        let config = tokio_rustls::rustls::ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(std::sync::Arc::new(AnyServer))
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let bind = format!("{from}:0").parse().expect("address");
        let to = format!("127.0.0.1:{port}").parse().expect("address");
        let connect = || async {
            let socket = tokio::net::TcpSocket::new_v4().ok()?;
            socket.bind(bind).ok()?;
            let tcp = socket.connect(to).await.ok()?;
            let name = ServerName::try_from("127.0.0.1").expect("a name");
            let handshake = connector.connect(name, tcp);
            let mut tls = tokio::time::timeout(Duration::from_secs(2), handshake)
                .await
                .ok()?
                .ok()?;
            poll_fn(|cx| Pin::new(&mut tls).poll_write(cx, b"G"))
                .await
                .ok()?;
            poll_fn(|cx| Pin::new(&mut tls).poll_flush(cx)).await.ok()?;
            Some(tls)
        };
        runtime.block_on(async {
            let mut conns = Vec::new();
            for _ in 0..count {
                conns.push(connect().await);
            }
            let through = conns.iter().filter(|c| c.is_some()).count();
            assert!(through > 0, "no TLS handshake from {from}");
            while !Attack::stopped(stop) {
                tokio::time::sleep(check).await;
                for c in conns.iter_mut() {
                    // Anything read (an answer, the end) or failing: the server is done
                    // with it. Nothing within a millisecond: still held.
                    let closed = match c.as_mut() {
                        None => true,
                        Some(s) => {
                            let mut byte = [0u8; 1];
                            let mut buf = tokio::io::ReadBuf::new(&mut byte);
                            let read = poll_fn(|cx| Pin::new(&mut *s).poll_read(cx, &mut buf));
                            tokio::time::timeout(Duration::from_millis(1), read)
                                .await
                                .is_ok()
                        }
                    };
                    if closed {
                        *c = connect().await;
                    }
                }
            }
        });
    }
}

/// Item 1 behind TLS and basic auth (1 of 20 scrapes answered before): 4 addresses x 16
/// connections, each through its handshake and then one byte of a request head.
#[test]
fn round3_1_one_byte_heads_over_tls_leave_room_for_a_fifth_peer() {
    let dir = tmp_dir("daemon-one-byte-tls");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    crate::web::self_signed(&cert, &key, "127.0.0.1");
    let hash = bcrypt::hash("s3cret", 10).expect("bcrypt");
    let config = format!(
        "{}max_connections = 64
[web.basic_auth_users]
prom = \"{hash}\"\n{}",
        crate::web::tls(&cert, &key),
        camera("c", "64x48", &[], 64)
    );
    let d = Daemon::spawn(&dir, &config);
    let curl = |from: &str| {
        let out = run_tool(
            Command::new("curl")
                .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
                .args(["--max-time", "3", "--interface", from, "-u", "prom:s3cret"])
                .arg("--cacert")
                .arg(&cert)
                .arg(format!("https://127.0.0.1:{}/metrics", d.port)),
            None,
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    wait_until("an HTTPS scrape", Duration::from_secs(60), || {
        (curl("127.0.0.1") == "200").then_some(())
    });
    let attack = Attack::start(
        &["127.0.0.41", "127.0.0.42", "127.0.0.43", "127.0.0.44"],
        tls_one_byte_heads(d.port, 16, Duration::from_millis(160)),
    );
    std::thread::sleep(Duration::from_secs(2));
    let answered = (0..20).filter(|_| curl("127.0.0.45") == "200").count();
    eprintln!("{answered} of 20 scrapes over TLS from 127.0.0.45 answered");
    drop(attack);
    assert_eq!(answered, 20);
    d.stop();
}

/// Resilience round 3, regression of round 2: 4 addresses x 16 kept-alive connections
/// asking a snapshot of a camera that is down (answered 503 at once) held every slot with
/// an answer in flight: 0 of 38 scrapes from a fifth address answered. The busiest
/// peer's oldest connection finishes its answer and gives its slot up.
#[test]
fn round3_b_a_snapshot_flood_of_a_down_camera_leaves_room_for_a_fifth_peer() {
    let dir = tmp_dir("daemon-snapshot-flood");
    let config = format!(
        "{SLOTS}snapshots = true\n{}[[camera]]\nname = \"down\"\n[camera.source]\n\
         kind = \"v4l2\"\ndevice = \"/dev/video-edgesight-none\"\n",
        camera("c", "64x48", &[], 64)
    );
    // A camera down answers 503 on /healthz: served is enough.
    let d = Daemon::spawn(&dir, &config);
    wait_until("the daemon to serve", Duration::from_secs(60), || {
        request(d.port, "GET", "/metrics")
            .ok()
            .filter(|r| r.status == 200)
    });
    let path = "/snapshot/luma.png?camera=down";
    assert_eq!(get(d.port, path).status, 503);
    let port = d.port;
    let answers = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = answers.clone();
    let attack = Attack::start(
        &["127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24"],
        move |from, stop| {
            // 16 kept-alive connections, asked in turn, each opened anew once closed.
            let mut conns: Vec<Option<TcpStream>> = (0..16).map(|_| None).collect();
            while !Attack::stopped(stop) {
                for c in conns.iter_mut() {
                    if c.is_none() {
                        *c = connect_from(from, port).ok();
                    }
                    let Some(s) = c.as_mut() else { continue };
                    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                    match keep_alive_get(s, path) {
                        Ok(503) => {
                            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Ok(other) => panic!("the flood got {other}"),
                        Err(_) => *c = None,
                    }
                }
            }
        },
    );
    wait_until(
        "the flood's first thousand 503s",
        Duration::from_secs(30),
        || (answers.load(std::sync::atomic::Ordering::Relaxed) >= 1000).then_some(()),
    );
    let answered = scrapes_answered("127.0.0.25", d.port, 30, Duration::from_secs(3));
    drop(attack);
    assert_eq!(answered, 30);
    d.stop();
}

/// Resilience round 3, regression of round 2: thousands of empty connections a second
/// from 4 addresses cut some scrapes from a fifth (39 of 40 answered whole): a scrape
/// whose request had not arrived, or not been read, looked idle, and the churn took its
/// slot. Here each scrape's request follows its connection by 150 ms, as an encrypted
/// request follows the TLS handshake over a link of 100 ms round trip (the handshake
/// leaves the connection idle in the slot table). At least 99 % of the scrapes must be
/// answered whole.
#[test]
fn round3_c_connection_churn_leaves_scrapes_whole() {
    let dir = tmp_dir("daemon-churn");
    // 16 slots, 4 per peer: the shape of 64, turned over four times as fast by a churn
    // that a loaded 2-core machine accepts at a few hundred connections a second.
    let slots = 16;
    let config = format!(
        "[web]\nmax_connections = {slots}\n{}",
        camera("c", "64x48", &[], 64)
    );
    let d = Daemon::start(&dir, &config);
    let port = d.port;
    let made = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = made.clone();
    let attack = Attack::start(
        &["127.0.0.31", "127.0.0.32", "127.0.0.33", "127.0.0.34"],
        move |from, stop| {
            // Each address keeps more than its share open, the oldest closed as it opens
            // another: the slots stay full of empty connections.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            let bind = format!("{from}:0").parse().expect("address");
            let to = format!("127.0.0.1:{port}").parse().expect("address");
            runtime.block_on(async {
                let mut ring = std::collections::VecDeque::new();
                while !Attack::stopped(stop) {
                    let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
                        continue;
                    };
                    if socket.bind(bind).is_ok() {
                        if let Ok(s) = socket.connect(to).await {
                            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            ring.push_back(s);
                        }
                    }
                    if ring.len() > 100 {
                        ring.pop_front();
                    }
                }
            });
        },
    );
    let start = std::time::Instant::now();
    let n = 100;
    let delay = Duration::from_millis(150);
    let answered = scrapes_answered_after("127.0.0.35", d.port, n, Duration::from_secs(5), delay);
    let rate =
        made.load(std::sync::atomic::Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    drop(attack);
    eprintln!("churn: {rate:.0} connections a second");
    // Each scrape's wait is long enough for the churn to replace every slot (the
    // daemon's threads run below other work: a loaded machine accepts fewer).
    assert!(
        rate * delay.as_secs_f64() >= slots as f64,
        "only {rate:.0} connections a second"
    );
    assert!(
        100 * answered >= 99 * n,
        "{answered} of {n} scrapes answered whole"
    );
    d.stop();
}
