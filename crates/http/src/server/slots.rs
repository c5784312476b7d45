//! Connection slots, so that a scraper always gets through: at most `max` connections at
//! once, at most a quarter of them from one peer. A newcomer whose peer holds its share,
//! or that finds the table full, takes a slot in this order:
//!
//! 1. an idle connection: no byte of a request received (none waiting in the socket
//!    either, or a TLS handshake under way), and no answer being sent, or one whose client
//!    has read nothing of it for [`STALLED_WRITE`]; of the peer holding the most slots
//!    first, then oldest first, and, from another peer, only of one holding at least as
//!    many as the newcomer's would. It is closed at once.
//! 2. a connection whose request head began arriving more than [`HEAD_GRACE`] ago and is
//!    still incomplete, oldest head first, closed at once. A real client writes its head
//!    in one go and it arrives within a round trip; one still incomplete after the grace
//!    is a slowloris (or a client that went away), not work worth protecting.
//! 3. a connection of one peer: the newcomer's own when that peer holds its share; else
//!    the peer holding the most slots, provided it holds more than the newcomer's would;
//!    else the newcomer's own. Of that peer, the oldest busy connection (being answered,
//!    sending its answer, or just done with one and kept alive) is *retired*: the answer
//!    in flight completes whole, then the connection closes, or after
//!    [`RETIRE_DEADLINE`] anyway; its slot is the newcomer's at once. At most a quarter
//!    of `max` are retiring at a time: past that the oldest retiring one is closed at
//!    once, so that a flood of newcomers can neither turn every connection into one that
//!    still holds a socket nor stop retiring. Where that peer has none busy, its oldest
//!    head that began arriving within the grace is closed at once: a slowloris that opens
//!    anew every connection closed keeps its connections young, and its own address's
//!    scraper (behind NAT or a proxy every client shares one), or a fifth peer arriving a
//!    moment after it began, must still get in.
//!
//! Otherwise the newcomer is closed. Idle connections of the biggest peer go first, and a
//! smaller peer's are left alone, so that a churn of empty connections from a few peers
//! takes their own, not a fifth peer's whose request has not arrived yet (a TLS handshake
//! leaves a connection idle for a round trip or two). A head that began arriving within the
//! grace is taken only from the newcomer's own peer or one holding more slots than the
//! newcomer's would, so a flood of new connections from other peers never cuts a scrape
//! being received, nor one being sent (a retired answer goes out whole, barring a quarter
//! of the slots retired after it before it is out); a slowloris holds only connections that
//! the next client takes away, and four peers each at their share leave room for a fifth.
//! Whether a connection accepted but not yet read from has its request waiting is asked of
//! the socket: on a loaded machine its task may not have run yet.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// An answer whose client has read nothing of it for this long no longer keeps the
/// connection's slot.
pub(crate) const STALLED_WRITE: Duration = Duration::from_secs(2);

/// How long a request head may take to arrive whole before its slot may go to a
/// newcomer. A client writes its head at once and it arrives within a round trip; the
/// second leaves room for a loaded machine that reads it late, and keeps a slowloris a
/// second at most from a scraper's slot.
pub(crate) const HEAD_GRACE: Duration = Duration::from_secs(1);

/// A retired connection (rule 3) is closed after this long even if its answer is still
/// going out: a few megabytes of scrape reach any client that reads within it.
pub(crate) const RETIRE_DEADLINE: Duration = Duration::from_secs(5);

/// The share of all slots one peer may hold: `max / PEER_SHARE`, at least one. As many
/// connections may be retiring at a time.
const PEER_SHARE: usize = 4;

/// Connections that may be retiring at a time beside `max` slots: each still holds its
/// socket, so the open-file limit must have room for them too.
pub(crate) fn retiring_max(max: usize) -> usize {
    (max / PEER_SHARE).max(1)
}

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
    /// Connections retired for a newcomer, finishing their answer, by id: their slot is
    /// given away, their socket not yet.
    retiring: BTreeMap<u64, Arc<Connection>>,
    /// How many may be retiring at a time.
    retiring_max: usize,
}

struct Open {
    peer: IpAddr,
    state: Arc<Connection>,
}

/// What the slot table knows of a connection, shared with its task.
pub(crate) struct Connection {
    /// Requests being answered now.
    requests: AtomicUsize,
    /// When the first bytes of a request head came in ([`millis`]), until the request
    /// reaches the handler; 0: none.
    head_since: AtomicU64,
    /// When the connection last sent bytes or finished an answer ([`millis`]); 0: never.
    last_write: AtomicU64,
    /// The last write found the socket full (the client is not reading).
    write_blocked: AtomicBool,
    /// When the connection was accepted ([`millis`]).
    accepted: u64,
    /// The socket, while it is open, to ask whether a request waits in it unread; -1:
    /// not known or closed.
    fd: AtomicI32,
    /// Notified when the slot was given to a newcomer: the connection is to close now.
    evicted: Notify,
    /// Notified when the slot was given to a newcomer: the connection is to finish its
    /// answer and close.
    retired: Notify,
}

impl Default for Connection {
    fn default() -> Connection {
        Connection::accepted_at(millis())
    }
}

/// Milliseconds since the first call, from an hour on (so that a time before it is a
/// positive number too): a clock the atomics can hold.
fn millis() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 3_600_000
}

/// What a newcomer may do with a connection's slot, in the order it may (module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Standing {
    Idle,
    StaleHead,
    Busy,
    /// A head that began arriving within [`HEAD_GRACE`]: kept.
    Receiving,
}

impl Connection {
    fn accepted_at(now: u64) -> Connection {
        Connection {
            requests: AtomicUsize::new(0),
            head_since: AtomicU64::new(0),
            last_write: AtomicU64::new(0),
            write_blocked: AtomicBool::new(false),
            accepted: now,
            fd: AtomicI32::new(-1),
            evicted: Notify::new(),
            retired: Notify::new(),
        }
    }

    /// Marks a request in progress until the guard drops.
    pub fn request(self: &Arc<Self>) -> RequestGuard {
        self.requests.fetch_add(1, Ordering::AcqRel);
        self.head_since.store(0, Ordering::Release);
        RequestGuard(Arc::clone(self))
    }

    /// Where the connection stands at `now` ([`millis`]).
    fn standing_at(&self, now: u64) -> Standing {
        let last_write = self.last_write.load(Ordering::Acquire);
        let quiet =
            last_write == 0 || now.saturating_sub(last_write) >= STALLED_WRITE.as_millis() as u64;
        // A client that has read nothing for a while gives its slot up whatever it sent
        // (requests pipelined behind an answer it does not read).
        if quiet && self.write_blocked.load(Ordering::Acquire) {
            return Standing::Idle;
        }
        if self.requests.load(Ordering::Acquire) > 0 {
            return Standing::Busy;
        }
        let mut head_since = self.head_since.load(Ordering::Acquire);
        if head_since == 0 && quiet && self.request_waiting() {
            // Arrived, not yet read: since the accept at the latest.
            head_since = self.accepted;
        }
        if head_since != 0 {
            return if now.saturating_sub(head_since) >= HEAD_GRACE.as_millis() as u64 {
                Standing::StaleHead
            } else {
                Standing::Receiving
            };
        }
        if quiet {
            Standing::Idle
        } else {
            Standing::Busy
        }
    }

    /// Whether bytes wait unread in the socket (FIONREAD).
    // One of the crate's named exceptions to `deny(unsafe_code)`: tokio's sockets do not
    // say how many bytes wait unread.
    #[allow(unsafe_code)]
    fn request_waiting(&self) -> bool {
        let fd = self.fd.load(Ordering::Acquire);
        if fd < 0 {
            return false;
        }
        let mut waiting: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int, which lives across the call. The descriptor is
        // the connection's while `fd` holds it ([`Socket`] clears it before closing); one
        // closed and reused meanwhile is only asked a question.
        let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut waiting) };
        rc == 0 && waiting > 0
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

    /// Resolves when the slot went to a newcomer and the connection is to close now.
    pub(crate) async fn evicted(&self) {
        self.evicted.notified().await
    }

    /// Resolves when the slot went to a newcomer and the connection is to finish the
    /// answer in flight and close.
    pub(crate) async fn retired(&self) {
        self.retired.notified().await
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
            let c = &self.connection;
            // The first bytes of a head start its clock; bytes read while a request is
            // answered (pipelined, or a body) are the handler's business.
            if c.requests.load(Ordering::Acquire) == 0 {
                let _ =
                    c.head_since
                        .compare_exchange(0, millis(), Ordering::AcqRel, Ordering::Acquire);
            }
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

/// The accepted socket, lending its descriptor to its [`Connection`] until it closes, so
/// that the table can ask whether a request waits in it.
pub(crate) struct Socket {
    inner: tokio::net::TcpStream,
    connection: Arc<Connection>,
}

impl Socket {
    pub(crate) fn new(inner: tokio::net::TcpStream, connection: Arc<Connection>) -> Socket {
        connection.fd.store(inner.as_raw_fd(), Ordering::Release);
        Socket { inner, connection }
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // Before the descriptor closes (the field drops after this).
        self.connection.fd.store(-1, Ordering::Release);
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
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

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
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
            if table.open.remove(&self.id).is_none() {
                table.retiring.remove(&self.id);
            }
        }
    }
}

impl Slots {
    pub fn new(max: usize) -> Arc<Slots> {
        let max = max.max(1);
        Arc::new(Slots {
            max,
            per_peer: (max / PEER_SHARE).max(1),
            table: Mutex::new(Table {
                retiring_max: retiring_max(max),
                ..Table::default()
            }),
        })
    }

    /// A slot for a connection from `peer`, taken from another connection where needed
    /// (module doc); `None` when none may be taken.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Slot> {
        self.admit_at(peer, millis())
    }

    /// [`Slots::admit`] at `now` ([`millis`]).
    fn admit_at(self: &Arc<Self>, peer: IpAddr, now: u64) -> Option<Slot> {
        let peer = peer_key(peer);
        let mut table = self.table.lock().ok()?;
        let held = table.held();
        let from_peer = held.get(&peer).copied().unwrap_or(0);
        if from_peer >= self.per_peer {
            let own = table.choose(now, |o| o.peer == peer, &held, from_peer, 0);
            if !table.take(own) {
                return None;
            }
        } else if table.open.len() >= self.max {
            let most = held.values().copied().max().unwrap_or(0);
            let any = table.choose(now, |_| true, &held, most, from_peer + 1);
            if !table.take(any.without_busy()) {
                let biggest = table.biggest_peer(now, &held, from_peer);
                if !biggest.is_some_and(|c| table.take(c)) {
                    // Its own peer's, rather than none (one address behind NAT).
                    let own = table.choose(now, |o| o.peer == peer, &held, from_peer, 0);
                    if !table.take(own) {
                        return None;
                    }
                }
            }
        }
        let id = table.next_id;
        table.next_id += 1;
        let connection = Arc::new(Connection::accepted_at(now));
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

/// The first connection of each kind a newcomer may take, oldest first.
#[derive(Clone, Copy, Debug, Default)]
struct Choice {
    idle: Option<u64>,
    stale: Option<u64>,
    busy: Option<u64>,
    /// A head arriving within the grace: only a newcomer of its own peer takes it.
    young: Option<u64>,
}

impl Choice {
    fn without_busy(self) -> Choice {
        Choice {
            busy: None,
            young: None,
            ..self
        }
    }
}

impl Table {
    /// Slots held by each peer.
    fn held(&self) -> HashMap<IpAddr, usize> {
        let mut held = HashMap::new();
        for o in self.open.values() {
            *held.entry(o.peer).or_default() += 1;
        }
        held
    }

    /// Among the connections that `matches`: the idle one of the peer holding the most
    /// slots (`held`), at least `idle_from`, the oldest of its peer's; the oldest stale
    /// head, busy one and young head. A peer's idle connection goes before a smaller
    /// peer's, and none of a peer holding fewer than the newcomer's would, so that a churn
    /// of empty connections from a few peers takes their own, not a fifth's scrape whose
    /// request has not arrived yet (or whose TLS handshake is under way). The search ends
    /// at an idle one of a peer holding `most`.
    fn choose(
        &self,
        now: u64,
        matches: impl Fn(&Open) -> bool,
        held: &HashMap<IpAddr, usize>,
        most: usize,
        idle_from: usize,
    ) -> Choice {
        let mut choice = Choice::default();
        let mut idle_held = 0;
        for (id, o) in self.open.iter().filter(|(_, o)| matches(o)) {
            let slot = match o.state.standing_at(now) {
                Standing::Idle => {
                    let peer_held = held.get(&o.peer).copied().unwrap_or(0);
                    if peer_held >= idle_from && peer_held > idle_held {
                        (choice.idle, idle_held) = (Some(*id), peer_held);
                    }
                    if idle_held >= most {
                        break;
                    }
                    continue;
                }
                Standing::StaleHead => &mut choice.stale,
                Standing::Busy => &mut choice.busy,
                Standing::Receiving => &mut choice.young,
            };
            slot.get_or_insert(*id);
        }
        choice
    }

    /// The oldest busy connection and the oldest young head among those of the peers
    /// holding the most slots, where they hold more than the newcomer's, which holds
    /// `theirs` now, would with one more.
    fn biggest_peer(
        &self,
        now: u64,
        held: &HashMap<IpAddr, usize>,
        theirs: usize,
    ) -> Option<Choice> {
        let most = held.values().copied().max()?;
        if most <= theirs + 1 {
            return None;
        }
        let mut choice = Choice::default();
        for (id, o) in self.open.iter().filter(|(_, o)| held[&o.peer] == most) {
            match o.state.standing_at(now) {
                Standing::Busy => choice.busy.get_or_insert(*id),
                Standing::Receiving => choice.young.get_or_insert(*id),
                _ => continue,
            };
            if choice.busy.is_some() && choice.young.is_some() {
                break;
            }
        }
        Some(choice)
    }

    /// Frees the first slot `choice` offers, in the order of the module doc. Whether one
    /// was freed.
    fn take(&mut self, choice: Choice) -> bool {
        let close = |table: &mut Table, id| match table.open.remove(&id) {
            Some(closed) => {
                closed.state.evicted.notify_one();
                true
            }
            None => false,
        };
        if let Some(id) = choice.idle.or(choice.stale) {
            return close(self, id);
        }
        if let Some(id) = choice.busy {
            if let Some(retired) = self.open.remove(&id) {
                if self.retiring.len() >= self.retiring_max {
                    if let Some((_, oldest)) = self.retiring.pop_first() {
                        oldest.evicted.notify_one();
                    }
                }
                retired.state.retired.notify_one();
                self.retiring.insert(id, retired.state);
                return true;
            }
        }
        choice.young.is_some_and(|id| close(self, id))
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

    fn idle_at(c: &Connection, now: u64) -> bool {
        c.standing_at(now) == Standing::Idle
    }

    fn idle(c: &Connection) -> bool {
        idle_at(c, millis())
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

    /// Whether the connection was told to finish its answer and close (without waiting).
    async fn told_to_retire(slot: &Slot) -> bool {
        let wait = slot.connection.retired();
        tokio::time::timeout(std::time::Duration::ZERO, wait)
            .await
            .is_ok()
    }

    /// A peer's own scraper gets past that peer's busy connections: its oldest is retired.
    #[tokio::test]
    async fn a_peer_busy_at_its_share_retires_its_oldest_for_its_newcomer() {
        let slots = Slots::new(8);
        let a = ip("10.0.0.1");
        let held: Vec<Slot> = (0..2).map(|_| slots.admit(a).unwrap()).collect();
        let _busy: Vec<RequestGuard> = held.iter().map(|s| s.connection.request()).collect();
        let third = slots.admit(a).expect("the oldest retired");
        assert!(told_to_retire(&held[0]).await);
        assert!(!told_to_close(&held[0]).await, "its answer goes out first");
        assert!(!told_to_retire(&held[1]).await);
        assert_eq!(slots.open_from(a), 2);
        assert!(slots.admit(ip("10.0.0.2")).is_some());
        drop(third);
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
        assert!(idle(&conn), "new and silent");
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
        assert!(!idle(&conn), "receiving a request");
        // The request reaches the handler, which answers.
        let guard = conn.request();
        assert!(!idle(&conn), "being answered");
        drop(guard);
        assert!(!idle(&conn), "about to send its answer");
        // Bytes go out: sending, until the client has read nothing for STALLED_WRITE.
        let status = b"HTTP/1.1 200 OK\r\n";
        let sent = std::future::poll_fn(|cx| Pin::new(&mut tracked).poll_write(cx, status))
            .await
            .unwrap();
        assert!(sent > 0);
        let wrote = conn.last_write.load(Ordering::Acquire);
        let stall = STALLED_WRITE.as_millis() as u64;
        assert!(!idle_at(&conn, wrote + stall - 1), "sending");
        assert!(idle_at(&conn, wrote + stall), "its client stopped reading");

        // In the table: a newcomer takes the stalled one's slot, never the others'.
        let slots = Slots::new(2);
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        let first = slots.admit(a).unwrap();
        let second = slots.admit(b).unwrap();
        first
            .connection
            .head_since
            .store(millis(), Ordering::Release);
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
        stuck.head_since.store(millis(), Ordering::Release);
        let _in_flight = stuck.requests.fetch_add(1, Ordering::AcqRel);
        stuck.wrote();
        stuck.write_polled(&Poll::Pending);
        let wrote = stuck.last_write.load(Ordering::Acquire);
        assert!(!idle_at(&stuck, wrote + stall - 1), "blocked only a moment");
        assert!(idle_at(&stuck, wrote + stall), "its client stopped reading");
    }

    /// Resilience round 3, item 1 and the slowloris regression: heads that never complete
    /// held every slot, since a connection receiving its request kept it. A head still
    /// incomplete after the grace goes to a newcomer, oldest first, from any peer when the
    /// table is full and from the newcomer's own peer at its share; one younger is kept.
    #[tokio::test]
    async fn round3_1_heads_incomplete_past_the_grace_give_their_slot_up() {
        let grace = HEAD_GRACE.as_millis() as u64;
        let t = millis();
        let slots = Slots::new(4);
        let peers = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"].map(ip);
        let held: Vec<Slot> = peers
            .iter()
            .map(|p| slots.admit_at(*p, t).unwrap())
            .collect();
        for (i, s) in held.iter().enumerate() {
            // One byte each; the second's came first.
            let began = if i == 1 { t } else { t + 10 };
            s.connection.head_since.store(began, Ordering::Release);
        }
        assert!(slots.admit_at(ip("10.0.0.5"), t + grace - 1).is_none());
        let scraper = slots
            .admit_at(ip("10.0.0.5"), t + grace)
            .expect("the oldest head");
        let _scraping = scraper.connection.request();
        assert!(told_to_close(&held[1]).await);
        assert!(
            !told_to_close(&held[0]).await,
            "its head is younger than the grace"
        );
        // Later every head is past the grace: the oldest, the first, goes next.
        let _next = slots.admit_at(ip("10.0.0.6"), t + 10 + grace).unwrap();
        assert!(told_to_close(&held[0]).await);
        assert!(!told_to_close(&held[2]).await);
        drop(scraper);

        // One address (NAT, a proxy): its own scraper takes its stale head first.
        let slots = Slots::new(8);
        let a = ip("127.0.0.1");
        let trickling: Vec<Slot> = (0..2).map(|_| slots.admit_at(a, t).unwrap()).collect();
        trickling[1]
            .connection
            .head_since
            .store(t, Ordering::Release);
        trickling[0]
            .connection
            .head_since
            .store(t + grace / 2, Ordering::Release);
        let _own = slots.admit_at(a, t + grace).expect("a stale head");
        assert!(told_to_close(&trickling[1]).await);
        assert!(!told_to_close(&trickling[0]).await, "younger, and newer");
        assert!(!told_to_retire(&trickling[1]).await, "closed, not retired");
    }

    /// A slowloris that opens anew every connection closed keeps its peer's share full of
    /// heads younger than the grace: a newcomer of that peer (its scraper, behind NAT)
    /// retires the peer's oldest busy connection, or else closes its oldest young head.
    /// Another peer's newcomer takes no young head.
    #[tokio::test]
    async fn round3_a_a_peers_newcomer_takes_its_young_heads_last() {
        let t = millis();
        let slots = Slots::new(8);
        let a = ip("127.0.0.1");
        let heads: Vec<Slot> = (0..2).map(|_| slots.admit_at(a, t).unwrap()).collect();
        for h in &heads {
            h.connection.head_since.store(t, Ordering::Release);
        }
        let scraper = slots.admit_at(a, t + 1).expect("the oldest young head");
        assert!(told_to_close(&heads[0]).await);
        let _scraping = scraper.connection.request();
        let next = slots.admit_at(a, t + 2).expect("the busy one, retired");
        next.connection.head_since.store(t + 2, Ordering::Release);
        assert!(told_to_retire(&scraper).await, "its answer goes out whole");
        assert!(!told_to_close(&scraper).await);
        assert!(!told_to_close(&heads[1]).await);
        // A full table of young heads: the peer of two gives one up to a peer of none.
        let others: Vec<Slot> = (2..8)
            .map(|n| slots.admit_at(IpAddr::from([10, 0, 0, n]), t + 3).unwrap())
            .collect();
        for o in &others {
            o.connection.head_since.store(t + 3, Ordering::Release);
        }
        assert_eq!(slots.table.lock().unwrap().open.len(), 8);
        let fifth = slots.admit_at(ip("10.0.1.1"), t + 4).expect("127.0.0.1's");
        assert!(told_to_close(&heads[1]).await);
        for o in &others {
            assert!(!told_to_close(o).await);
        }
        // Every peer holds one: a newcomer takes its own peer's young head, no other's.
        let _fifth = fifth.connection.request();
        let own = slots.admit_at(ip("10.0.0.2"), t + 5).expect("its own");
        own.connection.head_since.store(t + 5, Ordering::Release);
        assert!(told_to_close(&others[0]).await);
        let _own = slots.admit_at(a, t + 5).expect("its own");
        assert!(told_to_close(&next).await);
        for o in &others[1..] {
            assert!(!told_to_close(o).await);
        }
    }

    /// What a newcomer takes comes in order: idle, then a stale head, then a busy one.
    #[tokio::test]
    async fn round3_a_newcomer_takes_idle_then_stale_heads_then_busy() {
        let grace = HEAD_GRACE.as_millis() as u64;
        let t = millis();
        let slots = Slots::new(8);
        let peers = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"].map(ip);
        // Per peer, oldest first: busy, stale head; the fourth's newest one is idle.
        let mut held = Vec::new();
        let mut guards = Vec::new();
        for p in &peers {
            let busy = slots.admit_at(*p, t).unwrap();
            guards.push(busy.connection.request());
            held.push(busy);
        }
        for p in &peers[..3] {
            let head = slots.admit_at(*p, t).unwrap();
            head.connection.head_since.store(t, Ordering::Release);
            held.push(head);
        }
        held.push(slots.admit_at(peers[3], t).unwrap());
        let later = t + grace;
        // Each newcomer sends its request at once: busy.
        let newcomer = |n: u8| {
            let slot = slots.admit_at(IpAddr::from([10, 0, 1, n]), later)?;
            let busy = slot.connection.request();
            Some((slot, busy))
        };
        let _n1 = newcomer(1).expect("the idle one");
        assert!(told_to_close(&held[7]).await);
        let _n2 = newcomer(2).expect("the oldest stale head");
        assert!(told_to_close(&held[4]).await);
        let _n3 = newcomer(3).expect("another stale head");
        let _n4 = newcomer(4).expect("the last stale head");
        assert!(told_to_close(&held[5]).await && told_to_close(&held[6]).await);
        for h in &held[..4] {
            assert!(!told_to_retire(h).await, "busy kept while heads were stale");
        }
        // Now only busy ones are left, each peer holding one as the newcomers do: kept.
        assert!(newcomer(5).is_none());
    }

    /// The snapshot-flood regression: four peers each at their share with answers in
    /// flight left a fifth no slot. The busiest peer's oldest busy connection is retired
    /// (its answer completes, then it closes); past a quarter of the slots retiring, the
    /// oldest retiring is closed; a peer holding no more than the newcomer's would keeps
    /// its connections.
    #[tokio::test]
    async fn round3_b_four_busy_peers_at_their_share_leave_room_for_a_fifth() {
        let slots = Slots::new(8);
        let peers = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"].map(ip);
        let mut held: Vec<Slot> = peers
            .iter()
            .flat_map(|p| [slots.admit(*p).unwrap(), slots.admit(*p).unwrap()])
            .collect();
        let _busy: Vec<RequestGuard> = held.iter().map(|s| s.connection.request()).collect();
        let scraper = slots.admit(ip("10.0.0.5")).expect("a retired slot");
        assert!(told_to_retire(&held[0]).await);
        assert!(!told_to_close(&held[0]).await, "its answer goes out whole");
        assert_eq!(slots.open_from(peers[0]), 1);
        let _busy_scraper = scraper.connection.request();
        // The busiest peers now are the second to fourth: the second's oldest goes.
        let second = slots.admit(ip("10.0.0.6")).expect("another");
        let second_busy = second.connection.request();
        assert!(told_to_retire(&held[2]).await);
        // Two retiring, a quarter of eight: the next newcomer closes the oldest retiring
        // one at once, and retires the next busy one.
        let third = slots.admit(ip("10.0.0.7")).expect("another");
        let _third = third.connection.request();
        assert!(
            told_to_close(&held[0]).await,
            "retiring for longest: closed"
        );
        assert!(told_to_retire(&held[4]).await);
        assert!(!told_to_close(&held[2]).await);
        assert_eq!(
            slots
                .table
                .lock()
                .unwrap()
                .retiring
                .keys()
                .collect::<Vec<_>>(),
            [&2, &4]
        );
        drop(held.remove(0));
        // Every peer holds one or two now: a peer holding one gets no other peer's slot,
        // only its own.
        drop(second_busy);
        drop(second);
        let again = slots.admit(ip("10.0.0.6")).unwrap();
        let _again = again.connection.request();
        assert_eq!(slots.table.lock().unwrap().open.len(), 8);
        let _own = slots.admit(ip("10.0.0.5")).expect("its own");
        assert!(told_to_retire(&scraper).await);
        assert!(
            told_to_close(&held[1]).await,
            "retiring for longest: closed"
        );
        for h in [&held[0], &held[2], &held[4], &held[5], &held[6]] {
            assert!(!told_to_retire(h).await && !told_to_close(h).await);
        }
    }

    /// The churn regression: a scraper's connection accepted while the server was too
    /// busy to read its request looked idle, and the next empty connection of the churn
    /// took its slot. A request waiting unread in the socket counts as a head arriving
    /// since the accept.
    #[tokio::test]
    async fn round3_c_a_request_waiting_in_the_socket_keeps_its_slot() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let slots = Slots::new(1);
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let t = millis();
        let slot = slots.admit_at(ip("10.0.0.1"), t).unwrap();
        let socket = Socket::new(server, Arc::clone(&slot.connection));
        assert_eq!(
            slot.connection.standing_at(t),
            Standing::Idle,
            "nothing sent"
        );
        client.writable().await.unwrap();
        assert_eq!(client.try_write(b"GET /metrics HTTP/1.1\r\n").unwrap(), 23);
        let waiting = wait_for_bytes(&slot.connection).await;
        assert!(waiting, "FIONREAD saw the request");
        assert_eq!(slot.connection.standing_at(t), Standing::Receiving);
        assert!(slots.admit_at(ip("10.0.0.2"), t + 1).is_none());
        let grace = HEAD_GRACE.as_millis() as u64;
        assert_eq!(slot.connection.standing_at(t + grace), Standing::StaleHead);
        // Once the socket is closed its descriptor is no longer asked.
        drop(socket);
        assert_eq!(slot.connection.fd.load(Ordering::Acquire), -1);
        assert_eq!(slot.connection.standing_at(t), Standing::Idle);
    }

    /// A churn of empty connections from four peers at their share, with the table full:
    /// each newcomer takes an idle connection of a peer holding the most, never the idle
    /// one of a fifth peer holding one (a scrape whose request has not arrived yet), even
    /// when that one is the oldest.
    #[tokio::test]
    async fn round3_c_idle_connections_of_the_biggest_peers_go_first() {
        let slots = Slots::new(8);
        let scraper = slots.admit(ip("10.0.0.5")).unwrap();
        let churn = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"].map(ip);
        let mut held: Vec<Slot> = Vec::new();
        for _ in 0..100 {
            for p in &churn {
                held.push(slots.admit(*p).expect("an idle one of the churn's"));
            }
        }
        assert!(!told_to_close(&scraper).await);
        assert_eq!(slots.open_from(ip("10.0.0.5")), 1);
        assert_eq!(slots.table.lock().unwrap().open.len(), 8);
    }

    /// A fifth peer's connection in its TLS handshake (idle) is the only idle one, the
    /// others busy: a newcomer of a peer holding as many does not take it, but its own.
    #[tokio::test]
    async fn round3_1_a_smaller_peers_idle_connection_is_left_alone() {
        let slots = Slots::new(8);
        let handshaking = slots.admit(ip("10.0.0.5")).unwrap();
        let mut busy = Vec::new();
        for p in [
            "10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2", "10.0.0.3", "10.0.0.3",
        ]
        .into_iter()
        .chain(["10.0.0.4"])
        {
            let slot = slots.admit(ip(p)).unwrap();
            let guard = slot.connection.request();
            busy.push((slot, guard));
        }
        let _newcomer = slots.admit(ip("10.0.0.4")).expect("its own peer's");
        assert!(!told_to_close(&handshaking).await);
        assert!(told_to_retire(&busy[6].0).await);
        for (slot, _) in &busy[..6] {
            assert!(!told_to_retire(slot).await && !told_to_close(slot).await);
        }
    }

    /// Whether the bytes a client wrote reached the server's socket within a second.
    async fn wait_for_bytes(c: &Connection) -> bool {
        for _ in 0..100 {
            if c.request_waiting() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[test]
    fn ipv6_peers_count_by_their_64() {
        assert_eq!(peer_key(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1:2::"));
        assert_eq!(peer_key(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
    }
}
