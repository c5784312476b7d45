"""Scores the motion events (`[camera.motion]`) of the evaluation's replays against the
regions' ground truth in the sequences' labels: per sequence and region, the events a
person would count (something covering at least TRUTH_COVER of the region for at least
TRUTH_SECONDS), which the daemon's events found (precision, recall, delay), and the events
on normal footage nothing explains (false events, per hour). No I/O: eval.py runs the
daemons and prints what this returns; test_eval.py tests it.

The daemon's lines (one each, INFO):
    motion began camera=NAME roi=ROI frame=N
    motion ended camera=NAME roi=ROI frame=N

Truth, per region, from labels["motion"]["cover"] (per frame, each region's share covered
by something moving; null: nothing moves in the sequence): the runs of frames covered at
least TRUTH_COVER, runs closer than TRUTH_GAP_SECONDS joined, those lasting at least
TRUTH_SECONDS kept. A `motion began` at frame N matches the first truth event with
begin <= N < end + GRACE_SECONDS (the daemon's own min_seconds delays it) not matched yet;
its delay is (N - begin) / fps. One inside a tamper's frames (a cover sliding in, a pan)
is not scored; any other unmatched one is a false event.

Real footage has no truth per frame: its labels' motion.expect says, per region, what it
must show instead: `max_events` (a static region: at most so many `motion began`) and
`max_window_mean` (the highest mean of the region's motion ratio over a window of
WINDOW_FRAMES frames once the background is learned, from the ratios eval.py samples), or
`min_events` (a region people cross: at least so many). Its events are not matched.
"""
import statistics

TRUTH_COVER = 0.05
TRUTH_SECONDS = 0.5
TRUTH_GAP_SECONDS = 0.5
GRACE_SECONDS = 1.0
WINDOW_FRAMES = 150

MESSAGES = {"motion began": "motion_began", "motion ended": "motion_ended"}


def truth_events(labels, region):
    """(begin, end) frame ranges (half-open) of region `region` (index) moving."""
    motion = labels.get("motion") or {}
    cover = motion.get("cover")
    if not cover:
        return []
    fps = labels["fps"]
    runs, start = [], None
    for i, row in enumerate(cover + [[0.0] * len(cover[0])]):
        on = row[region] >= TRUTH_COVER
        if on and start is None:
            start = i
        elif not on and start is not None:
            runs.append([start, i])
            start = None
    joined = []
    for a, b in runs:
        if joined and a - joined[-1][1] < TRUTH_GAP_SECONDS * fps:
            joined[-1][1] = b
        else:
            joined.append([a, b])
    return [(a, b) for a, b in joined if b - a >= TRUTH_SECONDS * fps]


def window_means(samples, frames):
    """The means of (frame, ratio) samples over the windows [k * WINDOW_FRAMES, (k + 1) *
    WINDOW_FRAMES) of the first `frames` frames, each rounded to 3 places; a window without
    a sample is left out."""
    sums = {}
    for f, ratio in samples:
        if 0 <= f < frames:
            s = sums.setdefault(f // WINDOW_FRAMES, [0.0, 0])
            s[0] += ratio
            s[1] += 1
    return [round(total / count, 3) for _, (total, count) in sorted(sums.items())]


def score_expected(region, expect, began, samples, frames):
    """A region of real footage against its expectations."""
    means = window_means(samples, frames)
    out = {"roi": region["name"], "truth": 0, "detected": 0, "events": len(began),
           "delays_s": [], "false": [], "in_tamper": 0, "missed": [], "expect": expect,
           "window_means": means, "unmet": []}
    if len(began) > expect.get("max_events", len(began)):
        out["unmet"].append(f"{len(began)} events (frames {', '.join(map(str, began))}), "
                            f"at most {expect['max_events']} expected")
    if len(began) < expect.get("min_events", 0):
        out["unmet"].append(f"{len(began)} events, at least {expect['min_events']} expected")
    bound = expect.get("max_window_mean")
    if bound is not None and (not means or max(means) > bound):
        top = f"{max(means):.3f}" if means else "no sample"
        out["unmet"].append(f"motion ratio's window mean up to {top}, at most {bound} "
                            f"expected")
    return out


def score_motion(labels, events, ratios=None):
    """Per region of the sequence: its truth events, the daemon's `motion began` events
    and how they matched; or, for a region the labels give expectations for, those
    checked against its events and `ratios` ({roi: [(frame, ratio), ...]} sampled while
    the camera watched)."""
    name, n, fps = labels["name"], labels["frames"], labels["fps"]
    expects = (labels.get("motion") or {}).get("expect") or {}
    t = labels["tamper"]
    in_tamper = lambda f: t is not None and t["begin"] <= f < (
        t["end"] if t["end"] is not None else n)
    regions = []
    for k, region in enumerate((labels.get("motion") or {}).get("regions", [])):
        began = sorted(e["frame"] for e in events
                       if e["camera"] == name and e["event"] == "motion_began"
                       and e.get("roi") == region["name"] and e["frame"] < n)
        if region["name"] in expects:
            regions.append(score_expected(region, expects[region["name"]], began,
                                          (ratios or {}).get(region["name"], []), n))
            continue
        truth = truth_events(labels, k)
        matched, delays, false, in_tampers = set(), [], [], 0
        for f in began:
            hit = next((i for i, (a, b) in enumerate(truth)
                        if i not in matched and a <= f < b + GRACE_SECONDS * fps), None)
            if hit is not None:
                matched.add(hit)
                delays.append(round((f - truth[hit][0]) / fps, 3))
            elif in_tamper(f):
                in_tampers += 1
            else:
                false.append(f)
        regions.append({"roi": region["name"], "truth": len(truth), "detected": len(matched),
                        "events": len(began), "delays_s": delays, "false": false,
                        "in_tamper": in_tampers,
                        "missed": [a for i, (a, _) in enumerate(truth) if i not in matched]})
    return regions


def summarize_motion(results):
    """Over all sequences: truth events, found, precision and recall, delays, false
    events per hour of normal footage, and the events within tampers (not scored, but
    each one a region reporting the camera's own change as motion)."""
    # (real footage's regions, checked against their expectations, are not scored here)
    regions = [r for s in results for r in s.get("motion", []) if "expect" not in r]
    truth = sum(r["truth"] for r in regions)
    found = sum(r["detected"] for r in regions)
    scored = sum(r["events"] - r["in_tamper"] for r in regions)
    delays = [d for r in regions for d in r["delays_s"]]
    false = sum(len(r["false"]) for r in regions)
    normal_s = sum(s["normal_frames"] / s["fps"] for s in results)
    return {
        "truth_events": truth, "found": found, "events_scored": scored,
        "precision": round(found / scored, 3) if scored else None,
        "recall": round(found / truth, 3) if truth else None,
        "median_delay_s": round(statistics.median(delays), 3) if delays else None,
        "max_delay_s": max(delays) if delays else None,
        "false_events": false,
        "false_events_per_hour": round(false / (normal_s / 3600), 2) if normal_s else None,
        "in_tamper": sum(r["in_tamper"] for r in regions),
    }


def motion_failures(results):
    """What --check fails on: a truth event missed, a false event."""
    out = []
    for s in results:
        for r in s.get("motion", []):
            for a in r["missed"]:
                out.append(f"{s['name']}: motion in {r['roi']} from frame {a} MISSED")
            for f in r["false"]:
                out.append(f"{s['name']}: false motion event in {r['roi']} at frame {f}")
            for why in r.get("unmet", []):
                out.append(f"{s['name']}: {r['roi']}: {why}")
    return out


def format_motion(results, summary, table):
    """The per-sequence table (sequences with truth events or any event) and the totals."""
    rows = [("sequence", "region", "truth events", "found", "events", "precision", "recall",
             "delays s", "false (frames)")]
    for s in results:
        for r in s.get("motion", []):
            if "expect" in r or (not r["truth"] and not r["events"]):
                continue
            scored = r["events"] - r["in_tamper"]
            precision = f"{r['detected'] / scored:.2f}" if scored else "-"
            recall = f"{r['detected'] / r['truth']:.2f}" if r["truth"] else "-"
            delays = ", ".join(f"{d:.2f}" for d in r["delays_s"]) or "-"
            false = ", ".join(str(f) for f in r["false"])
            rows.append((s["name"], r["roi"], r["truth"], r["detected"], r["events"], precision,
                         recall, delays, f"{len(r['false'])}" + (f" ({false})" if false else "")))
    show = lambda v, f="{:.2f}": "-" if v is None else f.format(v)
    total = (f"motion: {summary['found']}/{summary['truth_events']} truth events found "
             f"(recall {show(summary['recall'])}), precision {show(summary['precision'])}, "
             f"delay median {show(summary['median_delay_s'])} s, max "
             f"{show(summary['max_delay_s'])} s; {summary['false_events']} false events "
             f"({show(summary['false_events_per_hour'])} per hour of normal footage); "
             f"{summary['in_tamper']} events within tampers (not scored)")
    lines = [table(rows), total]
    for s in results:
        for r in s.get("motion", []):
            if "expect" in r:
                means = ", ".join(f"{m:.2f}" for m in r["window_means"]) or "-"
                verdict = "; ".join(r["unmet"]) or "as expected"
                lines.append(f"{s['name']} {r['roi']}: {r['events']} events, window means "
                             f"({WINDOW_FRAMES} frames) {means}: {verdict}")
    return "\n".join(lines)
