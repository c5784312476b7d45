#!/usr/bin/env python3
"""Tests of the VM kernel's package choice (kernel_set.py) on saved `apt-cache show` outputs,
with no network: the archive as it was on 2026-11-29 (headers at 6.1.192-2, kbuild rebuilt at
6.1.192-3), an ABI bump on top of it, and packages missing from it.

    python3 tests/vm/test_kernel_set.py
"""
import pathlib
import shutil
import subprocess
import sys
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import kernel_set as ks  # noqa: E402

TODAY = ks.read_saved([HERE / "fixtures/apt-cache-show-2026-11-29.txt"])
# A later security release with a new ABI (6.1.0-57), as the archive serves both suites.
BUMP = ks.read_saved([HERE / "fixtures/apt-cache-show-abi-bump.txt"])


def without(stanzas, package, version=None):
    return [s for s in stanzas
            if not (s["Package"] == package and version in (None, s["Version"]))]


def choose(stanzas, image=None):
    notes = []
    abi, chosen = ks.choose(ks.Archive(ks.saved_show(stanzas)), image, notes.append)
    return abi, [f"{role} {p}={v}" for role, p, v in chosen], notes


def fails(stanzas, image=None):
    try:
        choose(stanzas, image)
    except ks.NoSet as e:
        return str(e)
    raise AssertionError("a set was chosen where none is consistent")


SET_56 = ["image linux-image-6.1.0-56-amd64=6.1.192-2",
          "build linux-headers-6.1.0-56-amd64=6.1.192-2",
          "build linux-headers-6.1.0-56-common=6.1.192-2",
          "build linux-kbuild-6.1=6.1.192-3",
          "build v4l2loopback-dkms=0.12.7-2"]


class TodaysArchive(unittest.TestCase):
    def test_kbuild_is_taken_at_the_rebuild_the_headers_accept(self):
        abi, chosen, notes = choose(TODAY)
        self.assertEqual(abi, "6.1.0-56-amd64")
        self.assertEqual(chosen, SET_56)
        self.assertEqual(notes, [])

    def test_the_old_rule_of_the_headers_version_for_every_part_finds_no_kbuild(self):
        # What tests/vm/run.sh asked for before: kbuild at the headers' own version.
        archive = ks.Archive(ks.saved_show(TODAY))
        self.assertIsNone(archive.newest("linux-kbuild-6.1", "=", "6.1.192-2"))

    def test_an_image_named_by_the_user_gets_its_own_abis_headers(self):
        abi, chosen, _ = choose(TODAY, "linux-image-6.1.0-50-amd64")
        self.assertEqual(abi, "6.1.0-50-amd64")
        self.assertEqual(chosen, ["image linux-image-6.1.0-50-amd64=6.1.176-1",
                                  "build linux-headers-6.1.0-50-amd64=6.1.176-1",
                                  "build linux-headers-6.1.0-50-common=6.1.176-1",
                                  "build linux-kbuild-6.1=6.1.192-3",
                                  "build v4l2loopback-dkms=0.12.7-2"])

    def test_an_image_the_archive_lacks_is_named(self):
        self.assertEqual(
            fails(TODAY, "linux-image-6.1.0-49-amd64"),
            "linux-image-6.1.0-49-amd64, named by --image: the archive has none")


class AbiBump(unittest.TestCase):
    def test_the_new_abi_is_taken_whole(self):
        abi, chosen, notes = choose(TODAY + BUMP)
        self.assertEqual(abi, "6.1.0-57-amd64")
        self.assertEqual(chosen, ["image linux-image-6.1.0-57-amd64=6.1.197-1",
                                  "build linux-headers-6.1.0-57-amd64=6.1.197-1",
                                  "build linux-headers-6.1.0-57-common=6.1.197-1",
                                  "build linux-kbuild-6.1=6.1.197-1",
                                  "build v4l2loopback-dkms=0.12.7-2"])
        self.assertEqual(notes, [])

    def test_headers_not_yet_published_fall_back_to_the_abi_before(self):
        abi, chosen, notes = choose(without(TODAY + BUMP, "linux-headers-6.1.0-57-amd64"))
        self.assertEqual(abi, "6.1.0-56-amd64")
        # The newer kbuild still meets the older headers' ">=".
        self.assertEqual(chosen, SET_56[:3] + ["build linux-kbuild-6.1=6.1.197-1", SET_56[4]])
        self.assertEqual(notes, [
            "linux-image-amd64 6.1.197-1: linux-headers-6.1.0-57-amd64 (for "
            "linux-image-6.1.0-57-amd64 6.1.197-1): not in the archive; linux-image-amd64 "
            "names 6.1.0-50-amd64, 6.1.0-56-amd64",
            "taking linux-image-amd64 6.1.192-2 instead"])

    def test_headers_rebuilt_alone_are_the_same_abi(self):
        rebuilt = [dict(s, Version="6.1.197-2") if s["Package"] == "linux-headers-6.1.0-57-amd64"
                   else s for s in BUMP]
        _, chosen, _ = choose(TODAY + rebuilt)
        self.assertEqual(chosen[:2], ["image linux-image-6.1.0-57-amd64=6.1.197-1",
                                      "build linux-headers-6.1.0-57-amd64=6.1.197-2"])


class MissingPackages(unittest.TestCase):
    def test_a_missing_common_part_falls_back_to_the_other_suite(self):
        abi, chosen, notes = choose(without(TODAY, "linux-headers-6.1.0-56-common"))
        self.assertEqual(abi, "6.1.0-50-amd64")
        self.assertEqual(chosen[2], "build linux-headers-6.1.0-50-common=6.1.176-1")
        self.assertEqual(notes[0],
                         "linux-image-amd64 6.1.192-2: linux-headers-6.1.0-56-common (= 6.1.192-2),"
                         " which linux-headers-6.1.0-56-amd64 6.1.192-2 depends on: the archive "
                         "has none")

    def test_a_kbuild_too_old_for_the_headers_falls_back(self):
        abi, chosen, _ = choose(without(TODAY, "linux-kbuild-6.1", "6.1.192-3"))
        self.assertEqual(abi, "6.1.0-50-amd64")
        self.assertEqual(chosen[3], "build linux-kbuild-6.1=6.1.176-1")

    def test_no_consistent_set_names_the_package_the_relation_and_what_was_found(self):
        security_only = [s for s in TODAY if s["Version"] != "6.1.176-1"]
        self.assertEqual(
            fails(without(security_only, "linux-kbuild-6.1", "6.1.192-3")
                  + [s for s in TODAY if s["Package"] == "linux-kbuild-6.1"
                     and s["Version"] == "6.1.176-1"]),
            "linux-kbuild-6.1 (>= 6.1.192-2), which linux-headers-6.1.0-56-amd64 6.1.192-2 "
            "depends on: the archive has 6.1.176-1")

    def test_the_image_the_meta_package_names_must_be_there(self):
        self.assertEqual(
            fails(without([s for s in TODAY if s["Version"] != "6.1.176-1"],
                          "linux-image-6.1.0-56-amd64")),
            "linux-image-6.1.0-56-amd64 (= 6.1.192-2), which linux-image-amd64 6.1.192-2 "
            "depends on: the archive has none")

    def test_v4l2loopback_missing_is_named(self):
        self.assertEqual(fails(without(TODAY, "v4l2loopback-dkms")),
                         "v4l2loopback-dkms, which the VM test builds: the archive has none")

    def test_empty_package_lists_say_so(self):
        self.assertEqual(fails([]),
                         "linux-image-amd64: not in the package lists (apt-get update?)")


class Versions(unittest.TestCase):
    PAIRS = [("6.1.192-2", "6.1.192-3"), ("6.1.192-3", "6.1.197-1"), ("6.1.176-1", "6.1.192-2"),
             ("1.0~rc1-1", "1.0-1"), ("1:0.9-1", "2.0-1"), ("4.3~", "4.3"), ("0.120+deb8u2", "0.120"),
             ("6.1.192+2", "6.1.192-2"), ("2.1.0.0", "2.1"), ("1.0a-1", "1.0-1"), ("10-1", "9-1"),
             ("1.0-1", "1.0-1"), ("0.12.7-2", "0.12.7-2+b1"), ("1.01-1", "1.1-1")]

    def test_order_is_dpkgs(self):
        for a, b in self.PAIRS:
            for x, y in ((a, b), (b, a)):
                c = ks.compare(x, y)
                ours = "lt" if c < 0 else "eq" if c == 0 else "gt"
                for op in ("lt", "eq", "gt"):
                    dpkg = subprocess.run(["dpkg", "--compare-versions", x, op, y]).returncode == 0
                    self.assertEqual(dpkg, ours == op, f"{x} {op} {y}")

    def test_relations(self):
        self.assertTrue(ks.satisfies("6.1.192-3", ">=", "6.1.192-2"))
        self.assertFalse(ks.satisfies("6.1.192-3", "=", "6.1.192-2"))
        self.assertTrue(ks.satisfies("6.1.176-1", "<<", "6.1.192-2"))
        self.assertFalse(ks.satisfies("6.1.192-2", ">>", "6.1.192-2"))


class CommandLine(unittest.TestCase):
    def run_cli(self, *args):
        return subprocess.run([sys.executable, str(HERE / "kernel_set.py"), *args],
                              capture_output=True, text=True)

    def test_prints_one_package_a_line(self):
        r = self.run_cli("--apt-cache-show", str(HERE / "fixtures/apt-cache-show-2026-11-29.txt"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["abi 6.1.0-56-amd64"] + SET_56)

    def test_failure_is_one_line_and_status_1(self):
        r = self.run_cli("--apt-cache-show", str(HERE / "fixtures/apt-cache-show-2026-11-29.txt"),
                         "--image", "linux-image-6.1.0-49-amd64")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.stderr.splitlines(),
                         ["kernel set: no consistent kernel set: linux-image-6.1.0-49-amd64, named "
                          "by --image: the archive has none"])


if __name__ == "__main__":
    if shutil.which("dpkg") is None:
        sys.exit("test_kernel_set: dpkg is needed to check the version order against it")
    unittest.main()
