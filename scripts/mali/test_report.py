#!/usr/bin/env python3
"""Tests of report.py's reading of Mesa's statistics and of its model of a frame's device
time, on a real run's output kept in tests/fixtures/mali/ (a Mali-G52 through Mesa 25.0.7's
Panfrost compiler, the mali tuning of 2026-11-29, with `edgesight kernels --launches
1920x1080,3840x2160`): every kernel gets its running variant's figures, the table is not
empty, a log without statistics is caught, the launches are read as listed, and the
model's arithmetic gives the figures worked out here by hand.

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
        # Midgard's Sobel, built in the same program and not launched.
        sobel = next(r for r in rows if r["kernel"] == "sobel3x3"
                     and r["defines"] == "-DNO_GRADIENTS -DNO_EDGE_MASK -DQUAD_ROWS=1")
        self.assertEqual((sobel["stats"]["inst"], sobel["stats"]["threads"]), (7208, 1))
        self.assertEqual((sobel["stats"]["spills"], sobel["stats"]["fills"]), (439, 1094))
        # The Optimized variant (no global offset) is the one launched, not the Default.
        corners = next(r for r in rows if r["kernel"] == "integral_corners")
        self.assertEqual(corners["stats"]["inst"], 5351)
        bayer = [r for r in rows if r["kernel"] == "luma_bayer"]
        self.assertEqual(sorted(r["defines"] for r in bayer),
                         ["", "-DSAMPLES_LE16", "-DSAMPLES_MIPI10", "-DSAMPLES_MIPI12"])
        self.assertEqual(report.summary(rows),
                         "25 launched kernels: 18 at 2 threads, 7 at 1 thread; "
                         "21 without spills, 4 with")

    def test_the_table_has_a_row_per_kernel_and_bifrosts_units(self):
        lines, kernels = load()
        rows = report.rows_of(kernels, report.parse_log(lines)[0], "g52")
        text = report.table(rows, markdown=True).splitlines()
        self.assertEqual(len(text), 2 + len(rows))
        self.assertIn("| inst | cycles | arith | texture | vary | ldst | threads | spills | fills |",
                      text[0])
        self.assertIn("| sobel3x3_quad | sobel -DNO_GRADIENTS -DNO_EDGE_MASK -DQUAD_ROWS=1 | yes "
                      "| 706 | 22.2 | 22.2 | 0.0 | 0.0 | 19.0 | 2 | 0 | 0 |", "\n".join(text))

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


def fixture_model(size=0, board="g52"):
    lines, kernels = load()
    rows = report.rows_of(kernels, report.parse_log(lines)[0], "g52")
    _, frame = report.launch_sets(kernels)[size]
    return report.model_frame(frame, report.stats_by_program(rows), report.BOARDS[board])


class Launches(unittest.TestCase):
    def test_each_size_lists_both_frames_launches_in_order(self):
        _, kernels = load()
        sets = report.launch_sets(kernels)
        self.assertEqual([(t, f["width"], f["height"], f["bytes_moved"]) for t, f in sets],
                         [("mali", 1920, 1080, 9472800), ("mali", 3840, 2160, 37972800)])
        frames = sets[0][1]["frames"]
        self.assertEqual([f["gradient_sampled"] for f in frames], [True, False])
        # The shim runs nothing: both frames' results were refused, and listed all the same.
        self.assertTrue(all("impossible" in f["refused"] for f in frames))
        plain = [(l["kernel"], l["global"], l["local"]) for l in frames[1]["launches"]]
        self.assertEqual(plain, [
            ("histogram_count", [1024], [64]),
            ("sobel3x3_quad", [480, 1080], [16, 4]),
            ("integral_tiles", [128, 68], [64, 1]),
            ("integral_left_rows", [1088, 4], [64, 1]),
            ("integral_tops", [512, 4], [64, 1]),
            ("integral_corners", [128, 5], [64, 1]),
            ("region_sums_items", [256], [64]),
        ])
        # The health stage's frame counts the magnitude's histogram after Sobel.
        self.assertEqual([l["kernel"] for l in frames[0]["launches"]][:3],
                         ["histogram_count", "sobel3x3_quad", "histogram_count"])

    def test_a_file_without_launches_has_none(self):
        self.assertEqual(report.launch_sets({"tunings": [{"tuning": "mali", "programs": []}]}), [])


class Model(unittest.TestCase):
    # Sobel's Optimized variant on the G52, from the fixture's log.
    SOBEL = ("715 inst, 557 tuples, 108 clauses, 22.250000 cycles, 22.250000 arith, "
             "0.000000 texture, 0.000000 vary, 19.000000 ldst, 478 quadwords, 2 threads, "
             "0 preloads, 2 loops, 0:0 spills:fills")

    def test_bifrost_arithmetic_scales_to_the_cores_lanes(self):
        s = report.parse_stats(self.SOBEL)
        # Mesa's 24 lanes against the G52 2EE's 16: 22.25 x 1.5 = 33.375 clocks, above the
        # 19 load/store messages; coalesced, 19 / 8.
        self.assertEqual(report.item_cycles(s, report.BOARDS["g52"]),
                         {"mesa": ("arith", 33.375), "coalesced": ("arith", 33.375)})
        # The G31's one 4-wide engine: 22.25 x 6.
        self.assertEqual(report.item_cycles(s, report.BOARDS["g31"])["mesa"], ("arith", 133.5))
        bound = report.parse_stats("5 inst, 3.0 cycles, 1.0 arith, 0.0 texture, 0.0 vary, "
                                   "3.0 ldst, 2 threads, 0 loops, 0:0 spills:fills")
        self.assertEqual(report.item_cycles(bound, report.BOARDS["g52"]),
                         {"mesa": ("ldst", 3.0), "coalesced": ("arith", 1.5)})

    def test_valhall_units_on_the_g610(self):
        s = report.parse_stats("706 inst, 22.25 cycles, 22.2 fma, 3.1 cvt, 0.5 sfu, 1.0 v, "
                               "0.0 t, 40.0 ls, 300 quadwords, 2 threads, 1 loops, 0:0 spills:fills")
        # Mesa's reference core is the G610's own 64 lanes: no scaling; 40 / 16 coalesced.
        self.assertEqual(report.item_cycles(s, report.BOARDS["g610"]),
                         {"mesa": ("ls", 40.0), "coalesced": ("fma", 22.2)})

    def test_a_launch_is_its_work_items_times_clocks_over_cores_and_clock(self):
        s = report.parse_stats(self.SOBEL)
        launch = {"kernel": "sobel3x3_quad", "global": [480, 1080], "local": [16, 4]}
        m = report.model_launch(launch, s, report.BOARDS["g52"])
        # 518400 work-items x 33.375 clocks / 1 core / 800 MHz.
        self.assertEqual((m["items"], m["bound"], m["us"]), (518400, "arith", 21627.0))
        valhall = report.parse_stats("706 inst, 40.0 cycles, 22.2 fma, 3.1 cvt, 0.5 sfu, "
                                     "0.0 v, 0.0 t, 40.0 ls, 2 threads, 0 loops, 0:0 spills:fills")
        g610 = report.model_launch(launch, valhall, report.BOARDS["g610"])
        # 518400 x 40 load/store clocks over 4 cores at 1000 MHz; 40 / 16 coalesced leaves
        # the 22.2 FMA clocks.
        self.assertEqual((g610["us"], g610["bound"]), (5184.0, "ls"))
        self.assertAlmostEqual(g610["us_coalesced"], 518400 * 22.2 / 4 / 1000)

    def test_the_g52_frame_at_1080p_against_its_floor(self):
        m = fixture_model(0)
        us = {l["kernel"]: l["us"] for l in m["launches"]}
        # Load/store bound but Sobel: work-items x Mesa's clocks / 800 MHz.
        self.assertEqual(us, {
            "histogram_count": 1024 * 25 / 800,
            "sobel3x3_quad": 21627.0,
            "integral_tiles": 128 * 68 * 1975 / 800,
            "integral_left_rows": 1088 * 4 * 118 / 800,
            "integral_tops": 512 * 4 * 202 / 800,
            "integral_corners": 128 * 5 * 327 / 800,
            "region_sums_items": 256 * 533 / 800,
        })
        # 32 + 21627 + 21488 + 641.92 + 517.12 + 261.6 + 170.56
        self.assertAlmostEqual(m["total_us"], 44738.2, places=6)
        # 9472800 bytes at 5 GB/s, and twice that with 7 launches of 30 µs.
        self.assertAlmostEqual(m["floor_us"], 1894.56, places=6)
        self.assertAlmostEqual(m["goal_us"], 2 * 1894.56 + 7 * 30, places=6)
        self.assertFalse(m["met"])
        self.assertEqual(m["looping"], 7)
        self.assertEqual((m["health_extra_launches"], m["health_extra_us"]), (1, 32.0))

    def test_the_tables(self):
        m = fixture_model(1)
        text = report.model_table(m, report.BOARDS["g52"], markdown=True).splitlines()
        self.assertEqual(text[0], "| kernel | work-items | bound | clk/item | loops | threads "
                                  "| µs | µs coalesced |")
        self.assertEqual(text[3], "| sobel3x3_quad | 2073600 | arith | 33.38 | 2 | 2 | >=86508 "
                                  "| >=86508 |")
        self.assertIn("3840x2160 on Mali-G52 2EE (RK3566): modelled ", "\n".join(text))
        summary = report.summary_table([(report.BOARDS["g52"], m)], markdown=True).splitlines()
        self.assertEqual(len(summary), 3)
        self.assertTrue(summary[2].startswith("| Mali-G52 2EE (RK3566) | 3840x2160 | 7 (7) | "),
                        summary[2])
        self.assertTrue(summary[2].endswith("| 7.59 | 15.40 | 23.0 | not met |"), summary[2])

    def test_a_launch_without_statistics_is_an_error(self):
        _, kernels = load()
        _, frame = report.launch_sets(kernels)[0]
        with self.assertRaises(KeyError):
            report.model_frame(frame, {}, report.BOARDS["g52"])


if __name__ == "__main__":
    unittest.main()
