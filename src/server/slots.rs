//! Connection slots, so that a scraper always gets through: at most `max` connections at
//! once, at most a quarter of them from one peer, and a newcomer that finds no slot takes
//! the one of the oldest idle connection (one not in the middle of a request: waiting for
//! a request head, a TLS handshake, or a client to read its response). A slowloris then
//! only ever holds connections that the next real client takes away, and one peer cannot
//! hold more than its share even with requests in flight.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

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
    /// Requests being answered now; 0 is idle.
    requests: AtomicUsize,
    /// Notified when the slot was given to a newcomer: the connection is to close.
    evicted: Notify,
}

impl Connection {
    /// Marks a request in progress until the guard drops.
    pub fn request(self: &Arc<Self>) -> RequestGuard {
        self.requests.fetch_add(1, Ordering::AcqRel);
        RequestGuard(Arc::clone(self))
    }

    pub(crate) async fn evicted(&self) {
        self.evicted.notified().await
    }
}

pub(crate) struct RequestGuard(Arc<Connection>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.requests.fetch_sub(1, Ordering::AcqRel);
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
            .find(|(_, o)| matches(o) && o.state.requests.load(Ordering::Acquire) == 0)
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

    #[test]
    fn ipv6_peers_count_by_their_64() {
        assert_eq!(peer_key(ip("2001:db8:1:2:3:4:5:6")), ip("2001:db8:1:2::"));
        assert_eq!(peer_key(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
    }
}
