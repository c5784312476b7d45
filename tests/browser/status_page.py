#!/usr/bin/env python3
"""The status page in a real browser (Debian's Chromium, driven by selenium).

    tests/browser/status_page.py --bin target/release/edgesight [--out target/browser]

One daemon, served with `Content-Security-Policy: default-src 'self'` (from a web config
file, as a site might set it), runs three cameras:

- `front`: the test pattern with two regions, health on: learning, then ok;
- `door`: a replay of one still image, health on: learning, ok, then, 12 s after its
  first frame, tampered as frozen while the page is open;
- `gone`: a V4L2 device that does not exist: down, waiting for it.

Checked, on a 1280x900 window and on a 390x844 phone (Chromium's mobile emulation):
- the page loads with no console errors (the CSP would report an inline script or style);
- values change without a reload (a mark set on the window survives; the frame number
  moves; the script counted its updates);
- the down camera shows its badge and why; the pictures of the up cameras load;
- `door` turns from `ok` to `tampered: frozen` in the browser within 4 s of
  `/api/v1/latest` saying so (the script reads every 2 s);
- on the phone nothing is wider than the screen, and pictures scrolled out of view are not
  fetched again while the ones in view are;
- with JavaScript off the page still shows the values and refreshes itself.
Screenshots of both layouts go to OUT/status-desktop.png and OUT/status-mobile.png.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# How long after the API says tampered the badge may take: the script reads every 2 s.
BADGE_WITHIN_S = 4.0


def fail(message):
    print(f"status page: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(ok, message):
    if not ok:
        fail(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def still_image(path):
    """A 160x120 grey PGM with texture, so the detectors have detail to learn."""
    w, h = 160, 120
    pixels = bytes(((x * 7 + y * 13) ^ (x * y)) & 0xFF for y in range(h) for x in range(w))
    path.write_bytes(b"P5\n%d %d\n255\n" % (w, h) + pixels)


def config(port, images):
    return f"""
[web]
listen_address = "127.0.0.1:{port}"
snapshots = true

[[camera]]
name = "front"
[camera.source]
kind = "pattern"
size = "320x240"
format = "grey"
fps = 15
[camera.health]
learning_seconds = 1.0
[[camera.roi]]
name = "door"
x = 10
y = 20
w = 100
h = 80
[[camera.roi]]
name = "street"
x = 0
y = 160
w = 320
h = 80

[[camera]]
name = "door"
[camera.source]
kind = "replay"
path = "{images}"
fps = 10
[camera.health]
learning_seconds = 1.0
frozen_seconds = 12.0

[[camera]]
name = "gone"
[camera.source]
kind = "v4l2"
device = "/dev/video-absent-for-the-browser-test"
"""


class Daemon:
    def __init__(self, binary, work):
        self.port = free_port()
        images = work / "images"
        images.mkdir()
        still_image(images / "still.pgm")
        (work / "edgesight.toml").write_text(config(self.port, images))
        (work / "web.yml").write_text(
            "http_server_config:\n  headers:\n"
            "    Content-Security-Policy: \"default-src 'self'\"\n"
        )
        self.log = open(work / "daemon.log", "w")
        self.proc = subprocess.Popen(
            [binary, "run", "--config", str(work / "edgesight.toml"),
             "--web.config.file", str(work / "web.yml")],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self.started = time.monotonic()
        deadline = time.monotonic() + 60
        while True:
            try:
                cams = self.json("/api/v1/cameras")
                if all(c["last_frame_age_seconds"] is not None
                       for c in cams if c["name"] != "gone"):
                    break
            except OSError:
                pass
            check(self.proc.poll() is None, f"the daemon exited: see {self.log.name}")
            check(time.monotonic() < deadline, "no frames from front and door within 60 s")
            time.sleep(0.2)

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return r.read()

    def json(self, path):
        return json.loads(self.get(path))

    def snapshot_requests(self):
        """edgesight_http_requests_total of the snapshot handler, all codes."""
        total = 0.0
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith("edgesight_http_requests_total{") and 'handler="snapshot"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("the daemon did not stop within 20 s of SIGTERM")
        self.log.close()
        check(code == 0, f"the daemon exited {code}: see {self.log.name}")


def browser(work, name, mobile=False, javascript=True):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # As root in a container, with no network beyond loopback: no sandbox, no GPU, and
    # none of the background connections Chromium would try and be refused.
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--hide-scrollbars", f"--user-data-dir={work / ('profile-' + name)}"]:
        options.add_argument(flag)
    if not javascript:
        options.add_argument("--blink-settings=scriptEnabled=false")
    if mobile:
        options.add_experimental_option("mobileEmulation", {
            "deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 3.0, "mobile": True,
                              "touch": True},
            "userAgent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 "
                         "(KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36",
        })
    else:
        options.add_argument("--window-size=1280,900")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def wait_for(what, timeout, probe):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        check(time.monotonic() < deadline, f"{what}: not within {timeout} s")
        time.sleep(0.1)


def badge(driver, camera):
    el = driver.find_element(By.CSS_SELECTOR, f'article[data-camera="{camera}"] .badge')
    return el.text, el.get_attribute("class")


def text_of(driver, camera, key):
    return driver.find_element(
        By.CSS_SELECTOR, f'article[data-camera="{camera}"] [data-k="{key}"]').text


def frames_shown(driver, camera):
    """The frame each picture of the camera's tile shows (its data-frame)."""
    return [img.get_attribute("data-frame") for img in driver.find_elements(
        By.CSS_SELECTOR, f'article[data-camera="{camera}"] img[data-picture]')]


def screenshot(driver, path):
    # The whole page, not only the window: as tall as its content.
    height = driver.execute_script("return document.documentElement.scrollHeight")
    width = driver.execute_script("return document.documentElement.clientWidth")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height,
        "deviceScaleFactor": driver.execute_script("return window.devicePixelRatio"),
        "mobile": driver.execute_script("return navigator.maxTouchPoints > 0")})
    driver.save_screenshot(str(path))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    print(f"status page: screenshot {path} ({width}x{height} CSS px)")


def desktop(d, work, out):
    driver = browser(work, "desktop")
    try:
        driver.get(d.url + "/")
        frozen = lambda: d.json("/api/v1/latest?camera=door")["health"]["kinds"]["frozen"]
        check(frozen() != "tampered",
              "door was tampered before the page was open: the test cannot see it turn")
        check(badge(driver, "door") in [("learning", "badge learning"), ("ok", "badge ok")],
              f"door's first badge: {badge(driver, 'door')}")
        driver.execute_script("window.edgesightMark = 'kept'")
        first = text_of(driver, "front", "frame")

        # The down camera: its badge and why.
        text, cls = badge(driver, "gone")
        check((text, cls) == ("waiting for device", "badge down"), f"gone's badge: {text!r} {cls!r}")
        reason = text_of(driver, "gone", "reason")
        check(reason.startswith("device absent: waiting for it to appear"), f"gone's reason: {reason!r}")

        # door turns tampered while the page is open: the API first, the badge soon after.
        t0 = time.monotonic()
        wait_for("door tampered in /api/v1/latest", 60, lambda: frozen() == "tampered")
        said = time.monotonic()
        wait_for("door's badge to say tampered", 30,
                 lambda: badge(driver, "door") == ("tampered: frozen", "badge tampered"))
        shown = time.monotonic()
        check(shown - said <= BADGE_WITHIN_S,
              f"door's badge took {shown - said:.1f} s after the API said tampered")
        print(f"status page: door tampered in the API after {said - t0:.1f} s, "
              f"on the page {shown - said:.1f} s later")
        check(driver.find_element(By.CSS_SELECTOR, 'article[data-camera="door"]')
              .get_attribute("class") == "tile tampered", "door's tile is not coloured tampered")

        # Values moved in place: the same document (the mark), a newer frame, updates counted.
        check(driver.execute_script("return window.edgesightMark") == "kept",
              "the page was reloaded")
        later = text_of(driver, "front", "frame")
        check(later != first, f"front's frame stayed {first!r}")
        updates = int(driver.execute_script("return document.body.dataset.updates || '0'"))
        check(updates >= 2, f"{updates} updates")
        summary = driver.find_element(By.ID, "summary").text
        check(summary == "3 cameras: 2 up, 1 down, 1 tampered", f"summary {summary!r}")

        # The pictures of the up cameras loaded, and the visible ones follow the frames.
        loaded = driver.execute_script(
            "return [...document.querySelectorAll('img[data-picture]')]"
            ".map(i => i.complete && i.naturalWidth > 0)")
        # Five a camera: luma, gradient, mask, histogram, motion.
        check(len(loaded) == 10 and all(loaded), f"pictures loaded: {loaded}")
        shown_before = frames_shown(driver, "front")
        wait_for("front's pictures to show a newer frame", 10,
                 lambda: frames_shown(driver, "front") != shown_before)

        errors = console_errors(driver)
        check(not errors, f"console errors: {errors}")
        screenshot(driver, out / "status-desktop.png")
    finally:
        driver.quit()


def mobile(d, work, out):
    driver = browser(work, "mobile", mobile=True)
    try:
        driver.get(d.url + "/")
        width = driver.execute_script("return window.innerWidth")
        check(width == 390, f"the phone's viewport is {width} px wide, not 390 (viewport meta?)")
        wait_for("an update", 10,
                 lambda: int(driver.execute_script("return document.body.dataset.updates || '0'")) >= 1)
        wide = driver.execute_script("""
            const w = document.documentElement.clientWidth;
            const over = [];
            if (document.documentElement.scrollWidth > w) over.push('page ' + document.documentElement.scrollWidth);
            for (const el of document.querySelectorAll('body *')) {
              const r = el.getBoundingClientRect();
              if (r.width > 0 && (r.right > w + 0.5 || r.left < -0.5))
                over.push(el.tagName + '.' + el.className + ' ' + r.left + '..' + r.right);
            }
            return over;""")
        check(not wide, f"wider than the 390 px screen: {wide[:10]}")
        font = driver.execute_script(
            "return parseFloat(getComputedStyle(document.querySelector('td')).fontSize)")
        check(font >= 14, f"table text is {font} px on the phone")

        # At the top, door's pictures are out of view: not fetched again while front's are.
        driver.execute_script("window.scrollTo(0, 0)")
        door_tile = driver.find_element(By.CSS_SELECTOR, 'article[data-camera="door"]')
        in_view = driver.execute_script(
            "return arguments[0].getBoundingClientRect().top < window.innerHeight", door_tile)
        check(not in_view, "door's tile is in view at the top of the phone's page")
        door_before, front_before = frames_shown(driver, "door"), frames_shown(driver, "front")
        time.sleep(6)
        check(frames_shown(driver, "door") == door_before,
              f"door's pictures, out of view, were fetched again: {door_before} -> "
              f"{frames_shown(driver, 'door')}")
        check(frames_shown(driver, "front")[0] != front_before[0],
              "front's luma picture, in view, was not fetched again")
        # Scrolled to, door's pictures catch up at the next update.
        driver.execute_script("arguments[0].scrollIntoView()", door_tile)
        wait_for("door's pictures once in view", 6,
                 lambda: frames_shown(driver, "door")[0] != door_before[0])
        driver.execute_script("window.scrollTo(0, 0)")

        errors = console_errors(driver)
        check(not errors, f"console errors: {errors}")
        screenshot(driver, out / "status-mobile.png")
    finally:
        driver.quit()


def without_javascript(d, work):
    driver = browser(work, "nojs", javascript=False)
    try:
        driver.get(d.url + "/")
        fps = text_of(driver, "front", "fps")
        check(fps.endswith(" fps"), f"front's frame rate without JavaScript: {fps!r}")
        check(badge(driver, "gone")[0] == "waiting for device", "gone's badge without JavaScript")
        check(driver.execute_script("return 1") == 1, "WebDriver cannot read the page")
        mark = driver.execute_script("return performance.timeOrigin")
        wait_for("the page to refresh itself", 12,
                 lambda: driver.execute_script("return performance.timeOrigin") != mark)
        check(not console_errors(driver), f"console errors: {console_errors(driver)}")
    finally:
        driver.quit()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", default="target/browser")
    args = ap.parse_args()
    for tool in [CHROMIUM, CHROMEDRIVER]:
        check(os.access(tool, os.X_OK), f"{tool} missing (Debian's chromium, chromium-driver)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="edgesight-browser-"))
    start = time.monotonic()
    d = Daemon(os.path.abspath(args.bin), work)
    try:
        desktop(d, work, out)
        mobile(d, work, out)
        without_javascript(d, work)
    except BaseException:
        print(f"status page: the daemon's log is {work / 'daemon.log'}", file=sys.stderr)
        d.proc.kill()
        raise
    d.stop()
    shutil.rmtree(work, ignore_errors=True)
    print(f"status page: all passed ({time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
