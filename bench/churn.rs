//! Connection churn against a running daemon, with scrapes meanwhile (a measurement, not a
//! test): threads open empty connections from four loopback addresses (127.0.0.2-5) as
//! fast as they can, each keeping its last HOLD open (so the daemon's connection table
//! stays full and every newcomer takes someone's slot) and resetting the oldest, while one
//! client scrapes `/metrics` from 127.0.0.1, one request after the other, and checks each
//! answer is whole (200 and every byte of its Content-Length).
//!
//!   cargo build --release --example churn
//!   target/release/examples/churn PORT [SECONDS=20] [THREADS_PER_ADDRESS=2] [HOLD=16]
//!
//! `python3 bench/http_load.py churn` starts a daemon and runs this against it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A connection from `from` to `to`, set to close with a reset (SO_LINGER 0).
fn connect_reset(from: [u8; 4], to: SocketAddr) -> std::io::Result<Fd> {
    // SAFETY: plain socket calls on a descriptor this function owns and closes.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
        let sockaddr = |ip: [u8; 4], port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(ip),
            },
            sin_zero: [0; 8],
        };
        let local = sockaddr(from, 0);
        let SocketAddr::V4(to) = to else {
            return Err(std::io::Error::other("IPv4 only"));
        };
        let remote = sockaddr(to.ip().octets(), to.port());
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let rc = if libc::bind(fd, (&raw const local).cast(), len) == 0 {
            libc::connect(fd, (&raw const remote).cast(), len)
        } else {
            -1
        };
        let err = std::io::Error::last_os_error();
        let fd = Fd(fd);
        if rc == 0 {
            Ok(fd)
        } else {
            Err(err)
        }
    }
}

/// An open socket, closed when dropped.
struct Fd(i32);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor is this value's own, closed once.
        unsafe { libc::close(self.0) };
    }
}

/// One scrape: whether the answer came whole, and how long it took.
fn scrape(to: SocketAddr) -> (bool, Duration) {
    let start = Instant::now();
    let whole = (|| -> std::io::Result<bool> {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
            return Ok(false);
        };
        let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok());
        Ok(head.starts_with("http/1.1 200") && length == Some(raw.len() - split - 4))
    })()
    .unwrap_or(false);
    (whole, start.elapsed())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args
        .get(1)
        .and_then(|p| p.parse().ok())
        .expect("usage: churn PORT [SECONDS] [THREADS_PER_ADDRESS]");
    let seconds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let per_address: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(2);
    let hold: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(16);
    let to: SocketAddr = ([127, 0, 0, 1], port).into();

    let stop = Arc::new(AtomicBool::new(false));
    let made = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for last in 2..=5u8 {
        for _ in 0..per_address {
            let (stop, made, failed) = (stop.clone(), made.clone(), failed.clone());
            threads.push(std::thread::spawn(move || {
                let mut open = std::collections::VecDeque::new();
                while !stop.load(Ordering::Relaxed) {
                    match connect_reset([127, 0, 0, last], to) {
                        Ok(fd) => {
                            made.fetch_add(1, Ordering::Relaxed);
                            open.push_back(fd);
                            if open.len() > hold {
                                open.pop_front();
                            }
                        }
                        Err(_) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        }
    }

    std::thread::sleep(Duration::from_secs(1));
    let (start, made_before) = (Instant::now(), made.load(Ordering::Relaxed));
    let mut times = Vec::new();
    let mut whole = 0;
    while start.elapsed() < Duration::from_secs(seconds) {
        let (ok, took) = scrape(to);
        whole += usize::from(ok);
        times.push(took);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let rate = (made.load(Ordering::Relaxed) - made_before) as f64 / elapsed;
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "churn: {rate:.0} new empty connections a second from 4 addresses ({} threads, each \
         holding its last {hold}, {} refused or failed); scrapes answered whole {whole}/{} ({:.2} %), latency median \
         {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        4 * per_address,
        failed.load(Ordering::Relaxed),
        times.len(),
        100.0 * whole as f64 / times.len() as f64,
        at(0.5),
        at(0.99),
        at(1.0)
    );
}
