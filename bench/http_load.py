"""The daemon's HTTP side under hostile clients, measured (not asserted):

  python3 bench/http_load.py snapshots [PORT]  # 3840x2160 camera, 64 new snapshot
                                               # requests a second that are never read,
                                               # for 20 s: the daemon's RSS, and whether
                                               # /metrics is answered meanwhile
  python3 bench/http_load.py churn [PORT]      # new empty connections from 127.0.0.2-5
                                               # as fast as bench/churn.rs makes them
                                               # (CHURN_THREADS per address, default 2,
                                               # each holding its last CHURN_HOLD, 16),
                                               # scrapes from 127.0.0.1 one after the
                                               # other for CHURN_SECONDS (default 20)
  python3 bench/http_load.py pace [PORT]       # a 320x240 test pattern at 30 fps behind
                                               # basic auth: frames published a second
                                               # and their share of the frames due, idle,
                                               # under wrk on /metrics (8 connections,
                                               # the right password) and under a flood
                                               # of wrong passwords (32 connections,
                                               # bcrypt cost 10), PACE_SECONDS each
                                               # (default 10); what tests/daemon/load.rs
                                               # holds to a share of one half

EDGESIGHT_BIN names the binary (default target/release/edgesight); the daemon's config
and log go to target/http-load/.
"""
import os, socket, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("EDGESIGHT_BIN", os.path.join(ROOT, "target/release/edgesight"))
OUT = os.path.join(ROOT, "target/http-load")
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 18960
mode = sys.argv[1]
os.makedirs(OUT, exist_ok=True)

def rss(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"):
            return int(l.split()[1]) // 1024
    return 0

def start(config, auth=""):
    path = f"{OUT}/{mode}.toml"
    open(path, "w").write(config)
    env = dict(os.environ, RUST_LOG="warn")
    env.setdefault("POCL_CACHE_DIR", os.path.join(ROOT, "target/pocl-cache"))
    p = subprocess.Popen([BIN, "run", "--config", path], env=env,
                         stdout=subprocess.DEVNULL, stderr=open(f"{OUT}/{mode}.log", "w"))
    for _ in range(600):
        try:
            s = socket.create_connection(("127.0.0.1", PORT), timeout=1)
            s.sendall(f"GET /healthz HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
                      .encode())
            if b"200" in s.recv(100):
                s.close()
                return p
            s.close()
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("daemon never healthy")

def get(path, src=None):
    s = socket.socket()
    s.settimeout(10)
    if src:
        s.bind((src, 0))
    s.connect(("127.0.0.1", PORT))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        return False
    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")]
    return bool(length) and len(body) == length[0]

def get_body(path):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return data.partition(b"\r\n\r\n")[2]

if mode == "snapshots":
    p = start(f'[web]\nlisten_address = "127.0.0.1:{PORT}"\nsnapshots = true\n'
              '[[camera]]\nname = "big"\n[camera.source]\nkind = "pattern"\nsize = "3840x2160"\nfps = 5\n')
    time.sleep(3)
    base = rss(p.pid)
    held, peak = [], base
    kinds = ["luma", "edges", "mask"]
    t0 = time.time()
    i = 0
    while time.time() - t0 < 20:
        for _ in range(64):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            try:
                s.connect(("127.0.0.1", PORT))
                s.sendall(f"GET /snapshot/{kinds[i % 3]}.png HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                held.append(s)
            except OSError:
                s.close()
            i += 1
        peak = max(peak, rss(p.pid))
        time.sleep(1)
    ok = sum(get("/metrics") for _ in range(50))
    print(f"snapshots: RSS {base} MB before, peak {peak} MB with {i} unread snapshot requests "
          f"over 20 s (64 a second); /metrics answered whole {ok}/50 meanwhile")
    p.terminate(); p.wait()
elif mode == "churn":
    # The connections come from bench/churn.rs (Python makes a few hundred a second here).
    # (Built here where cargo is; a machine without it runs the binary brought along.)
    import shutil
    if shutil.which("cargo"):
        subprocess.run(["cargo", "build", "--release", "--locked", "--example", "churn"],
                       cwd=ROOT, check=True)
    # Four cameras of 40 regions and 256 histogram bins: a scrape of about 150 KB, long
    # enough on the wire to be cut in the middle if the daemon took its slot.
    cameras = ""
    for c in range(4):
        cameras += (f'[[camera]]\nname = "c{c}"\n[camera.source]\nkind = "pattern"\nsize = "64x48"\n'
                    'fps = 10\n')
        for r in range(40):
            cameras += f'[[camera.roi]]\nname = "r{r}"\nx = {r}\ny = 0\nw = 8\nh = 8\n'
    p = start(f'[web]\nlisten_address = "127.0.0.1:{PORT}"\n[metrics]\nhistogram_bins = 256\n' + cameras)
    seconds = os.environ.get("CHURN_SECONDS", "20")
    threads = os.environ.get("CHURN_THREADS", "2")
    hold = os.environ.get("CHURN_HOLD", "16")
    size = len(get_body("/metrics"))
    print(f"churn: a scrape is {size} bytes")
    subprocess.run([os.path.join(ROOT, "target/release/examples/churn"), str(PORT), seconds, threads,
                    hold], check=True)
    p.terminate(); p.wait()
elif mode == "pace":
    import base64, re, signal
    # bcrypt("s3cret", cost 10): the cost people use (htpasswd -C 10).
    hashed = "$2b$10$BSKHzbuKStEcMk9gEBxgG.1odO5TPwg6s.ujQxTFNhDrnN730crRW"
    def basic(password):
        return "Basic " + base64.b64encode(f"prom:{password}".encode()).decode()
    good = f"Authorization: {basic('s3cret')}\r\n"
    p = start(f'[web]\nlisten_address = "127.0.0.1:{PORT}"\n[web.basic_auth_users]\n'
              f'prom = "{hashed}"\n[[camera]]\nname = "front"\n[camera.source]\n'
              'kind = "pattern"\nsize = "320x240"\nfps = 30\n', auth=good)
    def counters():
        # From another address than the load's, as Prometheus scrapes.
        s = socket.socket()
        s.settimeout(10)
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", PORT))
        s.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\n{good}Connection: close\r\n\r\n"
                  .encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        s.close()
        text = data.partition(b"\r\n\r\n")[2].decode()
        published = float(re.search(r'^edgesight_frames_total\{camera="front"\} (\S+)$', text,
                                    re.M).group(1))
        dropped = sum(float(v) for v in re.findall(
            r'^edgesight_frames_dropped_total\{camera="front",[^}]*\} (\S+)$', text, re.M))
        return published, published + dropped
    seconds = float(os.environ.get("PACE_SECONDS", "10"))
    url = f"http://127.0.0.1:{PORT}/metrics"
    for name, wrk in [
        ("idle", None),
        ("wrk on /metrics", ["-t2", "-c8", "-H", f"Authorization: {basic('s3cret')}"]),
        ("wrong-password flood", ["-t1", "-c32", "-H", f"Authorization: {basic('wrong')}"]),
    ]:
        load = wrk and subprocess.Popen(["wrk", *wrk, "--timeout", "5s", "-d600s", url],
                                        stdout=subprocess.DEVNULL)
        time.sleep(2)
        (p0, d0), t0 = counters(), time.monotonic()
        time.sleep(seconds)
        (p1, d1), t1 = counters(), time.monotonic()
        if load:
            load.send_signal(signal.SIGINT)
            load.wait()
        published, due = p1 - p0, d1 - d0
        print(f"pace: {name}: {published / (t1 - t0):.1f} frames/s published, "
              f"{published:.0f} of {due:.0f} due ({published / max(due, 1):.0%})")
        time.sleep(2)
    p.terminate(); p.wait()
