#!/usr/bin/env python3
"""Mali's own compiler on edgesight's kernels: a table per GPU of what Mesa's Panfrost compiler
makes of every kernel a Mali tuning builds (instructions, cycle estimate per unit, threads per
core, spills and fills), beside what the driver reports of it (work-group size, private memory).

    scripts/mali/report.py --edgesight target/release/edgesight --mesa PREFIX
                           [--gpu g52,g610,g31] [--tuning auto] [--out DIR] [--markdown]

PREFIX is scripts/mali/mesa.sh's install (its env.sh puts the no-op DRM shim's Mali in front of
OpenCL). For each GPU, `edgesight kernels --log.level debug` builds the tuning's programs
under the shim with BIFROST_MESA_DEBUG=shaderdb (one SHADER-DB line per compiled kernel
variant) and RUSTICL_DEBUG=nir (which names each kernel and variant before its line); the
debug log names the program before its kernels. Rusticl compiles a `Default` variant of each
kernel and, for those that read their global id, an `Optimized` one without a global offset,
which is the one edgesight's launches run: the table shows that one.

threads (Bifrost, Valhall): 2 is full occupancy (at most 32 registers a thread), 1 is half
(33 to 64); Midgard's compiler says its work registers and 4, 2 or 1 threads. spills:fills
are registers kept in memory. The script fails when a launched kernel has no
statistics, so that it cannot print an empty table.

With --sizes (1080p and 4K unless told otherwise), `edgesight kernels --launches` also lists
every kernel one frame of the daemon's pipeline launches at each size, with its work sizes,
and the bytes a frame moves; the report then models each GPU's device time for that frame
from the compiler's figures (see `model_launch`), beside the copy floor of those bytes at
the board's memory bandwidth. --reuse takes the JSON and logs an earlier run left in --out
instead of running the compiler again.
"""
import argparse
import json
import os
import re
import subprocess
import sys

GPUS = {"g31": "7093", "g52": "7212", "g57": "9093", "g610": "a867", "g72": "6221", "g76": "7211",
        "t720": "720", "t760": "750", "t860": "860"}
BUILDING = re.compile(r'\bbuilding kernels file=("[^"]*"|\S+) defines=("[^"]*"|\S*)')
VARIANT = re.compile(r"^=== Printing nir variant '(\w+)' for '([^']+)' before driver finalization")
SHADER_DB = re.compile(r"^SHADER-DB: (\w+) shader: (.*)$")


def unquote(v):
    return v[1:-1] if v.startswith('"') and v.endswith('"') else v


def parse_stats(body):
    """A SHADER-DB line's fields: `7 inst, 1.5 cycles, ..., 2 threads, 0 loops, 0:0 spills:fills`."""
    out = {}
    for part in body.split(", "):
        m = re.fullmatch(r"(\d+):(\d+) spills:fills", part)
        if m:
            out["spills"], out["fills"] = int(m.group(1)), int(m.group(2))
            continue
        m = re.fullmatch(r"([\d.]+) (\w+)", part)
        if m:
            out[m.group(2)] = float(m.group(1))
    return out


def parse_log(lines):
    """(program file, defines, kernel, variant) -> statistics, from the compiler's stderr."""
    stats, program, pending, unnamed = {}, None, [], 0
    for line in lines:
        m = BUILDING.search(line)
        if m:
            program = (unquote(m.group(1)), unquote(m.group(2)))
            pending = []
            continue
        m = VARIANT.match(line)
        if m:
            pending.append((m.group(2), m.group(1)))
            continue
        m = SHADER_DB.match(line)
        if m:
            if not pending or program is None:
                unnamed += 1
                continue
            kernel, variant = pending.pop(0)
            stats[(program[0], program[1], kernel, variant)] = parse_stats(m.group(2))
    return stats, unnamed


def rows_of(kernels_json, stats, gpu):
    """One row per kernel a tuning's programs hold, with its running variant's statistics."""
    rows = []
    for tuning in kernels_json["tunings"]:
        for p in tuning["programs"]:
            for k in p["kernels"]:
                key = (p["file"], p["defines"], k["name"])
                s = stats.get(key + ("Optimized",)) or stats.get(key + ("Default",))
                rows.append({"gpu": gpu, "tuning": tuning["tuning"], "file": p["file"],
                             "defines": p["defines"], "kernel": k["name"],
                             "launched": k["launched"], "work_group_size": k["work_group_size"],
                             "private_bytes": k["private_bytes"], "stats": s})
    return rows


# The statistics shown, in this order, where a GPU's compiler gives them: Bifrost's cycle
# parts (arith, texture, vary, ldst), Valhall's (fma, cvt, sfu, v, t, ls), Midgard's
# bundles and work registers.
SHOWN = ["inst", "bundles", "cycles", "arith", "texture", "vary", "ldst", "fma", "cvt", "sfu",
         "v", "t", "ls", "registers", "threads", "spills", "fills"]
CYCLES = {"cycles", "arith", "texture", "vary", "ldst", "fma", "cvt", "sfu", "v", "t", "ls"}


def columns(rows):
    have = set()
    for r in rows:
        have.update((r["stats"] or {}).keys())
    return [c for c in SHOWN if c in have]


def cell(stats, column):
    v = (stats or {}).get(column, 0)
    return f"{v:.1f}" if column in CYCLES else str(int(v))


def table(rows, markdown):
    cols = columns(rows)
    head = ["kernel", "program", "run"] + cols + ["wg", "priv B"]
    body = []
    for r in rows:
        program = r["file"].replace(".cl", "") + (f" {r['defines']}" if r["defines"] else "")
        body.append([r["kernel"], program, "yes" if r["launched"] else "-"]
                    + [cell(r["stats"], c) for c in cols]
                    + [str(r["work_group_size"]), str(r["private_bytes"])])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    else:
        widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
        out = ["  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [head] + body]
    return "\n".join(out)


def summary(rows):
    """How many launched kernels run at each occupancy (Bifrost and Valhall: 2 threads is
    full, 1 half; Midgard: 4, 2, 1) and how many spill."""
    run = [r for r in rows if r["launched"] and r["stats"]]
    threads = {}
    for r in run:
        t = int(r["stats"].get("threads", 0))
        threads[t] = threads.get(t, 0) + 1
    spilling = [r for r in run if r["stats"].get("spills", 0) or r["stats"].get("fills", 0)]
    occupancy = ", ".join(f"{n} at {t} thread{'s' if t != 1 else ''}"
                          for t, n in sorted(threads.items(), reverse=True))
    return (f"{len(run)} launched kernels: {occupancy}; {len(run) - len(spilling)} without "
            f"spills, {len(spilling)} with")


# The model of a frame's device time.
#
# What Mesa's SHADER-DB line counts (src/panfrost/compiler/bifrost_compile.c, Mesa 25.0.7:
# bi_print_stats, bi_count_tuple_stats; valhall/va_perf.c: va_count_instr_stats, with
# va_print_stats): the instructions of one thread (one work-item), each counted once as the
# program text holds it (a loop's body once, whatever its trip count), per unit, divided by
# what Mesa takes a whole shader core to do in a clock:
#   Bifrost: 24 arithmetic tuples (a core of three 8-wide execution engines, Mali-G76 or a
#            3-EE G52), 2 texture messages, 16 16-bit varying channels, 1 load/store message;
#   Valhall: 64 FMA, 64 CVT, 16 SFU instructions (a Mali-G78 core), 16 varying channels,
#            4 texture instructions, 1 load/store operation.
# So `cycles` (the largest unit's figure) is shader-core clocks per work-item at the core's
# full rate, and a launch of N work-items takes N x cycles / cores core clocks. Arithmetic
# scales with the target core's lanes (its execution engines x the warp's width) against
# Mesa's; the load/store unit is one a core. Mesa's load/store rate is one thread's message
# a clock; Arm's counters count one load/store cache access a clock, which serves a whole
# warp whose accesses fall in one line ("full" accesses), so the figure divided by the
# warp's width is the other end of the range (`coalesced`).
MESA_ARITH_LANES = {"bifrost": 24, "valhall": 64}
ARITH_UNITS = {"bifrost": ["arith"], "valhall": ["fma", "cvt", "sfu"]}
MESSAGE_UNITS = {"bifrost": ["texture", "vary"], "valhall": ["v", "t"]}
LDST_UNIT = {"bifrost": "ldst", "valhall": "ls"}

# The boards modelled (each an assumption, with its source in
# bench/notes/mali-compiler.md#mali-boards):
#   lanes: arithmetic lanes a core (execution engines x warp width);
#   gbps: the board's memory bandwidth, bytes read and written a second.
BOARDS = {
    "g52": {"name": "Mali-G52 2EE (RK3566)", "arch": "bifrost", "cores": 1, "lanes": 16,
            "warp": 8, "mhz": 800, "gbps": 5.0},
    "g610": {"name": "Mali-G610 MP4 (RK3588)", "arch": "valhall", "cores": 4, "lanes": 64,
             "warp": 16, "mhz": 1000, "gbps": 20.0},
    "g31": {"name": "Mali-G31 MP2", "arch": "bifrost", "cores": 2, "lanes": 4, "warp": 4,
            "mhz": 650, "gbps": 3.0},
}
# What a launch costs the driver and the GPU's job front end, beside its work: an
# assumption (no Mali board measured it here).
LAUNCH_US = 30.0


def launch_sets(kernels_json):
    """(tuning, one size's launches) for every --launches size of every tuning, as
    `edgesight kernels --json` writes them."""
    return [(t["tuning"], frame) for t in kernels_json["tunings"] for frame in t.get("launches", [])]


def stats_by_program(rows):
    """(file, defines, kernel) -> the running variant's statistics."""
    return {(r["file"], r["defines"], r["kernel"]): r["stats"] for r in rows}


def item_cycles(stats, board):
    """Shader-core clocks per work-item on `board`: each unit's, the bound's name and its
    figure, at Mesa's load/store rate and with every warp's message one access."""
    arch = board["arch"]
    scale = MESA_ARITH_LANES[arch] / board["lanes"]
    units = {u: stats.get(u, 0.0) * scale for u in ARITH_UNITS[arch]}
    units.update({u: stats.get(u, 0.0) for u in MESSAGE_UNITS[arch]})
    ldst = LDST_UNIT[arch]
    out = {}
    for reading, ls in (("mesa", stats.get(ldst, 0.0)),
                        ("coalesced", stats.get(ldst, 0.0) / board["warp"])):
        every = dict(units, **{ldst: ls})
        bound = max(every, key=lambda u: every[u])
        out[reading] = (bound, every[bound])
    return out


def model_launch(launch, stats, board):
    """One launch's modelled device time: work-items x clocks per work-item, over the
    board's cores, at its clock (threads per core, occupancy, taken to hide latency only)."""
    items = 1
    for g in launch["global"]:
        items *= g
    cycles = item_cycles(stats, board)
    us = {k: items * c / board["cores"] / board["mhz"] for k, (_, c) in cycles.items()}
    return {"kernel": launch["kernel"], "items": items, "bound": cycles["mesa"][0],
            "cycles": cycles["mesa"][1], "loops": int(stats.get("loops", 0)),
            "threads": int(stats.get("threads", 0)), "us": us["mesa"],
            "us_coalesced": us["coalesced"]}


def model_frame(frame, stats, board, launch_us=LAUNCH_US):
    """The model of one size's frames on `board`: each launch of the frame without the
    health stage, their total, the copy floor of the bytes a frame moves and the goal
    (twice the floor plus the launches' cost); and what the health stage's frame adds."""
    lists = frame["frames"]
    plain = next((f for f in lists if not f["gradient_sampled"]), lists[-1])
    health = next((f for f in lists if f["gradient_sampled"]), None)

    def launches_of(f):
        out = []
        for l in f["launches"]:
            s = stats.get((l["file"], l["defines"], l["kernel"]))
            if s is None:
                raise KeyError(f"no statistics for {l['kernel']} ({l['file']} {l['defines']})")
            out.append(model_launch(l, s, board))
        return out

    launches = launches_of(plain)
    total = sum(l["us"] for l in launches)
    floor = frame["bytes_moved"] / (board["gbps"] * 1e3)
    goal = 2 * floor + len(launches) * launch_us
    out = {"width": frame["width"], "height": frame["height"], "launches": launches,
           "total_us": total, "total_coalesced_us": sum(l["us_coalesced"] for l in launches),
           "looping": sum(1 for l in launches if l["loops"]),
           "bytes": frame["bytes_moved"], "floor_us": floor, "launch_us": launch_us,
           "goal_us": goal, "met": total <= goal}
    if health is not None:
        extra = launches_of(health)
        out["health_extra_us"] = sum(l["us"] for l in extra) - total
        out["health_extra_launches"] = len(extra) - len(launches)
    return out


def model_table(m, board, markdown):
    """One GPU's model at one size: a row per launch, then the frame against its goal."""
    head = ["kernel", "work-items", "bound", "clk/item", "loops", "threads", "µs",
            "µs coalesced"]
    def at_least(looping):
        """A loop's body counts once in Mesa's figures: such a launch's time is a floor."""
        return ">=" if looping else ""

    body = [[l["kernel"], str(l["items"]), l["bound"], f"{l['cycles']:.2f}", str(l["loops"]),
             str(l["threads"]), f"{at_least(l['loops'])}{l['us']:.0f}",
             f"{at_least(l['loops'])}{l['us_coalesced']:.0f}"]
            for l in m["launches"]]
    body.append([f"frame ({len(m['launches'])} launches)", "", "", "", "", "",
                 f"{at_least(m['looping'])}{m['total_us']:.0f}",
                 f"{at_least(m['looping'])}{m['total_coalesced_us']:.0f}"])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
    else:
        widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                           for i, (c, w) in enumerate(zip(x, widths))).rstrip()
                 for x in [head] + body]
    verdict = "met" if m["met"] else f"not met ({m['total_us'] / m['goal_us']:.1f}x the goal)"
    lines.append("")
    lines.append(
        f"{m['width']}x{m['height']} on {board['name']}: modelled {m['total_us'] / 1e3:.2f} ms "
        f"({m['total_coalesced_us'] / 1e3:.2f} ms coalesced); copy floor {m['bytes']} bytes at "
        f"{board['gbps']:g} GB/s = {m['floor_us'] / 1e3:.2f} ms; goal 2 x floor + "
        f"{len(m['launches'])} x {m['launch_us']:g} µs = {m['goal_us'] / 1e3:.2f} ms: {verdict}")
    if m["looping"]:
        lines.append(f"{m['looping']} of {len(m['launches'])} launches loop: Mesa counts a loop's "
                     "body once, so their time (and the frame's) is at least the figure shown")
    if "health_extra_us" in m:
        lines.append(f"the health stage's frame (one in 4): {m['health_extra_launches']:+d} "
                     f"launch, {m['health_extra_us']:+.0f} µs")
    return "\n".join(lines)


def summary_table(models, markdown):
    """Every GPU and size: the modelled frame against its floor and goal."""
    head = ["GPU", "size", "launches (looping)", "modelled ms", "coalesced ms",
            "copy floor ms", "goal ms", "model / floor", "goal"]
    body = [[b["name"], f"{m['width']}x{m['height']}",
             f"{len(m['launches'])} ({m['looping']})",
             f"{m['total_us'] / 1e3:.2f}", f"{m['total_coalesced_us'] / 1e3:.2f}",
             f"{m['floor_us'] / 1e3:.2f}", f"{m['goal_us'] / 1e3:.2f}",
             f"{m['total_us'] / m['floor_us']:.1f}", "met" if m["met"] else "not met"]
            for b, m in models]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
    else:
        widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [head] + body]
    return "\n".join(lines)


def shim_env(prefix, gpu_id):
    env = dict(os.environ)
    with open(os.path.join(prefix, "env.sh")) as f:
        for line in f:
            m = re.match(r"export (\w+)=(.*)$", line.strip())
            if m:
                env[m.group(1)] = m.group(2)
    env.update(PAN_GPU_ID=gpu_id, BIFROST_MESA_DEBUG="shaderdb", MIDGARD_MESA_DEBUG="shaderdb",
               RUSTICL_DEBUG="nir")
    return env


def reused(args, gpu, tuning):
    """What an earlier run left in --out for `gpu` and `tuning`."""
    with open(os.path.join(args.out, f"{gpu}-{tuning}.log")) as f:
        kept = f.read().splitlines()
    with open(os.path.join(args.out, f"{gpu}-{tuning}.json")) as f:
        return json.load(f), kept, ""


def run_gpu(args, gpu, tuning):
    if args.reuse:
        return reused(args, gpu, tuning)
    json_path = os.path.join(args.out, f"{gpu}-{tuning}.json")
    cmd = [args.edgesight, "kernels", "--tuning", tuning, "--log.level", "debug",
           "--json", json_path]
    if args.sizes:
        cmd += ["--launches", args.sizes]
    # The NIR dumps run to hundreds of megabytes: only the lines the table needs are kept.
    proc = subprocess.Popen(cmd, env=shim_env(args.mesa, GPUS.get(gpu, gpu)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    kept = []
    for line in proc.stderr:
        if (BUILDING.search(line) or VARIANT.match(line) or SHADER_DB.match(line)
                or "error" in line.lower() or "panicked" in line):
            kept.append(line.rstrip("\n"))
    stdout = proc.stdout.read()
    if proc.wait() != 0:
        sys.exit(f"mali-report: {' '.join(cmd)} failed on {gpu}:\n{stdout}\n"
                 + "\n".join(kept[-20:]))
    with open(os.path.join(args.out, f"{gpu}-{tuning}.log"), "w") as f:
        f.write("\n".join(kept) + "\n")
    with open(json_path) as f:
        return json.load(f), kept, stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--edgesight", required=True)
    ap.add_argument("--mesa", required=True, help="scripts/mali/mesa.sh's install directory")
    ap.add_argument("--gpu", default="g52,g610,g31")
    ap.add_argument("--tuning", default="auto",
                    help="the tunings to build, comma-separated; auto: what edgesight gives each GPU")
    ap.add_argument("--out", default="target/mali-report")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--sizes", default="1920x1080,3840x2160",
                    help="frame sizes whose launches the model takes, WIDTHxHEIGHT comma-separated")
    ap.add_argument("--launch-us", type=float, default=LAUNCH_US,
                    help="the assumed cost of a launch beside its work, µs")
    ap.add_argument("--reuse", action="store_true",
                    help="read the JSON and logs an earlier run left in --out; run nothing")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    every, models = [], []
    for gpu in args.gpu.split(","):
        for tuning in args.tuning.split(","):
            kernels_json, kept, stdout = run_gpu(args, gpu, tuning)
            stats, unnamed = parse_log(kept)
            rows = rows_of(kernels_json, stats, gpu)
            missing = [r["kernel"] for r in rows if r["launched"] and not r["stats"]]
            built = ",".join(t["tuning"] for t in kernels_json["tunings"])
            print(f"\n## {gpu} (PAN_GPU_ID={GPUS.get(gpu, gpu)}), tuning {built}: "
                  f"{kernels_json['device']}, {kernels_json['driver_version']}")
            print(table(rows, args.markdown))
            print(summary(rows))
            if missing or unnamed:
                sys.exit(f"mali-report: {gpu}: no statistics for {missing}, "
                         f"{unnamed} statistics lines without a kernel")
            every += rows
            board = BOARDS.get(gpu)
            sets = launch_sets(kernels_json)
            if board and sets:
                by_program = stats_by_program(rows)
                print(f"\n### The model of a frame on {board['name']}: {board['cores']} "
                      f"core{'s' if board['cores'] > 1 else ''}, {board['lanes']} arithmetic "
                      f"lanes a core, {board['warp']}-wide warps, {board['mhz']} MHz, "
                      f"{board['gbps']:g} GB/s")
                for tuning_name, frame in sets:
                    m = model_frame(frame, by_program, board, args.launch_us)
                    print(f"\n{gpu}, tuning {tuning_name}, {frame['width']}x{frame['height']}:")
                    print(model_table(m, board, args.markdown))
                    models.append((board, m))
    if models:
        print("\n## The modelled frames")
        print(summary_table(models, args.markdown))
        with open(os.path.join(args.out, "model.json"), "w") as f:
            json.dump([dict(m, gpu=b["name"]) for b, m in models], f, indent=1)
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(every, f, indent=1)
    print(f"\nmali-report: {len(every)} rows; logs and JSON in {args.out}")


if __name__ == "__main__":
    main()
