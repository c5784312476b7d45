#!/usr/bin/env python3
"""edgesight beside OpenCV on the same frames, in one run, alternating.

    python3 bench/compare.py [--bin target/release/edgesight] [--sizes 1920x1080,3840x2160]
                             [--rounds 5] [--runs 20] [--device SPEC] [--json FILE]
                             [--threads N]

`edgesight bench --save-frames` writes its synthetic grey frames; OpenCV
(opencv-python-headless) then does the same work on those bytes with its outputs
preallocated, once with 1 thread and once with all threads:

  sobel      Sobel dx and dy (CV_16S, ksize 3, BORDER_REFLECT_101), |dx|+|dy| saturated to
             8 bits, and the edge mask (magnitude >= 64): the outputs edgesight's sobel stage
             writes, bit for bit
  histogram  calcHist, 256 bins
  otsu       threshold(THRESH_BINARY | THRESH_OTSU): edgesight's otsu + binarize stages
  integral   integral2 (sum CV_32S, squared sum CV_64F); "integral+" adds the integrals of
             the edge and foreground masks, which edgesight's integral stage also computes

Each round runs OpenCV (1 thread), OpenCV (all threads) and `edgesight bench` once per size,
so slow stretches of a shared machine hit all of them alike. OpenCV figures are medians of
every timed call; edgesight's are medians of its per-round medians (device time and host
wall time). Ratios are edgesight / OpenCV: below 1 means edgesight is faster.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import cv2
import numpy as np

STAGES = ["sobel", "histogram", "otsu", "integral"]


def opencv_work(img):
    """Closures for each stage, outputs preallocated; returns (stages, check)."""
    h, w = img.shape
    dx = np.empty((h, w), np.int16)
    dy = np.empty((h, w), np.int16)
    ax = np.empty((h, w), np.uint8)
    ay = np.empty((h, w), np.uint8)
    mag = np.empty((h, w), np.uint8)
    edges = np.empty((h, w), np.uint8)
    mask = np.empty((h, w), np.uint8)
    isum = np.empty((h + 1, w + 1), np.int32)
    isq = np.empty((h + 1, w + 1), np.float64)
    iedges = np.empty((h + 1, w + 1), np.int32)
    ifg = np.empty((h + 1, w + 1), np.int32)
    hist = [None]

    def sobel():
        cv2.Sobel(img, cv2.CV_16S, 1, 0, dst=dx, ksize=3, borderType=cv2.BORDER_REFLECT_101)
        cv2.Sobel(img, cv2.CV_16S, 0, 1, dst=dy, ksize=3, borderType=cv2.BORDER_REFLECT_101)
        cv2.convertScaleAbs(dx, dst=ax)
        cv2.convertScaleAbs(dy, dst=ay)
        cv2.add(ax, ay, dst=mag)
        cv2.threshold(mag, 63, 255, cv2.THRESH_BINARY, dst=edges)

    def histogram():
        hist[0] = cv2.calcHist([img], [0], None, [256], [0, 256])

    def otsu():
        cv2.threshold(img, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU, dst=mask)

    def integral():
        cv2.integral2(img, sum=isum, sqsum=isq, sdepth=cv2.CV_32S, sqdepth=cv2.CV_64F)

    def integral_masks():
        cv2.integral(edges, sum=iedges, sdepth=cv2.CV_32S)
        cv2.integral(mask, sum=ifg, sdepth=cv2.CV_32S)

    return {
        "sobel": sobel,
        "histogram": histogram,
        "otsu": otsu,
        "integral": integral,
        "integral_masks": integral_masks,
    }


def time_opencv(work, runs, warmup=3):
    """Per-call times in ms for each stage, the stages interleaved call by call."""
    out = {k: [] for k in work}
    for i in range(warmup + runs):
        for name, fn in work.items():
            t = time.perf_counter_ns()
            fn()
            dt = (time.perf_counter_ns() - t) / 1e6
            if i >= warmup:
                out[name].append(dt)
    return out


def run_edgesight(args, sizes, runs, json_path, save_frames=None):
    cmd = [args.bin, "bench", "--sizes", ",".join(sizes), "--runs", str(runs),
           "--warmup", "5", "--json", str(json_path), "--device", args.device]
    if save_frames:
        cmd += ["--save-frames", str(save_frames)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(pathlib.Path(json_path).read_text())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="target/release/edgesight")
    ap.add_argument("--sizes", default="1280x720,1920x1080,3840x2160")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20, help="timed calls per round and size")
    ap.add_argument("--device", default="default")
    ap.add_argument("--json", help="write the medians and ratios here")
    ap.add_argument("--threads", type=int, default=0,
                    help="OpenCV's many-thread run uses this many threads (default: every CPU); "
                         "limit POCL to as many with POCL_MAX_PTHREAD_COUNT")
    args = ap.parse_args()
    os.environ.setdefault("POCL_CACHE_DIR", str(pathlib.Path("target/pocl-cache").resolve()))
    pathlib.Path(os.environ["POCL_CACHE_DIR"]).mkdir(parents=True, exist_ok=True)
    sizes = args.sizes.split(",")
    all_threads = args.threads or cv2.getNumberOfCPUs()
    cv2.setUseOptimized(True)

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="edgesight-compare-"))
    frames_dir = tmp / "frames"
    first = run_edgesight(args, sizes, 3, tmp / "first.json", save_frames=frames_dir)
    device = first["device"]
    frames = {}
    for s in sizes:
        w, h = map(int, s.split("x"))
        frames[s] = np.fromfile(frames_dir / f"frame-{s}.gray", np.uint8).reshape(h, w)
    works = {s: opencv_work(frames[s]) for s in sizes}

    cv_times = {(t, s): {} for t in (1, all_threads) for s in sizes}
    es_rounds = []
    for r in range(args.rounds):
        print(f"\rround {r + 1}/{args.rounds}", end="", file=sys.stderr, flush=True)
        for threads in (1, all_threads):
            cv2.setNumThreads(threads)
            for s in sizes:
                for k, v in time_opencv(works[s], args.runs).items():
                    cv_times[(threads, s)].setdefault(k, []).extend(v)
        es_rounds.append(run_edgesight(args, sizes, args.runs, tmp / f"round{r}.json"))
    print(file=sys.stderr)

    # Otsu on the same bytes: OpenCV's threshold (what IPP or OpenCV's own code gives).
    summary = {"device": device, "opencv": cv2.__version__, "threads": all_threads,
               "rounds": args.rounds, "runs": args.runs, "results": []}
    print(f"edgesight on {device}; OpenCV {cv2.__version__} with 1 and {all_threads} threads")
    print(f"{args.rounds} rounds x {args.runs} runs, alternating; medians in ms; "
          "ratio = edgesight / OpenCV (device time; wall time for the pipeline's last row)")
    for s in sizes:
        es = {}
        for name in ["luma", "sobel", "histogram", "otsu", "binarize", "integral", "regions"]:
            es[name] = statistics.median(
                [next(x for x in rr["results"] if f"{x['width']}x{x['height']}" == s)["stages"][name]
                 for rr in es_rounds])
        pick = lambda key: statistics.median(
            [next(x for x in rr["results"] if f"{x['width']}x{x['height']}" == s)[key]
             for rr in es_rounds])
        es_dev, es_wall = pick("pipeline_device_ms"), pick("pipeline_wall_ms")
        es_stage = {
            "sobel": es["sobel"],
            "histogram": es["histogram"],
            "otsu": es["otsu"] + es["binarize"],
            "integral": es["integral"],
        }
        row = {"size": s, "edgesight_ms": es_stage, "edgesight_pipeline_device_ms": es_dev,
               "edgesight_pipeline_wall_ms": es_wall, "opencv": {}}
        print(f"\n{s}")
        print(f"  {'stage':<12} {'edgesight':>10} {'cv 1 thr':>10} {'ratio':>7} "
              f"{'cv ' + str(all_threads) + ' thr':>10} {'ratio':>7}")
        cv = {t: {k: statistics.median(v) for k, v in cv_times[(t, s)].items()}
              for t in (1, all_threads)}
        for t in cv:
            cv[t]["pipeline"] = sum(cv[t][k] for k in STAGES)
            cv[t]["pipeline+"] = cv[t]["pipeline"] + cv[t]["integral_masks"]
            row["opencv"][str(t)] = cv[t]
        lines = [(k, es_stage[k], k) for k in STAGES]
        lines += [("integral+", es["integral"], None), ("pipeline", es_dev, "pipeline"),
                  ("pipeline+", es_dev, "pipeline+"), ("wall", es_wall, "pipeline+")]
        for label, mine, key in lines:
            if key is None:
                a, b = (cv[t]["integral"] + cv[t]["integral_masks"] for t in (1, all_threads))
            else:
                a, b = cv[1][key], cv[all_threads][key]
            print(f"  {label:<12} {mine:>10.3f} {a:>10.3f} {mine / a:>7.2f} {b:>10.3f} {mine / b:>7.2f}")
        summary["results"].append(row)
    print("\npipeline = sobel + histogram + otsu + integral (sum, sqsum); pipeline+ and integral+"
          " add the edge and foreground integrals OpenCV otherwise skips. edgesight's pipeline"
          " also sums the regions (in its device time).")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
