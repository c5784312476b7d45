"""Every crate version in Cargo.lock checked against the crates.io index: a version its
authors yanked (a serious bug, a security hole, or a broken release) is named.

    python3 scripts/check-yanked.py

Not in `make test` (it needs crates.io). It is the advisory check that works where the
RustSec database (on GitHub) cannot be reached; `cargo audit` is the full one.
"""
import json, os, sys, tomllib, urllib.request
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def index_path(name):
    n = name.lower()
    if len(n) <= 2:
        return f"{len(n)}/{n}"
    if len(n) == 3:
        return f"3/{n[0]}/{n}"
    return f"{n[:2]}/{n[2:4]}/{n}"

def yanked(pkg):
    url = f"https://index.crates.io/{index_path(pkg['name'])}"
    with urllib.request.urlopen(url, timeout=30) as r:
        for line in r.read().decode().splitlines():
            v = json.loads(line)
            if v["vers"] == pkg["version"]:
                return v["yanked"]
    return None  # not in the index

lock = tomllib.load(open(os.path.join(ROOT, "Cargo.lock"), "rb"))
pkgs = [p for p in lock["package"] if p.get("source", "").startswith("registry+")]
with ThreadPoolExecutor(16) as pool:
    results = list(pool.map(yanked, pkgs))
bad = [(p, y) for p, y in zip(pkgs, results) if y is not False]
for p, y in bad:
    print(f"{p['name']} {p['version']}: {'yanked' if y else 'not in the crates.io index'}")
print(f"check-yanked: {len(pkgs)} crates from crates.io, {len(bad)} yanked or missing")
sys.exit(1 if bad else 0)
