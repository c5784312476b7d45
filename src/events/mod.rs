//! Events: what begins and ends on each camera (a tamper kind, a region's motion event, a
//! camera coming back), each as a JSON message and, as it begins, the picture of its
//! frame. They are made whenever `[mqtt]` or `[events] dir` is set, by one task on the
//! daemon's runtime that reads what the cameras hand the HTTP side every [`TICK`]: the
//! MQTT link publishes them ([`News`]) and `[events] dir` keeps them, either without the
//! other. Nothing here is ever waited for by a camera thread.
//!
//! The rooms: `observed` reads one camera's moment, `tracker` turns the moments into the
//! events that begin and end, `pictures` takes each event's picture, and `store` writes
//! them to `[events] dir` on a thread of its own.

mod observed;
mod pictures;
mod store;
mod tracker;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use edgesight_http::server::CameraView;
pub use observed::Observed;
pub use pictures::PICTURE_QUALITY;
use store::Job;
pub use store::{EventsSettings, DEFAULT_MAX_AGE_DAYS, DEFAULT_MAX_FILES};
use tracker::Events;

/// How often the cameras are read: an event begins or ends within this of its frame.
const TICK: Duration = Duration::from_millis(250);

/// What the events hand the MQTT link, by camera (its place in the cameras' views).
#[derive(Debug)]
pub enum News {
    /// An event's message, as it begins or ends.
    Event { camera: usize, json: String },
    /// The picture of the events that last began on the camera.
    Picture { camera: usize, jpeg: Vec<u8> },
}

/// Starts making the events of the cameras of `views`, kept in `dir`'s directory and
/// handed to `news`, where set, until `shutdown` turns true. Call within the runtime.
pub fn start(
    dir: Option<EventsSettings>,
    news: Option<mpsc::UnboundedSender<News>>,
    views: Arc<Vec<CameraView>>,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    // The writer's first pruning happens at start, before any event.
    let store = dir.map(store::start);
    tokio::spawn(run(store, news, views, shutdown))
}

async fn run(
    store: Option<std::sync::mpsc::Sender<Job>>,
    news: Option<mpsc::UnboundedSender<News>>,
    views: Arc<Vec<CameraView>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut events = Events::default();
    // Each camera's picture, asked for (one at a time) with the stems of the events it is
    // the picture of.
    let (picture_tx, mut picture_rx) =
        mpsc::unbounded_channel::<(usize, Vec<String>, Option<Vec<u8>>)>();
    let mut asked = vec![false; views.len()];
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|s| *s) => break,
            Some((i, stems, picture)) = picture_rx.recv() => {
                asked[i] = false;
                let Some(jpeg) = picture else { continue };
                if let Some(store) = &store {
                    let _ = store.send(Job::Picture {
                        camera: views[i].name.clone(),
                        stems,
                        jpeg: jpeg.clone(),
                    });
                }
                if let Some(news) = &news {
                    let _ = news.send(News::Picture { camera: i, jpeg });
                }
            }
            _ = tick.tick() => {
                let now = SystemTime::now();
                for (i, view) in views.iter().enumerate() {
                    let round = events.changes(&Observed::of(view), now);
                    if !round.began.is_empty() && !asked[i] {
                        if let Some(answer) = view.next_pictures() {
                            asked[i] = true;
                            let (tx, name) = (picture_tx.clone(), view.name.clone());
                            let stems = round.began.clone();
                            tokio::spawn(async move {
                                let _ = tx.send((i, stems, pictures::take(name, answer).await));
                            });
                        }
                    }
                    for m in round.messages {
                        if let Some(store) = &store {
                            let _ = store.send(Job::Json {
                                camera: view.name.clone(),
                                stem: m.stem,
                                json: m.json.clone(),
                            });
                        }
                        if let Some(news) = &news {
                            let _ = news.send(News::Event { camera: i, json: m.json });
                        }
                    }
                }
            }
        }
    }
}
