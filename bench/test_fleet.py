#!/usr/bin/env python3
"""A quick run of fleet.py (three boards, a 2 s scrape interval, both phases, under a
minute) checking its tables and figures against what the boards export, and that it
leaves no process behind.

    python3 bench/test_fleet.py [--edgesight target/release/edgesight]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
# up, scrape_duration_seconds, scrape_samples_scraped, scrape_samples_post_metric_relabeling
# and scrape_series_added: the series Prometheus adds to each target's.
SYNTHETIC = 5
BOARDS = 3
PULL_ROWS = [
    "boards up / started", "scrapes failed in the window", "scrape_samples_scraped per board", "head series / boards",
    "bytes per scrape, default tier", "bytes per scrape, detail tier",
    "Prometheus RSS (/proc): baseline, with boards", "Prometheus go heap in use: baseline, with boards",
    "scrape_duration_seconds median / p99 / max", "daemon CPU per board",
    "daemon RSS / anonymous / PSS per board",
]
PUSH_ROWS = [
    "agents", "boards on the receiver (by board label)", "receiver head series / boards",
    "receiver RSS: baseline, with boards", "one board's own agent: RSS / PSS / heap in use",
    "shared agents, per board: RSS / PSS", "remote-write bytes per sample",
]


def rows(text, heading):
    """The first column of the Markdown table after `heading`."""
    lines = text.split(heading, 1)[1].splitlines()
    out = []
    for line in lines[3:]:
        if not line.startswith("|"):
            break
        out.append(line.split("|")[1].strip())
    return out


class Fleet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "fleet.json")
            run = subprocess.run(
                [sys.executable, str(HERE / "fleet.py"), "--boards", str(BOARDS),
                 "--interval", "2", "--baseline-seconds", "2", "--settle", "5", "--seconds", "6",
                 "--own-agents", "1", "--boards-per-agent", "2", "--base-port", "23100",
                 "--edgesight", EDGESIGHT, "--json", path],
                capture_output=True, text=True, timeout=120)
            if run.returncode != 0:
                raise AssertionError(f"fleet.py failed:\n{run.stdout}\n{run.stderr}")
            cls.stdout = run.stdout
            with open(path) as f:
                cls.out = json.load(f)

    def test_tables_have_every_row(self):
        pull = rows(self.stdout, f"### Pull: one Prometheus scraping {BOARDS} boards")
        push = rows(self.stdout, f"### Push: agents into a receiver, {BOARDS} boards")
        for row in PULL_ROWS:
            self.assertIn(row, pull)
        for row in PUSH_ROWS:
            self.assertIn(row, push)

    def test_pull_scrapes_every_board_whole(self):
        pull, per_board = self.out["pull"], self.out["bytes"]["default"]["samples"]
        self.assertEqual(pull["up"], BOARDS)
        self.assertEqual(pull["failed_scrapes"], 0)
        self.assertGreaterEqual(pull["scrapes"], 2 * BOARDS)
        self.assertEqual(pull["samples_scraped"], {"min": per_board, "max": per_board})
        self.assertEqual(pull["head_series"], BOARDS * (per_board + SYNTHETIC))
        self.assertGreater(pull["scrape_duration"]["samples"], BOARDS)
        self.assertGreater(pull["with_boards"]["heap_inuse"], 0)

    def test_detail_tier_is_larger(self):
        sizes = self.out["bytes"]
        self.assertGreater(sizes["detail"]["samples"], 2 * sizes["default"]["samples"])
        for tier in ("default", "detail"):
            self.assertLess(sizes[tier]["gzip"], sizes[tier]["bytes"])

    def test_push_brings_every_board_with_its_label(self):
        push, per_board = self.out["push"], self.out["bytes"]["default"]["samples"]
        self.assertEqual((push["agents"], push["own_agents"], push["shared_agents"]), (2, 1, 1))
        self.assertEqual(push["boards_on_receiver"], BOARDS)
        self.assertEqual(push["head_series"], BOARDS * (per_board + SYNTHETIC))
        self.assertEqual(push["own_agent"]["active_series"], per_board + SYNTHETIC)
        self.assertEqual(push["rw_failed"], 0)
        # A remote-write sample (snappy protobuf, labels sent each time) costs some bytes,
        # never hundreds.
        self.assertGreater(push["rw_bytes_per_sample"], 1)
        self.assertLess(push["rw_bytes_per_sample"], 100)

    def test_no_process_left(self):
        self.assertGreaterEqual(len(self.out["pids"]), BOARDS + 4)
        left = [pid for pid in self.out["pids"] if os.path.exists(f"/proc/{pid}")]
        self.assertEqual(left, [])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--edgesight", default="target/release/edgesight")
    args, rest = parser.parse_known_args()
    EDGESIGHT = args.edgesight
    unittest.main(argv=[sys.argv[0], *rest])
