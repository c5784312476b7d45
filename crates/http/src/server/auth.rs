//! HTTP basic auth against bcrypt hashes, as Prometheus' exporter web config does it, made
//! so that a flood of wrong passwords cannot take the CPU from the cameras:
//!
//! - bcrypt runs on one thread of its own (`es-bcrypt`, at the HTTP side's lower priority)
//!   fed by a short queue per peer (an IPv4 address or an IPv6 /64), taken in turns. A
//!   request that finds its peer's queue full is answered 503 at once rather than waiting:
//!   a waiting request would hold a connection slot, and a flood would then hold them all.
//!   Taken in turns, a flood of wrong passwords from one peer delays another peer's first
//!   login by one check, not by the flood.
//! - Credentials that passed are remembered, so a scraper that sends the same header every
//!   few seconds costs bcrypt once. They are remembered as an HMAC (under a key drawn at
//!   start) of the user, the stored hash and the password, never in clear.
//! - A user name that is not configured costs the same bcrypt as a known one, against a
//!   dummy hash of the highest configured cost, so answer times do not tell which user
//!   names exist.
//! - SIGHUP replaces the users whole ([`Auth::replace`]); a remembered password is tied to
//!   the hash it passed, so a removed user or a changed hash stops passing at once.
//!
//! [`check_hash`] is the one parser of a stored hash: the config check and the verifier
//! both call it, so `check-config` accepts exactly what `run` can serve.
//!
//! One room, long as it is: the hash check, the per-peer fair queue and the bcrypt
//! thread are one mechanism (what a check costs and how checks wait are what the floods
//! attacked together), followed by its unit tests, the flood and timing tests among them.

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};

use base64::Engine;
use ring::hmac;
use tokio::sync::oneshot;

/// The highest bcrypt cost served. Each step doubles the time of a check: cost 10 takes
/// about 90 ms on a board's Cortex-A53 core, so 14 is about 1.5 s, and every new client,
/// and every wrong password, waits for it.
pub(crate) const MAX_COST: u32 = 14;
/// Checks of one peer waiting for the bcrypt thread at most; more are answered 503 at once.
const BCRYPT_QUEUE_PER_PEER: usize = 2;
/// Peers with checks waiting at most: past them a new peer's check is answered 503.
const BCRYPT_PEERS: usize = 32;
/// Credentials remembered at most; the oldest is forgotten first.
const REMEMBERED: usize = 64;
/// Salt and hash (bcrypt's base64) of the dummy hash unknown users are checked against;
/// any valid pair does, since its answer is ignored.
const DUMMY_SALT_AND_HASH: &str = "JZtVuCPWzYJLHAb1Yf9/mu9sGlDQ.DbhpzNJcqjV1AxyY8XMAmG.G";

/// Why a stored bcrypt hash is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// Not `$2y$COST$` and 53 characters; `reason` is the bcrypt parser's.
    #[error("not a bcrypt hash ($2y$COST$ and 53 characters): {reason}")]
    Format {
        /// What the bcrypt parser said is wrong with it.
        reason: String,
    },
    /// The salt or the hash has characters outside bcrypt's base64.
    #[error(
        "not a bcrypt hash: its salt or hash has characters outside bcrypt's \
         base64 (./A-Za-z0-9)"
    )]
    Alphabet,
    /// A cost below bcrypt's minimum, which the verifier cannot check.
    #[error("bcrypt cost {cost} is below bcrypt's minimum of 4")]
    CostTooLow {
        /// The cost the hash was made with.
        cost: u32,
    },
    /// A cost above [`MAX_COST`]: each check would take too long to serve.
    #[error(
        "bcrypt cost {cost} is too slow to serve: each step doubles the time of a \
         check, cost 10 takes about 90 ms on a board and {max} is the most \
         accepted (make the hash with cost 10 to 12)",
        max = MAX_COST
    )]
    CostTooHigh {
        /// The cost the hash was made with.
        cost: u32,
    },
}

/// Why a set of basic-auth users is refused; each names the user.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    /// The user's stored hash is refused.
    #[error("user '{user}': {error}")]
    Hash {
        /// The user's name, as configured.
        user: String,
        /// What is wrong with the user's hash.
        error: HashError,
    },
    /// The user's hash has another cost than the first user's ([`mixed_costs`]).
    #[error("{}", mixed_costs(first, *first_cost, user, *cost))]
    MixedCosts {
        /// The first user, in name order, whose hash set the cost.
        first: String,
        /// The cost of `first`'s hash.
        first_cost: u32,
        /// The user whose hash has another cost.
        user: String,
        /// The cost of `user`'s hash.
        cost: u32,
    },
    /// The bcrypt thread the users' checks need cannot be started.
    #[error("starting es-bcrypt: {0}")]
    Thread(std::io::Error),
}

/// Parses a stored bcrypt hash the way the verifier reads it; returns its cost.
pub fn check_hash(hash: &str) -> Result<u32, HashError> {
    let parts = bcrypt::HashParts::from_str(hash).map_err(|e| HashError::Format {
        reason: e.to_string(),
    })?;
    let cost = parts.get_cost();
    // What bcrypt::verify decodes: a 16-byte salt and a 23-byte hash, in bcrypt's base64.
    let text = parts.to_string();
    let (salt, digest) = (parts.get_salt(), &text[text.len() - 31..]);
    let salt_ok = bcrypt::BASE_64.decode(&salt).is_ok_and(|s| s.len() == 16);
    let digest_ok = bcrypt::BASE_64.decode(digest).is_ok_and(|d| d.len() == 23);
    if !(salt_ok && digest_ok) {
        return Err(HashError::Alphabet);
    }
    if cost < 4 {
        return Err(HashError::CostTooLow { cost });
    }
    if cost > MAX_COST {
        return Err(HashError::CostTooHigh { cost });
    }
    Ok(cost)
}

/// Why users whose hashes have different costs are refused: the config check and
/// [`Auth::new`] say it alike.
pub fn mixed_costs(first: &str, first_cost: u32, user: &str, cost: u32) -> String {
    format!(
        "user '{user}': bcrypt cost {cost}, but user '{first}' has cost {first_cost}: every \
         user's hash needs one cost, since a wrong password answers in the time of its \
         user's cost and an unknown user in the time of the highest, so the answer times \
         would tell which user names exist (make every hash with one cost)"
    )
}

/// What a request's credentials earn it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The credentials passed, or no users are configured: the request is served.
    Allowed,
    /// No or malformed credentials, an unknown user or a wrong password: answer 401
    /// with a `WWW-Authenticate` challenge.
    Denied,
    /// The bcrypt queue is full: answer 503 and let the client retry.
    Busy,
}

/// Basic auth for every endpoint: the users served, the credentials that passed
/// (remembered as HMACs) and the bcrypt thread that checks the others. With no
/// users every request is allowed.
pub struct Auth {
    /// Swapped whole by a reload; a check in flight keeps the users it started with.
    users: RwLock<Arc<Users>>,
    remembered: Remembered,
    /// Started with the first users, at start or by a reload, and kept from then on.
    bcrypt: OnceLock<Bcrypt>,
}

/// The users served and the dummy hash unknown names are checked against.
struct Users {
    hashes: BTreeMap<String, String>,
    dummy: String,
}

impl Users {
    /// Checks every hash with [`check_hash`]; the error names the user.
    fn new(hashes: BTreeMap<String, String>) -> Result<Users, UsersError> {
        let mut cost: Option<(&str, u32)> = None;
        for (user, hash) in &hashes {
            let this = check_hash(hash).map_err(|error| UsersError::Hash {
                user: user.clone(),
                error,
            })?;
            match cost {
                Some((first, c)) if c != this => {
                    return Err(UsersError::MixedCosts {
                        first: first.to_string(),
                        first_cost: c,
                        user: user.clone(),
                        cost: this,
                    })
                }
                _ => cost = Some((user, this)),
            }
        }
        // The dummy hash has the users' cost, so an unknown user costs what a known one
        // does.
        let cost = cost.map_or(4, |(_, c)| c);
        Ok(Users {
            hashes,
            dummy: format!("$2b${cost:02}${DUMMY_SALT_AND_HASH}"),
        })
    }
}

impl Auth {
    /// Checks every hash with [`check_hash`] and starts the bcrypt thread (when there are
    /// users); the error names the user.
    pub fn new(users: BTreeMap<String, String>) -> Result<Auth, UsersError> {
        let auth = Auth {
            users: RwLock::new(Arc::new(Users::new(BTreeMap::new())?)),
            remembered: Remembered::new(),
            bcrypt: OnceLock::new(),
        };
        auth.replace(users)?;
        Ok(auth)
    }

    /// Serves `users` from the next check on (SIGHUP), or keeps the served ones and says
    /// why not; whether they differ from the served ones. Remembered passwords are tied
    /// to the hash they passed, so a removed user or a changed hash no longer passes by
    /// them.
    pub fn replace(&self, users: BTreeMap<String, String>) -> Result<bool, UsersError> {
        let users = Users::new(users)?;
        if !users.hashes.is_empty() && self.bcrypt.get().is_none() {
            let bcrypt = Bcrypt::start().map_err(UsersError::Thread)?;
            let _ = self.bcrypt.set(bcrypt);
        }
        let mut served = self.users.write().unwrap_or_else(|e| e.into_inner());
        let changed = served.hashes != users.hashes;
        *served = Arc::new(users);
        Ok(changed)
    }

    /// Judges an `Authorization` header value sent by `peer` (its checks wait in a queue
    /// of their own).
    pub async fn check(&self, header: Option<&str>, peer: Option<IpAddr>) -> Verdict {
        let users = Arc::clone(&self.users.read().unwrap_or_else(|e| e.into_inner()));
        if users.hashes.is_empty() {
            return Verdict::Allowed;
        }
        // Started before the first users were put in place.
        let Some(bcrypt) = self.bcrypt.get() else {
            return Verdict::Busy;
        };
        let Some((user, password)) = header.and_then(decode) else {
            return Verdict::Denied;
        };
        let (hash, known) = match users.hashes.get(&user) {
            Some(hash) => (hash.clone(), true),
            None => (users.dummy.clone(), false),
        };
        let print = self.remembered.fingerprint(&user, &hash, &password);
        if known && self.remembered.contains(&print) {
            return Verdict::Allowed;
        }
        match bcrypt.verify(peer, password, hash).await {
            None => Verdict::Busy,
            Some(true) if known => {
                self.remembered.insert(print);
                Verdict::Allowed
            }
            Some(_) => Verdict::Denied,
        }
    }

    /// Puts a bcrypt queue in place that nobody takes from, with `peer`'s part filled up,
    /// so that every check of `peer` that needs bcrypt finds it busy; the queue lives as
    /// long as what this returns (for tests).
    #[cfg(test)]
    pub(super) fn fill_bcrypt_queue(&mut self, peer: Option<IpAddr>) -> impl Sized {
        let bcrypt = Bcrypt::unstarted();
        let mut answers = Vec::new();
        for _ in 0..BCRYPT_QUEUE_PER_PEER {
            let (reply, answer) = oneshot::channel();
            let job = Job {
                password: "x".into(),
                hash: "y".into(),
                reply,
            };
            assert!(bcrypt.queue.push(peer, job).is_ok(), "queue full early");
            answers.push(answer);
        }
        let queue = Arc::clone(&bcrypt.queue);
        self.bcrypt = OnceLock::from(bcrypt);
        (queue, answers)
    }

    /// bcrypt checks run so far (for tests).
    #[cfg(test)]
    fn bcrypt_runs(&self) -> u64 {
        self.bcrypt
            .get()
            .map_or(0, |b| b.runs.load(Ordering::Relaxed))
    }
}

/// Credentials that passed, as HMACs under a key only this process knows.
struct Remembered {
    key: hmac::Key,
    seen: Mutex<VecDeque<[u8; 32]>>,
}

impl Remembered {
    fn new() -> Remembered {
        let mut secret = [0u8; 32];
        // A fresh key each start; without one (no OS randomness) the stack address and the
        // time still differ per process, and the entries stay one-way either way.
        if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret).is_err() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            secret[..16].copy_from_slice(&now.to_le_bytes());
        }
        Remembered {
            key: hmac::Key::new(hmac::HMAC_SHA256, &secret),
            seen: Mutex::new(VecDeque::new()),
        }
    }

    fn fingerprint(&self, user: &str, hash: &str, password: &str) -> [u8; 32] {
        let mut ctx = hmac::Context::with_key(&self.key);
        // Length prefixes keep ("ab", "c") and ("a", "bc") apart.
        for part in [user, hash, password] {
            ctx.update(&(part.len() as u64).to_le_bytes());
            ctx.update(part.as_bytes());
        }
        let mut print = [0u8; 32];
        print.copy_from_slice(ctx.sign().as_ref());
        print
    }

    fn contains(&self, print: &[u8; 32]) -> bool {
        self.seen.lock().is_ok_and(|seen| seen.contains(print))
    }

    fn insert(&self, print: [u8; 32]) {
        if let Ok(mut seen) = self.seen.lock() {
            if !seen.contains(&print) {
                if seen.len() >= REMEMBERED {
                    seen.pop_front();
                }
                seen.push_back(print);
            }
        }
    }
}

struct Job {
    password: String,
    hash: String,
    reply: oneshot::Sender<bool>,
}

/// The bcrypt thread and its queue; the thread ends when this is dropped.
struct Bcrypt {
    queue: Arc<FairQueue>,
    runs: Arc<AtomicU64>,
}

impl Bcrypt {
    fn start() -> std::io::Result<Bcrypt> {
        let bcrypt = Bcrypt::unstarted();
        let (queue, counted) = (Arc::clone(&bcrypt.queue), Arc::clone(&bcrypt.runs));
        std::thread::Builder::new()
            .name("es-bcrypt".into())
            .spawn(move || {
                super::lower_priority();
                while let Some(job) = queue.pop() {
                    counted.fetch_add(1, Ordering::Relaxed);
                    let ok = bcrypt::verify(&job.password, &job.hash).unwrap_or(false);
                    let _ = job.reply.send(ok);
                }
            })?;
        Ok(bcrypt)
    }

    /// The queue without its thread.
    fn unstarted() -> Bcrypt {
        Bcrypt {
            queue: Arc::new(FairQueue::default()),
            runs: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Whether `password` matches `hash`; `None` when `peer`'s queue is full.
    async fn verify(&self, peer: Option<IpAddr>, password: String, hash: String) -> Option<bool> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            password,
            hash,
            reply,
        };
        match self.queue.push(peer.map(super::slots::peer_key), job) {
            Ok(()) => Some(answer.await.unwrap_or(false)),
            Err(_) => None,
        }
    }
}

impl Drop for Bcrypt {
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// bcrypt checks waiting, a queue per peer, taken in turns: the first check of each
/// waiting peer, then the second of each, and so on.
#[derive(Default)]
struct FairQueue {
    waiting: Mutex<Waiting>,
    ready: Condvar,
}

#[derive(Default)]
struct Waiting {
    /// Peers in the order they are served next, each with its checks in order.
    peers: VecDeque<(Option<IpAddr>, VecDeque<Job>)>,
    closed: bool,
}

impl FairQueue {
    /// Queues `job` for `peer`, or gives it back when the peer's queue (or the room for
    /// peers) is full.
    fn push(&self, peer: Option<IpAddr>, job: Job) -> Result<(), Job> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let peers = &mut waiting.peers;
        match peers.iter().position(|(p, _)| *p == peer) {
            Some(i) if peers[i].1.len() >= BCRYPT_QUEUE_PER_PEER => return Err(job),
            Some(i) => peers[i].1.push_back(job),
            None if peers.len() >= BCRYPT_PEERS => return Err(job),
            None => peers.push_back((peer, VecDeque::from([job]))),
        }
        self.ready.notify_one();
        Ok(())
    }

    /// The next check, in turn; `None` once closed.
    fn pop(&self) -> Option<Job> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if waiting.closed {
                return None;
            }
            if let Some((peer, mut jobs)) = waiting.peers.pop_front() {
                let job = jobs.pop_front();
                if !jobs.is_empty() {
                    waiting.peers.push_back((peer, jobs));
                }
                if job.is_some() {
                    return job;
                }
                continue;
            }
            waiting = self.ready.wait(waiting).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn close(&self) {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closed = true;
        self.ready.notify_all();
    }
}

/// `Basic base64(user:password)` → (user, password).
fn decode(header: &str) -> Option<(String, String)> {
    let (scheme, data) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, password: &str) -> String {
        let raw = format!("{user}:{password}");
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }

    fn auth(password: &str, cost: u32) -> Auth {
        let hash = bcrypt::hash(password, cost).unwrap();
        Auth::new(BTreeMap::from([("prom".to_string(), hash)])).unwrap()
    }

    async fn check(auth: &Auth, user: &str, password: &str) -> Verdict {
        auth.check(Some(&header(user, password)), None).await
    }

    /// Resilience round 2, item 12: while no credentials were verified yet, a flood of
    /// wrong passwords from one address filled the bcrypt queue and a scraper elsewhere
    /// got 503 for as long as the flood lasted. Taken in turns, its first login waits for
    /// one check of the flood's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn round2_12_a_wrong_password_flood_does_not_starve_the_first_login() {
        let auth = Arc::new(auth("s3cret", 8));
        let flooder: Option<IpAddr> = Some("192.0.2.1".parse().unwrap());
        let scraper: Option<IpAddr> = Some("198.51.100.7".parse().unwrap());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (busy, denied) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut flood = Vec::new();
        for _ in 0..16 {
            let (auth, stop) = (Arc::clone(&auth), Arc::clone(&stop));
            let (busy, denied) = (Arc::clone(&busy), Arc::clone(&denied));
            flood.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match auth.check(Some(&header("prom", "wrong")), flooder).await {
                        Verdict::Busy => {
                            busy.fetch_add(1, Ordering::Relaxed);
                            tokio::task::yield_now().await;
                        }
                        _ => {
                            denied.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        }
        // The flood holds its share of the queue before the scraper comes.
        while busy.load(Ordering::Relaxed) < 100 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let started = std::time::Instant::now();
        let verdict = auth.check(Some(&header("prom", "s3cret")), scraper).await;
        let waited = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        for f in flood {
            f.await.expect("no panic");
        }
        assert_eq!(verdict, Verdict::Allowed);
        assert!(waited < std::time::Duration::from_secs(2), "{waited:?}");
        assert!(
            denied.load(Ordering::Relaxed) > 0,
            "the flood was checked too"
        );
    }

    #[tokio::test]
    async fn checks_users_and_passwords() {
        let auth = auth("s3cret", 4);
        assert_eq!(
            auth.check(Some(&header("prom", "s3cret")), None).await,
            Verdict::Allowed
        );
        // The second time comes from the cache and must agree.
        assert_eq!(
            auth.check(Some(&header("prom", "s3cret")), None).await,
            Verdict::Allowed
        );
        for denied in [
            Some(header("prom", "wrong")),
            Some(header("other", "s3cret")),
            None,
            Some("Bearer abc".into()),
        ] {
            assert_eq!(auth.check(denied.as_deref(), None).await, Verdict::Denied);
        }
        let open = Auth::new(BTreeMap::new()).unwrap();
        assert_eq!(open.check(None, None).await, Verdict::Allowed);
    }

    #[tokio::test]
    async fn unknown_users_and_wrong_passwords_each_cost_one_bcrypt() {
        let auth = auth("s3cret", 4);
        assert_eq!(
            auth.check(Some(&header("mallory", "s3cret")), None).await,
            Verdict::Denied
        );
        assert_eq!(auth.bcrypt_runs(), 1, "an unknown user skipped bcrypt");
        // A wrong password is never remembered: each try costs bcrypt again.
        for runs in [2, 3] {
            assert_eq!(
                auth.check(Some(&header("prom", "wrong")), None).await,
                Verdict::Denied
            );
            assert_eq!(auth.bcrypt_runs(), runs);
        }
        // A right one costs bcrypt once, then comes from memory.
        for _ in 0..3 {
            assert_eq!(
                auth.check(Some(&header("prom", "s3cret")), None).await,
                Verdict::Allowed
            );
        }
        assert_eq!(auth.bcrypt_runs(), 4);
        // A malformed header names no user: nothing to check.
        assert_eq!(auth.check(Some("Basic !!!"), None).await, Verdict::Denied);
        assert_eq!(auth.bcrypt_runs(), 4);
    }

    /// Resilience round 2, item 9: with users of costs 4 and 10, a wrong password for the
    /// cost-4 user answered in 1 ms and an unknown user in 220 ms. Users of different
    /// costs are refused; the dummy an unknown user is checked against has the users'
    /// cost, so both cost one bcrypt of the same cost.
    #[test]
    fn round2_9_known_and_unknown_users_cost_the_same_bcrypt() {
        let users = BTreeMap::from([
            ("a".to_string(), bcrypt::hash("x", 4).unwrap()),
            ("b".to_string(), bcrypt::hash("y", 6).unwrap()),
        ]);
        let err = Auth::new(users).err().expect("mixed costs refused");
        assert!(
            matches!(&err, UsersError::MixedCosts { first, first_cost: 4, user, cost: 6 }
                if first == "a" && user == "b"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("user 'b': bcrypt cost 6, but user 'a' has cost 4"),
            "{err}"
        );
        let users = BTreeMap::from([
            ("a".to_string(), bcrypt::hash("x", 6).unwrap()),
            ("b".to_string(), bcrypt::hash("y", 6).unwrap()),
        ]);
        let auth = Auth::new(users).unwrap();
        assert_eq!(check_hash(&auth.users.read().unwrap().dummy), Ok(6));
        for cost in 4..=MAX_COST {
            let dummy = format!("$2b${cost:02}${DUMMY_SALT_AND_HASH}");
            assert_eq!(check_hash(&dummy), Ok(cost));
        }
    }

    /// Resilience round 3, item 7: users swapped by a reload. A removed user and a
    /// changed hash are refused though their password was remembered; a new user passes;
    /// the dummy follows the new cost; a refused set keeps the served one; users put in
    /// place where there were none start the bcrypt thread, and none opens every route.
    #[tokio::test]
    async fn round3_7_replaced_users_are_served_from_the_next_check() {
        let s3cret = bcrypt::hash("s3cret", 4).unwrap();
        let auth = Auth::new(BTreeMap::from([
            ("prom".to_string(), s3cret.clone()),
            ("old".to_string(), s3cret.clone()),
        ]))
        .unwrap();
        for user in ["prom", "old"] {
            assert_eq!(check(&auth, user, "s3cret").await, Verdict::Allowed);
        }
        let runs = auth.bcrypt_runs();
        let replaced = BTreeMap::from([
            ("prom".to_string(), bcrypt::hash("other", 5).unwrap()),
            ("new".to_string(), bcrypt::hash("s3cret", 5).unwrap()),
        ]);
        assert!(auth.replace(replaced.clone()).unwrap());
        assert!(!auth.replace(replaced).unwrap());
        assert_eq!(check(&auth, "old", "s3cret").await, Verdict::Denied);
        assert_eq!(check(&auth, "prom", "s3cret").await, Verdict::Denied);
        assert_eq!(check(&auth, "prom", "other").await, Verdict::Allowed);
        assert_eq!(check(&auth, "new", "s3cret").await, Verdict::Allowed);
        // Each of the four went to bcrypt: nothing passed on what was remembered before.
        assert_eq!(auth.bcrypt_runs() - runs, 4);
        let dummy = || check_hash(&auth.users.read().unwrap().dummy);
        assert_eq!(dummy(), Ok(5));
        let mixed = BTreeMap::from([
            ("a".to_string(), bcrypt::hash("x", 4).unwrap()),
            ("b".to_string(), bcrypt::hash("y", 6).unwrap()),
        ]);
        let err = auth.replace(mixed).unwrap_err().to_string();
        assert!(err.starts_with("user 'b': bcrypt cost 6"), "{err}");
        assert_eq!(check(&auth, "new", "s3cret").await, Verdict::Allowed);
        assert_eq!(dummy(), Ok(5));
        auth.replace(BTreeMap::new()).unwrap();
        assert_eq!(check(&auth, "nobody", "").await, Verdict::Allowed);

        let open = Auth::new(BTreeMap::new()).unwrap();
        assert!(open.bcrypt.get().is_none());
        open.replace(BTreeMap::from([("prom".to_string(), s3cret)]))
            .unwrap();
        assert_eq!(check(&open, "prom", "wrong").await, Verdict::Denied);
        assert_eq!(check(&open, "prom", "s3cret").await, Verdict::Allowed);
    }

    #[test]
    fn remembered_credentials_are_not_kept_in_clear() {
        let auth = auth("s3cret", 4);
        let print = auth.remembered.fingerprint("prom", "h", "s3cret");
        assert_ne!(print, auth.remembered.fingerprint("prom", "h", "s3cre"));
        assert_ne!(print, auth.remembered.fingerprint("pro", "mh", "s3cret"));
        let text = String::from_utf8_lossy(&print);
        assert!(!text.contains("s3cret"));
        // Another process (another key) makes another fingerprint.
        assert_ne!(print, Remembered::new().fingerprint("prom", "h", "s3cret"));
    }

    #[test]
    fn remembered_credentials_are_bounded() {
        let r = Remembered::new();
        for i in 0..REMEMBERED + 10 {
            r.insert(r.fingerprint("u", "h", &i.to_string()));
        }
        assert_eq!(r.seen.lock().unwrap().len(), REMEMBERED);
        assert!(!r.contains(&r.fingerprint("u", "h", "0")));
        assert!(r.contains(&r.fingerprint("u", "h", &(REMEMBERED + 9).to_string())));
    }

    #[tokio::test]
    async fn a_full_bcrypt_queue_answers_busy_at_once() {
        let mut auth = auth("s3cret", 4);
        let _queue = auth.fill_bcrypt_queue(None);
        for user in ["prom", "mallory"] {
            assert_eq!(
                auth.check(Some(&header(user, "wrong")), None).await,
                Verdict::Busy
            );
        }
    }

    #[test]
    fn stored_hashes_are_parsed_as_the_verifier_reads_them() {
        let good = bcrypt::hash("pw", 4).unwrap();
        assert_eq!(check_hash(&good), Ok(4));
        let tail = &good[7..];
        let format = |e: &HashError| matches!(e, HashError::Format { .. });
        for (hash, expect, kind) in [
            (
                format!("$2y$31${tail}"),
                "bcrypt cost 31 is too slow to serve",
                &(|e: &HashError| *e == HashError::CostTooHigh { cost: 31 }) as &dyn Fn(&_) -> _,
            ),
            (
                format!("$2y$99${tail}"),
                "bcrypt cost 99 is too slow to serve",
                &|e| *e == HashError::CostTooHigh { cost: 99 },
            ),
            (
                format!("$2y$15${tail}"),
                "bcrypt cost 15 is too slow to serve",
                &|e| *e == HashError::CostTooHigh { cost: 15 },
            ),
            (format!("$2y$03${tail}"), "bcrypt cost 3 is below", &|e| {
                *e == HashError::CostTooLow { cost: 3 }
            }),
            (
                // Always one bad character (a tail without digits had none to replace).
                format!("$2y$04$!{}", &tail[1..]),
                "not a bcrypt hash: its salt or hash has characters",
                &|e| *e == HashError::Alphabet,
            ),
            (
                format!("$2y$04${}", &tail[1..]),
                "not a bcrypt hash",
                &format,
            ),
            (format!("$3y$04${tail}"), "not a bcrypt hash", &format),
            ("plain".to_string(), "not a bcrypt hash", &format),
        ] {
            let err = check_hash(&hash).expect_err(&hash);
            assert!(kind(&err), "{hash}: {err:?}");
            assert!(err.to_string().starts_with(expect), "{hash}: {err}");
        }
        assert_eq!(check_hash(&format!("$2y$14${tail}")), Ok(14));
        // The verifier refuses what the check refuses, naming the user.
        let users = BTreeMap::from([("prom".to_string(), format!("$2y$31${tail}"))]);
        let err = Auth::new(users).err().unwrap().to_string();
        assert!(err.starts_with("user 'prom': bcrypt cost 31"), "{err}");
    }
}
