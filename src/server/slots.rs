//! Connection slots, so that a scraper always gets through: at most `max` connections at
//! once, at most a quarter of them from one peer, and a newcomer that finds no slot takes
//! the one of the oldest idle connection. Idle is between requests: no byte of a request
//! received yet (or a TLS handshake under way), and no answer being sent, or one whose
//! client has read nothing of it for [`STALLED_WRITE`]. A connection receiving its
//! request, being answered or sending its answer keeps its slot, so a flood of new
//! connections never cuts a scrape; a slowloris only ever holds connections that the next
//! real client takes away, and one peer cannot hold more than its share even with
//! requests in flight.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// An answer whose client has read nothing of it for this long no longer keeps the
/// connection's slot.
pub(crate) const STALLED_WRITE: Duration = Duration::from_secs(2);

/// The share of all slots one peer may hold: `max / PEER_SHARE`, at least one.
const PEER_SHARE: usize = 4;

pub(crate) struct Slots {
    max: usize,
    per_peer: usize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    /// By id, which is by age: the first idle entry is the oldest.
    open: BTreeMap<u64, Open>,
}

struct Open {
    peer: IpAddr,
    state: Arc<Connection>,
}

/// What the slot table knows of a connection, shared with its task.
#[derive(Default)]
pub(crate) struct Connection {
    /// Requests being answered now.
    requests: AtomicUsize,
    /// Bytes of a request came in, and the request has not reached the handler yet.
    receiving: AtomicBool,
    /// When the connection last sent bytes or finished an answer ([`millis`]); 0: never.
    last_write: AtomicU64,
    /// The last write found the socket full (the client is not reading).
    write_blocked: AtomicBool,
    /// Notified when the slot was given to a newcomer: the connection is to close.
    evicted: Notify,
}

/// Milliseconds since the first call, from an hour on (so that a time before it is a
/// positive number too): a clock the atomics can hold.
fn millis() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 3_600_000
}

impl Connection {
    /// Marks a request in progress until the guard drops.
    pub fn request(self: &Arc<Self>) -> RequestGuard {
        self.requests.fetch_add(1, Ordering::AcqRel);
        self.receiving.store(false, Ordering::Release);
        RequestGuard(Arc::clone(self))
    }

    /// Whether the slot may go to a newcomer: between requests, nothing being sent.
    fn is_idle(&self) -> bool {
        self.is_idle_at(millis())
    }

    /// [`Connection::is_idle`] at `now` ([`millis`]).
    fn is_idle_at(&self, now: u64) -> bool {
        let last_write = self.last_write.load(Ordering::Acquire);
        let quiet =
            last_write == 0 || now.saturating_sub(last_write) >= STALLED_WRITE.as_millis() as u64;
        // A client that has read nothing for a while gives its slot up whatever it sent
        // (requests pipelined behind an answer it does not read).
        let stalled = quiet && self.write_blocked.load(Ordering::Acquire);
        stalled
            || (quiet
                && self.requests.load(Ordering::Acquire) == 0
                && !self.receiving.load(Ordering::Acquire))
    }

    /// Notes what a write to the socket came to: progress, or a full socket.
    fn write_polled(&self, polled: &Poll<std::io::Result<usize>>) {
        match polled {
            Poll::Ready(Ok(n)) if *n > 0 => self.wrote(),
            Poll::Pending => self.write_blocked.store(true, Ordering::Release),
            _ => {}
        }
    }

    fn wrote(&self) {
        self.last_write.store(millis(), Ordering::Release);
        self.write_blocked.store(false, Ordering::Release);
    }

    pub(crate) async fn evicted(&self) {
        self.evicted.notified().await
    }
}

pub(crate) struct RequestGuard(Arc<Connection>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        // The answer is written next: sending counts from now. A socket found full stays
        // so: only bytes going out clear that (a client pipelining requests behind answers
        // it never reads gets them answered into the server's buffer, not to the socket).
        self.0.last_write.store(millis(), Ordering::Release);
        self.0.requests.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's stream, telling its [`Connection`] when request bytes come in and
/// answer bytes go out (put inside TLS: a handshake under way stays idle).
pub(crate) struct Tracked<S> {
    inner: S,
    connection: Arc<Connection>,
}

impl<S> Tracked<S> {
    pub(crate) fn new(inner: S, connection: Arc<Connection>) -> Tracked<S> {
        Tracked { inner, connection }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.connection.receiving.store(true, Ordering::Release);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        self.connection.write_polled(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.connection.write_polled(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A held slot; dropping it frees the slot.
pub(crate) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    pub connection: Arc<Connection>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut table) = self.slots.table.lock() {
            table.open.remove(&self.id);
        }
    }
}

impl Slots {
    pub fn new(max: usize) -> Arc<Slots> {
        let max = max.max(1);
        Arc::new(Slots {
            max,
            per_peer: (max / PEER_SHARE).max(1),
            table: Mutex::new(Table::default()),
        })
    }

    /// A slot for a connection from `peer`, taking an idle connection's where needed;
    /// `None` when every slot it could take is busy with a request.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Slot> {
        let peer = peer_key(peer);
        let mut table = self.table.lock().ok()?;
        let from_peer = table.open.values().filter(|o| o.peer == peer).count();
        if from_peer >= self.per_peer && !table.evict_oldest_idle(|o| o.peer == peer) {
            return None;
        }
        if table.open.len() >= self.max && !table.evict_oldest_idle(|_| true) {
            return None;
        }
        let id = table.next_id;
        table.next_id += 1;
        let connection = Arc::new(Connection::default());
        table.open.insert(
            id,
            Open {
                peer,
                state: Arc::clone(&connection),
            },
        );
        Some(Slot {
            slots: Arc::clone(self),
            id,
            connection,
        })
    }

    /// Connections open now, from `peer` (tests).
    #[cfg(test)]
    fn open_from(&self, peer: IpAddr) -> usize {
        let table = self.table.lock().unwrap();
        table
            .open
            .values()
            .filter(|o| o.peer == peer_key(peer))
            .count()
    }
}

impl Table {
    fn evict_oldest_idle(&mut self, matches: impl Fn(&Open) -> bool) -> bool {
        let oldest = self
            .open
            .iter()
            .find(|(_, o)| matches(o) && o.state.is_idle())
            .map(|(id, _)| *id);
        match oldest.and_then(|id| self.open.remove(&id)) {
            Some(evicted) => {
                evicted.state.evicted.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Peers as the limits count them: an IPv4 address (also when mapped into IPv6), or an
/// IPv6 /64, the block one host usually gets.
pub(super) fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Whether the connection was told to close (without waiting).
    async fn told_to_close(slot: &Slot) -> bool {
        let wait = slot.connection.evicted();
        tokio::time::timeout(std::time::Duration::ZERO, wait)
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn one_peer_keeps_only_its_share_and_its_newest() {
        let slots = Slots::new(8);
        let a = ip("127.0.0.1");
        let held: Vec<Slot> = (0..8).map(|_| slots.admit(a).unwrap()).collect();
        assert_eq!(slots.open_from(a), 2);
        // The newest two stayed; the older ones were told to close.
        assert_eq!(
            slots.table.lock().unwrap().open.keys().collect::<Vec<_>>(),
            [&6, &7]
        );
        assert!(told_to_close(&held[0]).await);
        assert!(told_to_close(&held[5]).await);
        assert!(!told_to_close(&held[6]).await);
        // Another peer finds free slots.
        let b = slots.admit(ip("127.0.0.2"));
        assert!(b.is_some());
        drop(held);
        assert_eq!(slots.open_from(a), 0);
    }

    #[test]
    fn a_peer_busy_with_requests_is_refused_beyond_its_share() {
        let slots = Slots::new(8);
        let a = ip("10.0.0.1");
        let held: Vec<Slot> = (0..2).map(|_| slots.admit(a).unwrap()).collect();
        let _busy: Vec<RequestGuard> = held.iter().map(|s| s.connection.request()).collect();
        assert!(slots.admit(a).is_none());
        assert!(slots.admit(ip("10.0.0.2")).is_some());
    }

    #[test]
    fn a_full_table_gives_the_oldest_idle_slot_to_a_newcomer() {
        let slots = Slots::new(4);
        let peers = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"].map(ip);
        let held: Vec<Slot> = peers.iter().map(|p| slots.admit(*p).unwrap()).collect();
        let _busy = held[0].connection.request();
        let newcomer = slots.admit(ip("10.0.0.5")).expect("a slot");
        // 10.0.0.1 is busy: the next oldest, 10.0.0.2, gave its slot up.
        assert_eq!(slots.open_from(peers[0]), 1);
        assert_eq!(slots.open_from(peers[1]), 0);
        drop(newcomer);
        // All busy: refused.
        let _all: Vec<RequestGuard> = held[2..].iter().map(|s| s.connection.request()).collect();
        let refill = slots.admit(ip("10.0.0.6")).unwrap();
        let _r = refill.connection.request();
        assert!(slots.admit(ip("10.0.0.7")).is_none());
    }

    /// Resilience round 2, item 6: a flood of new empty connections took the slots of
    /// connections receiving their request or sending their answer (5-22 % of scrapes
    /// closed unanswered, 4 MB scrapes cut mid-body). Those keep their slots; an answer
    /// its client stopped reading does not.
    #[tokio::test]
    async fn round2_6_connections_receiving_or_sending_keep_their_slots() {
        let conn = Arc::new(Connection::default());
        assert!(conn.is_idle(), "new and silent");
        // Request bytes come in: receiving.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let mut tracked = Tracked::new(server, Arc::clone(&conn));
        client.writable().await.unwrap();
        assert_eq!(client.try_write(b"GET /met").unwrap(), 8);
        let mut buf = [0u8; 8];
        let mut read = ReadBuf::new(&mut buf);
        std::future::poll_fn(|cx| Pin::new(&mut tracked).poll_read(cx, &mut read))
            .await
            .unwrap();
        assert!(!read.filled().is_empty());
        assert!(!conn.is_idle(), "receiving a request");
        // The request reaches the handler, which answers.
        let guard = conn.request();
        assert!(!conn.is_idle(), "being answered");
        drop(guard);
        assert!(!conn.is_idle(), "about to send its answer");
        // Bytes go out: sending, until the client has read nothing for STALLED_WRITE.
        let status = b"HTTP/1.1 200 OK\r\n";
        let sent = std::future::poll_fn(|cx| Pin::new(&mut tracked).poll_write(cx, status))
            .await
            .unwrap();
        assert!(sent > 0);
        let wrote = conn.last_write.load(Ordering::Acquire);
        let stall = STALLED_WRITE.as_millis() as u64;
        assert!(!conn.is_idle_at(wrote + stall - 1), "sending");
        assert!(conn.is_idle_at(wrote + stall), "its client stopped reading");

        // In the table: a newcomer takes the stalled one's slot, never the others'.
        let slots = Slots::new(2);
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        let first = slots.admit(a).unwrap();
        let second = slots.admit(b).unwrap();
        first.connection.receiving.store(true, Ordering::Release);
        second.connection.wrote();
        assert!(slots.admit(ip("10.0.0.3")).is_none(), "both busy");
        second
            .connection
            .last_write
            .store(millis() - stall, Ordering::Release);
        let _third = slots.admit(ip("10.0.0.3")).expect("the stalled slot");
        assert!(told_to_close(&second).await);
        assert!(!told_to_close(&first).await);

        // A client that pipelines requests behind an answer it does not read: receiving
        // and with a request in flight, but its writes blocked for STALLED_WRITE.
        let stuck = Connection::default();
        stuck.receiving.store(true, Ordering::Release);
        let _in_flight = stuck.requests.fetch_add(1, Ordering::AcqRel);
        stuck.wrote();
        stuck.write_polled(&Poll::Pending);
        let wrote = stuck.last_write.load(Ordering::Acquire);
        assert!(
            !stuck.is_idle_at(wrote + stall - 1),
            "blocked only a moment"
        );
        assert!(
            stuck.is_idle_at(wrote + stall),
            "its client stopped reading"
        );
    }

    #[test]
    fn ipv6_peers_count_by_their_64() {
        assert_eq!(peer_key(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1:2::"));
        assert_eq!(peer_key(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
    }
}
