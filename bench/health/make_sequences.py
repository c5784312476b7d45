"""Writes the labelled camera-health evaluation sequences: 320x240 grey frames at 30 fps,
made from the scikit-image sample photographs (bench/health/fetch_images.sh) and, for
two, OpenCV's sample video (bench/health/fetch_footage.sh; decoded with FFmpeg), each a
directory of PGM files (000000.pgm, 000001.pgm, ... in play order) with its labels.json,
and an index.json listing them all.

    python3 bench/health/make_sequences.py [--images DIR] [--out DIR] [--only NAME,...]
                                           [--subset] [--jobs N]

    --images   the photographs and the footage (default target/health/images)
    --out      where the sequences go (default target/health/sequences); a sequence's
               directory is emptied of PGM files and written afresh
    --only     just these sequences (index.json keeps listing the others already made)
    --subset   just the sequences flagged "subset" (the small ones the tests use)
    --jobs     sequences made at once (default: the CPU count, at most 4)

Deterministic: every sequence has its own seed, and the same numpy and Pillow give the same
bytes (index.json holds each sequence's sha256 over its frames in order). Only numpy and
Pillow are used. What each sequence shows and the labels' fields: bench/health/README.md.

Every frame is a clean rendering (the photograph, its lighting, objects, blur, cover, view)
plus sensor noise drawn afresh for that frame: Gaussian read noise and a little shot noise
(variance growing with the signal), rounded and clipped to 0..255. A frozen frame is the
previous file's bytes again, noise included.

Over 500 lines as one file: every sequence's recipe (the scene, the tamper and its frame
numbers) sits beside the image operations it uses, so that a label and the frames it
describes are read together; the file is a table of those recipes more than code.
"""
import argparse
import hashlib
import json
import math
import os
import pathlib
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from PIL import Image

W, H, FPS = 320, 240, 30
READ_SIGMA = 2.0  # read noise, grey levels
SHOT = 0.04  # shot-noise variance per grey level of signal (3.5 levels of sigma at 200)
WHEEL = "scikit-image 0.25.2, skimage/data"
FOOTAGE_FROM = "Debian 12's opencv-doc (4.6), usr/share/doc/opencv-doc/examples/data"
FOOTAGE_LICENSE = "OpenCV's (Apache-2.0 AND BSD-3-Clause), as Debian's copyright file states"
HEADER = b"P5\n%d %d\n255\n" % (W, H)

# The images' licenses as scikit-image's skimage/data/_fetchers.py states them.
LICENSES = {
    "camera.png": "CC0 (photographer Lav Varshney)",
    "astronaut.png": "public domain (NASA; no known copyright restrictions)",
    "coffee.png": "CC0 (photographer Rachel Michetti)",
    "chelsea.png": "CC0 (photographer Stefan van der Walt)",
    "rocket.jpg": "public domain (SpaceX)",
    "coins.png": "no known copyright restrictions (Brooklyn Museum collection)",
    "brick.png": "CC0 (CC0Textures, Bricks25)",
    "grass.png": "CC0 (linolafett, DeviantArt)",
    "gravel.png": "CC0 (CC0Textures, Gravel04)",
}


# ---- images ---------------------------------------------------------------------------


class Images:
    """The photographs, read once each, as float32 grey (Pillow's ITU-R 601 luma)."""

    def __init__(self, folder):
        self.folder = pathlib.Path(folder)
        self.cache = {}

    def pil(self, name):
        path = self.folder / name
        if not path.is_file():
            sys.exit(f"make_sequences: {path} is missing; run bench/health/fetch_images.sh")
        return Image.open(path).convert("L")

    def fit(self, name, margin=20):
        """The photograph resized to the least size that holds a view with `margin` to spare
        each way (aspect kept)."""
        w, h = self.pil(name).size
        scale = max((W + margin) / w, (H + margin) / h)
        return self.stage(name, width=max(round(w * scale), W + margin))

    def stage(self, name, width=None, height=None):
        """The photograph resized to `width` (or `height`), aspect kept."""
        key = (name, width, height)
        if key not in self.cache:
            img = self.pil(name)
            w, h = img.size
            if width is not None:
                size = (width, round(h * width / w))
            elif height is not None:
                size = (round(w * height / h), height)
            else:
                size = (w, h)
            if size != (w, h):
                img = img.resize(size, Image.LANCZOS)
            self.cache[key] = np.asarray(img, dtype=np.float32)
        return self.cache[key]


def crop(stage, x, y):
    """The W x H view of `stage` whose top-left corner is at (x, y) (integers)."""
    x, y = int(round(x)), int(round(y))
    assert 0 <= x <= stage.shape[1] - W and 0 <= y <= stage.shape[0] - H, (x, y, stage.shape)
    return stage[y:y + H, x:x + W].copy()


def centre(stage, dx=0, dy=0):
    return crop(stage, (stage.shape[1] - W) // 2 + dx, (stage.shape[0] - H) // 2 + dy)


def median_gain(view, target=115.0):
    """The gain that brings the view's median to `target` (a camera's AE set point)."""
    return target / max(float(np.median(view)), 1.0)


# ---- filters --------------------------------------------------------------------------


def gaussian_blur(img, sigma):
    """Separable Gaussian blur, edges reflected; `sigma` in pixels (<= 0.2: unchanged)."""
    if sigma <= 0.2:
        return img
    r = int(math.ceil(3 * sigma))
    k = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2).astype(np.float32)
    k /= k.sum()
    p = np.pad(img, ((0, 0), (r, r)), mode="reflect")
    out = np.zeros_like(img)
    for j, w in enumerate(k):
        out += w * p[:, j:j + img.shape[1]]
    p = np.pad(out, ((r, r), (0, 0)), mode="reflect")
    out = np.zeros_like(img)
    for j, w in enumerate(k):
        out += w * p[j:j + img.shape[0], :]
    return out


def box_blur(img, length, axis):
    """Motion blur: a box of `length` pixels along `axis` (1 = horizontal), edges held."""
    n = int(round(abs(length)))
    if n < 2:
        return img
    lo, hi = n // 2, n - 1 - n // 2
    pad = [(0, 0), (0, 0)]
    pad[axis] = (lo + 1, hi)
    c = np.cumsum(np.pad(img, pad, mode="edge"), axis=axis, dtype=np.float64)
    size = img.shape[axis]
    a = np.take(c, np.arange(n, n + size), axis=axis)
    b = np.take(c, np.arange(0, size), axis=axis)
    return ((a - b) / n).astype(np.float32)


def smooth_noise(rng, scale, amplitude):
    """Low-frequency texture: white noise blurred at `scale` pixels, `amplitude` sigma."""
    n = gaussian_blur(rng.standard_normal((H, W)).astype(np.float32), scale)
    return n * (amplitude / max(float(n.std()), 1e-6))


def ease(u):
    """0 to 1 smoothly (smoothstep), clamped."""
    u = min(max(u, 0.0), 1.0)
    return u * u * (3 - 2 * u)


YY, XX = np.mgrid[0:H, 0:W].astype(np.float32)


# ---- objects --------------------------------------------------------------------------


class Sprite:
    """A cut-out moving across the view: its texture and a soft-edged alpha mask."""

    def __init__(self, texture, alpha):
        self.texture, self.alpha = texture.astype(np.float32), alpha.astype(np.float32)

    def paste(self, frame, cx, cy, alpha_only=False):
        """Composites the sprite centred at (cx, cy), clipped at the frame's edges (or,
        `alpha_only`, writes its alpha there)."""
        h, w = self.alpha.shape
        x0, y0 = int(round(cx - w / 2)), int(round(cy - h / 2))
        fx0, fy0 = max(x0, 0), max(y0, 0)
        fx1, fy1 = min(x0 + w, W), min(y0 + h, H)
        if fx1 <= fx0 or fy1 <= fy0:
            return frame
        a = self.alpha[fy0 - y0:fy1 - y0, fx0 - x0:fx1 - x0]
        t = self.texture[fy0 - y0:fy1 - y0, fx0 - x0:fx1 - x0]
        region = frame[fy0:fy1, fx0:fx1]
        frame[fy0:fy1, fx0:fx1] = a if alpha_only else region * (1 - a) + t * a
        return frame

    def cover(self, cx, cy):
        """The fraction of the frame the sprite covers at (cx, cy) (alpha summed)."""
        probe = np.zeros((H, W), np.float32)
        h, w = self.alpha.shape
        x0, y0 = int(round(cx - w / 2)), int(round(cy - h / 2))
        fx0, fy0, fx1, fy1 = max(x0, 0), max(y0, 0), min(x0 + w, W), min(y0 + h, H)
        if fx1 <= fx0 or fy1 <= fy0:
            return 0.0
        probe[fy0:fy1, fx0:fx1] = self.alpha[fy0 - y0:fy1 - y0, fx0 - x0:fx1 - x0]
        return float(probe.mean())


# The regions every sequence's camera measures motion in (x, y, w, h): three side by side
# across the middle, and a strip along the top that nothing crosses in any sequence.
MOTION_REGIONS = [
    {"name": "left", "x": 8, "y": 64, "w": 96, "h": 128},
    {"name": "middle", "x": 112, "y": 64, "w": 96, "h": 128},
    {"name": "right", "x": 216, "y": 64, "w": 96, "h": 128},
    {"name": "top", "x": 8, "y": 4, "w": 304, "h": 40},
]


def region_covers(n, place):
    """Per frame, each of MOTION_REGIONS' share covered by the sprites `place(i)` lists as
    (sprite, x, y) (alpha at least 0.5 counts): the motion the regions should see."""
    rows = []
    for i in range(n):
        alpha = np.zeros((H, W), np.float32)
        for sp, x, y in place(i):
            probe = np.zeros((H, W), np.float32)
            sp.paste(probe, x, y, alpha_only=True)
            alpha = np.maximum(alpha, probe)
        inside = alpha >= 0.5
        rows.append([round(float(inside[r["y"]:r["y"] + r["h"], r["x"]:r["x"] + r["w"]].mean()), 4)
                     for r in MOTION_REGIONS])
    return rows


def blob_alpha(w, h, rng, wobble=0.0, edge=1.5):
    """An ellipse of w x h (its outline wobbled by `wobble` of its radius), edge soft."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    dx, dy = (xx - (w - 1) / 2) / (w / 2), (yy - (h - 1) / 2) / (h / 2)
    rho = np.hypot(dx, dy)
    theta = np.arctan2(dy, dx)
    outline = np.ones_like(rho)
    if wobble:
        p = rng.uniform(0, 2 * np.pi, 3)
        outline = 1 - wobble + wobble * (0.5 + 0.3 * np.sin(3 * theta + p[0])
                                         + 0.2 * np.sin(5 * theta + p[1]))
    # distance inside the outline, in pixels (roughly), ramped over `edge` pixels
    inside = (outline - rho) * min(w, h) / 2
    return np.clip(inside / edge + 0.5, 0, 1)


# ---- sequences ------------------------------------------------------------------------
#
# Each maker returns (frames, render, tamper, nuisances, extra): `render(i)` is frame i's
# clean image (float32, before noise; values past 255 clip) or None for "the previous
# frame's bytes again"; `tamper` is None (a nuisance sequence) or its frames: begin (the
# first frame it shows in), established (the first at full strength), ending (the first on
# the way back) and end (the first normal again), the last two None when it stays;
# `nuisances` lists the nuisance events with their frames.

S = FPS  # frames per second, for readability: 10 * S is ten seconds


def wobble_gain(i, seed_phase, amplitude=0.02, period=13.0):
    """A barely-there illumination drift every sequence has (about 1 %/s at most)."""
    return 1.0 + amplitude * math.sin(2 * math.pi * i / (period * S) + seed_phase)


def nuisance_noise(p, imgs, rng):
    view = centre(imgs.fit("camera.png", 40))
    g = median_gain(view)
    n = p["seconds"] * S
    return n, lambda i: view * g, None, [{"kind": "noise", "begin": 0, "end": n}], {}


def nuisance_drift(p, imgs, rng):
    view = centre(imgs.fit("coffee.png", 20))
    g0 = median_gain(view, 105)
    n, period = p["seconds"] * S, 30.0 * S
    amp, tilt = 0.16, 0.10

    def render(i):
        # global gain swinging +-16 % over 30 s (at most 3.4 %/s) and the light's side
        # shifting across the view (a tilt of +-5 % from left to right)
        ph = 2 * math.pi * i / period
        ramp = 1 + tilt * math.sin(ph * 0.75) * (XX / W - 0.5)
        return view * (g0 * (1 + amp * math.sin(ph))) * ramp

    rate = amp * 2 * math.pi / 30.0
    return n, render, None, [{"kind": "illumination_drift", "begin": 0, "end": n,
                              "amplitude": amp, "period_s": 30.0,
                              "max_rate_per_s": round(rate, 4)}], {}


def nuisance_objects(p, imgs, rng):
    bg = centre(imgs.fit("chelsea.png", 20))
    g = median_gain(bg)
    # a cut-out of the astronaut photograph (her face and shoulders), 13.8 % of the frame
    face = np.asarray(imgs.pil("astronaut.png").crop((110, 10, 390, 235)).resize(
        (130, 105), Image.LANCZOS), dtype=np.float32)
    big = Sprite(face, blob_alpha(130, 105, rng))
    # a brick-textured blob (6 %) and a gravel-textured one (5 %)
    brick = imgs.stage("brick.png", width=256)[40:40 + 80, 30:30 + 96] * 0.55
    small = Sprite(brick, blob_alpha(96, 80, rng, wobble=0.35))
    gravel = imgs.stage("gravel.png", width=256)[100:100 + 70, 60:60 + 88] * 1.3
    third = Sprite(gravel, blob_alpha(88, 70, rng, wobble=0.3))
    # (sprite, first frame, last frame, start centre, end centre)
    paths = [
        (big, 2 * S, 8 * S, (-70, 150), (W + 70, 130)),
        (small, 10 * S, 13 * S, (W + 50, 70), (-50, 90)),
        (third, 15 * S, 22 * S, (-45, 250), (W + 45, 40)),
        (small, 16 * S, 21 * S, (W + 50, 180), (-50, 200)),
    ]

    def place(i):
        """(path, sprite, x, y) of each object in view at frame i."""
        out = []
        for k, (sp, a, b, (x0, y0), (x1, y1)) in enumerate(paths):
            if a <= i <= b:
                u = (i - a) / (b - a)
                bob = 6 * math.sin(2 * math.pi * u * 3)
                out.append((k, sp, x0 + (x1 - x0) * u, y0 + (y1 - y0) * u + bob))
        return out

    def render(i):
        frame = bg.copy()
        for _, sp, x, y in place(i):
            sp.paste(frame, x, y)
        return frame * g

    n = p["seconds"] * S
    covers = [[(k, sp.cover(x, y)) for k, sp, x, y in place(i)] for i in range(n)]
    events = []
    for k, (sp, a, b, _, _) in enumerate(paths):
        cover = max(c for row in covers for k2, c in row if k2 == k)
        events.append({"kind": "object", "begin": a, "end": b + 1,
                       "max_cover": round(cover, 3)})
    total = max(sum(c for _, c in row) for row in covers)
    moving = region_covers(n, lambda i: [(sp, x, y) for _, sp, x, y in place(i)])
    return n, render, None, events, {"max_cover": round(total, 3), "motion_cover": moving}


def motion_crossing(p, imgs, rng):
    """People-sized cut-outs walking through the left and middle regions at a walking
    pace, one after another and then two at once, never the right or the top; a slow
    drift of the light all along."""
    view = centre(imgs.fit(p["photo"], 20))
    g = median_gain(view)
    # a person: the astronaut photograph's figure, 56 x 120 (8.8 % of the frame)
    person = np.asarray(imgs.pil("astronaut.png").crop((120, 0, 380, 512)).resize(
        (56, 120), Image.LANCZOS), dtype=np.float32) * 0.9
    walker = Sprite(person, blob_alpha(56, 120, rng, wobble=0.15))
    dark = Sprite(person * 0.45, blob_alpha(56, 120, rng, wobble=0.15))
    # (sprite, first frame, last frame, start centre, end centre): 1.2-1.6 m/s across a
    # few metres of view, entering and leaving at the frame's edges or stopping short
    paths = [
        (walker, 3 * S, 7 * S, (-30, 128), (160, 128)),       # into the middle, out of view
        (dark, 10 * S, 13 * S, (60, 250), (60, 110)),          # up through the left
        (walker, 16 * S, 19 * S, (-30, 120), (120, 130)),      # to the middle's edge
        (dark, 16 * S, 20 * S, (150, 300), (150, 100)),        # up the middle meanwhile
    ]

    def place(i):
        out = []
        for sp, a, b, (x0, y0), (x1, y1) in paths:
            if a <= i <= b:
                u = (i - a) / (b - a)
                out.append((sp, x0 + (x1 - x0) * u, y0 + (y1 - y0) * u + 3 * math.sin(
                    2 * math.pi * u * 6)))
        return out

    def render(i):
        frame = view.copy()
        for sp, x, y in place(i):
            sp.paste(frame, x, y)
        return frame * g * wobble_gain(i, 0.7, amplitude=0.06, period=11.0)

    n = p["seconds"] * S
    events = [{"kind": "walker", "begin": a, "end": b + 1} for _, a, b, _, _ in paths]
    return n, render, None, events, {"motion_cover": region_covers(n, place)}


def nuisance_light(p, imgs, rng):
    view = centre(imgs.fit(p["photo"]))
    g0 = median_gain(view, 80)  # a dim room
    on = p["light_on_s"] * S
    strength = 0.5
    lamp = np.exp(-((XX - 50) ** 2 + (YY - 10) ** 2) / (2 * 160.0 ** 2))
    falloff = 0.6 + 0.4 * lamp  # +30 % far from the lamp, +50 % under it
    # a fluorescent tube's start: two flickers, then on
    steps = {on: 0.55, on + 1: 0.15, on + 2: 0.85, on + 3: 0.7}

    def render(i):
        level = 0.0 if i < on else steps.get(i, 1.0)
        return view * g0 * wobble_gain(i, 0.3) * (1 + strength * level * falloff)

    n = p["seconds"] * S
    return n, render, None, [{"kind": "light_on", "begin": on, "end": on + 4,
                              "gain_min": 1 + strength * 0.6,
                              "gain_max": round(1 + strength * float(falloff.max()), 3)}], {}


def nuisance_autoexposure(p, imgs, rng):
    view = centre(imgs.fit("rocket.jpg", 30))
    g0 = median_gain(view, 100)
    # AE's abrupt steps (as a camera makes when the scene's light changes), each followed
    # by a damped settling: corrections every 2 frames, overshooting and decaying in ~0.6 s
    steps = [(5 * S, 1.22), (10 * S, 0.80), (14 * S, 1.18), (19 * S, 0.84)]

    def gain(i):
        g = g0
        for at, f in steps:
            if i >= at:
                g *= f
                k = (i - at) // 2  # the AE loop updates every other frame
                g *= 1 + 0.25 * (f - 1) * math.exp(-k / 3.0) * math.sin(math.pi * k / 3)
        return g

    n = p["seconds"] * S
    return n, lambda i: view * gain(i), None, [
        {"kind": "auto_exposure_step", "begin": at, "end": at + 20, "factor": f}
        for at, f in steps], {}


def tamper_defocus(p, imgs, rng):
    view = centre((imgs.stage(p["photo"], width=p["stage_width"]) if "stage_width" in p
            else imgs.fit(p["photo"])))
    g0 = median_gain(view)
    begin, grow = p["pre_s"] * S, S  # sigma grows over 1 s
    hold = p["hold_s"] * S
    sigma_max, refocus = p["sigma"], p.get("refocus_s")
    end = begin + grow + hold + int(refocus * S) if refocus else None
    cache = {}

    def sigma(i):
        if i < begin:
            return 0.0
        if i < begin + grow:
            return sigma_max * (i - begin + 1) / grow
        if end is None or i < begin + grow + hold:
            return sigma_max
        if i < end:
            return sigma_max * (end - i) / (end - begin - grow - hold + 1)
        return 0.0

    def render(i):
        s = round(sigma(i), 3)
        if s not in cache:
            cache[s] = gaussian_blur(view, s)
        return cache[s] * (g0 * wobble_gain(i, 1.1))

    n = (end if end else begin + grow + hold) + p["post_s"] * S
    return n, render, {"begin": begin, "established": begin + grow,
                       "ending": end and begin + grow + hold, "end": end,
                       "sigma_max": sigma_max}, [], {}


def cover_texture(rng, level):
    """The cover: dark, out of focus (a faint low-frequency texture) and a little uneven."""
    t = level + smooth_noise(rng, 12, 2.0) + 3.0 * (YY / H - 0.5)
    return t.astype(np.float32)


def tamper_covered(p, imgs, rng):
    view = centre(imgs.fit(p["photo"], 20))
    g0 = median_gain(view)
    cover = cover_texture(rng, p.get("level", 14.0))
    begin, slide = p["pre_s"] * S, int(round(p["slide_s"] * S))
    hold = p["hold_s"] * S
    frac, side = p["cover"], p["side"]
    removed = p.get("removed", False)
    end = begin + slide + hold + slide if removed else None

    def extent(i):  # how far the cover reaches, 0..frac
        if i < begin:
            return 0.0
        if i < begin + slide:
            return frac * ease((i - begin + 1) / slide)
        if end is None or i < begin + slide + hold:
            return frac
        if i < end:
            return frac * ease((end - i - 1) / slide)
        return 0.0

    def render(i):
        scene = view * (g0 * wobble_gain(i, 0.7))
        e = extent(i)
        if e <= 0:
            return scene
        # a soft edge 8 px wide (the cover is close to the lens, out of focus)
        if side == "left":
            a = np.clip((e * W - XX) / 8 + 0.5, 0, 1)
        else:  # from the top
            a = np.clip((e * H - YY) / 8 + 0.5, 0, 1)
        return scene * (1 - a) + cover * a

    n = (end if end else begin + slide + hold) + p["post_s"] * S
    return n, render, {"begin": begin, "established": begin + slide,
                       "ending": end and begin + slide + hold, "end": end,
                       "cover": frac, "from": side}, [], {}


def tamper_moved(p, imgs, rng):
    if "to_photo" in p:
        # pointed somewhere else: the view slides from one photograph onto another
        a = centre(imgs.fit(p["photo"], 20))
        b = centre(imgs.fit(p["to_photo"], 40))
        b = b * (median_gain(b, 100) / median_gain(a, 100))
        seam = np.clip((np.arange(2 * H, dtype=np.float32) - (H - 6)) / 12, 0, 1)[:, None]
        stage = np.vstack([a, a])[:2 * H] * (1 - seam) + np.vstack([b, b])[:2 * H] * seam
        start, stop = (0, 0), (0, H)
        g_scale = median_gain(a)
    else:
        stage = imgs.stage(p["photo"], width=p["stage_width"])
        start, stop = p["start"], p["stop"]
        g_scale = median_gain(crop(stage, *start))
    begin, move = p["pre_s"] * S, int(round(p["move_s"] * S))
    hold = p["hold_s"] * S

    def pos(i):
        u = ease((i - begin + 1) / move) if i >= begin else 0.0
        x = start[0] + (stop[0] - start[0]) * u
        y = start[1] + (stop[1] - start[1]) * u
        # the bump leaves the camera shaking a little for half a second
        k = i - (begin + move)
        if 0 <= k < S // 2:
            x += 2.5 * math.exp(-k / 5) * math.sin(k * 1.9)
            y += 2.0 * math.exp(-k / 5) * math.cos(k * 1.7)
        return x, y

    def clamp(x, y):
        return (min(max(x, 0), stage.shape[1] - W), min(max(y, 0), stage.shape[0] - H))

    def render(i):
        x, y = clamp(*pos(i))
        frame = crop(stage, x, y)
        if begin <= i < begin + move:
            # motion blur over half the frame time
            px, py = clamp(*pos(i - 1))
            frame = box_blur(frame, 0.5 * (x - px), 1)
            frame = box_blur(frame, 0.5 * (y - py), 0)
        return frame * (g_scale * wobble_gain(i, 2.0))

    n = begin + move + hold + p["post_s"] * S
    return n, render, {"begin": begin, "established": begin + move, "ending": None,
                       "end": None,
                       "shift": [stop[0] - start[0], stop[1] - start[1]],
                       "to_photo": p.get("to_photo")}, [], {}


def tamper_frozen(p, imgs, rng):
    view = centre(imgs.fit(p["photo"], 20))
    g0 = median_gain(view)
    begin, hold = p["pre_s"] * S, p["hold_s"] * S
    end = begin + hold if p.get("resumes") else None
    drift = p.get("drift", 0.0)
    sprite = None
    if p.get("object"):
        tex = imgs.stage("brick.png", width=256)[120:120 + 80, 100:100 + 100] * 0.5
        sprite = Sprite(tex, blob_alpha(100, 80, rng, wobble=0.3))

    def place(i):
        """The object crossing the view when the picture freezes (nothing moves while it
        is frozen)."""
        u = (i - (begin - 4 * S)) / (8 * S)
        if sprite is None or not 0 <= u <= 1 or (begin <= i and (end is None or i < end)):
            return []
        return [(sprite, -60 + (W + 120) * u, 120 + 20 * math.sin(3 * u))]

    def render(i):
        if begin <= i and (end is None or i < end):
            return None
        frame = view.copy()
        for sp, x, y in place(i):
            sp.paste(frame, x, y)
        return frame * (g0 * (1 + drift * math.sin(2 * math.pi * i / (20 * S)))
                        * wobble_gain(i, 0.2))

    n = (end if end else begin + hold) + p["post_s"] * S
    extra = {"motion_cover": region_covers(n, place)} if sprite is not None else {}
    return n, render, {"begin": begin, "established": begin, "ending": end, "end": end,
                       "repeats_frame": begin - 1}, [], extra


def tamper_exposure(p, imgs, rng):
    view = centre(imgs.fit(p["photo"], 20))
    g0 = median_gain(view)
    lit = view * g0
    mode = p.get("mode", "clip")
    if mode == "haze":
        # no gain: the picture lifted `lift` of the way towards 240 (glare, fog on the
        # lens, an IR lamp washing it out), nothing clipping but the noise
        target = p["lift"]
    elif mode == "dim":
        # the light at a fixed share: darker by a large factor, most pixels above 8
        target = p["gain"]
    elif p["kind"] == "overexposed":
        # the gain that puts the 20th percentile 10 % past white: 80 % clip, noise or not
        target = 255 * 1.1 / max(float(np.percentile(lit, 20)), 1.0)
    else:
        # the gain that puts the 90th percentile at 5: nearly all the frame near black
        target = 5.0 / max(float(np.percentile(lit, 90)), 1.0)
    begin, ramp = p["pre_s"] * S, int(round(p["ramp_s"] * S))
    hold = p["hold_s"] * S
    end = begin + ramp + hold + ramp if p.get("recovers") else None

    def progress(i):  # 0 before, 1 held, a ramp between
        if i < begin:
            return 0.0
        if i < begin + ramp:
            return (i - begin + 1) / ramp
        if end is None or i < begin + ramp + hold:
            return 1.0
        if i < end:
            return (end - i - 1) / ramp
        return 0.0

    def render(i):
        u = progress(i)
        if mode == "haze":
            return (lit + (240.0 - lit) * (target * u)) * wobble_gain(i, 1.7)
        return lit * (target ** u * wobble_gain(i, 1.7))  # a geometric ramp

    n = (end if end else begin + ramp + hold) + p["post_s"] * S
    extra = {"mode": mode}
    if mode == "haze":
        extra["lift"] = target
    else:
        extra["gain"] = round(target, 4)
    return n, render, {"begin": begin, "established": begin + ramp,
                       "ending": end and begin + ramp + hold, "end": end,
                       **extra}, [], {}


def nuisance_dusk(p, imgs, rng):
    """The light falling geometrically to `gain` over `dusk_s` (a sunset, a cloud bank):
    slower than the sequence's adapt time, so the baseline follows it."""
    view = centre(imgs.fit(p["photo"], 20))
    lit = view * median_gain(view)
    fps = p["fps"]
    begin, length = p["pre_s"] * fps, p["dusk_s"] * fps

    def render(i):
        u = min(max((i - begin) / length, 0.0), 1.0)
        return lit * (p["gain"] ** u * wobble_gain(i, 0.9))

    n = (p["pre_s"] + p["dusk_s"] + p["hold_s"]) * fps
    return n, render, None, [{"kind": "dusk", "begin": begin, "end": begin + length,
                              "gain": p["gain"]}], {}


# The footage's frames decoded to grey (Y) at its own size, in order: FFmpeg's output with
# bitexact flags, as Debian 12's FFmpeg 5.1 gives it.
FOOTAGE = {"file": "vtest.avi", "width": 768, "height": 576, "fps": 10, "frames": 795,
           "sha256": "98ea8431937983d0a0faa6b940f987b52d181298f2e0c4e19982ab9bcf8f4f04"}
# The regions of the plaza footage (x, y, w, h at W x H): the building's band along the top,
# where nobody walks, and the walkway people cross.
PLAZA_REGIONS = [
    {"name": "building", "x": 128, "y": 0, "w": 128, "h": 32},
    {"name": "walkway", "x": 112, "y": 80, "w": 176, "h": 80},
]

# What the plaza's regions must show (motion_score.py): the building's band no event and
# its motion ratio's mean over every window of 150 frames at most 0.02 (a third of one of
# its 16 tiles); the walkway, which people cross all along, at least one event.
PLAZA_EXPECT = {"building": {"max_events": 0, "max_window_mean": 0.02},
                "walkway": {"min_events": 1}}


class Footage:
    """The footage's frames, decoded once with FFmpeg, each resized to W x H (float32)
    when first asked for."""

    def __init__(self, frames):
        self.frames, self.resized = frames, {}

    def __len__(self):
        return len(self.frames)

    def __getitem__(self, k):
        if k not in self.resized:
            self.resized[k] = np.asarray(Image.fromarray(self.frames[k]).resize(
                (W, H), Image.LANCZOS), dtype=np.float32)
        return self.resized[k]


def footage_frames(imgs):
    """The footage's frames (a Footage)."""
    path = imgs.folder / FOOTAGE["file"]
    if not path.is_file():
        sys.exit(f"make_sequences: {path} is missing; run bench/health/fetch_footage.sh")
    raw = subprocess.run(["ffmpeg", "-v", "error", "-flags", "+bitexact", "-i", str(path),
                          "-f", "rawvideo", "-pix_fmt", "gray", "-"],
                         capture_output=True, check=True).stdout
    got = hashlib.sha256(raw).hexdigest()
    if got != FOOTAGE["sha256"]:
        sys.exit(f"make_sequences: {path} decodes to frames of sha256 {got}, not "
                 f"{FOOTAGE['sha256']} (another FFmpeg than Debian 12's?)")
    w, h = FOOTAGE["width"], FOOTAGE["height"]
    return Footage(np.frombuffer(raw, np.uint8).reshape(-1, h, w))


def motion_footage(p, imgs, rng):
    """Real footage: people crossing a plaza below a static building. The source frames
    played forward then backward (`passes` times in all, each pass turning at the ends),
    each shown `repeat` times with its own noise (3: the footage's 10 fps at 30; 1: three
    times its speed), from the source frame `skip` on for `source_frames`; the whole light
    stepped to `light_gain` from `light_at_s` for `light_s` seconds (0: no step)."""
    frames = footage_frames(imgs)
    order = []
    for k in range(p["passes"]):
        order += range(len(frames)) if k % 2 == 0 else range(len(frames) - 1, -1, -1)
    order = order[p.get("skip", 0):p.get("skip", 0) + p.get("source_frames", len(order))]
    n = len(order) * p["repeat"]
    fps = p["fps"]
    events = []
    if p["light_s"]:
        begin = round(p["light_at_s"] * fps)
        events.append({"kind": "light_step", "begin": begin,
                       "end": begin + round(p["light_s"] * fps), "factor": p["light_gain"]})

    def render(i):
        g = next((e["factor"] for e in events if e["begin"] <= i < e["end"]), 1.0)
        return frames[order[i // p["repeat"]]] * g

    return n, render, None, events, {"motion_regions": PLAZA_REGIONS,
                                      "motion_expect": p["expect"]}


MAKERS = {
    "noise": nuisance_noise, "drift": nuisance_drift, "objects": nuisance_objects,
    "light": nuisance_light, "autoexposure": nuisance_autoexposure,
    "defocus": tamper_defocus, "covered": tamper_covered, "moved": tamper_moved,
    "frozen": tamper_frozen, "underexposed": tamper_exposure, "overexposed": tamper_exposure,
    "dusk": nuisance_dusk, "crossing": motion_crossing, "footage": motion_footage,
}

# name, maker, kind, parameters, description. Tampers have 10 s of normal footage first.
SEQUENCES = [
    ("nuisance-noise-camera", "noise", "nuisance",
     dict(seed=101, photos=["camera.png"], seconds=15),
     "a static scene, sensor noise only"),
    ("nuisance-drift-coffee", "drift", "nuisance",
     dict(seed=102, photos=["coffee.png"], seconds=30),
     "slow illumination drift: global gain swinging +-16 % over 30 s (at most 3.4 %/s), "
     "the light's side shifting across the view"),
    ("nuisance-objects-chelsea", "objects", "nuisance",
     dict(seed=103, photos=["chelsea.png", "astronaut.png", "brick.png", "gravel.png"],
          seconds=24),
     "objects moving across: a cut-out of another photograph (13.8 % of the frame), "
     "textured blobs (5-6 %), two at once near the end (at most ~13 % together)"),
    ("nuisance-light-astronaut", "light", "nuisance",
     dict(seed=104, photos=["astronaut.png"], seconds=20, light_on_s=10),
     "a light switching on at 10 s in a dim room: +30 % to +50 % gain with a soft falloff "
     "from the lamp's corner, after two flickers"),
    ("nuisance-autoexposure-rocket", "autoexposure", "nuisance",
     dict(seed=105, photos=["rocket.jpg"], seconds=24),
     "auto-exposure: abrupt gain steps of +22 %, -20 %, +18 %, -16 % at 5, 10, 14, 19 s, "
     "each settling (damped corrections) over ~0.6 s"),
    ("defocus-camera", "defocus", "defocus",
     dict(seed=201, photos=["camera.png"], pre_s=10, hold_s=9, post_s=0, sigma=4.0),
     "Gaussian blur growing over 1 s to sigma 4 px, staying"),
    ("defocus-coins", "defocus", "defocus",
     dict(seed=202, photos=["coins.png"], stage_width=W + 64, pre_s=10, hold_s=5,
          refocus_s=0.5, post_s=5, sigma=6.0),
     "Gaussian blur growing over 1 s to sigma 6 px, held 5 s, refocused over 0.5 s"),
    ("covered-coffee", "covered", "covered",
     dict(seed=203, photos=["coffee.png"], pre_s=10, slide_s=0.7, hold_s=6, cover=1.0,
          side="left", removed=True, post_s=5),
     "a dark cover sliding in from the left over 0.7 s to 100 %, held 6 s, taken away"),
    ("covered-astronaut", "covered", "covered",
     dict(seed=204, photos=["astronaut.png"], pre_s=10, slide_s=1.0, hold_s=8, cover=0.92,
          side="top", level=20.0, post_s=0),
     "a dark cover sliding down from the top over 1 s to 92 % (the bottom rows still "
     "see the scene), staying"),
    ("moved-rocket", "moved", "moved",
     dict(seed=205, photos=["rocket.jpg"], stage_width=560, start=(20, 100),
          stop=(220, 20), pre_s=10, move_s=0.5, hold_s=8, post_s=0),
     "a pan of 200 px right and 80 px up over 0.5 s (motion blur, a little shake after), "
     "staying"),
    ("moved-chelsea-to-grass", "moved", "moved",
     dict(seed=206, photos=["chelsea.png", "grass.png"], to_photo="grass.png", pre_s=10,
          move_s=0.5, hold_s=8, post_s=0),
     "the camera knocked down to the ground: the view slides from the cat onto grass "
     "over 0.5 s, staying"),
    ("frozen-camera", "frozen", "frozen",
     dict(seed=207, photos=["camera.png"], pre_s=10, hold_s=5, resumes=True, post_s=5),
     "the picture freezes for 5 s (the same bytes, noise included), then plays again"),
    ("frozen-coffee", "frozen", "frozen",
     dict(seed=208, photos=["coffee.png", "brick.png"], pre_s=10, hold_s=8, object=True,
          drift=0.08, post_s=0),
     "slow drift and an object crossing, the picture freezing with the object mid-way, "
     "staying frozen"),
    ("overexposed-coffee", "overexposed", "overexposed",
     dict(seed=209, photos=["coffee.png"], kind="overexposed", pre_s=10, ramp_s=0.3,
          hold_s=6, recovers=True, post_s=5),
     "gain up over 0.3 s until 80 % of the pixels clip at 255, held 6 s, back"),
    ("underexposed-rocket", "underexposed", "underexposed",
     dict(seed=210, photos=["rocket.jpg"], kind="underexposed", pre_s=10, ramp_s=0.3,
          hold_s=8, post_s=0),
     "gain down over 0.3 s until 90 % of the frame is below ~5, staying"),
    # Exposure without clipping, against the learned view (and a dusk that is not one).
    ("underexposed-dim-coffee", "underexposed", "underexposed",
     dict(seed=211, photos=["coffee.png"], kind="underexposed", mode="dim", gain=0.125,
          pre_s=10, ramp_s=0.5, hold_s=8, recovers=True, post_s=5),
     "the light down to an eighth over 0.5 s (mean ~14, most pixels above 8), held 8 s, "
     "back"),
    ("overexposed-haze-astronaut", "overexposed", "overexposed",
     dict(seed=212, photos=["astronaut.png"], kind="overexposed", mode="haze", lift=0.8,
          pre_s=10, ramp_s=0.5, hold_s=6, post_s=0),
     "the picture washed out over 0.5 s, 80 % of the way to grey 240 (glare, fog on the "
     "lens): nothing clips, staying"),
    ("nuisance-dusk-chelsea", "dusk", "nuisance",
     dict(seed=106, photos=["chelsea.png"], fps=5, pre_s=10, dusk_s=90, hold_s=20,
          gain=0.125, health={"adapt_seconds": 15}),
     "dusk: the light falling to an eighth over 90 s at 5 fps, with adapt_seconds = 15 "
     "(the default's 600 s against an hour's dusk, scaled down)"),
    # Motion: people crossing regions (every sequence's regions are scored for motion).
    ("motion-crossing-coffee", "crossing", "nuisance",
     dict(seed=107, photos=["coffee.png", "astronaut.png"], seconds=24),
     "people-sized cut-outs walking through the left and middle regions (one, then two at "
     "once), never the right or the top strip; the light drifting +-6 % meanwhile"),
    # Real footage: people crossing a plaza under a static building (this folder's
    # README, "Real footage").
    ("motion-plaza-vtest", "footage", "nuisance",
     dict(seed=108, seconds=159, passes=2, repeat=3, light_at_s=76, light_s=8,
          light_gain=0.75, expect=PLAZA_EXPECT),
     "OpenCV's vtest.avi played forward then backward (2 min 39 s): people crossing a "
     "plaza below a building, 10 fps shown at 30, the light of the facade rising a tenth "
     "and falling back, the whole light stepped to x0.75 for 8 s in the middle; the "
     "building's band must stay still, the walkway move"),
    # The small subset the Rust tests use: 4 s of normal footage, the event, a little after.
    ("subset-light-camera", "light", "nuisance",
     dict(seed=301, photos=["camera.png"], seconds=6, light_on_s=3,
          subset=True),
     "a light switching on at 3 s (+30 % to +50 %)"),
    ("subset-defocus-astronaut", "defocus", "defocus",
     dict(seed=302, photos=["astronaut.png"], pre_s=4, hold_s=2, post_s=0, sigma=5.0,
          subset=True),
     "blur growing over 1 s to sigma 5 px"),
    ("subset-covered-coins", "covered", "covered",
     dict(seed=303, photos=["coins.png"], pre_s=4, slide_s=0.5, hold_s=2, cover=1.0,
          side="left", post_s=0, subset=True),
     "a cover sliding in from the left over 0.5 s to 100 %"),
    ("subset-moved-coffee", "moved", "moved",
     dict(seed=304, photos=["coffee.png"], stage_width=560, start=(20, 60),
          stop=(220, 60), pre_s=4, move_s=0.5, hold_s=2, post_s=0, subset=True),
     "a pan of 200 px over 0.5 s"),
    ("subset-frozen-chelsea", "frozen", "frozen",
     dict(seed=305, photos=["chelsea.png"], pre_s=4, hold_s=2, resumes=True, post_s=1,
          subset=True),
     "the picture frozen for 2 s, then playing again"),
    ("subset-underexposed-dim-chelsea", "underexposed", "underexposed",
     dict(seed=307, photos=["chelsea.png"], kind="underexposed", mode="dim", gain=0.125,
          pre_s=4, ramp_s=0.3, hold_s=2, post_s=0, subset=True),
     "the light down to an eighth over 0.3 s, nothing much clipping"),
    ("subset-plaza-vtest", "footage", "nuisance",
     dict(seed=308, seconds=12, passes=1, repeat=3, source_frames=120, light_s=0,
          expect=PLAZA_EXPECT, subset=True),
     "vtest.avi's first 12 s: people crossing while the facade's light rises a tenth"),
    ("subset-overexposed-camera", "overexposed", "overexposed",
     dict(seed=306, photos=["camera.png"], kind="overexposed", pre_s=4, ramp_s=0.3,
          hold_s=2, post_s=0, subset=True),
     "gain up over 0.3 s until 80 % of the pixels clip"),
]


# ---- writing --------------------------------------------------------------------------


def add_noise(clean, rng):
    """Sensor noise drawn for this frame: read noise plus shot noise, rounded, clipped."""
    signal = np.clip(clean, 0, None)
    sigma = np.sqrt(READ_SIGMA ** 2 + SHOT * np.minimum(signal, 255))
    z = rng.standard_normal((H, W), dtype=np.float32)
    return np.clip(np.rint(signal + z * sigma), 0, 255).astype(np.uint8)


def normal_segments(n, tamper):
    if tamper is None:
        return [[0, n]]
    segs = [[0, tamper["begin"]]]
    if tamper["end"] is not None and tamper["end"] < n:
        segs.append([tamper["end"], n])
    return segs


def make(entry, images_dir, out_dir):
    name, maker, kind, p, description = entry
    p = {"photo": p["photos"][0] if p.get("photos") else None, "fps": FPS, **p}
    start = time.perf_counter()
    imgs = Images(images_dir)
    scene_rng = np.random.default_rng([p["seed"], 1])
    noise_rng = np.random.default_rng([p["seed"], 2])
    n, render, tamper, nuisances, extra = MAKERS[maker](p, imgs, scene_rng)
    folder = pathlib.Path(out_dir) / name
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.pgm"):
        old.unlink()
    digest = hashlib.sha256()
    last = None
    for i in range(n):
        clean = render(i)
        if clean is None:
            assert last is not None, f"{name}: frame {i} repeats a frame before the first"
            data = last
        else:
            data = HEADER + add_noise(clean, noise_rng).tobytes()
        (folder / f"{i:06d}.pgm").write_bytes(data)
        digest.update(data)
        last = data
    photos = p.get("photos", [])
    labels = {
        "name": name,
        "kind": kind,
        "description": description,
        "fps": p["fps"],
        "width": W,
        "height": H,
        "format": "PGM (P5), 8-bit grey, maxval 255",
        "frames": n,
        "first_file": "000000.pgm",
        "last_file": f"{n - 1:06d}.pgm",
        "source": ({"footage": FOOTAGE["file"], "from": FOOTAGE_FROM,
                    "license": FOOTAGE_LICENSE} if maker == "footage" else
                   {"photo": photos[0], "others": photos[1:], "from": WHEEL,
                    "licenses": {ph: LICENSES[ph] for ph in photos}}),
        "seed": p["seed"],
        "subset": bool(p.get("subset")),
        "tamper": None if tamper is None else {k: v for k, v in tamper.items()},
        "normal": normal_segments(n, tamper),
        "nuisances": nuisances,
        "noise": {"read_sigma": READ_SIGMA, "shot_variance_per_level": SHOT},
        # settings of this sequence's own (eval.py puts them in its camera's config)
        "health": p.get("health", {}),
        "sha256": digest.hexdigest(),
    }
    cover = extra.pop("motion_cover", None)
    labels["motion"] = {
        "regions": extra.pop("motion_regions", MOTION_REGIONS),
        # per frame, each region's share covered by something moving (none: nothing moves,
        # or unknown, as in real footage)
        "cover": cover,
    }
    expect = extra.pop("motion_expect", None)
    if expect:
        # what real footage's regions must show in place of a frame-by-frame truth
        labels["motion"]["expect"] = expect
    labels.update(extra)
    (folder / "labels.json").write_text(json.dumps(labels, indent=1) + "\n")
    return labels, time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", default="target/health/images")
    ap.add_argument("--out", default="target/health/sequences")
    ap.add_argument("--only", default="")
    ap.add_argument("--subset", action="store_true")
    ap.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 4))
    args = ap.parse_args()
    chosen = SEQUENCES
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {e[0] for e in SEQUENCES}
        if unknown:
            sys.exit(f"make_sequences: no sequence named {', '.join(sorted(unknown))}")
        chosen = [e for e in SEQUENCES if e[0] in names]
    if args.subset:
        chosen = [e for e in chosen if e[3].get("subset")]
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    # the longest first, so that the jobs end together
    order = sorted(chosen, key=lambda e: -(e[3].get("seconds") or e[3]["pre_s"]
                                            + e[3].get("dusk_s", 0) + e[3]["hold_s"]
                                            + e[3].get("post_s", 0)))
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        results = dict(zip((e[0] for e in order),
                           pool.map(make, order, [args.images] * len(order),
                                    [args.out] * len(order))))
    # index.json: the sequences made now, and those made before that are still there
    # (listed in the generator's order)
    entries = {}
    index_path = out / "index.json"
    if index_path.is_file():
        for e in json.loads(index_path.read_text()).get("sequences", []):
            if (out / e["dir"] / "labels.json").is_file():
                entries[e["name"]] = e
    total_frames = total_bytes = 0
    for name, _, kind, p, _ in chosen:
        labels, seconds = results[name]
        size = labels["frames"] * (len(HEADER) + W * H)
        total_frames += labels["frames"]
        total_bytes += size
        t = labels["tamper"]
        entries[name] = {
            "name": name, "dir": name, "kind": kind, "frames": labels["frames"],
            "seconds": round(labels["frames"] / labels["fps"], 2), "bytes": size,
            "subset": labels["subset"], "tamper_begin": t and t["begin"],
            "tamper_established": t and t["established"], "tamper_end": t and t["end"],
            "normal": labels["normal"], "sha256": labels["sha256"]}
        print(f"{name:28} {kind:12} {labels['frames']:5} frames {size / 1e6:6.1f} MB "
              f"{seconds:5.1f} s")
    index = {"fps": FPS, "width": W, "height": H, "generator": "bench/health/make_sequences.py",
             "photos_from": WHEEL,
             "sequences": [entries[e[0]] for e in SEQUENCES if e[0] in entries]}
    index_path.write_text(json.dumps(index, indent=1) + "\n")
    print(f"make_sequences: {len(chosen)} sequences, {total_frames} frames, "
          f"{total_bytes / 1e6:.0f} MB in {out}, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
