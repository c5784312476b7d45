#!/usr/bin/env python3
"""Home Assistant Core's own MQTT integration against the daemon's discovery and states.

    tests/ha/run.sh [--bin target/debug/edgesight] [--out target/ha/run]

Run by the Python of target/ha/venv, where scripts/install-deps.sh test installs the
Home Assistant release of tests/ha/requirements.txt; the Python of any venv with a Home
Assistant and what its default integrations, mqtt and camera need runs it too (a newer
release on a newer Python: VENV/bin/python tests/ha/check.py). Started on loopback ports, each in
OUT/: Debian's mosquitto with a password file; Home Assistant, headless (no YAML for
MQTT: a new user made through the onboarding API, its token from the login flow, then
the MQTT integration added through the config flow's REST API, as its dialog does); the
daemon as board `b7` with three cameras:

- `front`: the test pattern with camera health and two regions, `lane` where the bar
  moves and `sky` where nothing does;
- `still`: a raw replay of one textured frame, which the daemon finds frozen; later the
  file is replaced by the same frame with sensor noise, and the tamper ends;
- `absent`: a V4L2 device that does not exist: down, waiting for it.

Checked through Home Assistant's registries (its websocket API) and REST API:
- each camera is one device of the MQTT entry, with the name, maker, model, version and
  status-page link the daemon sent, and exactly its entities (connectivity, a tamper
  sensor per kind, motion per region, frame rate, sharpness, light, event picture), by
  unique ID, with the entity IDs Home Assistant derives from their names, and the
  connectivity and frame rate as diagnostics;
- their classes, units and state classes; `front`: connected, motion `on` in `lane`,
  `off` in `sky`, about 30 fps; `still`: frozen `on`, then `off` after the new file;
  `absent`: connectivity `off`, its other entities unavailable but the picture;
- the event pictures through /api/camera_proxy: JPEGs that decode at each camera's size,
  `still`'s within JPEG's error of its frame;
- the daemon stopped (SIGSTOP, its connection open and silent): every entity unavailable
  once mosquitto gives up on it, available again when it goes on (SIGCONT), with its
  states; killed (SIGKILL): every entity unavailable within 1.5 keepalives;
- Home Assistant's log holds no warning or error but the two its start always writes.
"""

import argparse
import asyncio
import io
import json
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import aiohttp
from PIL import Image

BOARD = "b7"
MQTT_USER = "edgesight"
MQTT_PASSWORD = "ha-test-s3cret"
HA_USER = "tester"
HA_PASSWORD = "ha-test-login-1"
KEEPALIVE_S = 2
# How long Debian 12's mosquitto (2.0.11) takes to give up on a silent client: 1.5
# keepalives counted in whole seconds (more than 3: up to 4 s), seen by its check of every
# client, which runs once every 5 s at a whole second (up to 1 s late); Home Assistant
# follows within a tenth of a second.
MOSQUITTO_SILENT_S = int(1.5 * KEEPALIVE_S) + 1 + 5 + 1
TAMPER_KINDS = ["overexposed", "underexposed", "covered", "frozen", "moved", "defocus"]
STILL_SIZE = (64, 48)
# The log lines of Home Assistant's start that are about its setup, not about us:
# --skip-pip's reminder, and Python 3.11's deprecation in this last release to run on it.
EXPECTED_LOG = [
    "[homeassistant.bootstrap] Skipping pip installation of required modules",
    "[homeassistant.bootstrap] Support for the running Python version 3.11",
]


class Failure(Exception):
    pass


def fail(message):
    raise Failure(message)


def check(ok, message):
    if not ok:
        fail(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, timeout, probe, interval=0.2):
    """Calls `probe` until it returns something true; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        check(time.monotonic() < deadline, f"{what}: not within {timeout} s")
        time.sleep(interval)


def textured(w, h):
    """The daemon's tests' textured still (tests/common/daemon.rs, textured_pgm)."""
    return [40 + ((x // 8 + y // 6) % 3) * 50 + (x + 2 * y) % 17 + 20 * ((x ^ y) & 1)
            for y in range(h) for x in range(w)]


def noisy_frames(base, count, seed=1):
    """`count` frames of `base` with a sensor's noise (±3 levels): a live still scene."""
    r = random.Random(seed)
    return b"".join(bytes(max(0, min(255, v + r.randint(-3, 3))) for v in base)
                    for _ in range(count))


class Broker:
    def __init__(self, work):
        self.port = free_port()
        passwd = work / "passwd"
        subprocess.run(["mosquitto_passwd", "-b", "-c", str(passwd), MQTT_USER, MQTT_PASSWORD],
                       check=True)
        conf = work / "mosquitto.conf"
        # `user root`: started by root, the broker keeps the rights to read the password
        # file (it takes another user otherwise); run by anyone else the line does nothing.
        conf.write_text(f"user root\nlistener {self.port} 127.0.0.1\nallow_anonymous false\n"
                        f"password_file {passwd}\npersistence false\nlog_dest stderr\n"
                        "log_type all\n")
        self.log = open(work / "mosquitto.log", "w")
        self.proc = subprocess.Popen(["mosquitto", "-c", str(conf)],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        wait_for("mosquitto listening", 20, lambda: connects(self.port))


def connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class HomeAssistant:
    def __init__(self, venv_bin, work):
        self.port = free_port()
        self.dir = work / "config"
        self.dir.mkdir()
        # Where, when and in what units, so that nothing is looked up on the network.
        (self.dir / "configuration.yaml").write_text(f"""\
homeassistant:
  name: edgesight test
  latitude: 52.5
  longitude: 13.4
  elevation: 0
  unit_system: metric
  time_zone: UTC
  currency: EUR
  country: DE
http:
  server_host: 127.0.0.1
  server_port: {self.port}
logger:
  default: info
""")
        self.url = f"http://127.0.0.1:{self.port}"
        self.out = open(work / "hass.out", "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [str(venv_bin / "hass"), "--config", str(self.dir), "--skip-pip", "--log-no-color"],
            stdout=self.out, stderr=subprocess.STDOUT)
        self.token = None

    def wait_up(self):
        def onboarding():
            check(self.proc.poll() is None, f"Home Assistant exited: see {self.out.name}")
            try:
                return self.request("/api/onboarding")
            except OSError:
                return None
        steps = wait_for("Home Assistant's onboarding API", 120, onboarding, 0.5)
        self.start_s = time.monotonic() - self.started
        check(steps[0] == {"step": "user", "done": False}, f"a fresh instance: {steps}")

    def request(self, path, body=None, form=None, raw=False):
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                payload = r.read()
                return (r.headers.get("Content-Type"), payload) if raw else json.loads(payload)
        except urllib.error.HTTPError as e:
            fail(f"{path}: HTTP {e.code}: {e.read()[:500]!r}")

    def log_in(self):
        """The owner made as the onboarding's first step; a token from its auth code."""
        client = self.url + "/"
        code = self.request("/api/onboarding/users", {
            "client_id": client, "name": "Tester", "username": HA_USER,
            "password": HA_PASSWORD, "language": "en"})["auth_code"]
        tokens = self.request("/auth/token", form={
            "grant_type": "authorization_code", "code": code, "client_id": client})
        self.token = tokens["access_token"]
        check(self.request("/api/") == {"message": "API running."}, "the REST API")

    def add_mqtt(self, broker):
        """The MQTT integration added as its dialog adds it: the config flow's one form."""
        flow = self.request("/api/config/config_entries/flow", {"handler": "mqtt"})
        check(flow.get("step_id") == "broker", f"the MQTT flow's first step: {flow}")
        done = self.request(f"/api/config/config_entries/flow/{flow['flow_id']}", {
            "broker": "127.0.0.1", "port": broker.port, "username": MQTT_USER,
            "password": MQTT_PASSWORD})
        check(done.get("type") == "create_entry" and done["result"]["state"] == "loaded",
              f"the MQTT entry: {done}")
        return done["result"]["entry_id"]

    def states(self):
        return {s["entity_id"]: s for s in self.request("/api/states")}

    def ws(self, *commands):
        """The results of websocket API commands (the registries have no REST API)."""
        async def run():
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(self.url + "/api/websocket") as ws:
                    check((await ws.receive_json())["type"] == "auth_required", "ws auth")
                    await ws.send_json({"type": "auth", "access_token": self.token})
                    check((await ws.receive_json())["type"] == "auth_ok", "ws auth_ok")
                    results = []
                    for i, command in enumerate(commands, 1):
                        await ws.send_json({"id": i, "type": command})
                        answer = await ws.receive_json()
                        check(answer.get("success"), f"{command}: {answer}")
                        results.append(answer["result"])
                    return results
        return asyncio.run(run())

    def log_problems(self):
        """Warnings and errors of its log, with the lines that follow them (tracebacks)."""
        path = self.dir / "home-assistant.log"
        log = path.read_text() if path.exists() else ""
        problems, keep = [], False
        for line in log.splitlines():
            if line[:4].isdigit():
                level = line.split(" ")[2] if line.count(" ") >= 2 else ""
                keep = (level in ("WARNING", "ERROR", "CRITICAL")
                        and not any(e in line for e in EXPECTED_LOG))
            if keep:
                problems.append(line)
        return problems


def daemon_config(web_port, broker, work):
    password = work / "mqtt.password"
    password.write_text(MQTT_PASSWORD + "\n")
    return f"""
[web]
listen_address = "127.0.0.1:{web_port}"

[mqtt]
url = "mqtt://127.0.0.1:{broker.port}"
board = "{BOARD}"
username = "{MQTT_USER}"
password_file = "{password}"
keepalive_seconds = {KEEPALIVE_S}

[[camera]]
name = "front"
[camera.source]
kind = "pattern"
size = "320x240"
fps = 30
[camera.pipeline]
edge_threshold = 64
[camera.health]
learning_seconds = 0.5
[camera.motion]
min_seconds = 0.2
[[camera.roi]]
name = "lane"
x = 0
y = 160
w = 320
h = 32
[[camera.roi]]
name = "sky"
x = 0
y = 0
w = 320
h = 16

[[camera]]
name = "still"
[camera.source]
kind = "replay"
path = "{work / 'still.grey'}"
size = "{STILL_SIZE[0]}x{STILL_SIZE[1]}"
format = "grey"
fps = 30
[camera.health]
learning_seconds = 0.5

[[camera]]
name = "absent"
[camera.source]
kind = "v4l2"
device = "/dev/video-edgesight-ha-none"
"""


def expected_entities(camera, regions, health):
    """{unique_id: (entity_id, entity_category, what its state's attributes must hold)} of
    one camera."""
    def entity(component, obj, name, attributes, category=None):
        unique = f"edgesight_{BOARD}_{camera}_{obj}"
        entity_id = f"{component}.{BOARD}_{camera}_{name}"
        return unique, (entity_id, category, attributes)

    out = [entity("binary_sensor", "connectivity", "connected",
                  {"device_class": "connectivity"}, "diagnostic")]
    if health:
        out += [entity("binary_sensor", f"tamper_{k}", f"tamper_{k}", {"device_class": "tamper"})
                for k in TAMPER_KINDS]
    out += [entity("binary_sensor", f"motion_{r}", f"motion_{r}", {"device_class": "motion"})
            for r in regions]
    out.append(entity("sensor", "fps", "frame_rate",
                      {"unit_of_measurement": "fps", "state_class": "measurement"},
                      "diagnostic"))
    if health:
        out += [entity("sensor", obj, name, {"unit_of_measurement": "%",
                                             "state_class": "measurement"})
                for obj, name in [("sharpness", "sharpness"), ("light_ratio", "light")]]
    out.append(entity("camera", "event_picture", "event_picture", {}))
    return dict(out)


CAMERAS = {
    "front": expected_entities("front", ["lane", "sky"], True),
    "still": expected_entities("still", [], True),
    "absent": expected_entities("absent", [], True),
}


def check_registries(ha, entry_id, version, web_port):
    devices, entities = ha.ws("config/device_registry/list", "config/entity_registry/list")
    ours = [d for d in devices if entry_id in d["config_entries"]]
    by_name = {d["name"]: d for d in ours}
    check(sorted(by_name) == sorted(f"{BOARD} {c}" for c in CAMERAS),
          f"one device per camera: {[d['name'] for d in ours]}")
    for camera, want in CAMERAS.items():
        d = by_name[f"{BOARD} {camera}"]
        got = (d["identifiers"], d["manufacturer"], d["model"], d["sw_version"],
               d["configuration_url"])
        check(got == ([["mqtt", f"edgesight_{BOARD}_{camera}"]], "edgesight",
                      "edgesight camera", version, f"http://127.0.0.1:{web_port}/"),
              f"{camera}'s device: {got}")
        mine = {e["unique_id"]: (e["entity_id"], e["entity_category"])
                for e in entities if e["device_id"] == d["id"]}
        wanted = {u: (eid, category) for u, (eid, category, _) in want.items()}
        check(mine == wanted, f"{camera}'s entities:\n  got  {sorted(mine.items())}\n"
              f"  want {sorted(wanted.items())}")
        check(all(e["platform"] == "mqtt" and e["disabled_by"] is None
                  for e in entities if e["device_id"] == d["id"]),
              f"{camera}'s entities are MQTT's and enabled")


def check_attributes(states):
    for camera, want in CAMERAS.items():
        for entity_id, _, attributes in want.values():
            s = states.get(entity_id)
            check(s is not None, f"{entity_id}: no state")
            got = {k: s["attributes"].get(k) for k in attributes}
            check(got == attributes, f"{entity_id}: {got}, not {attributes}")


def state_of(ha, entity_id):
    return ha.request(f"/api/states/{entity_id}")["state"]


def picture(ha, camera):
    """The event picture through Home Assistant's camera proxy, decoded. The picture is
    sent a frame or so after the state that its event began with: until it arrives the
    proxy answers 500 (no image)."""
    path = f"/api/camera_proxy/camera.{BOARD}_{camera}_event_picture"

    def fetched():
        try:
            return ha.request(path, raw=True)
        except Failure as e:
            if "HTTP 500" in str(e):
                return None
            raise
    kind, body = wait_for(f"{camera}'s picture", 10, fetched)
    check(kind == "image/jpeg", f"{camera}'s picture: {kind}")
    image = Image.open(io.BytesIO(body))
    check(image.format == "JPEG", f"{camera}'s picture: {image.format}")
    image.load()
    return image


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default="target/debug/edgesight")
    parser.add_argument("--out", default="target/ha/run")
    args = parser.parse_args()
    binary = Path(args.bin).resolve()
    work = Path(args.out).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[1]
    venv_bin = Path(sys.executable).parent

    procs, ha = [], None
    try:
        broker = Broker(work)
        procs.append(broker.proc)
        ha = HomeAssistant(venv_bin, work)
        procs.append(ha.proc)
        ha.wait_up()
        print(f"home assistant: up in {ha.start_s:.1f} s")
        ha.log_in()
        entry_id = ha.add_mqtt(broker)

        (work / "still.grey").write_bytes(bytes(textured(*STILL_SIZE)))
        web_port = free_port()
        (work / "edgesight.toml").write_text(daemon_config(web_port, broker, work))
        daemon_log = open(work / "daemon.log", "w")
        daemon = subprocess.Popen([binary, "run", "--config", str(work / "edgesight.toml")],
                                  stdout=daemon_log, stderr=subprocess.STDOUT)
        procs.append(daemon)
        began = time.monotonic()
        every = [eid for want in CAMERAS.values() for eid, _, _ in want.values()]

        def all_known():
            check(daemon.poll() is None, f"the daemon exited: see {daemon_log.name}")
            check(not ha.log_problems(), "warnings or errors in Home Assistant's log")
            states = ha.states()
            return states if all(e in states for e in every) else None
        states = wait_for("every entity in Home Assistant", 60, all_known)
        print(f"home assistant: {len(every)} entities {time.monotonic() - began:.1f} s "
              "after the daemon's start")
        check_registries(ha, entry_id, version, web_port)
        check_attributes(states)

        def state_is(entity_id, want, timeout=30):
            deadline = time.monotonic() + timeout
            while (now := state_of(ha, entity_id)) != want:
                check(time.monotonic() < deadline,
                      f"{entity_id} is {now}, not {want} within {timeout} s")
                time.sleep(0.2)
        state_is(f"binary_sensor.{BOARD}_front_connected", "on")
        state_is(f"binary_sensor.{BOARD}_front_motion_lane", "on")
        state_is(f"binary_sensor.{BOARD}_still_tamper_frozen", "on")
        states = ha.states()
        fps = states[f"sensor.{BOARD}_front_frame_rate"]["state"]
        check(fps.replace(".", "", 1).isdigit() and 25.0 <= float(fps) <= 31.0,
              f"front's frame rate {fps}")
        quiet = [f"binary_sensor.{BOARD}_front_motion_sky"] + [
            f"binary_sensor.{BOARD}_{c}_tamper_{k}" for c in ("front", "still")
            for k in TAMPER_KINDS if (c, k) != ("still", "frozen")]
        loud = {e: states[e]["state"] for e in quiet if states[e]["state"] != "off"}
        check(not loud, f"on, or not known, where nothing happens: {loud}")
        # Down: it says so, and the rest of it is unavailable but its last picture.
        state_is(f"binary_sensor.{BOARD}_absent_connected", "off")
        states = ha.states()
        absent = {eid: states[eid]["state"] for eid, _, _ in CAMERAS["absent"].values()}
        want = {eid: "unavailable" for eid in absent}
        want[f"binary_sensor.{BOARD}_absent_connected"] = "off"
        want[f"camera.{BOARD}_absent_event_picture"] = "idle"
        check(absent == want, f"the absent camera's entities: {absent}")

        front = picture(ha, "front")
        check((front.size, front.mode) == ((320, 240), "L"), f"front's picture {front}")
        still = picture(ha, "still")
        check((still.size, still.mode) == (STILL_SIZE, "L"), f"still's picture {still}")
        diffs = [abs(a - b) for a, b in zip(still.getdata(), textured(*STILL_SIZE))]
        mean = sum(diffs) / len(diffs)
        # As the daemon's own test of this picture: a mean of 4.4 levels, at most 16.
        check(mean <= 6.0 and max(diffs) <= 24, f"still's picture: mean {mean}, "
              f"max {max(diffs)} levels from its frame")

        # The same frame with a sensor's noise, replacing the file: frozen no more.
        fresh = work / "still.new"
        fresh.write_bytes(noisy_frames(textured(*STILL_SIZE), 30))
        fresh.rename(work / "still.grey")
        state_is(f"binary_sensor.{BOARD}_still_tamper_frozen", "off")

        def unavailable_after(signal_name, send, within):
            """Home Assistant shows every entity unavailable within `within` s of `send`."""
            sent = time.monotonic()
            send()
            wait_for(f"every entity unavailable after {signal_name}", 10,
                     lambda: all(s["state"] == "unavailable"
                                 for e, s in ha.states().items() if e in every), 0.05)
            after = time.monotonic() - sent
            print(f"home assistant: every entity unavailable {after:.2f} s after "
                  f"{signal_name}")
            check(after <= within, f"unavailable {after:.2f} s after {signal_name}, not "
                  f"within {within} s")

        # Stopped, the daemon keeps its connection open and silent: the broker gives up on
        # it after 1.5 keepalives and sends its last will. Going on, it connects again and
        # sends every state.
        unavailable_after("SIGSTOP", lambda: daemon.send_signal(signal.SIGSTOP),
                          MOSQUITTO_SILENT_S)
        daemon.send_signal(signal.SIGCONT)
        state_is(f"binary_sensor.{BOARD}_front_connected", "on")
        state_is(f"binary_sensor.{BOARD}_still_tamper_frozen", "off")
        state_is(f"binary_sensor.{BOARD}_absent_connected", "off")
        # Killed, its socket is closed at once: the will follows.
        unavailable_after("SIGKILL", daemon.kill, 1.5 * KEEPALIVE_S + 0.5)
        daemon.wait()

        check(not ha.log_problems(), "warnings or errors in Home Assistant's log")
        print(f"home assistant: OK ({len(every)} entities of {len(CAMERAS)} devices, "
              f"{time.monotonic() - ha.started:.1f} s)")
    except Failure as e:
        print(f"home assistant: FAIL: {e}", file=sys.stderr)
        # What Home Assistant made of the payloads is most often why.
        problems = ha.log_problems() if ha else []
        if problems:
            print("Home Assistant's log:\n" + "\n".join(problems), file=sys.stderr)
        print(f"home assistant: logs in {work}", file=sys.stderr)
        sys.exit(1)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                # A daemon left stopped by a failure takes its SIGTERM once it goes on.
                p.send_signal(signal.SIGCONT)
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


if __name__ == "__main__":
    main()
