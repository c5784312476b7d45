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


def run_gpu(args, gpu, tuning):
    json_path = os.path.join(args.out, f"{gpu}-{tuning}.json")
    cmd = [args.edgesight, "kernels", "--tuning", tuning, "--log.level", "debug",
           "--json", json_path]
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
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    every = []
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
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(every, f, indent=1)
    print(f"\nmali-report: {len(every)} rows; logs and JSON in {args.out}")


if __name__ == "__main__":
    main()
