//! The publisher's two tasks on the daemon's tokio runtime: `drive` owns the connection
//! (connects, backs off, says why it failed once per reason, counts what it sends), and
//! `publish` reads the cameras' states every [`TICK`], takes the events' [`News`], and
//! hands what changed to the client while connected, to the [`Outbox`] while not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus::{IntCounter, IntCounterVec, IntGauge};
use rumqttc::{
    AsyncClient, ConnectReturnCode, ConnectionError, Event, EventLoop, LastWill, MqttOptions,
    Outgoing, Packet, QoS, TlsConfiguration, Transport,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::discovery::{self, Cameras};
use super::outbox::{Message, Outbox};
use super::states::States;
use super::MqttSettings;
use crate::events::{News, Observed};
use edgesight_http::metrics::Metrics;
use edgesight_http::server::CameraView;

/// How often the cameras' states are read: an on/off topic follows within this.
const TICK: Duration = Duration::from_millis(250);
/// Messages kept while the broker is away; the oldest are dropped past it. A state
/// change of every topic of a few cameras fits many times over.
const OUTBOX: usize = 1024;
/// Requests the client holds before its connection takes them.
const CLIENT_QUEUE: usize = 64;
/// The wait before the first retry, doubled at each failure up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long a stopping daemon waits for its `offline` to reach the broker.
const GOODBYE_WITHIN: Duration = Duration::from_millis(500);

/// `edgesight_mqtt_*`: board-level, three series.
#[derive(Clone)]
pub struct MqttMetrics {
    connected: IntGauge,
    published: IntCounter,
    dropped: IntCounter,
}

impl MqttMetrics {
    pub fn new(metrics: &Metrics) -> MqttMetrics {
        let connected = metrics.int_gauges(
            "edgesight_mqtt_connected",
            "1 while the daemon is connected to its MQTT broker ([mqtt] url), 0 otherwise.",
            &[],
        );
        let published = metrics.counters(
            "edgesight_mqtt_messages_published_total",
            "Messages sent to the MQTT broker.",
            &[],
        );
        let dropped: IntCounterVec = metrics.counters(
            "edgesight_mqtt_messages_dropped_total",
            "Messages never sent to the MQTT broker, by reason: queue_full (the oldest \
             of those waiting while the broker was away).",
            &["reason"],
        );
        MqttMetrics {
            connected: connected.with_label_values(&[] as &[&str]),
            published: published.with_label_values(&[] as &[&str]),
            dropped: dropped.with_label_values(&["queue_full"]),
        }
    }
}

/// What the connection tells the publisher.
#[derive(Debug)]
enum Link {
    Up,
    Down,
    /// Home Assistant started: it wants the discovery configs again.
    Birth,
}

/// Starts publishing the cameras of `views` and the events `news` brings to the broker
/// of `settings`, until `shutdown` turns true; the task ends after saying `offline`. Call
/// within the runtime.
pub fn start(
    settings: MqttSettings,
    news: mpsc::UnboundedReceiver<News>,
    views: Arc<Vec<CameraView>>,
    cameras: Cameras,
    metrics: MqttMetrics,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let parts = Parts {
        news,
        views,
        cameras,
        metrics,
        outbox: OUTBOX,
    };
    start_with(settings, parts, shutdown)
}

/// What the publisher works with besides its settings; `outbox` is its capacity, which
/// only tests set to other than [`OUTBOX`].
struct Parts {
    news: mpsc::UnboundedReceiver<News>,
    views: Arc<Vec<CameraView>>,
    cameras: Cameras,
    metrics: MqttMetrics,
    outbox: usize,
}

fn start_with(
    settings: MqttSettings,
    parts: Parts,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let metrics = parts.metrics.clone();
    let (client, eventloop) = AsyncClient::new(options(&settings), CLIENT_QUEUE);
    let (link_tx, link_rx) = mpsc::unbounded_channel();
    let driver = tokio::spawn(drive(
        eventloop,
        settings.clone(),
        metrics.clone(),
        link_tx,
        shutdown.clone(),
    ));
    tokio::spawn(publish(client, driver, settings, parts, link_rx, shutdown))
}

fn options(s: &MqttSettings) -> MqttOptions {
    let mut o = MqttOptions::new(&s.client_id, &s.host, s.port);
    o.set_keep_alive(s.keepalive);
    o.set_clean_session(true);
    o.set_last_will(LastWill::new(
        s.availability_topic(),
        "offline",
        qos(s.qos),
        true,
    ));
    if s.tls {
        // Checked with the config: an error here is a file changed since, said at connect.
        if let Ok(config) = super::tls::client_config(s) {
            o.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(
                Arc::new(config),
            )));
        }
    }
    o
}

fn qos(q: u8) -> QoS {
    match q {
        0 => QoS::AtMostOnce,
        1 => QoS::AtLeastOnce,
        _ => QoS::ExactlyOnce,
    }
}

/// Why a connection failed, in words that say what to check.
fn reason(e: &ConnectionError) -> String {
    match e {
        ConnectionError::ConnectionRefused(ConnectReturnCode::BadUserNamePassword) => {
            "the broker refused the user name or password ([mqtt] username, password_file)".into()
        }
        ConnectionError::ConnectionRefused(ConnectReturnCode::NotAuthorized) => {
            "the broker refused this client as not authorized (check [mqtt] username \
             and password_file, or cert_file)"
                .into()
        }
        ConnectionError::ConnectionRefused(code) => {
            format!("the broker refused the connection: {code:?}")
        }
        // The handshake's own error, without the client's "I/O" wrapping.
        ConnectionError::Tls(rumqttc::TlsError::Io(e)) => {
            format!("TLS: {e} ([mqtt] ca_file, cert_file, key_file)")
        }
        ConnectionError::Tls(e) => format!("TLS: {e} ([mqtt] ca_file, cert_file, key_file)"),
        ConnectionError::NetworkTimeout => "no answer from the broker".into(),
        e => e.to_string(),
    }
}

/// Polls the connection: reconnects after a failure with a doubling backoff, logs each
/// distinct reason once, and reads the password file again before each connection.
async fn drive(
    mut eventloop: EventLoop,
    settings: MqttSettings,
    metrics: MqttMetrics,
    link: mpsc::UnboundedSender<Link>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut backoff = BACKOFF_MIN;
    let mut said: Option<String> = None;
    let mut up = false;
    let mut credentials_read = false;
    loop {
        if !up && !credentials_read {
            credentials(&mut eventloop, &settings);
            credentials_read = true;
        }
        let event = tokio::select! {
            event = eventloop.poll() => event,
            // While connected, the publisher says `offline` and disconnects instead.
            _ = shutdown.wait_for(|s| *s), if !up => return,
        };
        match event {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                up = true;
                backoff = BACKOFF_MIN;
                metrics.connected.set(1);
                tracing::info!(broker = %settings.url, "MQTT: connected");
                said = None;
                let _ = link.send(Link::Up);
            }
            Ok(Event::Outgoing(Outgoing::Publish(_))) => metrics.published.inc(),
            Ok(Event::Incoming(Packet::Publish(p)))
                if !settings.discovery_prefix.is_empty()
                    && p.topic == settings.birth_topic()
                    && p.payload.as_ref() == b"online" =>
            {
                let _ = link.send(Link::Birth);
            }
            Ok(Event::Outgoing(Outgoing::Disconnect)) => {
                metrics.connected.set(0);
                return;
            }
            Ok(_) => {}
            Err(e) => {
                if up {
                    up = false;
                    metrics.connected.set(0);
                    let _ = link.send(Link::Down);
                }
                if *shutdown.borrow() {
                    return;
                }
                let why = reason(&e);
                if said.as_ref() != Some(&why) {
                    tracing::warn!(
                        broker = %settings.url,
                        "MQTT: {why}; retrying every {}-{} s",
                        BACKOFF_MIN.as_secs(),
                        BACKOFF_MAX.as_secs()
                    );
                    said = Some(why);
                }
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    _ = shutdown.wait_for(|s| *s) => return,
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                credentials_read = false;
            }
        }
    }
}

/// Sets the user name and the password (read from its file now) for the next connection.
fn credentials(eventloop: &mut EventLoop, s: &MqttSettings) {
    let Some(user) = &s.username else { return };
    let password = match &s.password_file {
        None => String::new(),
        Some(file) => match super::read_password(file) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("MQTT: password_file: {e}");
                String::new()
            }
        },
    };
    eventloop
        .mqtt_options
        .set_credentials(user.clone(), password);
}

async fn publish(
    client: AsyncClient,
    driver: JoinHandle<()>,
    settings: MqttSettings,
    parts: Parts,
    mut link: mpsc::UnboundedReceiver<Link>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Parts {
        mut news,
        views,
        cameras,
        metrics,
        outbox,
    } = parts;
    let qos = qos(settings.qos);
    let mut outbox = Outbox::new(outbox);
    let mut states = States::new(&settings.topic_prefix);
    // Each camera's event picture waiting for the broker, and the one last sent (sent
    // again at each connection: it is retained, and a broker may have lost it).
    let mut pictures: Vec<Option<Vec<u8>>> = vec![None; views.len()];
    let mut sent_pictures: Vec<Option<Vec<u8>>> = vec![None; views.len()];
    let mut connected = false;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|s| *s) => break,
            Some(l) = link.recv() => match l {
                Link::Up => {
                    connected = true;
                    if !settings.discovery_prefix.is_empty() {
                        let _ = client.try_subscribe(settings.birth_topic(), QoS::AtLeastOnce);
                    }
                    // Before what waited: `online`, then the entities the states are for.
                    let first = std::iter::once(Message::retained(
                        settings.availability_topic(),
                        "online",
                    ))
                    .chain(discovery::messages(&settings, &cameras));
                    for m in first.collect::<Vec<_>>().into_iter().rev() {
                        outbox.put_back(m);
                    }
                    // A broker that restarted has lost the retained states: all again.
                    states.forget();
                    for (waiting, sent) in pictures.iter_mut().zip(&sent_pictures) {
                        if waiting.is_none() {
                            waiting.clone_from(sent);
                        }
                    }
                }
                Link::Down => connected = false,
                Link::Birth => {
                    for m in discovery::messages(&settings, &cameras) {
                        if outbox.push(m).is_some() {
                            metrics.dropped.inc();
                        }
                    }
                }
            },
            Some(n) = news.recv() => match n {
                News::Event { camera, json } => {
                    let topic = format!("{}/{}/events", settings.topic_prefix, views[camera].name);
                    if outbox.push(Message::event(topic, json)).is_some() {
                        metrics.dropped.inc();
                    }
                }
                News::Picture { camera, jpeg } => pictures[camera] = Some(jpeg),
            },
            _ = tick.tick() => {
                let now = Instant::now();
                for view in views.iter() {
                    for m in states.changes(&Observed::of(view), now) {
                        if outbox.push(m).is_some() {
                            metrics.dropped.inc();
                        }
                    }
                }
            }
        }
        if connected {
            while let Some(m) = outbox.pop() {
                if client
                    .try_publish(&m.topic, qos, m.retain, m.payload.clone())
                    .is_err()
                {
                    // The client's queue is full: the rest waits for the next round.
                    outbox.put_back(m);
                    break;
                }
            }
            for (i, waiting) in pictures.iter_mut().enumerate() {
                let Some(jpeg) = waiting.take() else { continue };
                let topic = format!("{}/{}/picture", settings.topic_prefix, views[i].name);
                if client.try_publish(topic, qos, true, jpeg.clone()).is_err() {
                    *waiting = Some(jpeg);
                    break;
                }
                sent_pictures[i] = Some(jpeg);
            }
        }
    }
    // A clean disconnection does not send the last will: say `offline` first.
    if connected {
        let _ = client.try_publish(settings.availability_topic(), qos, true, "offline");
        let _ = client.try_disconnect();
        let _ = tokio::time::timeout(GOODBYE_WITHIN, driver).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// While the broker is away, every message waits in the outbox; past its capacity
    /// each new one drops the oldest, and `queue_full` counts exactly those.
    #[tokio::test]
    async fn an_outbox_overflowing_while_the_broker_is_away_counts_each_drop() {
        // A loopback port nobody listens on: every connection is refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let config = format!(
            "[mqtt]\nurl = \"mqtt://127.0.0.1:{port}\"\nboard = \"b7\"\n\
             discovery_prefix = \"\"\n[[camera]]\nname = \"front\"\n\
             [camera.source]\nkind = \"pattern\"\n"
        );
        let settings = crate::config::check_text(std::path::Path::new("t.toml"), &config)
            .expect("a valid config");
        let mqtt = settings.mqtt.clone().expect("[mqtt]");
        let cameras = crate::config::discovery_cameras(&settings, &mqtt.board);
        let registry = Metrics::new();
        let (_latest_tx, latest) = watch::channel(None);
        let (requests, _taken) = std::sync::mpsc::channel();
        let views = Arc::new(vec![CameraView::new("front".into(), latest, requests)]);
        let (news_tx, news) = mpsc::unbounded_channel();
        let (stop_tx, stop) = watch::channel(false);
        let capacity = 8;
        let parts = Parts {
            news,
            views,
            cameras,
            metrics: MqttMetrics::new(&registry),
            outbox: capacity,
        };
        let task = start_with(mqtt, parts, stop);
        let events = 20;
        for n in 0..events {
            let json = format!("{{\"n\":{n}}}");
            news_tx.send(News::Event { camera: 0, json }).expect("sent");
        }
        // With the camera's first round: its `state` and `availability` topics.
        let overflow = 2 + events - capacity;
        let series = r#"edgesight_mqtt_messages_dropped_total{reason="queue_full"}"#;
        let deadline = Instant::now() + Duration::from_secs(10);
        while registry.sample(series) != Some(overflow as f64) {
            assert!(
                Instant::now() < deadline,
                "{series} is {:?}, not {overflow}",
                registry.sample(series)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Rounds go on without a change: nothing more is queued, so nothing more dropped.
        tokio::time::sleep(3 * TICK).await;
        assert_eq!(registry.sample(series), Some(overflow as f64));
        assert_eq!(registry.sample("edgesight_mqtt_connected"), Some(0.0));
        assert_eq!(
            registry.sample("edgesight_mqtt_messages_published_total"),
            Some(0.0)
        );
        stop_tx.send(true).expect("the publisher listens");
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the publisher stops")
            .expect("no panic");
    }
}
