#!/usr/bin/env python3
"""The JPEG decoders for MJPEG cameras, timed on the same frames in one run.

    python3 bench/jpeg_decoders.py [--rounds 5] [--runs 30] [--json FILE]
                                   [--bin EDGESIGHT --example JPEG_DECODERS]

Makes camera-like JPEG frames (samples/scene.png, a photograph, scaled to 1280x720 and
1920x1080 with sensor-like noise, σ = 3 levels, encoded by OpenCV's libjpeg-turbo at
quality 75, 85 and 95, 4:2:0 and 4:2:2 as UVC webcams send them), then in each round
runs `cargo run --release --example jpeg_decoders` (libjpeg-turbo through edgesight's
decoder, and zune-jpeg with its luma output, alternating) and OpenCV's
`cv2.imdecode(buf, cv2.IMREAD_GRAYSCALE)` (one thread) on every frame. Figures are
medians over the rounds of each round's median; ratios are decoder / OpenCV (below 1 is
faster). It also checks that edgesight's luma equals OpenCV's and reports zune-jpeg's
largest difference. The CPU's model is printed with the table. With --bin and --example
(binaries built elsewhere, for a machine without cargo) nothing is built.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import cv2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def make_frames(out_dir: str):
    scene = cv2.imread(os.path.join(ROOT, "samples/scene.png"), cv2.IMREAD_COLOR)
    rng = np.random.default_rng(29)
    frames = []
    for (w, h) in [(1280, 720), (1920, 1080)]:
        big = cv2.resize(scene, (w, h), interpolation=cv2.INTER_CUBIC).astype(np.float32)
        noisy = np.clip(big + rng.normal(0, 3, big.shape), 0, 255).astype(np.uint8)
        for quality in (75, 85, 95):
            for name, factor in (("420", cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420),
                                 ("422", cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422)):
                ok, buf = cv2.imencode(".jpg", noisy, [cv2.IMWRITE_JPEG_QUALITY, quality,
                                                       cv2.IMWRITE_JPEG_SAMPLING_FACTOR, factor])
                assert ok
                path = os.path.join(out_dir, f"{w}x{h}-q{quality}-{name}.jpg")
                with open(path, "wb") as f:
                    f.write(buf.tobytes())
                frames.append(path)
    return frames


def opencv_ms(path: str, runs: int) -> float:
    buf = np.fromfile(path, np.uint8)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        cv2.imdecode(buf, cv2.IMREAD_GRAYSCALE)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json")
    parser.add_argument("--bin", help="an edgesight binary (default: built by cargo)")
    parser.add_argument("--example", help="the jpeg_decoders example binary (likewise)")
    args = parser.parse_args()
    cv2.setNumThreads(1)
    if not (args.bin and args.example):
        subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "edgesight",
                        "--example", "jpeg_decoders"], cwd=ROOT, check=True)
    binary = args.bin or os.path.join(ROOT, "target/release/edgesight")
    example = args.example or os.path.join(ROOT, "target/release/examples/jpeg_decoders")
    with tempfile.TemporaryDirectory() as tmp:
        frames = make_frames(tmp)
        # Exactness first: edgesight's luma is OpenCV's.
        for path in frames:
            out = os.path.join(tmp, "out")
            subprocess.run([binary, "process", path,
                            "--out", out, "--raw"], check=True, capture_output=True)
            want = cv2.imdecode(np.fromfile(path, np.uint8), cv2.IMREAD_GRAYSCALE)
            got = np.fromfile(os.path.join(out, "luma.u8"), np.uint8).reshape(want.shape)
            if not np.array_equal(got, want):
                print(f"{path}: edgesight's luma differs from OpenCV's", file=sys.stderr)
                return 1
        per = {p: {"turbo": [], "zune": [], "opencv": [], "diff": 0,
                   "kb": os.path.getsize(p) / 1024} for p in frames}
        for _ in range(args.rounds):
            ours = json.loads(subprocess.run([example, "--runs", str(args.runs), *frames],
                                             check=True, capture_output=True, text=True).stdout)
            for p in frames:
                per[p]["turbo"].append(ours[p]["libjpeg_turbo_ms"])
                per[p]["zune"].append(ours[p]["zune_jpeg_ms"])
                per[p]["diff"] = max(per[p]["diff"], ours[p]["zune_max_diff"])
                per[p]["opencv"].append(opencv_ms(p, args.runs))
    print(f"JPEG luma decode, ms per frame (median of {args.rounds} rounds of {args.runs}), "
          f"one thread, {cpu_model()}, OpenCV {cv2.__version__}")
    print(f"{'frame':<24}{'KB':>6}{'OpenCV':>9}{'libjpeg-turbo':>15}{'ratio':>7}"
          f"{'zune-jpeg':>11}{'ratio':>7}{'zune max|diff|':>16}")
    rows = []
    for p in frames:
        m = {k: statistics.median(per[p][k]) for k in ("turbo", "zune", "opencv")}
        kb = per[p]["kb"]
        name = os.path.basename(p)[:-4]
        rows.append({"frame": name, "kb": kb, **m, "zune_max_diff": per[p]["diff"],
                     "turbo_ratio": m["turbo"] / m["opencv"],
                     "zune_ratio": m["zune"] / m["opencv"]})
        print(f"{name:<24}{kb:>6.0f}{m['opencv']:>9.3f}{m['turbo']:>15.3f}"
              f"{m['turbo'] / m['opencv']:>7.2f}{m['zune']:>11.3f}{m['zune'] / m['opencv']:>7.2f}"
              f"{per[p]['diff']:>16}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_model(), "opencv": cv2.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
