"""Checks the camera-health sequences against their labels: reads every frame of every
sequence index.json lists and fails (exit 1, each failure printed) when a label does not
hold. A self-check of the generator, not an evaluation of any detector.

    python3 bench/health/check_sequences.py [DIR] [--only NAME,...]   (default target/health/sequences)

What it checks, sequence by sequence:
  - the files: index.json and labels.json agree; the directory holds exactly the PGM files
    000000.pgm .. N-1 (nothing else the replay source would play), each a P5 of the
    labelled size with maxval 255; their sha256 in order is the labelled one; the normal
    segments and the tamper span tile the frames.
  - the noise: consecutive frames are byte-identical exactly where a frame is labelled
    frozen; elsewhere most unclipped pixels differ from the previous frame (noise is drawn
    afresh), and no two frames of a nuisance sequence are identical.
  - normal footage (every normal segment): not covered (its histogram is wide), not
    clipped white, not crushed black.
  - the tamper, by kind: defocus: the mean gradient falls to less than half its level
    before, along the growth, and comes back after a refocus; covered: the labelled
    fraction of the frame sits in a narrow band of grey levels; moved: the view differs
    from the one before by far more than the noise, and stays; frozen: the frames repeat
    the labelled frame; overexposed: at least 75 % of the pixels clip at 255;
    underexposed: at least 85 % are below 16. Without clipping (`mode`): dim: the mean at
    most a fifth of before with less than half the pixels at or below 8; haze: at least
    60 % of the way to white with at most 5 % at 255. An ending tamper gives back the view
    of before.
  - the nuisances: the light's step, a real footage's light step and the AE steps have
    the labelled size; the drift's rate stays within a few % per second; the objects
    cover at most ~15 % of the frame; a dusk ends near its labelled gain, at most 5 %
    darker a second, never clipping (its frames after the dusk begins are exempt from the
    normal footage's checks).
"""
import argparse
import hashlib
import json
import pathlib
import sys

import numpy as np

failures = []


def fail(name, message):
    failures.append(f"{name}: {message}")
    print(f"  FAIL {message}")


def read_pgm(path, width, height):
    data = path.read_bytes()
    header = b"P5\n%d %d\n255\n" % (width, height)
    if not data.startswith(header) or len(data) != len(header) + width * height:
        return data, None
    return data, np.frombuffer(data, np.uint8, offset=len(header)).reshape(height, width)


def gradient(f):
    """Mean gradient magnitude of the frame binned 2x2 (which halves the noise's share)."""
    b = f.astype(np.float32).reshape(f.shape[0] // 2, 2, f.shape[1] // 2, 2).mean(axis=(1, 3))
    return float(np.abs(np.diff(b, axis=1)).mean() + np.abs(np.diff(b, axis=0)).mean())


def narrow(f, band=15):
    """The fraction of pixels within `band` grey levels of the frame's darkest-mode level."""
    hist = np.bincount(f.ravel(), minlength=256)
    mode = int(np.argmax(np.convolve(hist, np.ones(2 * band + 1), mode="same")))
    return float(hist[max(mode - band, 0):mode + band + 1].sum() / f.size)


class Stats:
    """Per-frame measures of a sequence, from one pass over its files."""

    def __init__(self, n):
        self.mean = np.zeros(n)
        self.std = np.zeros(n)
        self.white = np.zeros(n)  # fraction at 255
        self.dark = np.zeros(n)  # fraction below 16
        self.clip8 = np.zeros(n)  # fraction at or below 8: the detectors' dark clipping
        self.spread = np.zeros(n)  # 95th - 5th percentile
        self.grad = np.zeros(n)
        self.narrow = np.zeros(n)
        self.same_as_prev = np.zeros(n, bool)
        self.noise_changed = np.ones(n)  # fraction of unclipped pixels changed since prev


def check_sequence(root, entry):
    name = entry["name"]
    print(f"{name}")
    folder = root / entry["dir"]
    labels = json.loads((folder / "labels.json").read_text())
    n, w, h = labels["frames"], labels["width"], labels["height"]
    for key in ("kind", "frames", "subset", "sha256", "normal"):
        if entry[key] != labels[key]:
            fail(name, f"index.json's {key} {entry[key]!r} is not labels.json's {labels[key]!r}")
    if entry.get("tamper_begin") != (labels["tamper"] or {}).get("begin"):
        fail(name, "index.json's tamper_begin differs from labels.json's")

    # the files
    images = sorted(p.name for p in folder.iterdir()
                    if p.suffix.lower() in (".png", ".pgm", ".ppm", ".pnm", ".jpg", ".jpeg"))
    expected = [f"{i:06d}.pgm" for i in range(n)]
    if images != expected:
        fail(name, f"the directory's images are not exactly 000000.pgm..{n - 1:06d}.pgm "
                   f"({len(images)} images)")
        return

    # the segments tile the frames
    t = labels["tamper"]
    spans = [tuple(s) for s in labels["normal"]]
    if t:
        spans.append((t["begin"], t["end"] if t["end"] is not None else n))
        if not (t["begin"] <= t["established"] <= (t["ending"] or n) <= (t["end"] or n)
                and (t["ending"] is None) == (t["end"] is None)):
            fail(name, f"tamper begin {t['begin']} / established {t['established']} / "
                       f"ending {t['ending']} / end {t['end']} out of order")
    spans.sort()
    if spans[0][0] != 0 or spans[-1][1] != n or any(
            a[1] != b[0] for a, b in zip(spans, spans[1:])):
        fail(name, f"normal segments and the tamper do not tile 0..{n}: {spans}")
    normal = np.zeros(n, bool)
    for a, b in labels["normal"]:
        normal[a:b] = True

    # one pass over the frames
    s = Stats(n)
    digest = hashlib.sha256()
    seen = {}
    prev = prev_data = None
    duplicates = 0
    frames_kept = {}
    keep = set()
    if t:
        keep = {max(t["begin"] - 1, 0), t["established"], n - 1}
    for i in range(n):
        data, f = read_pgm(folder / expected[i], w, h)
        digest.update(data)
        if f is None:
            fail(name, f"{expected[i]} is not a {w}x{h} P5 PGM with maxval 255")
            return
        s.mean[i], s.std[i] = f.mean(), f.std()
        s.white[i] = (f == 255).mean()
        s.dark[i] = (f < 16).mean()
        s.clip8[i] = (f <= 8).mean()
        p5, p95 = np.percentile(f, (5, 95))
        s.spread[i] = p95 - p5
        s.grad[i] = gradient(f)
        s.narrow[i] = narrow(f)
        if prev is not None:
            s.same_as_prev[i] = data == prev_data
            live = (prev > 0) & (prev < 255) & (f > 0) & (f < 255)
            if live.sum() > 1000:
                s.noise_changed[i] = float((prev[live] != f[live]).mean())
        key = hashlib.blake2b(data, digest_size=16).digest()
        if key in seen and (not t or t.get("repeats_frame") is None):
            duplicates += 1
        seen[key] = i
        if i in keep or (t and t["end"] is not None and i == min(t["end"] + 10, n - 1)):
            frames_kept[i] = f.astype(np.float32)
        prev, prev_data = f, data
    if digest.hexdigest() != labels["sha256"]:
        fail(name, "the frames' sha256 is not the labelled one (stale or damaged files)")

    # the noise: identical exactly where frozen
    frozen = np.zeros(n, bool)
    if t and labels["kind"] == "frozen":
        frozen[t["begin"]:t["end"] if t["end"] is not None else n] = True
    wrong = np.flatnonzero(s.same_as_prev != frozen)
    if len(wrong):
        fail(name, f"{len(wrong)} frames are identical to the previous one where not frozen "
                   f"or differ where frozen (first: frame {wrong[0]})")
    live = ~frozen
    live[0] = False
    low = np.flatnonzero(live & (s.noise_changed < 0.6))
    if len(low):
        fail(name, f"{len(low)} frames keep most unclipped pixels of the previous one "
                   f"(first: frame {low[0]}, {s.noise_changed[low[0]]:.2f} changed)")
    if duplicates:
        fail(name, f"{duplicates} frames repeat an earlier frame's bytes")

    # normal footage looks like a working camera (a dusk's is darker by design: its own
    # checks below)
    dusk = [e for e in labels.get("nuisances", []) if e["kind"] == "dusk"]
    if dusk:
        normal[dusk[0]["begin"]:] = False
    bad = np.flatnonzero(normal & ((s.spread < 60) | (s.narrow > 0.5)))
    if len(bad):
        fail(name, f"{len(bad)} normal frames have a narrow histogram (first: frame {bad[0]}, "
                   f"5-95 % spread {s.spread[bad[0]]:.0f}, narrow {s.narrow[bad[0]]:.2f})")
    bad = np.flatnonzero(normal & (s.white > 0.10))
    if len(bad):
        fail(name, f"{len(bad)} normal frames clip more than 10 % white "
                   f"(first: frame {bad[0]}, {s.white[bad[0]]:.2f})")
    bad = np.flatnonzero(normal & (s.dark > 0.35))
    if len(bad):
        fail(name, f"{len(bad)} normal frames have more than 35 % below 16 "
                   f"(first: frame {bad[0]}, {s.dark[bad[0]]:.2f})")
    summary = (f"  mean {s.mean[normal].min():.0f}-{s.mean[normal].max():.0f}, "
               f"5-95 % spread >= {s.spread[normal].min():.0f}, "
               f"white <= {s.white[normal].max():.3f}, dark <= {s.dark[normal].max():.3f}, "
               f"noise changes >= {s.noise_changed[live].min():.2f} of unclipped pixels")
    print(summary)

    if t:
        check_tamper(name, labels, s, frames_kept, n)
    else:
        check_nuisances(name, labels, s, folder, n, w, h)


def check_tamper(name, labels, s, kept, n):
    t, kind = labels["tamper"], labels["kind"]
    b, est, end = t["begin"], t["established"], t["end"]
    held = slice(est, t["ending"] if t["ending"] is not None else n)
    before = slice(max(b - 60, 0), b)
    if kind == "defocus":
        g0, g1 = s.grad[before].mean(), s.grad[held].max()
        print(f"  gradient {g0:.2f} before, at most {g1:.2f} while blurred "
              f"(sigma {t['sigma_max']})")
        if not g1 < 0.5 * g0:
            fail(name, f"blurred frames keep {g1 / g0:.2f} of the gradient (want < 0.5)")
        # falling along the growth: every 5th frame lower than the one before it
        growth = s.grad[b:est + 1:5]
        if not np.all(np.diff(growth) < 0):
            fail(name, f"the gradient does not fall along the blur's growth: {growth.round(2)}")
    elif kind == "covered":
        c = s.narrow[held].min()
        print(f"  at least {c:.3f} of each covered frame within +-15 levels "
              f"(cover {t['cover']}); normal at most {s.narrow[before].max():.3f}")
        if not c >= t["cover"] - 0.02:
            fail(name, f"only {c:.3f} of a covered frame is in a narrow band (cover {t['cover']})")
    elif kind == "moved":
        ref, settled = kept[max(b - 1, 0)], kept[n - 1]
        moved = float(np.abs(settled - ref).mean())
        print(f"  mean |difference| from the view before: {moved:.1f} levels")
        if not moved > 20:
            fail(name, f"the view after the move differs by {moved:.1f} levels (want > 20)")
        # staying: the settled view's gradient and mean keep to those at the end
        after = slice(est + 15, n)
        if s.mean[after].max() - s.mean[after].min() > 10:
            fail(name, "the view does not stay after the move (its mean wanders)")
    elif kind == "frozen":
        print(f"  frames {b}..{(end or n) - 1} repeat frame {t['repeats_frame']}")
        if t["repeats_frame"] != b - 1:
            fail(name, "the repeated frame is not the one before the freeze")
    elif kind == "overexposed" and t.get("mode") == "haze":
        wmax = s.white[held].max()
        m0, m1 = s.mean[before].mean(), s.mean[held].min()
        way = (m1 - m0) / (255 - m0)
        print(f"  mean {m0:.0f} -> at least {m1:.0f} ({way:.2f} of the way to white), "
              f"at most {wmax:.3f} at 255")
        if not wmax <= 0.05:
            fail(name, f"a washed-out frame clips {wmax:.3f} (want <= 0.05: no clipping)")
        if not way >= 0.6:
            fail(name, f"a washed-out frame is only {way:.2f} of the way to white (want >= 0.6)")
    elif kind == "underexposed" and t.get("mode") == "dim":
        cmax = s.clip8[held].max()
        ratio = s.mean[held].max() / s.mean[before].mean()
        print(f"  mean at most x{ratio:.3f} of before, at most {cmax:.3f} at or below 8")
        if not cmax < 0.5:
            fail(name, f"a dim frame has {cmax:.3f} at or below 8 (want < 0.5: not clipped)")
        if not ratio <= 0.2:
            fail(name, f"a dim frame keeps x{ratio:.3f} of the mean (want <= 0.2)")
    elif kind == "overexposed":
        wmin = s.white[held].min()
        print(f"  at least {wmin:.3f} of each overexposed frame at 255")
        if not wmin >= 0.75:
            fail(name, f"an overexposed frame clips only {wmin:.3f} (want >= 0.75)")
    elif kind == "underexposed":
        dmin = s.dark[held].min()
        print(f"  at least {dmin:.3f} of each underexposed frame below 16")
        if not dmin >= 0.85:
            fail(name, f"an underexposed frame has only {dmin:.3f} below 16 (want >= 0.85)")
    else:
        fail(name, f"unknown kind {kind}")
    if end is not None and end + 10 < n:
        back = float(np.abs(kept[end + 10] - kept[max(b - 1, 0)]).mean())
        print(f"  {back:.1f} levels from the view before, 10 frames after the end")
        if not back < 6:
            fail(name, f"the view after the tamper's end is {back:.1f} levels from the view "
                       "before (want < 6)")


def check_nuisances(name, labels, s, folder, n, w, h):
    if labels["kind"] != "nuisance":
        fail(name, f"no tamper, but kind {labels['kind']}")
    for e in labels["nuisances"]:
        k = e["kind"]
        if k == "light_on":
            ratio = s.mean[e["end"] + 5] / s.mean[e["begin"] - 1]
            print(f"  light on: mean x{ratio:.2f}")
            if not 1.25 <= ratio <= 1.6:
                fail(name, f"the light's step is x{ratio:.2f} (want +25..60 %)")
        elif k == "auto_exposure_step":
            ratio = s.mean[e["begin"]] / s.mean[e["begin"] - 1]
            print(f"  AE step at {e['begin']}: mean x{ratio:.3f} (gain x{e['factor']})")
            if not (0.74 <= ratio <= 0.87 or 1.13 <= ratio <= 1.27):
                fail(name, f"the AE step at {e['begin']} is x{ratio:.3f} (want 15..25 %)")
        elif k == "illumination_drift":
            per_s = s.mean[30:] / s.mean[:-30]
            swing = s.mean.max() / s.mean.min()
            print(f"  drift: at most {100 * np.abs(per_s - 1).max():.1f} %/s, "
                  f"swing x{swing:.2f}")
            if np.abs(per_s - 1).max() > 0.06:
                fail(name, "the drift is faster than 6 %/s")
            if swing < 1.2:
                fail(name, f"the drift swings only x{swing:.2f}")
        elif k == "object":
            pass  # checked below, all objects together
        elif k == "light_step":
            ratio = s.mean[e["begin"]] / s.mean[e["begin"] - 1]
            back = s.mean[e["end"]] / s.mean[e["end"] - 1]
            print(f"  light step at {e['begin']}: mean x{ratio:.3f}, back x{back:.3f} at "
                  f"{e['end']} (gain x{e['factor']})")
            if abs(ratio - e["factor"]) > 0.03 or abs(back * e["factor"] - 1) > 0.03:
                fail(name, f"the light step at {e['begin']} is x{ratio:.3f} and back "
                           f"x{back:.3f} (want x{e['factor']} and back)")
        elif k == "dusk":
            fps = labels["fps"]
            ratio = s.mean[e["end"]:].max() / s.mean[:e["begin"]].mean()
            per_s = s.mean[fps:] / s.mean[:-fps]
            fastest = 1 - per_s.min()
            print(f"  dusk: mean x{ratio:.3f} at the end, at most {100 * fastest:.1f} %/s "
                  f"darker, at most {s.clip8.max():.3f} at or below 8")
            if not 0.09 <= ratio <= 0.17:
                fail(name, f"the dusk ends at x{ratio:.3f} of the light (want ~x0.125)")
            if fastest > 0.05:
                fail(name, f"the dusk darkens {100 * fastest:.1f} %/s (want at most 5)")
            if s.clip8.max() >= 0.5:
                fail(name, "the dusk clips half the frame at or below 8")
        elif k != "noise":
            fail(name, f"unknown nuisance {k}")
    objects = [e for e in labels["nuisances"] if e["kind"] == "object"]
    if objects:
        # the background: the median of the frames before the first object
        first = min(e["begin"] for e in objects)
        bg = np.median(np.stack([read_pgm(folder / f"{i:06d}.pgm", w, h)[1]
                                 for i in range(0, first, 3)]), axis=0)
        covered = []
        for i in range(0, n, 3):
            f = read_pgm(folder / f"{i:06d}.pgm", w, h)[1]
            covered.append(float((np.abs(f - bg) > 25).mean()))
        top = max(covered)
        print(f"  objects: at most {top:.3f} of the frame differs from the background")
        if not 0.05 <= top <= 0.16:
            fail(name, f"the objects change {top:.3f} of the frame (want 0.05..0.16)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default="target/health/sequences")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    root = pathlib.Path(args.dir)
    index_path = root / "index.json"
    if not index_path.is_file():
        sys.exit(f"check_sequences: no {index_path}; run bench/health/make_sequences.py")
    index = json.loads(index_path.read_text())
    entries = index["sequences"]
    names = [e["name"] for e in entries]
    if len(set(names)) != len(names):
        fail("index.json", "a sequence is listed twice")
    if args.only:
        entries = [e for e in entries if e["name"] in set(args.only.split(","))]
    if not entries:
        sys.exit("check_sequences: no sequences to check")
    for e in entries:
        check_sequence(root, e)
    if failures:
        print(f"\ncheck_sequences: {len(failures)} FAILED:", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        sys.exit(1)
    print(f"\ncheck_sequences: {len(entries)} sequences, every label holds")


if __name__ == "__main__":
    main()
