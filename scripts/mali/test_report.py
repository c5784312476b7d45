#!/usr/bin/env python3
"""Tests of report.py's reading of Mesa's statistics, on a real run's output kept in
tests/fixtures/mali/ (a Mali-G52 through Mesa 25.0.7's Panfrost compiler, the mali tuning
of 2026-11-29): every kernel gets its running variant's figures, the table is not empty,
and a log without statistics is caught.

    python3 scripts/mali/test_report.py
"""
import json
import pathlib
import sys
import unittest

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE.parent.parent / "tests/fixtures/mali"
sys.path.insert(0, str(HERE))
import report  # noqa: E402


def load():
    lines = (FIXTURES / "g52-mali.log").read_text().splitlines()
    kernels = json.loads((FIXTURES / "g52-mali.json").read_text())
    return lines, kernels


class Parsing(unittest.TestCase):
    def test_every_launched_kernel_has_its_optimized_variants_figures(self):
        lines, kernels = load()
        stats, unnamed = report.parse_log(lines)
        self.assertEqual(unnamed, 0)
        rows = report.rows_of(kernels, stats, "g52")
        self.assertEqual(len(rows), sum(len(p["kernels"]) for p in kernels["tunings"][0]["programs"]))
        launched = [r for r in rows if r["launched"]]
        self.assertEqual(len(launched), 25)
        self.assertTrue(all(r["stats"] for r in launched))
        sobel = next(r for r in rows if r["kernel"] == "sobel3x3"
                     and r["defines"] == "-DNO_GRADIENTS -DNO_EDGE_MASK")
        self.assertEqual((sobel["stats"]["inst"], sobel["stats"]["threads"]), (7208, 1))
        self.assertEqual((sobel["stats"]["spills"], sobel["stats"]["fills"]), (439, 1094))
        # The Optimized variant (no global offset) is the one launched, not the Default.
        corners = next(r for r in rows if r["kernel"] == "integral_corners")
        self.assertEqual(corners["stats"]["inst"], 5351)
        bayer = [r for r in rows if r["kernel"] == "luma_bayer"]
        self.assertEqual(sorted(r["defines"] for r in bayer),
                         ["", "-DSAMPLES_LE16", "-DSAMPLES_MIPI10", "-DSAMPLES_MIPI12"])
        self.assertEqual(report.summary(rows),
                         "25 launched kernels: 15 at 2 threads, 10 at 1 thread; "
                         "18 without spills, 7 with")

    def test_the_table_has_a_row_per_kernel_and_bifrosts_units(self):
        lines, kernels = load()
        rows = report.rows_of(kernels, report.parse_log(lines)[0], "g52")
        text = report.table(rows, markdown=True).splitlines()
        self.assertEqual(len(text), 2 + len(rows))
        self.assertIn("| inst | cycles | arith | texture | vary | ldst | threads | spills | fills |",
                      text[0])
        self.assertIn("| sobel3x3 | sobel -DNO_GRADIENTS -DNO_EDGE_MASK | yes | 7208 |", "\n".join(text))

    def test_statistics_without_a_named_kernel_or_program_are_counted(self):
        stats, unnamed = report.parse_log(["SHADER-DB: MESA_SHADER_KERNEL shader: 5 inst, "
                                           "1.0 cycles, 2 threads, 0 loops, 0:0 spills:fills"])
        self.assertEqual((stats, unnamed), ({}, 1))

    def test_a_log_without_statistics_leaves_every_kernel_without_figures(self):
        _, kernels = load()
        rows = report.rows_of(kernels, {}, "g52")
        self.assertTrue(rows and not any(r["stats"] for r in rows))

    def test_midgard_lines_have_their_own_columns(self):
        s = report.parse_stats("512 inst, 140 bundles, 400 quadwords, 12 registers, "
                               "1 threads, 2 loops, 8:20 spills:fills")
        rows = [{"kernel": "k", "file": "f.cl", "defines": "", "launched": True,
                 "work_group_size": 64, "private_bytes": 0, "stats": s}]
        head = report.table(rows, markdown=True).splitlines()[0]
        self.assertIn("| inst | bundles | registers | threads | spills | fills |", head)
        self.assertEqual(report.summary(rows),
                         "1 launched kernels: 1 at 1 thread; 0 without spills, 1 with")

    def test_valhall_lines(self):
        s = report.parse_stats("706 inst, 22.25 cycles, 22.2 fma, 3.1 cvt, 0.5 sfu, 1.0 v, "
                               "0.0 t, 19.0 ls, 300 quadwords, 2 threads, 1 loops, 3:7 spills:fills")
        self.assertEqual((s["inst"], s["ls"], s["threads"], s["spills"], s["fills"]),
                         (706, 19.0, 2, 3, 7))


if __name__ == "__main__":
    unittest.main()
