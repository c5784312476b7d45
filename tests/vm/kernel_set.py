#!/usr/bin/env python3
"""Chooses the Debian kernel packages the VM tests download, from the package lists as they are.

    tests/vm/kernel_set.py [--image PACKAGE] [--apt-cache-show FILE ...]

Prints one package a line, `ROLE PACKAGE=VERSION`, ROLE being `abi` (then the ABI name alone),
`image` (the kernel), or `build` (what building v4l2loopback against it takes: the ABI's
headers, the parts those headers depend on, v4l2loopback-dkms). On failure it prints one line
naming the package, the version asked for and the versions found, and exits 1.

The rules, because Debian's archive moves under a fixed script (a point release, an ABI bump,
a rebuild of one binary package but not its siblings):
- the image is the one `linux-image-amd64` depends on, newest meta-package version first; an
  older one (another suite's) is taken only when the newer has no consistent set, and that is
  said on stderr;
- the headers are the image's ABI's (`linux-headers-<abi>`), at the image's version when the
  archive has it, else its newest: one ABI name is one kernel ABI, which is Debian's promise;
- every `linux-headers-*` and `linux-kbuild-*` part is taken at the newest version that meets
  the headers' own Depends, never at the headers' version (kbuild may be a later rebuild).

Without --apt-cache-show it asks `apt-cache show`; with it, it reads saved `apt-cache show`
outputs instead (the tests' fixtures: tests/vm/fixtures/).
"""
import argparse
import re
import subprocess
import sys

META = "linux-image-amd64"
LOOPBACK = "v4l2loopback-dkms"
ARCHES = ("amd64", "all")
IMAGE_DEP = re.compile(r"^linux-image-(\d.*-amd64)$")
BUILD_PART = re.compile(r"^linux-(headers|kbuild)-")
RELATION = re.compile(r"^\s*([^\s(:]+)(?::\S+)?\s*(?:\(\s*(<<|<=|=|>=|>>|<|>)\s*([^)\s]+)\s*\))?")


class NoSet(Exception):
    """No consistent set: the message is the one line the user sees."""


# Debian version ordering, as dpkg's verrevcmp defines it.
def _order(c):
    if c == "~":
        return -1
    if c.isalpha():
        return ord(c)
    return ord(c) + 256


def _compare_part(a, b):
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            bc = _order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if ac != bc:
                return ac - bc
            i += 1
            j += 1
        ni = i
        while ni < len(a) and a[ni].isdigit():
            ni += 1
        nj = j
        while nj < len(b) and b[nj].isdigit():
            nj += 1
        na, nb = int(a[i:ni] or 0), int(b[j:nj] or 0)
        if na != nb:
            return -1 if na < nb else 1
        i, j = ni, nj
    return 0


def _split(version):
    epoch, _, rest = version.rpartition(":") if ":" in version else ("0", "", version)
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return int(epoch or 0), upstream, revision


def compare(a, b):
    """<0, 0 or >0 as Debian version a sorts before, with or after b."""
    ea, ua, ra = _split(a)
    eb, ub, rb = _split(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _compare_part(ua, ub) or _compare_part(ra, rb)


def satisfies(version, op, wanted):
    if op is None:
        return True
    c = compare(version, wanted)
    return {"<<": c < 0, "<": c <= 0, "<=": c <= 0, "=": c == 0,
            ">=": c >= 0, ">": c >= 0, ">>": c > 0}[op]


def newest_first(versions):
    out = []
    for v in versions:
        k = 0
        while k < len(out) and compare(out[k], v) > 0:
            k += 1
        if k == len(out) or compare(out[k], v) != 0:
            out.insert(k, v)
    return out


def parse_stanzas(text):
    """apt-cache show's output: paragraphs of `Field: value`, continued on indented lines."""
    stanzas, fields, last = [], {}, None
    for line in text.splitlines() + [""]:
        if not line.strip():
            if fields:
                stanzas.append(fields)
            fields, last = {}, None
        elif line[0] in " \t" and last:
            fields[last] += "\n" + line.strip()
        elif ":" in line:
            last, _, value = line.partition(":")
            fields[last] = value.strip()
    return stanzas


def relations(depends):
    """Depends' groups of alternatives, each a list of (package, op, version)."""
    groups = []
    for group in filter(None, (g.strip() for g in (depends or "").split(","))):
        alts = []
        for alt in group.split("|"):
            m = RELATION.match(alt)
            if m:
                alts.append(m.groups())
        groups.append(alts)
    return groups


class Archive:
    """The package lists: each package's stanzas by version."""

    def __init__(self, show):
        self._show = show
        self._known = {}

    def versions(self, package):
        """{version: stanza} of the package for this machine's architecture."""
        if package not in self._known:
            found = {}
            for s in parse_stanzas(self._show(package)):
                if s.get("Package") == package and s.get("Architecture", "amd64") in ARCHES:
                    found.setdefault(s["Version"], s)
            self._known[package] = found
        return self._known[package]

    def newest(self, package, op=None, wanted=None):
        """The newest version meeting the relation, or None."""
        for v in newest_first(self.versions(package)):
            if satisfies(v, op, wanted):
                return v
        return None

    def found(self, package):
        return ", ".join(newest_first(self.versions(package))) or "none"


def want(archive, package, op, wanted, why):
    """The newest version meeting the relation; NoSet names the package, why it is wanted and
    what the archive has."""
    version = archive.newest(package, op, wanted)
    if version is None:
        relation = f" ({op} {wanted})" if op else ""
        raise NoSet(f"{package}{relation}, {why}: the archive has {archive.found(package)}")
    return version


def build_set(archive, image, image_version=None):
    """(abi, [(role, package, version)]) for one kernel image."""
    m = IMAGE_DEP.match(image)
    if not m:
        raise NoSet(f"{image} is not a linux-image-<abi>-amd64 package")
    abi = m.group(1)
    if image_version is None:
        image_version = want(archive, image, None, None, "named by --image")
    headers = f"linux-headers-{abi}"
    versions = archive.versions(headers)
    if not versions:
        others = sorted(a for a in _abis_named(archive) if a != abi)
        raise NoSet(f"{headers} (for {image} {image_version}): not in the archive"
                    + (f"; {META} names {', '.join(others)}" if others else ""))
    hv = image_version if image_version in versions else newest_first(versions)[0]
    chosen = [("image", image, image_version), ("build", headers, hv)]
    for alts in relations(versions[hv].get("Depends")):
        parts = [a for a in alts if BUILD_PART.match(a[0])]
        if not parts:
            continue
        errors = []
        for name, op, wanted in parts:
            try:
                chosen.append(("build", name, want(archive, name, op, wanted,
                                                   f"which {headers} {hv} depends on")))
                break
            except NoSet as e:
                errors.append(str(e))
        else:
            raise NoSet(" or ".join(errors))
    chosen.append(("build", LOOPBACK, want(archive, LOOPBACK, None, None, "which the VM test builds")))
    return abi, chosen


def _abis_named(archive):
    """The ABIs the meta-package's versions depend on."""
    abis = set()
    for v, s in archive.versions(META).items():
        for alts in relations(s.get("Depends")):
            for name, _, _ in alts:
                m = IMAGE_DEP.match(name)
                if m:
                    abis.add(m.group(1))
    return abis


def choose(archive, image=None, note=lambda line: None):
    """The newest consistent set: (abi, [(role, package, version)])."""
    if image:
        return build_set(archive, image)
    metas = newest_first(archive.versions(META))
    if not metas:
        raise NoSet(f"{META}: not in the package lists (apt-get update?)")
    first_error = None
    for mv in metas:
        try:
            deps = [a for alts in relations(archive.versions(META)[mv].get("Depends"))
                    for a in alts if IMAGE_DEP.match(a[0])]
            if not deps:
                raise NoSet(f"{META} {mv} depends on no linux-image-<abi>-amd64")
            name, op, wanted = deps[0]
            version = want(archive, name, op, wanted, f"which {META} {mv} depends on")
            result = build_set(archive, name, version)
        except NoSet as e:
            first_error = first_error or e
            note(f"{META} {mv}: {e}")
            continue
        if first_error:
            note(f"taking {META} {mv} instead")
        return result
    raise first_error


def apt_cache_show(package):
    run = subprocess.run(["apt-cache", "show", package], capture_output=True, text=True)
    return run.stdout if run.returncode == 0 else ""


def saved_show(stanzas):
    """An apt-cache show that answers from saved stanzas."""
    by_package = {}
    for s in stanzas:
        by_package.setdefault(s.get("Package"), []).append(s)

    def show(package):
        return "\n\n".join("\n".join(f"{k}: {v}" for k, v in s.items())
                           for s in by_package.get(package, []))
    return show


def read_saved(paths):
    return [s for p in paths for s in parse_stanzas(open(p, encoding="utf-8").read())]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--image", help="this linux-image-<abi>-amd64 instead of linux-image-amd64's")
    ap.add_argument("--apt-cache-show", nargs="+", metavar="FILE",
                    help="saved apt-cache show outputs to read instead of asking apt-cache")
    args = ap.parse_args()
    archive = Archive(saved_show(read_saved(args.apt_cache_show)) if args.apt_cache_show else apt_cache_show)
    try:
        abi, chosen = choose(archive, args.image,
                             note=lambda line: print(f"kernel set: {line}", file=sys.stderr))
    except NoSet as e:
        print(f"kernel set: no consistent kernel set: {e}", file=sys.stderr)
        return 1
    print(f"abi {abi}")
    for role, package, version in chosen:
        print(f"{role} {package}={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
