#!/usr/bin/env python3
"""A simulated fleet: many edgesight daemons scraped by one real Prometheus, then the same
boards pushed through Prometheus agents into a receiver (measured, not asserted).

  python3 bench/fleet.py --boards 100 [--seconds 180] [--interval 15]

Each board is one `edgesight run` on loopback with 4 test-pattern cameras (64x48 grey at
1 fps, two regions each: the series of a real board, little of its CPU). POCL's kernel
cache is shared (POCL_CACHE_DIR, target/pocl-cache by default), so kernels build once.

Phase 1, pull: one Prometheus (Debian's `prometheus` on PATH) with the shape of
deploy/prometheus.yml (job edgesight, file_sd targets, sample_limit) and an empty
targets file: its memory after it settles is the baseline; then every board is written
into the targets file and, after SETTLE seconds, SECONDS of scraping are measured.

Phase 2, push: a Prometheus receiver (--web.enable-remote-write-receiver) and agents
(--enable-feature=agent). The first OWN_AGENTS boards get one agent each, as a board
runs it (external_labels site and board, scraping its edgesight); running one agent per
board for hundreds of boards would measure this machine's two cores rather than the
agents, so the other boards go through shared agents of BOARDS_PER_AGENT boards each
(the board label then set on the target in file_sd, the same series on the receiver).
The agents push with the shipped board agent's remote_write (deploy/agent/agent.yml: its
bounded queue, retries and the write relabelling that drops the detail tier), taken from
that file as it is and pointed at the receiver; their scrape job is this script's.

Printed: a Markdown table per phase (and --json FILE writes every figure), with the
daemons' own cost, bytes per scrape of one board (plain and gzip, default and detail
tier), series per board, Prometheus' memory per board and per series against its
baseline, scrape durations, and the agents' cost and remote-write bytes per sample.
--phases pull or push runs one of them; --tier detail has each board serve its detail tier
to a plain scrape (about a board's series before the metrics diet). Every process
started is stopped on exit.
"""

import argparse
import gzip
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

CAMERAS = 4
HZ = os.sysconf("SC_CLK_TCK")
# The board agent as shipped: its remote_write goes into every agent here.
SHIPPED_AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy",
                             "agent", "agent.yml")

# deploy/prometheus.yml's limit; the detail tier (about 250 series a camera) needs more.
SAMPLE_LIMIT = {"default": 1000, "detail": 2000}

children = []  # every process started, stopped in reverse order on exit


def stop_all():
    for proc in reversed(children):
        if proc.poll() is None:
            proc.terminate()
    deadline = time.time() + 10
    for proc in reversed(children):
        try:
            proc.wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    children.clear()


def start(args, log):
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    children.append(proc)
    return proc


def free_ports(n, first):
    """n ports from `first` up that nothing listens on (below the ephemeral range, so
    outgoing connections do not take them meanwhile)."""
    ports, port = [], first
    while len(ports) < n:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                ports.append(port)
            except OSError:
                pass
        port += 1
    return ports


def get(url, gzip_ok=False, timeout=10):
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if gzip_ok else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read(), r.headers.get("Content-Encoding")


def wait_http(url, proc, what, log, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"fleet: {what} exited ({open(log).read()[-2000:]})")
        try:
            get(url, timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"fleet: {what} did not answer {url} within {timeout} s")


def samples(text):
    """A text exposition's samples: {name{labels}: value}."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def family_sum(metrics, name):
    return sum(v for k, v in metrics.items() if k == name or k.startswith(name + "{"))


def proc_mem(pid):
    """RSS, anonymous RSS and PSS (shared pages split among their users), in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "Threads"):
                out[key] = int(rest.split()[0]) * (1024 if key != "Threads" else 1)
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                out["Pss"] = int(line.split()[1]) * 1024
    return out


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ  # utime, stime


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def quantile(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


class Prometheus:
    """One `prometheus` server on loopback with its own storage; read through its API and
    its own /metrics."""

    def __init__(self, name, workdir, port, config, extra=()):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            f.write(config)
        self.url = f"http://127.0.0.1:{port}"
        self.log = os.path.join(self.dir, "log")
        agent = "--enable-feature=agent" in extra
        storage = "--storage.agent.path" if agent else "--storage.tsdb.path"
        self.proc = start(
            ["prometheus", f"--config.file={self.config}", f"{storage}={self.dir}/data",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn", *extra], self.log)
        wait_http(self.url + "/-/ready", self.proc, f"prometheus {name}", self.log)

    def metrics(self):
        return samples(get(self.url + "/metrics")[0].decode())

    def query(self, expr):
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        body = json.loads(get(url, timeout=60)[0])
        if body["status"] != "success":
            sys.exit(f"fleet: query {expr!r} failed: {body}")
        return body["data"]["result"]

    def memory(self):
        own = self.metrics()
        mem = proc_mem(self.proc.pid)
        return {"rss": mem["VmRSS"], "pss": mem["Pss"],
                "heap_inuse": own["go_memstats_heap_inuse_bytes"],
                "process_rss": own["process_resident_memory_bytes"],
                "head_series": own.get("prometheus_tsdb_head_series", 0.0)}


def board_config(port, tier, cameras=CAMERAS):
    lines = [f'[web]\nlisten_address = "127.0.0.1:{port}"\n[metrics]\ntier = "{tier}"\n']
    for i in range(cameras):
        lines.append(
            f'\n[[camera]]\nname = "cam{i}"\n[camera.source]\nkind = "pattern"\n'
            'size = "64x48"\nformat = "grey"\nfps = 1\n'
            '[[camera.roi]]\nname = "left"\nx = 0\ny = 0\nw = 16\nh = 16\n'
            '[[camera.roi]]\nname = "centre"\nx = 16\ny = 12\nw = 32\nh = 24\n')
    return "".join(lines)


def board_name(i):
    return f"board-{i:04d}"


def start_boards(args, workdir):
    ports = free_ports(args.boards, args.base_port)
    boards = []
    t0 = time.time()
    for i, port in enumerate(ports):
        path = os.path.join(workdir, f"{board_name(i)}.toml")
        with open(path, "w") as f:
            f.write(board_config(port, args.tier))
        log = os.path.join(workdir, f"{board_name(i)}.log")
        proc = start([args.edgesight, "run", "--config", path, "--log.level", "warn"], log)
        boards.append({"name": board_name(i), "port": port, "proc": proc, "log": log})
        if i == 0:  # the first one builds any kernel the shared cache lacks, alone
            wait_http(f"http://127.0.0.1:{port}/healthz", proc, board_name(i), log)
    for b in boards:
        wait_http(f"http://127.0.0.1:{b['port']}/healthz", b["proc"], b["name"], b["log"])
    return boards, time.time() - t0


def one_board_bytes(port):
    out = {}
    for tier, query in (("default", "?exclude%5B%5D=detail"), ("detail", "?collect%5B%5D=detail")):
        plain, _ = get(f"http://127.0.0.1:{port}/metrics{query}")
        zipped, encoding = get(f"http://127.0.0.1:{port}/metrics{query}", gzip_ok=True)
        assert encoding == "gzip", f"board answered {encoding!r} to Accept-Encoding: gzip"
        assert len(gzip.decompress(zipped)) > 0
        out[tier] = {"samples": len(samples(plain.decode())), "bytes": len(plain),
                     "gzip": len(zipped)}
    return out


def daemons_snapshot(boards):
    cpu = sum(cpu_seconds(b["proc"].pid) for b in boards)
    mems = [proc_mem(b["proc"].pid) for b in boards]
    return cpu, mems


def measure_window(seconds, procs):
    """CPU seconds each process used over the window, and the window's length."""
    before = [cpu_seconds(p.pid) for p in procs]
    t0 = time.time()
    time.sleep(seconds)
    return [cpu_seconds(p.pid) - b for p, b in zip(procs, before)], time.time() - t0


def scrape_job(interval, timeout, sample_limit):
    return (f"  - job_name: edgesight\n    scrape_interval: {interval}s\n"
            f"    scrape_timeout: {timeout}s\n    sample_limit: {sample_limit}\n")


def pull_phase(args, workdir, boards):
    targets = os.path.join(workdir, "targets.yml")
    with open(targets, "w") as f:
        f.write("[]\n")
    config = ("global:\n  scrape_interval: %ds\n  evaluation_interval: %ds\n"
              "scrape_configs:\n%s    file_sd_configs:\n      - files: [%s]\n"
              % (args.interval, args.interval,
                 scrape_job(args.interval, min(5, args.interval), SAMPLE_LIMIT[args.tier]), targets))
    prom = Prometheus("central", workdir, free_ports(1, args.base_port - 100)[0], config)
    time.sleep(args.baseline_seconds)
    base = prom.memory()
    with open(targets + ".tmp", "w") as f:
        for b in boards:
            f.write(f"- targets: ['127.0.0.1:{b['port']}']\n"
                    f"  labels: {{site: bench, board: {b['name']}}}\n")
    os.rename(targets + ".tmp", targets)
    time.sleep(args.settle)
    procs = [prom.proc] + [b["proc"] for b in boards]
    cpu, window = measure_window(args.seconds, procs)
    mem = prom.memory()
    window_s = int(window)
    up = prom.query('sum(up{job="edgesight"})')
    # Over the whole window, not only the last scrape: one that failed or came back short
    # shows here.
    scraped = [float(v) for r in prom.query(f'scrape_samples_scraped{{job="edgesight"}}[{window_s}s]')
               for _, v in r["values"]]
    ups = [float(v) for r in prom.query(f'up{{job="edgesight"}}[{window_s}s]') for _, v in r["values"]]
    durations = [float(v) for r in prom.query(f'scrape_duration_seconds{{job="edgesight"}}[{window_s}s]')
                 for _, v in r["values"]]
    cpu_d, mems = daemons_snapshot(boards)
    n = len(boards)
    series = mem["head_series"]
    result = {
        "boards": n,
        "up": float(up[0]["value"][1]) if up else 0.0,
        "scrapes": len(ups), "failed_scrapes": ups.count(0.0),
        "samples_scraped": {"min": min(scraped, default=0), "max": max(scraped, default=0)},
        "head_series": series,
        "baseline": base,
        "with_boards": mem,
        "prometheus_cpu_share": cpu[0] / window,
        "scrape_duration": {"median": statistics.median(durations) if durations else float("nan"),
                            "p99": quantile(durations, 0.99), "max": max(durations, default=0),
                            "samples": len(durations)},
        "daemons_cpu_share": sum(cpu[1:]) / window,
        "daemons": {k: statistics.mean(m[k] for m in mems) for k in ("VmRSS", "RssAnon", "Pss", "Threads")},
        "window_s": window,
        "loadavg": loadavg(),
    }
    prom.proc.terminate()
    prom.proc.wait(30)
    return result




def agent_config(args, receiver_url, external, targets_yml):
    """An agent's config: this script's scrape job over `targets_yml`, and the shipped
    agent's remote_write (queue, retries, write relabelling) pointed at the receiver."""
    with open(SHIPPED_AGENT) as f:
        (remote_write,) = yaml.safe_load(f)["remote_write"]
    remote_write["url"] = f"{receiver_url}/api/v1/write"
    ext = "".join(f"    {k}: {v}\n" for k, v in external.items())
    return (f"global:\n  scrape_interval: {args.interval}s\n  external_labels:\n{ext}"
            f"scrape_configs:\n{scrape_job(args.interval, min(5, args.interval), 1000)}"
            f"    file_sd_configs:\n      - files: [{targets_yml}]\n"
            + yaml.safe_dump({"remote_write": [remote_write]}, sort_keys=False))


def push_phase(args, workdir, boards):
    port = free_ports(1, args.base_port - 200)[0]
    receiver = Prometheus("receiver", workdir, port, "global:\n  scrape_interval: 15s\n",
                          ("--web.enable-remote-write-receiver",))
    time.sleep(args.baseline_seconds)
    base = receiver.memory()
    own = boards[:args.own_agents]
    rest = boards[args.own_agents:]
    groups = [[b] for b in own]
    groups += [rest[i:i + args.boards_per_agent] for i in range(0, len(rest), args.boards_per_agent)]
    agent_ports = free_ports(len(groups), args.base_port - 190)
    agents = []
    for i, (group, aport) in enumerate(zip(groups, agent_ports)):
        name = f"agent-{i:03d}"
        targets = os.path.join(workdir, name + "-targets.yml")
        external = {"site": "bench"}
        with open(targets, "w") as f:
            for b in group:
                f.write(f"- targets: ['127.0.0.1:{b['port']}']\n")
                if len(group) > 1:  # a shared agent: the board named on its target
                    f.write(f"  labels: {{board: {b['name']}}}\n")
        if len(group) == 1:
            external["board"] = group[0]["name"]
        agents.append({"prom": Prometheus(name, workdir, aport,
                                          agent_config(args, receiver.url, external, targets),
                                          ("--enable-feature=agent",)),
                       "boards": len(group)})
    time.sleep(args.settle)
    procs = [receiver.proc] + [a["prom"].proc for a in agents]
    rw_before = [a["prom"].metrics() for a in agents]
    cpu, window = measure_window(args.seconds, procs)
    rw_after = [a["prom"].metrics() for a in agents]
    mem = receiver.memory()
    per_agent = []
    for a, before, after, c in zip(agents, rw_before, rw_after, cpu[1:]):
        d = lambda name: family_sum(after, name) - family_sum(before, name)
        m = proc_mem(a["prom"].proc.pid)
        per_agent.append({
            "boards": a["boards"], "rss": m["VmRSS"], "pss": m["Pss"],
            "heap_inuse": after["go_memstats_heap_inuse_bytes"], "cpu_share": c / window,
            "bytes": d("prometheus_remote_storage_bytes_total"),
            "samples": d("prometheus_remote_storage_samples_total"),
            "failed": d("prometheus_remote_storage_samples_failed_total"),
            "retried": d("prometheus_remote_storage_samples_retried_total"),
            "active_series": family_sum(after, "prometheus_agent_active_series"),
        })
    boards_seen = receiver.query('count(count by (board) (edgesight_build_info{site="bench"}))')
    own_a = [a for a in per_agent if a["boards"] == 1]
    shared = [a for a in per_agent if a["boards"] > 1]
    total_bytes = sum(a["bytes"] for a in per_agent)
    total_samples = sum(a["samples"] for a in per_agent)
    result = {
        "boards": len(boards),
        "agents": len(agents), "own_agents": len(own_a), "shared_agents": len(shared),
        "boards_on_receiver": float(boards_seen[0]["value"][1]) if boards_seen else 0.0,
        "head_series": mem["head_series"],
        "baseline": base,
        "with_boards": mem,
        "receiver_cpu_share": cpu[0] / window,
        "own_agent": {k: statistics.mean(a[k] for a in own_a) for k in
                      ("rss", "pss", "heap_inuse", "cpu_share", "active_series")} if own_a else None,
        "shared_agent": {k: statistics.mean(a[k] / a["boards"] for a in shared) for k in
                         ("rss", "pss", "cpu_share", "active_series")} if shared else None,
        "rw_bytes_per_sample": total_bytes / total_samples if total_samples else float("nan"),
        "rw_samples_per_s": total_samples / window,
        "rw_failed": sum(a["failed"] for a in per_agent),
        "rw_retried": sum(a["retried"] for a in per_agent),
        "window_s": window,
        "loadavg": loadavg(),
    }
    return result


def mib(x):
    return f"{x / 2**20:.1f} MiB"


def kib(x):
    return f"{x / 1024:.2f} KiB"


def print_pull(r, sizes, startup):
    n = r["boards"]
    b, w = r["baseline"], r["with_boards"]
    extra = {k: w[k] - b[k] for k in ("rss", "heap_inuse", "process_rss")}
    s = r["head_series"]
    rows = [
        ("boards up / started", f"{r['up']:.0f} / {n} (all answered /healthz {startup:.1f} s after the first start)"),
        ("scrapes failed in the window", f"{r['failed_scrapes']} of {r['scrapes']}"),
        ("scrape_samples_scraped per board", f"{r['samples_scraped']['min']:.0f} to {r['samples_scraped']['max']:.0f} (every scrape in the window)"),
        ("head series / boards", f"{s:.0f} / {n} = {s / n:.1f}"),
        ("bytes per scrape, default tier", f"{sizes['default']['bytes']:,} plain, {sizes['default']['gzip']:,} gzip ({sizes['default']['samples']} samples)"),
        ("bytes per scrape, detail tier", f"{sizes['detail']['bytes']:,} plain, {sizes['detail']['gzip']:,} gzip ({sizes['detail']['samples']} samples)"),
        ("Prometheus RSS (/proc): baseline, with boards", f"{mib(b['rss'])}, {mib(w['rss'])}"),
        ("  per board, per series", f"{kib(extra['rss'] / n)}, {extra['rss'] / s:.0f} B"),
        ("Prometheus process_resident_memory_bytes per board, per series", f"{kib(extra['process_rss'] / n)}, {extra['process_rss'] / s:.0f} B"),
        ("Prometheus go heap in use: baseline, with boards", f"{mib(b['heap_inuse'])}, {mib(w['heap_inuse'])}"),
        ("  per board, per series", f"{kib(extra['heap_inuse'] / n)}, {extra['heap_inuse'] / s:.0f} B"),
        ("Prometheus CPU", f"{100 * r['prometheus_cpu_share']:.1f} % of a core"),
        ("scrape_duration_seconds median / p99 / max", f"{1000 * r['scrape_duration']['median']:.1f} / {1000 * r['scrape_duration']['p99']:.1f} / {1000 * r['scrape_duration']['max']:.1f} ms ({r['scrape_duration']['samples']} scrapes)"),
        ("daemon CPU per board", f"{100 * r['daemons_cpu_share'] / n:.2f} % of a core (all: {100 * r['daemons_cpu_share']:.0f} %)"),
        ("daemon RSS / anonymous / PSS per board", f"{mib(r['daemons']['VmRSS'])} / {mib(r['daemons']['RssAnon'])} / {mib(r['daemons']['Pss'])}, {r['daemons']['Threads']:.0f} threads"),
        ("window, load average after", f"{r['window_s']:.0f} s, {r['loadavg']}"),
    ]
    print(f"\n### Pull: one Prometheus scraping {n} boards (file_sd)\n")
    print("| | |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


def print_push(r):
    n = r["boards"]
    b, w = r["baseline"], r["with_boards"]
    s = r["head_series"]
    extra = {k: w[k] - b[k] for k in ("rss", "heap_inuse")}
    rows = [
        ("agents", f"{r['agents']}: {r['own_agents']} with one board each, {r['shared_agents']} shared by the rest"),
        ("boards on the receiver (by board label)", f"{r['boards_on_receiver']:.0f} / {n}"),
        ("receiver head series / boards", f"{s:.0f} / {n} = {s / n:.1f}"),
        ("receiver RSS: baseline, with boards", f"{mib(b['rss'])}, {mib(w['rss'])}; per series {extra['rss'] / s:.0f} B"),
        ("receiver go heap in use: baseline, with boards", f"{mib(b['heap_inuse'])}, {mib(w['heap_inuse'])}; per series {extra['heap_inuse'] / s:.0f} B"),
        ("receiver CPU", f"{100 * r['receiver_cpu_share']:.1f} % of a core"),
    ]
    if r["own_agent"]:
        a = r["own_agent"]
        rows.append(("one board's own agent: RSS / PSS / heap in use", f"{mib(a['rss'])} / {mib(a['pss'])} / {mib(a['heap_inuse'])}"))
        rows.append(("  its CPU, active series", f"{100 * a['cpu_share']:.2f} % of a core, {a['active_series']:.0f}"))
    if r["shared_agent"]:
        a = r["shared_agent"]
        rows.append(("shared agents, per board: RSS / PSS", f"{mib(a['rss'])} / {mib(a['pss'])}"))
        rows.append(("  CPU per board", f"{100 * a['cpu_share']:.2f} % of a core"))
    rows += [
        ("remote-write bytes per sample", f"{r['rw_bytes_per_sample']:.2f} (bytes_total / samples_total, all agents)"),
        ("remote-write samples/s, failed, retried", f"{r['rw_samples_per_s']:.1f}, {r['rw_failed']:.0f}, {r['rw_retried']:.0f}"),
        ("window, load average after", f"{r['window_s']:.0f} s, {r['loadavg']}"),
    ]
    print(f"\n### Push: agents into a receiver, {n} boards\n")
    print("| | |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--boards", type=int, default=10)
    p.add_argument("--seconds", type=float, default=180, help="measured window of each phase")
    p.add_argument("--settle", type=float, default=45, help="scraping before the window")
    p.add_argument("--baseline-seconds", type=float, default=20, help="a Prometheus's wait before its baseline")
    p.add_argument("--interval", type=int, default=15, help="scrape interval, seconds")
    p.add_argument("--own-agents", type=int, default=4, help="boards with an agent of their own")
    p.add_argument("--boards-per-agent", type=int, default=25, help="boards per shared agent")
    p.add_argument("--phases", default="pull,push")
    p.add_argument("--tier", choices=("default", "detail"), default="default",
                   help="what a plain /metrics of each board gets ([metrics] tier): detail "
                        "is close to one camera's 236 series before the diet")
    p.add_argument("--base-port", type=int, default=21000)
    p.add_argument("--edgesight", default=os.environ.get("EDGESIGHT", "target/release/edgesight"))
    p.add_argument("--json", help="write every figure to this file")
    args = p.parse_args()
    phases = set(args.phases.split(","))
    if not phases <= {"pull", "push"} or args.boards < 1:
        p.error("--phases takes pull, push or both; --boards at least 1")
    for tool in ("prometheus", args.edgesight):
        if not shutil.which(tool):
            sys.exit(f"fleet: {tool} not found")
    os.environ.setdefault("POCL_CACHE_DIR", os.path.abspath("target/pocl-cache"))
    os.makedirs(os.environ["POCL_CACHE_DIR"], exist_ok=True)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit("fleet: stopped by signal"))
    workdir = tempfile.mkdtemp(prefix="edgesight-fleet-")
    try:
        print(f"fleet: {args.boards} boards of {CAMERAS} cameras ({args.tier} tier), load average {loadavg()}", flush=True)
        boards, startup = start_boards(args, workdir)
        time.sleep(5)  # every camera past its first frames
        sizes = one_board_bytes(boards[0]["port"])
        out = {"args": vars(args), "startup_s": startup, "bytes": sizes}
        print(f"fleet: all up in {startup:.1f} s", flush=True)
        if "pull" in phases:
            out["pull"] = pull_phase(args, workdir, boards)
            print_pull(out["pull"], sizes, startup)
        if "push" in phases:
            out["push"] = push_phase(args, workdir, boards)
            print_push(out["push"])
        out["pids"] = [proc.pid for proc in children]
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        stop_all()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
