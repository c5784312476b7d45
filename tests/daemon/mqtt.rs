//! The daemon and a real MQTT broker (Debian's mosquitto, on a loopback port with a
//! password file): the availability topic and its last will, each camera's retained
//! state topics and Home Assistant's discovery configs, a wrong password said once and
//! retried, the broker restarted while the frames flow, mqtts with a client certificate
//! (a CA made with openssl) and a wrong CA, the events and their pictures (an MJPEG
//! recording's its own image). The subscriber is mosquitto_sub.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::daemon::*;
use crate::{assert_refused, latest_frame};

const USER: &str = "edgesight";
const PASSWORD: &str = "mqtt-s3cret";

/// A mosquitto broker on a free loopback port, which takes `USER` with `PASSWORD` only.
struct Broker {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Broker {
    fn start(dir: &Path) -> Broker {
        let passwd = dir.join("passwd");
        let _ = std::fs::remove_file(&passwd);
        run_tool_ok(
            Command::new("mosquitto_passwd")
                .args(["-b", "-c"])
                .arg(&passwd)
                .args([USER, PASSWORD]),
            None,
        );
        Broker::start_on(dir, free_port())
    }

    /// Starts the broker on `port` (again, after [`Broker::kill`]).
    fn start_on(dir: &Path, port: u16) -> Broker {
        Broker::start_with(dir, port, "")
    }

    /// Starts the broker on `port`, its listener's settings followed by `listener`.
    fn start_with(dir: &Path, port: u16, listener: &str) -> Broker {
        let conf = dir.join("mosquitto.conf");
        // `user root`: a broker started by root keeps the rights to read the test's files
        // (it takes another user otherwise); started by anyone else, the line does nothing.
        std::fs::write(
            &conf,
            format!(
                "user root\nlistener {port} 127.0.0.1\n{listener}allow_anonymous false\n\
                 password_file {}\npersistence false\nlog_dest stderr\nlog_type all\n",
                dir.join("passwd").display()
            ),
        )
        .expect("mosquitto.conf");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("mosquitto.log"))
            .expect("log");
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start mosquitto (scripts/install-deps.sh test installs it)");
        wait_until("mosquitto listening", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
        Broker {
            child,
            port,
            dir: dir.to_path_buf(),
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("mosquitto.log")).unwrap_or_default()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// mosquitto_sub on the topics of a filter (every topic under `edgesight/` by default), each message a `TOPIC PAYLOAD` line of
/// its file.
struct Subscriber {
    child: Child,
    out: PathBuf,
}

impl Subscriber {
    fn start(broker: &Broker, name: &str) -> Subscriber {
        Subscriber::on(broker, name, "edgesight/#")
    }

    fn on(broker: &Broker, name: &str, filter: &str) -> Subscriber {
        let out = broker.dir.join(format!("{name}.messages"));
        let child = Command::new("mosquitto_sub")
            .args(["-h", "127.0.0.1", "-p", &broker.port.to_string()])
            .args(["-u", USER, "-P", PASSWORD, "-i", name, "-t", filter, "-v"])
            .stdout(std::fs::File::create(&out).expect("messages file"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start mosquitto_sub");
        Subscriber { child, out }
    }

    /// The messages received so far, in order (an event's picture, binary, makes lines
    /// of no topic of ours).
    fn messages(&self) -> Vec<(String, String)> {
        String::from_utf8_lossy(&std::fs::read(&self.out).unwrap_or_default())
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(t, p)| (t.to_string(), p.to_string()))
            .collect()
    }

    /// The payloads `topic` received so far.
    fn payloads(&self, topic: &str) -> Vec<String> {
        self.messages()
            .into_iter()
            .filter(|(t, _)| t == topic)
            .map(|(_, p)| p)
            .collect()
    }

    /// Waits until `topic`'s last payload is `payload`; when it came.
    fn wait_for(&self, topic: &str, payload: &str, limit: Duration) -> Instant {
        wait_until(&format!("{topic} = {payload}"), limit, || {
            (self.payloads(topic).last().map(String::as_str) == Some(payload)).then(Instant::now)
        })
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `[mqtt]` for `broker` as board `b7`, its password in `dir/mqtt.password`.
fn mqtt_table(dir: &Path, broker: &Broker, password: &str) -> String {
    let file = dir.join("mqtt.password");
    std::fs::write(&file, format!("{password}\n")).expect("password file");
    format!(
        "[mqtt]\nurl = \"mqtt://127.0.0.1:{}\"\nboard = \"b7\"\nusername = \"{USER}\"\n\
         password_file = \"{}\"\nkeepalive_seconds = 2\n",
        broker.port,
        file.display()
    )
}

/// The pattern at 320x240 with health and motion (its bar moves in `lane`, nothing in
/// `sky`), a replay of one image (frozen), and a camera whose device is absent.
fn cameras(dir: &Path) -> String {
    let images = dir.join("images");
    std::fs::create_dir_all(&images).expect("mkdir");
    std::fs::write(images.join("still.pgm"), textured_pgm(64, 48)).expect("write an image");
    format!(
        "{}[camera.health]\nlearning_seconds = 0.5\n[camera.motion]\nmin_seconds = 0.2\n\
         [[camera]]\nname = \"still\"\n[camera.source]\nkind = \"replay\"\npath = \"{}\"\n\
         fps = 30\n[camera.health]\nlearning_seconds = 0.5\n\
         [[camera]]\nname = \"absent\"\n[camera.source]\nkind = \"v4l2\"\n\
         device = \"/dev/video-edgesight-none\"\n",
        camera(
            "front",
            "320x240",
            &[("lane", 0, 160, 320, 32), ("sky", 0, 0, 320, 16)],
            64
        ),
        images.display()
    )
}

#[test]
fn mqtt_states_follow_the_cameras_and_the_last_will_says_offline() {
    let dir = tmp_dir("daemon-mqtt-states");
    let broker = Broker::start(&dir);
    let sub = Subscriber::start(&broker, "states");
    let ha = Subscriber::on(&broker, "discovery", "homeassistant/#");
    let config = format!("{}{}", mqtt_table(&dir, &broker, PASSWORD), cameras(&dir));
    // Not `start`: /healthz answers 503 while a camera (the absent one) is down.
    let mut d = Daemon::spawn(&dir, &config);
    let limit = Duration::from_secs(60);
    sub.wait_for("edgesight/b7/availability", "online", limit);
    sub.wait_for("edgesight/b7/front/state", "up", limit);
    sub.wait_for("edgesight/b7/front/availability", "online", limit);
    sub.wait_for("edgesight/b7/absent/state", "waiting_for_device", limit);
    sub.wait_for("edgesight/b7/absent/availability", "offline", limit);
    // The bar's lane moves once learned; the sky never does; the replay is frozen.
    sub.wait_for("edgesight/b7/front/motion/lane", "ON", limit);
    sub.wait_for("edgesight/b7/still/tamper/frozen", "ON", limit);
    let frame = latest_frame(d.port).expect("a frame");
    assert_eq!(frame["motion"]["regions"]["sky"]["events"], 0, "{frame}");
    assert_eq!(sub.payloads("edgesight/b7/front/motion/sky"), ["OFF"]);
    assert_eq!(sub.payloads("edgesight/b7/front/tamper/covered"), ["OFF"]);
    // The frame rate is the pattern's 30 fps, sent at most once a second.
    std::thread::sleep(Duration::from_secs(3));
    let fps = sub.payloads("edgesight/b7/front/fps");
    let last: f64 = fps.last().expect("a frame rate").parse().expect("a number");
    assert!((25.0..=31.0).contains(&last), "{fps:?}");
    // Over the run so far (at most a minute and a few seconds): one a second at most.
    assert!(fps.len() <= 75, "{fps:?}");
    // Nothing is sent for nothing: the pattern's on/off topics are not repeated.
    let states = sub.payloads("edgesight/b7/front/state");
    let ups = states.iter().filter(|s| *s == "up").count();
    assert_eq!(
        (ups, states.last().map(String::as_str)),
        (1, Some("up")),
        "{states:?}"
    );
    assert_discovery(&ha, &sub);
    // Home Assistant's birth message brings every config again.
    let covered = "homeassistant/binary_sensor/b7/front_tamper_covered/config";
    assert_eq!(ha.payloads(covered).len(), 1);
    run_tool_ok(
        Command::new("mosquitto_pub")
            .args(["-h", "127.0.0.1", "-p", &broker.port.to_string()])
            .args([
                "-u",
                USER,
                "-P",
                PASSWORD,
                "-t",
                "homeassistant/status",
                "-m",
                "online",
            ]),
        None,
    );
    wait_until("the configs again", Duration::from_secs(10), || {
        (ha.payloads(covered).len() == 2).then_some(())
    });
    let m = d.metrics();
    assert_eq!(sample(&m, "edgesight_mqtt_connected"), Some(1.0), "{m}");
    let published = sample(&m, "edgesight_mqtt_messages_published_total").expect("published");
    assert!(published >= 15.0, "{m}");
    assert_eq!(
        sample(
            &m,
            r#"edgesight_mqtt_messages_dropped_total{reason="queue_full"}"#
        ),
        Some(0.0),
        "{m}"
    );
    // Killed: the broker says `offline` for it within 1.5 keepalives (2 s here).
    d.signal(libc::SIGKILL);
    let killed = Instant::now();
    let said = sub.wait_for(
        "edgesight/b7/availability",
        "offline",
        Duration::from_secs(10),
    );
    let after = said.duration_since(killed);
    assert!(after <= Duration::from_secs(4), "{after:?}");
    let _ = d.child.wait();
}

/// Every discovery config holds what Home Assistant's MQTT integration requires of its
/// component, and reads a state topic the daemon publishes.
fn assert_discovery(ha: &Subscriber, states: &Subscriber) {
    // Three cameras with health (7 binary sensors, 3 sensors and the event picture's
    // camera each) and front's 2 regions.
    let configs = wait_until("35 discovery configs", Duration::from_secs(10), || {
        let all = ha.messages();
        (all.len() >= 35).then_some(all)
    });
    assert_eq!(configs.len(), 35, "{configs:?}");
    let mut unique = std::collections::HashSet::new();
    let published: std::collections::HashSet<String> =
        states.messages().into_iter().map(|(t, _)| t).collect();
    for (topic, payload) in &configs {
        let c: serde_json::Value = serde_json::from_str(payload).expect("JSON");
        let component = topic.split('/').nth(1).expect("a component");
        assert!(
            topic.starts_with("homeassistant/") && topic.ends_with("/config"),
            "{topic}"
        );
        // A camera reads its pictures from `topic`; the others their states.
        let read = if component == "camera" {
            "topic"
        } else {
            "state_topic"
        };
        let state = c[read].as_str().expect("state_topic or topic, required");
        assert!(state.starts_with("edgesight/b7/"), "{topic}: {c}");
        assert!(unique.insert(c["unique_id"].as_str().expect("unique_id").to_string()));
        assert!(c["name"].is_string(), "{topic}: {c}");
        let device = &c["device"];
        assert!(device["identifiers"][0].is_string(), "{topic}: {c}");
        assert!(device["configuration_url"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://127.0.0.1:")));
        let availability = c["availability"].as_array().expect("availability");
        assert!(availability.iter().all(|a| a["topic"].is_string()), "{c}");
        assert_eq!(c["availability_mode"], "all", "{c}");
        match component {
            "binary_sensor" => {
                let class = c["device_class"].as_str().expect("device_class");
                assert!(["tamper", "motion", "connectivity"].contains(&class), "{c}");
            }
            "sensor" => {
                assert!(c["unit_of_measurement"].is_string(), "{c}");
                assert_eq!(c["state_class"], "measurement", "{c}");
            }
            "camera" => {
                assert!(state.ends_with("/picture"), "{c}");
                assert!(c.get("image_encoding").is_none(), "raw JPEG bytes: {c}");
            }
            other => panic!("{other}: no such component here"),
        }
        // What a camera up and learned publishes is there already (a picture once an
        // event began).
        if state.starts_with("edgesight/b7/front/")
            && !state.ends_with("/sharpness")
            && component != "camera"
        {
            assert!(published.contains(state), "{state} is not published");
        }
    }
}

#[test]
fn mqtt_a_wrong_password_is_said_once_and_retried_until_it_is_right() {
    let dir = tmp_dir("daemon-mqtt-password");
    let broker = Broker::start(&dir);
    let sub = Subscriber::start(&broker, "password");
    let config = format!(
        "{}{}",
        mqtt_table(&dir, &broker, "wrong"),
        camera("front", "64x48", &[], 40)
    );
    let d = Daemon::start(&dir, &config);
    let refused = "not authorised";
    wait_until("three refused connections", Duration::from_secs(30), || {
        (broker.log().matches(refused).count() >= 3).then_some(())
    });
    let log = d.log();
    // mosquitto answers a wrong password with MQTT 3.1.1's "not authorized".
    let said = "MQTT: the broker refused this client as not authorized (check [mqtt] \
                username and password_file, or cert_file); retrying every 1-30 s";
    assert_eq!(log.matches(said).count(), 1, "{log}");
    // Still serving, and not connected.
    let m = d.metrics();
    assert_eq!(sample(&m, "edgesight_mqtt_connected"), Some(0.0), "{m}");
    assert!(sub.payloads("edgesight/b7/availability").is_empty());
    // The password file is read again at each try: the right one connects.
    std::fs::write(dir.join("mqtt.password"), format!("{PASSWORD}\n")).expect("write");
    sub.wait_for(
        "edgesight/b7/availability",
        "online",
        Duration::from_secs(40),
    );
    assert_eq!(sample(&d.metrics(), "edgesight_mqtt_connected"), Some(1.0));
    assert!(d.log().contains("MQTT: connected"), "{}", d.log());
}

#[test]
fn mqtt_a_restarted_broker_gets_every_state_again_and_frames_never_stall() {
    let dir = tmp_dir("daemon-mqtt-restart");
    let mut broker = Broker::start(&dir);
    let config = format!(
        "{}{}",
        mqtt_table(&dir, &broker, PASSWORD),
        camera("front", "64x48", &[], 40)
    );
    let d = Daemon::start(&dir, &config);
    {
        let sub = Subscriber::start(&broker, "before");
        sub.wait_for("edgesight/b7/front/state", "up", Duration::from_secs(60));
    }
    let sequence = || {
        latest_frame(d.port).expect("a frame")["sequence"]
            .as_u64()
            .unwrap()
    };
    broker.kill();
    wait_until(
        "the daemon sees the broker gone",
        Duration::from_secs(20),
        || (sample(&d.metrics(), "edgesight_mqtt_connected") == Some(0.0)).then_some(()),
    );
    // Three seconds without a broker: the camera's 30 fps go on.
    let before = sequence();
    std::thread::sleep(Duration::from_secs(3));
    let gained = sequence() - before;
    assert!(gained >= 60, "{gained} frames in 3 s without a broker");
    // A broker without persistence comes back empty: the daemon sends every state again.
    let broker = Broker::start_on(&dir, broker.port);
    let sub = Subscriber::start(&broker, "after");
    sub.wait_for(
        "edgesight/b7/availability",
        "online",
        Duration::from_secs(40),
    );
    sub.wait_for("edgesight/b7/front/state", "up", Duration::from_secs(10));
    sub.wait_for(
        "edgesight/b7/front/availability",
        "online",
        Duration::from_secs(10),
    );
    assert_eq!(sample(&d.metrics(), "edgesight_mqtt_connected"), Some(1.0));
    let log = d.log();
    assert_eq!(log.matches("MQTT: connected").count(), 2, "{log}");
    // The publisher is made at start: a changed [mqtt] is said to take a restart.
    let path = dir.join("edgesight.toml");
    let changed = std::fs::read_to_string(&path).expect("config");
    std::fs::write(
        &path,
        changed.replace("keepalive_seconds = 2", "keepalive_seconds = 3"),
    )
    .expect("write");
    d.signal(libc::SIGHUP);
    wait_until("the reload's warning", Duration::from_secs(30), || {
        d.log()
            .contains("SIGHUP: [mqtt] changes take a restart; keeping the running ones")
            .then_some(())
    });
    // Stopped cleanly, the daemon says `offline` itself (a clean disconnection sends no
    // last will), before it exits.
    let stopping = sub.messages().len();
    let took = d.stop();
    assert!(took < Duration::from_secs(3), "{took:?}");
    sub.wait_for(
        "edgesight/b7/availability",
        "offline",
        Duration::from_secs(2),
    );
    let after: Vec<_> = sub.messages().split_off(stopping);
    assert_eq!(
        after,
        [(
            "edgesight/b7/availability".to_string(),
            "offline".to_string()
        )],
        "{after:?}"
    );
}

#[test]
fn mqtt_check_config_refuses_a_bad_table_at_its_key() {
    let dir = tmp_dir("daemon-mqtt-refused");
    let front = camera("front", "64x48", &[], 40);
    assert_refused(
        &dir,
        "qos",
        &format!("{front}[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\nboard = \"b\"\nqos = 3\n"),
        ":12:7: mqtt.qos: 3 is not a QoS: 0, 1 or 2",
    );
    assert_refused(
        &dir,
        "url",
        &format!("{front}[mqtt]\nurl = \"mqtt//h\"\n"),
        ":10:7: mqtt.url: 'mqtt//h': not an mqtt:// or mqtts:// URL",
    );
    assert_refused(
        &dir,
        "events",
        &format!(
            "{front}[mqtt]\nurl = \"mqtt://127.0.0.1:1\"\nboard = \"b\"\n[events]\n\
             dir = \"/var/e\"\nmax_files = 0\n"
        ),
        ":14:13: events.max_files: 0 is not from 1 to 1000000",
    );
}

/// Runs openssl in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    run_tool_ok(Command::new("openssl").args(args).current_dir(dir), None);
}

/// A CA `NAME.crt` (and its key) in `dir`.
fn ca(dir: &Path, name: &str) {
    let (key, crt) = (format!("{name}.key"), format!("{name}.crt"));
    let subject = format!("/CN=edgesight test {name}");
    openssl(
        dir,
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", &subject,
            "-keyout", &key, "-out", &crt,
        ],
    );
}

/// `NAME.crt` and `NAME.key` signed by the CA `ca`, with the extensions `ext`.
fn signed(dir: &Path, name: &str, ext: &str) {
    let (key, csr, crt) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
    );
    let ext_file = format!("{name}.ext");
    std::fs::write(dir.join(&ext_file), ext).expect("ext");
    let subject = format!("/CN={name}");
    openssl(
        dir,
        &[
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", &subject, "-keyout", &key, "-out",
            &csr,
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &ext_file,
            "-out",
            &crt,
        ],
    );
}

/// mqtts with a CA made here and a client certificate the broker requires: the right
/// files connect; a CA that did not sign the broker's certificate is said once, naming
/// the keys to check, and retried.
#[test]
fn mqtt_over_tls_with_a_client_certificate_and_a_wrong_ca_said() {
    let dir = tmp_dir("daemon-mqtt-tls");
    ca(&dir, "ca");
    ca(&dir, "other");
    signed(
        &dir,
        "broker",
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    );
    signed(&dir, "client", "extendedKeyUsage=clientAuth\n");
    let passwd = dir.join("passwd");
    run_tool_ok(
        Command::new("mosquitto_passwd")
            .args(["-b", "-c"])
            .arg(&passwd)
            .args([USER, PASSWORD]),
        None,
    );
    let at = |f: &str| dir.join(f).display().to_string();
    let broker = Broker::start_with(
        &dir,
        free_port(),
        &format!(
            "cafile {}\ncertfile {}\nkeyfile {}\nrequire_certificate true\n",
            at("ca.crt"),
            at("broker.crt"),
            at("broker.key")
        ),
    );
    let table = |ca: &str| {
        format!(
            "[mqtt]\nurl = \"mqtts://127.0.0.1:{}\"\nboard = \"b7\"\nusername = \"{USER}\"\n\
             password_file = \"{}\"\nca_file = \"{}\"\ncert_file = \"{}\"\nkey_file = \"{}\"\n{}",
            broker.port,
            at("mqtt.password"),
            at(ca),
            at("client.crt"),
            at("client.key"),
            camera("front", "64x48", &[], 40)
        )
    };
    std::fs::write(dir.join("mqtt.password"), format!("{PASSWORD}\n")).expect("password");
    let wrong_dir = dir.join("wrong");
    std::fs::create_dir_all(&wrong_dir).expect("mkdir");
    let wrong = Daemon::start(&wrong_dir, &table("other.crt"));
    // mosquitto logs a handshake the client refused either after "New connection from"
    // or as "Client connection from ... failed", as its loop meets it: both name the
    // client's alert.
    wait_until("three refused handshakes", Duration::from_secs(30), || {
        (broker.log().matches("tlsv1 alert unknown ca").count() >= 3).then_some(())
    });
    let log = wrong.log();
    let said: Vec<&str> = log.lines().filter(|l| l.contains("MQTT: ")).collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(
        said[0].contains(
            "MQTT: TLS: invalid peer certificate: UnknownIssuer ([mqtt] ca_file, cert_file, \
             key_file); retrying every 1-30 s"
        ),
        "{log}"
    );
    assert_eq!(
        sample(&wrong.metrics(), "edgesight_mqtt_connected"),
        Some(0.0)
    );
    drop(wrong);
    let right_dir = dir.join("right");
    std::fs::create_dir_all(&right_dir).expect("mkdir");
    let right = Daemon::start(&right_dir, &table("ca.crt"));
    wait_until("connected over TLS", Duration::from_secs(30), || {
        (sample(&right.metrics(), "edgesight_mqtt_connected") == Some(1.0)).then_some(())
    });
    // The broker took the client certificate and the password: the states are there.
    let out = run_tool_ok(
        Command::new("mosquitto_sub")
            .args(["-h", "127.0.0.1", "-p", &broker.port.to_string()])
            .args([
                "-u",
                USER,
                "-P",
                PASSWORD,
                "-t",
                "edgesight/b7/availability",
            ])
            .args(["--cafile", &at("ca.crt"), "--cert", &at("client.crt")])
            .args(["--key", &at("client.key"), "-C", "1", "-W", "10"]),
        None,
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "online\n");
}

/// Now in UTC as the events write it (RFC 3339, milliseconds): such strings sort as times.
fn utc_now() -> String {
    let out = run_tool_ok(
        Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%S.%3NZ"]),
        None,
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The retained picture of `camera` (waited for up to 30 s), decoded: its size and luma.
fn decoded_picture(broker: &Broker, camera: &str) -> (edgesight::frame::Size, Vec<u8>) {
    let jpeg = picture(broker, camera);
    let mut decoder = edgesight::jpeg::LumaDecoder::new().expect("libturbojpeg");
    let size = decoder.size(&jpeg).expect("a JPEG");
    let mut luma = vec![0; (size.width * size.height) as usize];
    decoder
        .decode(
            &jpeg,
            size,
            edgesight::jpeg::Scale::Full,
            &mut luma,
            size.width as usize,
        )
        .expect("a whole JPEG");
    (size, luma)
}

/// The retained picture of `camera` as the broker holds it (waited for up to 30 s).
fn picture(broker: &Broker, camera: &str) -> Vec<u8> {
    let out = run_tool_ok(
        Command::new("mosquitto_sub")
            .args(["-h", "127.0.0.1", "-p", &broker.port.to_string()])
            .args(["-u", USER, "-P", PASSWORD])
            .args(["-t", &format!("edgesight/b7/{camera}/picture")])
            // One message, its payload in hex (it is binary).
            .args(["-C", "1", "-W", "30", "-F", "%x"]),
        None,
    );
    let hex = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// An MJPEG recording's event picture is the recording's own image, byte for byte: a
/// colour 4:2:0 JPEG that the grey encode of its luma could never make. The recording
/// repeats one image, so the frozen detector turns on.
#[test]
fn mqtt_an_mjpeg_cameras_event_picture_is_its_own_jpeg() {
    let dir = tmp_dir("daemon-mqtt-mjpeg");
    let broker = Broker::start(&dir);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jpeg");
    let image = std::fs::read(fixtures.join("scene-420.jpg")).expect("fixture");
    let path = dir.join("still.mjpeg");
    std::fs::write(&path, image.repeat(3)).expect("write the recording");
    let config = format!(
        "{}[[camera]]\nname = \"webcam\"\n[camera.source]\nkind = \"replay\"\n\
         path = \"{}\"\nformat = \"mjpeg\"\nfps = 30\n\
         [camera.health]\nlearning_seconds = 0.5\n",
        mqtt_table(&dir, &broker, PASSWORD),
        path.display()
    );
    let sub = Subscriber::on(&broker, "mjpeg", "edgesight/b7/+/events");
    let _d = Daemon::start(&dir, &config);
    wait_until("the frozen event", Duration::from_secs(60), || {
        events(&sub, "webcam")
            .into_iter()
            .find(|e| e["kind"] == "tamper_frozen")
    });
    let jpeg = picture(&broker, "webcam");
    assert!(
        jpeg == image,
        "the picture ({} bytes) is not the recording's image ({} bytes)",
        jpeg.len(),
        image.len()
    );
}

/// The JSON events of `camera` received so far.
fn events(sub: &Subscriber, camera: &str) -> Vec<serde_json::Value> {
    sub.payloads(&format!("edgesight/b7/{camera}/events"))
        .iter()
        .map(|p| serde_json::from_str(p).expect("an event is JSON"))
        .collect()
}

/// Events that begin while the broker is away wait in the outbox and arrive once it is
/// back (the frames flowing meanwhile); a motion event turned off by a reload ends with
/// its start and its end; the region that never moves has none.
#[test]
fn mqtt_events_begun_while_the_broker_is_away_arrive_then_end() {
    let dir = tmp_dir("daemon-mqtt-events");
    let mut broker = Broker::start(&dir);
    let config = format!("{}{}", mqtt_table(&dir, &broker, PASSWORD), cameras(&dir));
    broker.kill();
    let d = Daemon::spawn(&dir, &config);
    let limit = Duration::from_secs(60);
    wait_until("a motion event and a frozen replay", limit, || {
        let log = d.log();
        (log.contains("motion began camera=front roi=lane")
            && log
                .lines()
                .any(|l| l.contains("camera health: tampered") && l.contains("camera=still")))
        .then_some(())
    });
    let sequence = || {
        latest_frame(d.port).expect("a frame")["sequence"]
            .as_u64()
            .unwrap()
    };
    let before = sequence();
    std::thread::sleep(Duration::from_secs(2));
    let gained = sequence() - before;
    assert!(gained >= 40, "{gained} frames in 2 s without a broker");
    assert_eq!(sample(&d.metrics(), "edgesight_mqtt_connected"), Some(0.0));
    let back = utc_now();
    let broker = Broker::start_on(&dir, broker.port);
    let sub = Subscriber::on(&broker, "events", "edgesight/b7/+/events");
    let lane_began = wait_until("the lane's event", limit, || {
        events(&sub, "front")
            .into_iter()
            .find(|e| e["region"] == "lane")
    });
    assert_eq!(
        (
            &lane_began["camera"],
            &lane_began["kind"],
            &lane_began["ended"]
        ),
        (&"front".into(), &"motion".into(), &serde_json::Value::Null),
        "{lane_began}"
    );
    let started = lane_began["started"].as_str().expect("started").to_string();
    assert!(
        started.len() == 24 && started.ends_with('Z') && started < back,
        "{started} is not before the broker came back at {back}"
    );
    let ratio = lane_began["measures"]["ratio"].as_f64().expect("a ratio");
    assert!(ratio > 0.0 && ratio <= 1.0, "{lane_began}");
    let frozen = wait_until("the frozen replay's event", limit, || {
        events(&sub, "still")
            .into_iter()
            .find(|e| e["kind"] == "tamper_frozen")
    });
    assert_eq!(frozen["ended"], serde_json::Value::Null, "{frozen}");
    assert!(frozen["started"]
        .as_str()
        .is_some_and(|s| s < back.as_str()));
    let unchanged = frozen["measures"]["unchanged_seconds"].as_f64();
    assert!(unchanged.is_some_and(|s| s > 0.0), "{frozen}");
    // Each event's picture, taken while the broker was away, is retained once it is back:
    // the replay's is its one image, within JPEG's error at the quality chosen.
    let (size, still) = decoded_picture(&broker, "still");
    assert_eq!((size.width, size.height), (64, 48));
    let source = textured_pgm(64, 48);
    let source = &source[source.len() - 64 * 48..];
    let diffs: Vec<u8> = still
        .iter()
        .zip(source)
        .map(|(a, b)| a.abs_diff(*b))
        .collect();
    let mean = diffs.iter().map(|&d| f64::from(d)).sum::<f64>() / diffs.len() as f64;
    let max = diffs.iter().max().copied();
    // The image alternates 20 levels pixel by pixel, the worst case for JPEG: measured
    // a mean of 4.4 levels, at most 16.
    assert!(mean <= 6.0 && max <= Some(24), "mean {mean}, max {max:?}");
    let (size, _) = decoded_picture(&broker, "front");
    assert_eq!((size.width, size.height), (320, 240));
    // Motion turned off by a reload: the lane's event ends, with its start.
    let path = dir.join("edgesight.toml");
    std::fs::write(
        &path,
        config.replace("min_seconds = 0.2\n", "enabled = false\n"),
    )
    .expect("write");
    let reloaded = utc_now();
    d.signal(libc::SIGHUP);
    let lane_ended = wait_until("the lane's event to end", limit, || {
        events(&sub, "front")
            .into_iter()
            .find(|e| e["region"] == "lane" && !e["ended"].is_null())
    });
    assert_eq!(lane_ended["started"].as_str(), Some(started.as_str()));
    let ended = lane_ended["ended"].as_str().expect("ended");
    assert!(
        ended > reloaded.as_str(),
        "{ended} before the reload at {reloaded}"
    );
    let front = events(&sub, "front");
    assert_eq!(front.len(), 2, "one begin, one end: {front:?}");
    assert!(front.iter().all(|e| e["region"] != "sky"));
    assert_eq!(
        sample(
            &d.metrics(),
            r#"edgesight_mqtt_messages_dropped_total{reason="queue_full"}"#
        ),
        Some(0.0)
    );
}

/// `[events] dir` with `max_files = 2`: after three motion events (motion turned off and
/// on again by reloads), the camera's directory holds the two newest events' JSON (as
/// last published) and pictures, and nothing of the first.
#[test]
fn mqtt_events_dir_keeps_the_newest_pairs() {
    let dir = tmp_dir("daemon-mqtt-events-dir");
    let broker = Broker::start(&dir);
    let sub = Subscriber::on(&broker, "events-dir", "edgesight/b7/+/events");
    let kept = dir.join("kept");
    let config = |motion: &str| {
        format!(
            "{}[events]\ndir = \"{}\"\nmax_files = 2\n{}[camera.health]\nlearning_seconds = 0.5\n\
             [camera.motion]\n{motion}",
            mqtt_table(&dir, &broker, PASSWORD),
            kept.display(),
            camera("front", "320x240", &[("lane", 0, 160, 320, 32)], 64),
        )
    };
    let d = Daemon::start(&dir, &config("min_seconds = 0.2\n"));
    let path = dir.join("edgesight.toml");
    let limit = Duration::from_secs(60);
    let lane = |ended: bool| {
        events(&sub, "front")
            .into_iter()
            .filter(|e| e["region"] == "lane" && e["ended"].is_null() != ended)
            .count()
    };
    for round in 1..=3 {
        wait_until(&format!("the lane's event {round}"), limit, || {
            (lane(false) == round).then_some(())
        });
        if round == 3 {
            break;
        }
        std::fs::write(&path, config("enabled = false\n")).expect("write");
        d.signal(libc::SIGHUP);
        wait_until(&format!("the lane's event {round} to end"), limit, || {
            (lane(true) == round).then_some(())
        });
        std::fs::write(&path, config("min_seconds = 0.2\n")).expect("write");
        d.signal(libc::SIGHUP);
    }
    let all = events(&sub, "front");
    let stem = |e: &serde_json::Value| {
        let started = e["started"]
            .as_str()
            .expect("started")
            .replace([':', '-'], "");
        format!("{started}-motion-lane")
    };
    let begun: Vec<String> = all
        .iter()
        .filter(|e| e["ended"].is_null())
        .map(stem)
        .collect();
    let mut want: Vec<String> = begun[1..]
        .iter()
        .flat_map(|s| [format!("{s}.jpg"), format!("{s}.json")])
        .collect();
    want.sort();
    let front = kept.join("front");
    let names = || file_names(&front);
    wait_until("the two newest pairs", Duration::from_secs(20), || {
        (names() == want).then_some(())
    });
    // Each JSON file is its event's last message: the second ended, the third not yet.
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(front.join(name)).expect("read")).expect("JSON")
    };
    let second = all
        .iter()
        .rfind(|e| stem(e) == begun[1])
        .expect("the second");
    assert_eq!(&read(&format!("{}.json", begun[1])), second);
    assert!(!second["ended"].is_null(), "{second}");
    assert!(read(&format!("{}.json", begun[2]))["ended"].is_null());
    let jpeg = std::fs::read(front.join(format!("{}.jpg", begun[2]))).expect("picture");
    let mut decoder = edgesight::jpeg::LumaDecoder::new().expect("libturbojpeg");
    let size = decoder.size(&jpeg).expect("a JPEG");
    assert_eq!((size.width, size.height), (320, 240));
}
