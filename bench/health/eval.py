#!/usr/bin/env python3
"""Scores the camera-health (tamper) detectors on the labelled sequences: plays each
sequence once through `edgesight run` (one replay camera per sequence, several cameras per
daemon), reads the health events the daemon logs, and prints per sequence and per detector
kind how soon each tamper was reported and how many false alarms normal footage raised.

    python3 bench/health/eval.py [--binary B] [--sequences DIR] [--subset] [--only NAME,...]
                                 [--parallel N] [--set KEY=VALUE ...] [--json OUT] [--check]

Over 500 lines as one file: the daemon runs, the event parsing and the scoring feed one
another and test_eval.py tests them together; apart they would pass the same records
around.

The events (one stderr line each, from the daemon's tracing subscriber):
    WARN camera health: tampered camera=NAME kind=KIND frame=N
    INFO camera health: ok again camera=NAME kind=KIND frame=N
    INFO camera health: baseline learned camera=NAME frame=N
N is the replay's frame sequence number, the image index during the first pass; events
at N >= the sequence's frames (past the loop's seam) are ignored.

Scoring, per sequence (frames and segments from its labels.json, ranges half-open):
  - detection: the first `tampered` of the sequence's own kind at begin <= N < end (end =
    the last frame when the tamper stays); delay = (N - begin) / fps. None: MISSED.
  - other kinds raised in [begin, end) (informational), and for a tamper that ends, when
    the own kind was reported `ok again` after the detection, in seconds after `end`.
  - false alarm: a `tampered` of any kind at a frame inside a `normal` segment; per hour
    of normal footage over all sequences' normal frames.
--check exits 1, listing them, when a tamper is missed or detected more than 2.0 s after
its begin, or when there is any false alarm.
"""
import argparse
import http.client
import json
import os
import pathlib
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib

import motion_score

KINDS = ("defocus", "covered", "moved", "frozen", "underexposed", "overexposed")
LATE_S = 2.0
MESSAGES = {
    "camera health: tampered": "tampered",
    "camera health: ok again": "ok",
    "camera health: baseline learned": "baseline",
    **motion_score.MESSAGES,
}

# ---- parsing (no I/O) -----------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LEVEL = re.compile(r"\b(ERROR|WARN|INFO|DEBUG|TRACE)\b")
FIELD = re.compile(r'(\w+)=("[^"]*"|\S+)')


def parse_line(line):
    """(level, event) of one log line; event is None unless it is a health event, else
    {"event": "tampered"|"ok"|"baseline", "camera", "kind" (None for baseline), "frame"}."""
    line = ANSI.sub("", line)
    m = LEVEL.search(line)
    level = m.group(1) if m else None
    for message, event in MESSAGES.items():
        at = line.find(message)
        if at < 0:
            continue
        fields = {k: v.strip('"') for k, v in FIELD.findall(line[at + len(message):])}
        try:
            return level, {"event": event, "camera": fields["camera"],
                           "kind": fields.get("kind"), "roi": fields.get("roi"),
                           "frame": int(fields["frame"])}
        except (KeyError, ValueError):
            return level, None
    return level, None


def parse_log(lines):
    """The health events of a log (in log order) and its ERROR lines."""
    events, errors = [], []
    for line in lines:
        level, event = parse_line(line)
        if event:
            events.append(event)
        if level == "ERROR":
            errors.append(line.rstrip("\n"))
    return events, errors


# ---- scoring (no I/O) -----------------------------------------------------------------


def score_sequence(labels, events):
    """One sequence's result from its labels and the events of its camera (others are
    skipped), in log order."""
    name, kind, n, fps = labels["name"], labels["kind"], labels["frames"], labels["fps"]
    mine = [e for e in events if e["camera"] == name and not e["event"].startswith("motion")]
    # a stable sort: events of one frame keep the log's order
    evs = sorted((e for e in mine if e["frame"] < n), key=lambda e: e["frame"])
    tampered = [e for e in evs if e["event"] == "tampered"]
    in_normal = lambda f: any(a <= f < b for a, b in labels["normal"])
    baseline = next((e["frame"] for e in evs if e["event"] == "baseline"), None)
    r = {
        "name": name, "kind": kind, "frames": n, "fps": fps,
        "normal_frames": sum(b - a for a, b in labels["normal"]),
        "tamper_begin": None, "tamper_end": None,
        "detected_frame": None, "delay_s": None, "missed": None, "late": None,
        "other_kinds": [], "cleared_frame": None, "cleared_after_end_s": None,
        "false_alarms": [{"kind": e["kind"], "frame": e["frame"]}
                         for e in tampered if in_normal(e["frame"])],
        "baseline_frame": baseline,
        "events_past_seam": len(mine) - len(evs),
    }
    t = labels["tamper"]
    if t is None:
        return r
    begin, end = t["begin"], t["end"] if t["end"] is not None else n
    during = [e for e in tampered if begin <= e["frame"] < end]
    own = next((e for e in during if e["kind"] == kind), None)
    r.update(tamper_begin=begin, tamper_end=t["end"], missed=own is None,
             other_kinds=sorted({e["kind"] for e in during if e["kind"] != kind}))
    if own is None:
        return r
    delay = (own["frame"] - begin) / fps
    r.update(detected_frame=own["frame"], delay_s=round(delay, 3), late=delay > LATE_S)
    if t["end"] is not None:
        after = evs[evs.index(own) + 1:]
        cleared = next((e for e in after if e["event"] == "ok" and e["kind"] == kind), None)
        if cleared:
            r.update(cleared_frame=cleared["frame"],
                     cleared_after_end_s=round((cleared["frame"] - t["end"]) / fps, 3))
    return r


def summarize(results):
    """Per detector kind: the tamper sequences of that kind and how they went, and its
    false alarms on the normal footage of every sequence."""
    normal_s = sum(r["normal_frames"] / r["fps"] for r in results)
    kinds = {}
    for k in KINDS:
        seqs = [r for r in results if r["kind"] == k and r["tamper_begin"] is not None]
        delays = [r["delay_s"] for r in seqs if not r["missed"]]
        alarms = sum(a["kind"] == k for r in results for a in r["false_alarms"])
        kinds[k] = {
            "sequences": len(seqs), "detected": len(delays),
            "median_delay_s": round(statistics.median(delays), 3) if delays else None,
            "max_delay_s": max(delays) if delays else None,
            "late": sum(bool(r["late"]) for r in seqs),
            "missed": sum(bool(r["missed"]) for r in seqs),
            "false_alarms": alarms,
            "false_alarms_per_hour": round(alarms / (normal_s / 3600), 2) if normal_s else None,
        }
    return {"normal_seconds": round(normal_s, 2), "kinds": kinds}


def check_failures(results):
    """What --check fails on, one line each."""
    out = []
    for r in results:
        if r["missed"]:
            out.append(f"{r['name']}: {r['kind']} MISSED (tamper from frame {r['tamper_begin']})")
        elif r["late"]:
            out.append(f"{r['name']}: {r['kind']} detected {r['delay_s']:.2f} s after its "
                       f"begin (frame {r['detected_frame']}), later than {LATE_S} s")
        for a in r["false_alarms"]:
            out.append(f"{r['name']}: false alarm, {a['kind']} at frame {a['frame']} "
                       f"(normal footage)")
    return out


def seconds(value):
    return "-" if value is None else f"{value:.2f}"


def format_tables(results, summary):
    """The two tables and the normal footage's length, as text."""
    rows = [("sequence", "kind", "detected", "others raised", "cleared after end",
             "false alarms", "baseline", "frames dropped")]
    for r in results:
        if r["tamper_begin"] is None:
            det = "-"
        elif r["missed"]:
            det = "MISSED"
        else:
            det = f"{r['delay_s']:.2f} s" + (" LATE" if r["late"] else "")
        alarms = ", ".join(f"{a['kind']}@{a['frame']}" for a in r["false_alarms"])
        cleared = ("-" if r["cleared_after_end_s"] is None
                   else f"{r['cleared_after_end_s']:+.2f} s")
        if r["tamper_end"] is not None and not r["missed"] and r["cleared_frame"] is None:
            cleared = "never"
        dropped = r.get("frames_dropped")
        dropped = "-" if dropped is None else str(sum(dropped.values()))
        if r.get("skipped_at_start") is not None:
            dropped += f" ({r['skipped_at_start']} at start)"
        rows.append((r["name"], r["kind"], det, ",".join(r["other_kinds"]) or "-", cleared,
                     f"{len(r['false_alarms'])}" + (f" ({alarms})" if alarms else ""),
                     "-" if r["baseline_frame"] is None else r["baseline_frame"], dropped))
    kinds = [("kind", "sequences", "detected", "median delay s", "max delay s", "late",
              "missed", "false alarms", "per hour")]
    for k, s in summary["kinds"].items():
        kinds.append((k, s["sequences"], s["detected"], seconds(s["median_delay_s"]),
                      seconds(s["max_delay_s"]), s["late"], s["missed"], s["false_alarms"],
                      seconds(s["false_alarms_per_hour"])))
    return "\n".join([table(rows), "", table(kinds), "",
                      f"normal footage: {summary['normal_seconds']:.1f} s "
                      f"({summary['normal_seconds'] / 3600:.4f} h) over {len(results)} sequences"])


def table(rows):
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in rows)


# ---- running the daemon ---------------------------------------------------------------


def machine():
    """The CPU's model and the number of cores, from /proc/cpuinfo."""
    model = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "Model") and value.strip():
                    model = value.strip()
                    break
    except OSError:
        pass
    return {"cpu": model or platform.machine(), "arch": platform.machine(),
            "cores": os.cpu_count()}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_text(port, sequences, health):
    """A config of one replay camera at the labelled fps per sequence, with the sequence's
    own health settings (its labels' `health`) and the --set lines in each camera's
    [camera.health]; a sequence's own setting is kept over a --set of the same key."""
    out = ['[log]\nlevel = "info"\n', f'[web]\nlisten_address = "127.0.0.1:{port}"\n']
    for labels, path in sequences:
        out.append(f'[[camera]]\nname = {json.dumps(labels["name"])}\n[camera.source]\n'
                   f'kind = "replay"\npath = {json.dumps(str(path))}\nfps = {labels["fps"]}\n')
        # The sequence's own settings (a dusk's scaled-down adapt time), then --set's.
        own = [(k, json.dumps(v)) for k, v in labels.get("health", {}).items()]
        lines = own + [(k, v) for k, v in health if k not in dict(own)]
        if lines:
            out.append("[camera.health]\n" + "".join(f"{k} = {v}\n" for k, v in lines))
        # The regions motion is scored in (motion_score.py).
        for r in (labels.get("motion") or {}).get("regions", []):
            out.append(f'[[camera.roi]]\nname = {json.dumps(r["name"])}\n'
                       f'x = {r["x"]}\ny = {r["y"]}\nw = {r["w"]}\nh = {r["h"]}\n')
    return "\n".join(out)


def get(port, path):
    """(status, body) of a GET on the daemon; (None, why) when it does not answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as e:
        return None, str(e)
    finally:
        conn.close()


def closest_approach(labels, samples):
    """The detectors' numbers nearest their thresholds, from (frame, sharpness,
    scene_change, light) samples of /api/v1/latest: the lowest sharpness and the highest
    scene change on normal footage and, in a tamper sequence, from `established` to
    `ending`, and the lowest light (mean luma as a share of the learned) on normal footage
    (a dusk shows there). None where no sample (or none after learning) fell there."""
    t = labels["tamper"]
    in_normal = lambda f: any(a <= f < b for a, b in labels["normal"])
    in_tamper = lambda f: t is not None and t["established"] <= f < (
        t["ending"] if t["ending"] is not None else labels["frames"])
    pick = lambda where, i: [s[i] for s in samples
                             if len(s) > i and where(s[0]) and s[i] is not None]
    out = {}
    for part, where in (("normal", in_normal), ("tamper", in_tamper)):
        sharp, change = pick(where, 1), pick(where, 2)
        out[f"{part}_min_sharpness"] = round(min(sharp), 3) if sharp else None
        out[f"{part}_max_scene_change"] = round(max(change), 3) if change else None
    light = pick(in_normal, 3)
    out["normal_min_light"] = round(min(light), 3) if light else None
    return out


def frame_counts(metrics, camera):
    """frames_total and frames_dropped_total by reason of a camera, from /metrics."""
    total, dropped = None, {}
    label = f'camera="{camera}"'
    for line in metrics.splitlines():
        if label not in line:
            continue
        if line.startswith("edgesight_frames_total{"):
            total = int(float(line.split()[-1]))
        elif line.startswith("edgesight_frames_dropped_total{"):
            m = re.search(r'reason="(\w+)"', line)
            dropped[m.group(1)] = int(float(line.split()[-1]))
    return {"frames_processed": total, "frames_dropped": dropped}


def fail(message):
    sys.exit(f"eval: {message}")


def run_daemon(binary, sequences, health, out_dir, number):
    """Plays the sequences, one camera each, through one daemon until every camera has
    played its sequence once; returns the lines it logged and each camera's frame counts
    when it got there. Exits on a daemon that fails, stops early or logs an error."""
    port = free_port()
    config = out_dir / f"daemon-{number}.toml"
    config.write_text(config_text(port, sequences, health))
    log_path = out_dir / f"daemon-{number}.log"
    env = {k: v for k, v in os.environ.items() if k not in ("RUST_LOG", "JOURNAL_STREAM")}
    limit = max(l["frames"] / l["fps"] for l, _ in sequences) * 3 + 30
    names = ", ".join(l["name"] for l, _ in sequences)
    print(f"daemon {number}: {names}; log {log_path}", flush=True)
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([binary, "run", "--config", str(config)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, env=env)
    counts, pending = {}, {l["name"]: l for l, _ in sequences}

    def log_lines():
        return log_path.read_text(errors="replace").splitlines()

    def errors():
        return parse_log(log_lines())[1]

    try:
        while pending:
            if proc.poll() is not None:
                fail(f"daemon {number} exited early with code {proc.returncode}; its log, "
                     f"{log_path}, ends:\n  " + "\n  ".join(log_lines()[-10:]))
            logged = errors()
            if logged:
                fail(f"daemon {number} logged errors (see {log_path}):\n  " + "\n  ".join(logged))
            if time.monotonic() - start > limit:
                fail(f"daemon {number}: {', '.join(sorted(pending))} did not play "
                     f"their sequence within {limit:.0f} s (see {log_path})")
            for name, labels in list(pending.items()):
                status, body = get(port, f"/api/v1/latest?camera={name}")
                latest = json.loads(body) if status == 200 else {}
                sequence = latest.get("sequence", -1)
                h = latest.get("health") or {}
                counts.setdefault(name, {}).setdefault("samples", []).append(
                    (sequence, h.get("sharpness"), h.get("scene_change"),
                     h.get("mean_luma_ratio")))
                m = latest.get("motion") or {}
                if m.get("state") == "watching":
                    for roi, r in (m.get("regions") or {}).items():
                        counts[name].setdefault("ratios", {}).setdefault(roi, []).append(
                            (sequence, r["ratio"]))
                if sequence >= labels["frames"] - 1:
                    del pending[name]
                    counts.setdefault(name, {}).update(frame_counts(get(port, "/metrics")[1], name))
                elif sequence >= 1 and "skipped_at_start" not in counts[name]:
                    # the frames the camera skipped while it built its pipeline
                    gaps = frame_counts(get(port, "/metrics")[1], name)["frames_dropped"]
                    counts[name]["skipped_at_start"] = gaps.get("sequence_gap")
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        fail(f"daemon {number} did not stop within 10 s of SIGTERM (see {log_path})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if code != 0:
        fail(f"daemon {number} exited with code {code} after SIGTERM (see {log_path})")
    lines = log_lines()
    logged = parse_log(lines)[1]
    if logged:
        fail(f"daemon {number} logged errors (see {log_path}):\n  " + "\n  ".join(logged))
    print(f"daemon {number}: done in {time.monotonic() - start:.1f} s", flush=True)
    return lines, counts


def load_sequences(directory, subset, only):
    index = json.loads((directory / "index.json").read_text())
    entries = index["sequences"]
    if only:
        names = set(only.split(","))
        unknown = names - {e["name"] for e in entries}
        if unknown:
            fail(f"no sequence named {', '.join(sorted(unknown))} in {directory}/index.json")
        entries = [e for e in entries if e["name"] in names]
    if subset:
        entries = [e for e in entries if e["subset"]]
    if not entries:
        fail(f"no sequences chosen from {directory}/index.json")
    return [(json.loads((directory / e["dir"] / "labels.json").read_text()),
             (directory / e["dir"]).resolve()) for e in entries]


def parse_set(items):
    out = []
    for item in items:
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq:
            fail(f"--set {item!r}: use KEY=VALUE")
        try:
            tomllib.loads(f"{key} = {value}")
        except tomllib.TOMLDecodeError as e:
            fail(f"--set {item!r} is not a TOML `key = value` ({e}); quote strings, "
                 f"e.g. --set 'mode=\"fast\"'")
        out.append((key, value))
    return out


def format_approach(results):
    """The closest approach table: how near each sequence came to the sharpness and scene
    change thresholds on normal footage and during its tamper, and how far the light of
    its normal footage fell from the learned view's."""
    show = lambda v: "-" if v is None else f"{v:.2f}"
    rows = [("sequence", "normal: min sharpness", "max scene change", "min light",
             "tamper: min sharpness", "max scene change")]
    for r in results:
        rows.append((r["name"], show(r["normal_min_sharpness"]),
                     show(r["normal_max_scene_change"]), show(r.get("normal_min_light")),
                     show(r["tamper_min_sharpness"]), show(r["tamper_max_scene_change"])))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["sampled from /api/v1/latest about 10 times a second"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default="target/release/edgesight")
    ap.add_argument("--sequences", default="target/health/sequences", type=pathlib.Path)
    ap.add_argument("--subset", action="store_true", help="only the `subset: true` sequences")
    ap.add_argument("--only", default="", help="NAME,... (sequences to play)")
    ap.add_argument("--parallel", type=int, default=4, help="sequences per daemon")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a TOML line for every camera's [camera.health] (repeatable)")
    ap.add_argument("--json", type=pathlib.Path, help="write the results here")
    ap.add_argument("--out", default="target/health/eval", type=pathlib.Path,
                    help="the daemons' configs and logs")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 on a missed or late (> 2 s) tamper or any false alarm")
    args = ap.parse_args()
    health = parse_set(args.set)
    sequences = load_sequences(args.sequences, args.subset, args.only)
    binary = str(pathlib.Path(args.binary).resolve())
    try:
        version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                                 check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"cannot run {binary}: {e}")
    host = machine()
    print(f"machine: {host['cpu']} ({host['arch']}), {host['cores']} cores")
    print(f"binary: {binary} ({version})")
    print(f"health settings: {', '.join(f'{k} = {v}' for k, v in health) or 'defaults'}")
    args.out.mkdir(parents=True, exist_ok=True)
    for old in list(args.out.glob("daemon-*.log")) + list(args.out.glob("daemon-*.toml")):
        old.unlink()
    # POCL compiles the kernels once into its cache (as `make` sets it), not in every
    # camera at once while the replays already run.
    os.environ.setdefault("POCL_CACHE_DIR", str(pathlib.Path("target/pocl-cache").resolve()))
    pathlib.Path(os.environ["POCL_CACHE_DIR"]).mkdir(parents=True, exist_ok=True)
    first = sequences[0][1] / sequences[0][0]["first_file"]
    with tempfile.TemporaryDirectory() as tmp:
        warm = subprocess.run([binary, "process", str(first), "--out", tmp],
                              capture_output=True, text=True)
    if warm.returncode != 0:
        fail(f"{binary} process {first} failed:\n{warm.stderr}")
    # the longest first, so that the cameras of one daemon end at about the same time
    order = sorted(sequences, key=lambda s: -s[0]["frames"] / s[0]["fps"])
    step = max(args.parallel, 1)
    events, counts, daemons = [], {}, []
    for number, at in enumerate(range(0, len(order), step), 1):
        group = order[at:at + step]
        start = time.monotonic()
        lines, got = run_daemon(binary, group, health, args.out, number)
        events += parse_log(lines)[0]
        counts.update(got)
        daemons.append({"log": str(args.out / f"daemon-{number}.log"),
                        "sequences": [l["name"] for l, _ in group],
                        "wall_s": round(time.monotonic() - start, 1)})
    results = []
    for labels, _ in sequences:
        r = score_sequence(labels, events)
        got = dict(counts.get(labels["name"], {}))
        r["motion"] = motion_score.score_motion(labels, events, got.pop("ratios", {}))
        r.update(closest_approach(labels, got.pop("samples", [])))
        r.update({"frames_processed": None, "frames_dropped": None, "skipped_at_start": None,
                  **got})
        results.append(r)
    summary = summarize(results)
    summary["motion"] = motion_score.summarize_motion(results)
    print()
    print(format_tables(results, summary))
    print()
    print(motion_score.format_motion(results, summary["motion"], table))
    print()
    print(format_approach(results))
    skipped = [r["skipped_at_start"] for r in results if r["skipped_at_start"] is not None]
    if skipped:
        print(f"frames skipped at start (while each camera built its pipeline): "
              f"{min(skipped)}-{max(skipped)} per camera")
    failures = check_failures(results) + motion_score.motion_failures(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "machine": host, "binary": binary, "version": version,
            "sequences_dir": str(args.sequences), "health_settings": dict(health),
            "late_after_s": LATE_S, "parallel": step, "daemons": daemons,
            "sequences": results, **summary, "check_failures": failures}, indent=1) + "\n")
        print(f"results: {args.json}")
    if args.check:
        if failures:
            print(f"\ncheck: {len(failures)} failures:\n  " + "\n  ".join(failures))
            sys.exit(1)
        print("\ncheck: passed")


if __name__ == "__main__":
    main()
