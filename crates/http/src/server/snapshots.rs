//! A camera's pictures for `/snapshot/*.png`, read back from the camera and encoded once
//! per frame, whoever asks:
//!
//! - A camera that is down (no frame yet, or none for [`DOWN_AFTER`] or
//!   `web.stale_after_seconds` if longer) is answered at once; nothing waits on it. A slow
//!   camera (a frame every few seconds) is not down between its frames.
//! - The camera is asked for its pictures at most once a second, by one request; others
//!   that come meanwhile wait on that one read-back (no lock is held across the wait),
//!   or, once a picture exists, are served it at once while a newer one is fetched.
//! - The pictures (four frame-sized images and their PNGs) are let go [`KEEP`] after
//!   their read-back unless a newer one replaced them: a status page watched once does not
//!   hold them for the daemon's life.
//! - Each PNG is encoded once and shared by every answer (answers hold the same bytes);
//!   the encoded bytes alive, cached or held by answers not yet read, are counted against
//!   [`PNG_BUDGET`], past which a request is answered 503: clients that never read cannot
//!   grow the daemon towards its memory limit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{oneshot, watch};

use crate::mailbox::{Snapshot, SnapshotReply};
use crate::report;

/// A picture is read back again once it is this old, which bounds the read-backs a busy
/// status page costs the pipeline.
pub(super) const MAX_AGE: Duration = Duration::from_secs(1);
/// How long a read-back's pictures are kept when no newer one replaces them: longer than
/// the status page's 2 s between reads, so a page watched keeps its pictures at hand.
pub(super) const KEEP: Duration = Duration::from_secs(10);
/// How long a read-back may take: the camera's next frame.
const WAIT: Duration = Duration::from_secs(3);
/// A camera without a frame for this long (or for `web.stale_after_seconds` if longer)
/// is down.
pub(super) const DOWN_AFTER: Duration = Duration::from_secs(10);
/// Encoded PNG bytes alive at most, all cameras together: about eight 3840x2160 luma
/// PNGs of a busy scene.
pub(super) const PNG_BUDGET: usize = 64 << 20;

/// The PNG bytes alive (cached, or held by answers not yet written), server-wide, and
/// the most there may be.
#[derive(Clone)]
pub(super) struct PngBudget {
    alive: Arc<AtomicUsize>,
    limit: usize,
}

impl PngBudget {
    pub(super) fn new(limit: usize) -> PngBudget {
        PngBudget {
            alive: Arc::new(AtomicUsize::new(0)),
            limit,
        }
    }

    /// PNG bytes alive now.
    pub(super) fn alive(&self) -> usize {
        self.alive.load(Ordering::Relaxed)
    }

    /// `png` as shared bytes, counted while any answer or the cache holds them.
    fn counted(&self, png: Vec<u8>) -> Bytes {
        struct Counted(Vec<u8>, Arc<AtomicUsize>);
        impl AsRef<[u8]> for Counted {
            fn as_ref(&self) -> &[u8] {
                &self.0
            }
        }
        impl Drop for Counted {
            fn drop(&mut self) {
                self.1.fetch_sub(self.0.len(), Ordering::Relaxed);
            }
        }
        self.alive.fetch_add(png.len(), Ordering::Relaxed);
        Bytes::from_owner(Counted(png, Arc::clone(&self.alive)))
    }
}

/// The pictures of `/snapshot/NAME`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Picture {
    Luma,
    Gradient,
    Mask,
    Histogram,
    Motion,
}

impl Picture {
    pub(super) fn from_name(name: &str) -> Option<Picture> {
        Some(match name {
            "luma.png" => Picture::Luma,
            // The gradient picture keeps the path users and `process` know it by.
            "edges.png" => Picture::Gradient,
            "mask.png" => Picture::Mask,
            "histogram.png" => Picture::Histogram,
            "motion.png" => Picture::Motion,
            _ => return None,
        })
    }
}

/// Why there is no picture to send.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum NoPicture {
    /// The camera delivers no frames: try again in this many seconds.
    Down(String),
    /// The answers waiting to be read hold the budget.
    OverBudget,
    Failed(String),
}

/// Each kind's PNG of one read-back, made by the first request that needs it while the
/// others wait for it: one encode whoever asks.
type PngCell = Arc<tokio::sync::OnceCell<Bytes>>;

/// One read-back of a camera's pictures and the PNGs made of it so far.
struct Read {
    /// Which read-back of this camera's (1, 2, ...): the pictures' ETag.
    id: u64,
    at: Instant,
    snapshot: Arc<Snapshot>,
    pngs: [PngCell; 5],
}

type Outcome = Option<Result<Arc<Snapshot>, String>>;

#[derive(Default)]
struct Cache {
    last: Option<Read>,
    /// A read-back asked of the camera and not answered yet.
    pending: Option<watch::Receiver<Outcome>>,
    /// Read-backs made so far.
    reads: u64,
}

/// A picture's bytes and the ETag that names them: the same for every answer made from
/// one read-back, another for the next (and for the same read-back after a restart).
pub(super) struct Png {
    pub bytes: Bytes,
    pub etag: String,
}

/// Tells this process's read-backs from those of the one before it, whose numbers a
/// browser may still hold.
fn process_tag() -> u64 {
    static TAG: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TAG.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    })
}

/// One camera's snapshots: asked of its thread, their PNGs kept a while for the page's next fetches.
pub(super) struct CameraSnapshots {
    name: String,
    requests: Mutex<mpsc::Sender<SnapshotReply>>,
    cache: Arc<Mutex<Cache>>,
    keep: Duration,
}

impl CameraSnapshots {
    pub(super) fn new(name: String, requests: mpsc::Sender<SnapshotReply>) -> CameraSnapshots {
        CameraSnapshots {
            name,
            requests: Mutex::new(requests),
            cache: Arc::new(Mutex::new(Cache::default())),
            keep: KEEP,
        }
    }

    /// Snapshots kept `keep` after their read-back rather than [`KEEP`].
    #[cfg(test)]
    pub(super) fn keeping(self, keep: Duration) -> CameraSnapshots {
        CameraSnapshots { keep, ..self }
    }

    /// The PNG of `kind` of a recent frame; `last_frame` is how long ago the camera
    /// published its last one (`None`: never), and one older than `down_after` is a camera
    /// that is down.
    pub(super) async fn png(
        &self,
        kind: Picture,
        last_frame: Option<Duration>,
        down_after: Duration,
        budget: &PngBudget,
    ) -> Result<Png, NoPicture> {
        if last_frame.is_none_or(|age| age > down_after) {
            return Err(NoPicture::Down(format!(
                "camera '{}' delivers no frames\n",
                self.name
            )));
        }
        let found = {
            let mut cache = lock(&self.cache);
            let fresh = cache
                .last
                .as_ref()
                .is_some_and(|r| r.at.elapsed() < MAX_AGE);
            if !fresh && cache.pending.is_none() {
                cache.pending = Some(self.ask()?);
            }
            match (&cache.last, &cache.pending) {
                // A picture exists: served now; a newer one may be on its way.
                (Some(read), _) => Ok((
                    Arc::clone(&read.snapshot),
                    Arc::clone(&read.pngs[kind as usize]),
                    read.id,
                )),
                (None, Some(pending)) => Err(pending.clone()),
                (None, None) => unreachable!("asked above"),
            }
        };
        let (snapshot, png, id) = match found {
            Ok(found) => found,
            Err(mut pending) => {
                let outcome = pending
                    .wait_for(Option::is_some)
                    .await
                    .map_err(|_| NoPicture::Failed("the read-back was abandoned\n".into()))?
                    .clone()
                    .expect("waited for");
                let snapshot = outcome.map_err(NoPicture::Failed)?;
                // The PNG cell of that read-back, unless a newer one replaced it (then
                // its PNG is made for this answer alone, and named by no ETag).
                let (png, id) = lock(&self.cache)
                    .last
                    .as_ref()
                    .filter(|r| Arc::ptr_eq(&r.snapshot, &snapshot))
                    .map(|r| (Arc::clone(&r.pngs[kind as usize]), r.id))
                    .unwrap_or_default();
                (snapshot, png, id)
            }
        };
        let png = png
            .get_or_try_init(|| async {
                if budget.alive() >= budget.limit {
                    return Err(NoPicture::OverBudget);
                }
                // PNG encoding takes milliseconds per megapixel: off the async workers.
                let encoded = tokio::task::spawn_blocking(move || encode(&snapshot, kind))
                    .await
                    .map_err(|e| NoPicture::Failed(format!("{e}\n")))?
                    .map_err(|e| NoPicture::Failed(format!("{e}\n")))?;
                Ok(budget.counted(encoded))
            })
            .await?;
        let etag = match id {
            0 => String::new(),
            id => format!("\"{:x}-{id}\"", process_tag()),
        };
        Ok(Png {
            bytes: png.clone(),
            etag,
        })
    }

    /// Asks the camera for the pictures of its next frame, for a reader other than the
    /// routes (an event's picture); `None` when the camera thread is not running.
    pub(super) fn next_frame(&self) -> Option<oneshot::Receiver<Arc<Snapshot>>> {
        let (reply, answer) = oneshot::channel();
        lock(&self.requests)
            .send(SnapshotReply::event_picture(reply))
            .ok()?;
        Some(answer)
    }

    /// Asks the camera for the pictures of its next frame; the answer (or the lack of
    /// one within [`WAIT`]) becomes the cache's last read-back.
    fn ask(&self) -> Result<watch::Receiver<Outcome>, NoPicture> {
        let (reply, answer) = oneshot::channel();
        let sent = lock(&self.requests)
            .send(SnapshotReply::pictures(reply))
            .is_ok();
        if !sent {
            return Err(NoPicture::Down(format!(
                "camera '{}' is not running\n",
                self.name
            )));
        }
        let (tx, rx) = watch::channel(None);
        let (cache, name, keep) = (Arc::clone(&self.cache), self.name.clone(), self.keep);
        tokio::spawn(async move {
            let outcome = match tokio::time::timeout(WAIT, answer).await {
                Ok(Ok(snapshot)) => Ok(snapshot),
                Ok(Err(_)) => Err(format!("camera '{name}' gave no pictures (see the log)\n")),
                Err(_) => Err(format!(
                    "camera '{name}' processed no frame within {} s\n",
                    WAIT.as_secs()
                )),
            };
            let read = {
                let mut held = lock(&cache);
                let read = outcome.is_ok().then(|| held.reads + 1);
                if let (Ok(snapshot), Some(id)) = (&outcome, read) {
                    held.reads = id;
                    held.last = Some(Read {
                        id,
                        at: Instant::now(),
                        snapshot: Arc::clone(snapshot),
                        pngs: Default::default(),
                    });
                }
                held.pending = None;
                read
            };
            let _ = tx.send(Some(outcome));
            if let Some(id) = read {
                tokio::time::sleep(keep).await;
                let mut held = lock(&cache);
                if held.last.as_ref().is_some_and(|r| r.id == id) {
                    held.last = None;
                }
            }
        });
        Ok(rx)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn encode(snap: &Snapshot, kind: Picture) -> image::ImageResult<Vec<u8>> {
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    use image::{ExtendedColorType, ImageEncoder};
    let mut out = Vec::new();
    let encoder = PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Sub);
    match kind {
        Picture::Histogram => {
            let chart = report::histogram_chart(&snap.histogram, snap.otsu_threshold);
            encoder.write_image(
                chart.as_raw(),
                chart.width(),
                chart.height(),
                ExtendedColorType::Rgb8,
            )?;
        }
        _ => {
            let pixels = match kind {
                Picture::Luma => &snap.luma,
                Picture::Gradient => &snap.gradient,
                Picture::Motion => &snap.motion,
                _ => &snap.mask,
            };
            encoder.write_image(pixels, snap.width, snap.height, ExtendedColorType::L8)?;
        }
    }
    Ok(out)
}
