#!/usr/bin/env python3
"""Generate the deterministic edgesight test scene ``samples/scene.png``.

The scene is a synthetic 640x480 8-bit RGB "street" picture drawn with numpy
and OpenCV drawing primitives: a sky gradient with a sun, a textured ground
plane, a row of buildings with lit/unlit windows, some diagonal lines (a road,
wires, a ramp), a line of text, then a slight Gaussian blur and mild noise.
It is designed to have a bimodal-ish luma histogram (bright sky vs. dark
buildings/ground, so Otsu has something to split) and plenty of edges in
every direction.

All randomness comes from a fixed numpy seed, so the output is reproducible
for a given numpy/OpenCV version.  Rerun from the repository root with:

    python3 scripts/make_sample.py            # writes samples/scene.png
    python3 scripts/make_sample.py -o OTHER.png
"""

import argparse
import os
import sys

import cv2
import numpy as np

W, H = 640, 480
SEED = 20240611
HORIZON = 300


def draw_scene(seed: int = SEED) -> np.ndarray:
    """Return the scene as an HxWx3 uint8 array in RGB channel order."""
    rng = np.random.default_rng(seed)
    # Work in RGB float, convert to uint8 at the end.
    img = np.zeros((H, W, 3), np.float32)

    # --- sky: vertical gradient from deep blue (top) to pale haze (horizon)
    t = np.linspace(0.0, 1.0, HORIZON, dtype=np.float32)[:, None]
    top = np.array([70, 120, 200], np.float32)
    bottom = np.array([215, 225, 235], np.float32)
    img[:HORIZON] = (top * (1 - t) + bottom * t)[:, None, :]

    # --- sun with a soft halo
    sun_c = (505, 80)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    d = np.hypot(xx - sun_c[0], yy - sun_c[1])
    halo = np.clip(1.0 - d / 140.0, 0, 1) ** 2 * 45.0
    img[:HORIZON] += halo[:HORIZON, :, None] * np.array([1.0, 0.9, 0.6], np.float32)

    # --- ground: dark earthy gradient with blotchy texture and grass streaks
    tg = np.linspace(0.0, 1.0, H - HORIZON, dtype=np.float32)[:, None]
    g_top = np.array([90, 85, 60], np.float32)
    g_bot = np.array([45, 50, 35], np.float32)
    img[HORIZON:] = (g_top * (1 - tg) + g_bot * tg)[:, None, :]
    coarse = rng.normal(0, 1, ((H - HORIZON) // 8 + 1, W // 8 + 1)).astype(np.float32)
    coarse = cv2.resize(coarse, (W, H - HORIZON), interpolation=cv2.INTER_CUBIC)
    fine = rng.normal(0, 1, (H - HORIZON, W)).astype(np.float32)
    tex = 12.0 * coarse + 3.0 * fine
    img[HORIZON:] += tex[:, :, None]

    canvas = np.clip(img, 0, 255).astype(np.uint8)
    canvas = np.ascontiguousarray(canvas)

    # grass streaks (short slanted strokes)
    for _ in range(400):
        x = int(rng.integers(0, W))
        y = int(rng.integers(HORIZON + 5, H))
        L = int(rng.integers(4, 12))
        dx = int(rng.integers(-3, 4))
        shade = int(rng.integers(30, 110))
        cv2.line(canvas, (x, y), (x + dx, y - L), (shade // 2, shade, shade // 3), 1, cv2.LINE_AA)

    # --- distant hills (filled polygon just above the horizon)
    xs = np.arange(0, W + 40, 40)
    hill_y = HORIZON - 20 - (25 * np.sin(xs / 90.0) + rng.integers(0, 15, xs.size))
    pts = np.stack([xs, hill_y.astype(np.int32)], axis=1)
    pts = np.vstack([pts, [[W, HORIZON], [0, HORIZON]]]).astype(np.int32)
    cv2.fillPoly(canvas, [pts], (120, 140, 150), cv2.LINE_AA)

    # --- buildings with windows
    x = 20
    while x < W - 60:
        bw = int(rng.integers(50, 110))
        bh = int(rng.integers(90, 230))
        base = HORIZON + int(rng.integers(0, 25))
        tone = int(rng.integers(35, 90))
        col = (tone, tone + int(rng.integers(-10, 10)), tone + int(rng.integers(0, 20)))
        x0, y0, x1, y1 = x, base - bh, min(x + bw, W - 1), base
        cv2.rectangle(canvas, (x0, y0), (x1, y1), col, -1)
        cv2.rectangle(canvas, (x0, y0), (x1, y1), (20, 20, 25), 2)
        # roof detail: sometimes a triangular roof, sometimes an antenna
        if rng.random() < 0.4:
            roof = np.array([[x0, y0], [(x0 + x1) // 2, y0 - int(rng.integers(15, 40))], [x1, y0]], np.int32)
            cv2.fillPoly(canvas, [roof], (tone // 2 + 20, 30, 30), cv2.LINE_AA)
        elif rng.random() < 0.5:
            ax = int(rng.integers(x0 + 5, x1 - 5))
            cv2.line(canvas, (ax, y0), (ax, y0 - 30), (30, 30, 30), 2)
        # window grid
        ww, wh, gap = 8, 11, 6
        for wy in range(y0 + 10, y1 - wh - 8, wh + gap):
            for wx in range(x0 + 8, x1 - ww - 4, ww + gap):
                lit = rng.random() < 0.45
                wc = (235, 215, 130) if lit else (25, 30, 45)
                cv2.rectangle(canvas, (wx, wy), (wx + ww, wy + wh), wc, -1)
        x += bw + int(rng.integers(8, 30))

    # --- diagonal lines: a road in perspective, power wires, a ramp
    cv2.fillPoly(canvas, [np.array([[250, H], [390, H], [335, HORIZON + 5], [305, HORIZON + 5]], np.int32)],
                 (70, 70, 72), cv2.LINE_AA)
    for k in range(6):
        ya = HORIZON + 20 + k * 28
        yb = ya + 14
        fa = (ya - HORIZON) / (H - HORIZON)
        cv2.line(canvas, (320, ya), (320, yb), (230, 230, 200), max(1, int(1 + 4 * fa)))
    cv2.line(canvas, (0, 40), (W - 1, 150), (25, 25, 25), 1, cv2.LINE_AA)
    cv2.line(canvas, (0, 60), (W - 1, 175), (25, 25, 25), 1, cv2.LINE_AA)
    cv2.line(canvas, (430, H - 1), (620, HORIZON + 10), (200, 60, 50), 3, cv2.LINE_AA)
    cv2.line(canvas, (20, H - 10), (200, HORIZON + 30), (180, 180, 60), 2)

    # --- the sun disc itself
    cv2.circle(canvas, sun_c, 34, (255, 240, 170), -1, cv2.LINE_AA)
    cv2.circle(canvas, sun_c, 34, (255, 220, 120), 2, cv2.LINE_AA)

    # --- a few clouds (ellipses)
    for cx, cy in [(120, 70), (300, 45), (220, 110)]:
        for _ in range(4):
            ox, oy = int(rng.integers(-30, 30)), int(rng.integers(-8, 8))
            ax_, ay_ = int(rng.integers(20, 40)), int(rng.integers(8, 16))
            cv2.ellipse(canvas, (cx + ox, cy + oy), (ax_, ay_), 0, 0, 360, (245, 245, 248), -1, cv2.LINE_AA)

    # --- text
    cv2.putText(canvas, "EDGESIGHT", (24, H - 24), cv2.FONT_HERSHEY_SIMPLEX, 1.4, (250, 250, 250), 3, cv2.LINE_AA)
    cv2.putText(canvas, "test scene 640x480", (400, H - 20), cv2.FONT_HERSHEY_PLAIN, 1.3, (10, 10, 10), 2, cv2.LINE_8)

    # --- slight blur and mild noise
    out = cv2.GaussianBlur(canvas, (3, 3), 0.8).astype(np.float32)
    out += rng.normal(0, 1.0, (H, W, 1)).astype(np.float32)  # luma-ish noise
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(os.path.dirname(here), "samples", "scene.png")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", default=default_out, help="output PNG (default: samples/scene.png)")
    args = ap.parse_args(argv)

    rgb = draw_scene()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    # cv2.imwrite expects BGR channel order.
    if not cv2.imwrite(args.out, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9]):
        print(f"failed to write {args.out}", file=sys.stderr)
        return 1
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes, {W}x{H} RGB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
