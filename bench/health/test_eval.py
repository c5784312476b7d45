#!/usr/bin/env python3
"""Tests of eval.py's log parsing and scoring on synthetic labels and log lines.

    python3 bench/health/test_eval.py
"""
import pathlib
import sys
import tomllib
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import eval as ev  # noqa: E402  (bench/health/eval.py)
import motion_score  # noqa: E402

TS = "2026-11-23T19:00:00.123456Z"


def labels(name, kind, frames, tamper=None, fps=30):
    """labels.json as make_sequences.py writes it, reduced to what scoring reads."""
    if tamper is None:
        normal = [[0, frames]]
    else:
        begin, end = tamper
        normal = [[0, begin]] + ([[end, frames]] if end is not None else [])
        tamper = {"begin": begin, "established": begin, "ending": end, "end": end}
    return {"name": name, "kind": kind, "frames": frames, "fps": fps, "tamper": tamper,
            "normal": normal}


def log(*events):
    """Log lines as the daemon writes them: (event, camera, kind, frame)."""
    lines = []
    for event, camera, kind, frame in events:
        if event == "tampered":
            lines.append(f"{TS}  WARN camera health: tampered camera={camera} kind={kind} "
                         f"frame={frame}")
        elif event == "ok":
            lines.append(f"{TS}  INFO camera health: ok again camera={camera} kind={kind} "
                         f"frame={frame}")
        else:
            lines.append(f"{TS}  INFO camera health: baseline learned camera={camera} "
                         f"frame={frame}")
    return ev.parse_log(lines)[0]


COVERED = labels("subset-covered-coins", "covered", 195, (120, None))
FROZEN = labels("subset-frozen-chelsea", "frozen", 210, (120, 180))
LIGHT = labels("subset-light-camera", "nuisance", 180)


class ParseTest(unittest.TestCase):
    def test_the_three_events(self):
        self.assertEqual(
            ev.parse_line(f"{TS}  WARN camera health: tampered camera=subset-covered-coins "
                          "kind=covered frame=161"),
            ("WARN", {"event": "tampered", "camera": "subset-covered-coins",
                      "kind": "covered", "roi": None, "frame": 161}))
        self.assertEqual(
            ev.parse_line(f"{TS}  INFO camera health: ok again camera=a kind=frozen frame=7"),
            ("INFO", {"event": "ok", "camera": "a", "kind": "frozen", "roi": None, "frame": 7}))
        self.assertEqual(
            ev.parse_line(f"{TS}  INFO camera health: baseline learned camera=a frame=90"),
            ("INFO", {"event": "baseline", "camera": "a", "kind": None, "roi": None,
                      "frame": 90}))
        self.assertEqual(
            ev.parse_line(f"{TS}  INFO motion began camera=a roi=door frame=33"),
            ("INFO", {"event": "motion_began", "camera": "a", "kind": None, "roi": "door",
                      "frame": 33}))

    def test_colours_quotes_spans_and_field_order(self):
        line = ("\x1b[2m2026-11-23T19:00:00Z\x1b[0m \x1b[33m WARN\x1b[0m es{camera=x}: "
                'camera health: tampered frame=12 kind=moved camera="front door"')
        self.assertEqual(ev.parse_line(line), ("WARN", {
            "event": "tampered", "camera": "front door", "kind": "moved", "roi": None,
            "frame": 12}))

    def test_other_lines(self):
        self.assertEqual(ev.parse_line(f"{TS}  INFO camera opened camera=a source=x"),
                         ("INFO", None))
        # a health message without its frame is not an event
        self.assertEqual(ev.parse_line(f"{TS}  WARN camera health: tampered camera=a"),
                         ("WARN", None))
        events, errors = ev.parse_log([
            f"{TS}  INFO serving listen=127.0.0.1:1",
            f"{TS} ERROR camera a failed: no such file",
            f"{TS}  WARN camera health: tampered camera=a kind=covered frame=3",
        ])
        self.assertEqual(errors, [f"{TS} ERROR camera a failed: no such file"])
        self.assertEqual(events, [{"event": "tampered", "camera": "a", "kind": "covered",
                                   "roi": None, "frame": 3}])


class ScoreTest(unittest.TestCase):
    def test_detected(self):
        r = ev.score_sequence(COVERED, log(("baseline", COVERED["name"], None, 60),
                                           ("tampered", COVERED["name"], "covered", 150)))
        self.assertEqual((r["detected_frame"], r["delay_s"], r["missed"], r["late"]),
                         (150, 1.0, False, False))
        self.assertEqual((r["baseline_frame"], r["false_alarms"], r["normal_frames"]),
                         (60, [], 120))
        self.assertEqual(ev.check_failures([r]), [])

    def test_missed(self):
        r = ev.score_sequence(COVERED, [])
        self.assertEqual((r["detected_frame"], r["delay_s"], r["missed"], r["late"]),
                         (None, None, True, None))
        self.assertEqual(ev.check_failures([r]),
                         ["subset-covered-coins: covered MISSED (tamper from frame 120)"])

    def test_late_after_two_seconds(self):
        on_time = ev.score_sequence(COVERED, log(("tampered", COVERED["name"], "covered", 180)))
        self.assertEqual((on_time["delay_s"], on_time["late"]), (2.0, False))
        late = ev.score_sequence(COVERED, log(("tampered", COVERED["name"], "covered", 181)))
        self.assertEqual((late["delay_s"], late["late"], late["missed"]), (2.033, True, False))
        self.assertEqual(ev.check_failures([late]), [
            "subset-covered-coins: covered detected 2.03 s after its begin (frame 181), "
            "later than 2.0 s"])

    def test_false_alarm_in_normal_footage_and_other_kinds(self):
        name = COVERED["name"]
        r = ev.score_sequence(COVERED, log(("tampered", name, "covered", 119),
                                           ("ok", name, "covered", 119),
                                           ("tampered", name, "moved", 130),
                                           ("tampered", name, "covered", 140)))
        self.assertEqual(r["false_alarms"], [{"kind": "covered", "frame": 119}])
        self.assertEqual((r["detected_frame"], r["other_kinds"]), (140, ["moved"]))
        self.assertEqual(ev.check_failures([r]), [
            "subset-covered-coins: false alarm, covered at frame 119 (normal footage)"])

    def test_events_past_the_seam_are_ignored(self):
        name = LIGHT["name"]
        # 185 is image 5 of the second pass: not normal footage of the first
        r = ev.score_sequence(LIGHT, log(("tampered", name, "overexposed", 185),
                                         ("tampered", name, "frozen", 180)))
        self.assertEqual((r["false_alarms"], r["events_past_seam"]), ([], 2))
        r = ev.score_sequence(LIGHT, log(("tampered", name, "overexposed", 179)))
        self.assertEqual(r["false_alarms"], [{"kind": "overexposed", "frame": 179}])

    def test_a_tamper_that_ends_and_clears(self):
        name = FROZEN["name"]
        r = ev.score_sequence(FROZEN, log(("tampered", name, "frozen", 100),
                                          ("ok", name, "frozen", 110),
                                          ("tampered", name, "frozen", 126),
                                          ("ok", name, "frozen", 183),
                                          ("tampered", name, "frozen", 200)))
        self.assertEqual((r["detected_frame"], r["delay_s"]), (126, 0.2))
        self.assertEqual((r["cleared_frame"], r["cleared_after_end_s"]), (183, 0.1))
        # raised before the begin and again after the end: normal footage, false alarms
        self.assertEqual(r["false_alarms"], [{"kind": "frozen", "frame": 100},
                                             {"kind": "frozen", "frame": 200}])
        # cleared before the end (as the picture moves again): negative
        r = ev.score_sequence(FROZEN, log(("tampered", name, "frozen", 126),
                                          ("ok", name, "frozen", 177)))
        self.assertEqual(r["cleared_after_end_s"], -0.1)
        # never cleared
        r = ev.score_sequence(FROZEN, log(("tampered", name, "frozen", 126)))
        self.assertEqual((r["cleared_frame"], r["cleared_after_end_s"]), (None, None))

    def test_own_kind_after_the_end_is_no_detection(self):
        name = FROZEN["name"]
        r = ev.score_sequence(FROZEN, log(("tampered", name, "frozen", 180)))
        self.assertEqual((r["missed"], r["false_alarms"]),
                         (True, [{"kind": "frozen", "frame": 180}]))

    def test_other_cameras_are_not_mixed_up(self):
        events = log(("tampered", FROZEN["name"], "covered", 10),
                     ("tampered", COVERED["name"] + "-2", "covered", 100),
                     ("tampered", "subset-covered", "covered", 121),
                     ("tampered", COVERED["name"] + "-2", "covered", 122),
                     ("tampered", COVERED["name"], "covered", 123))
        r = ev.score_sequence(COVERED, events)
        self.assertEqual((r["detected_frame"], r["false_alarms"]), (123, []))
        r = ev.score_sequence(FROZEN, events)
        self.assertEqual((r["missed"], r["false_alarms"]),
                         (True, [{"kind": "covered", "frame": 10}]))


class ApproachTest(unittest.TestCase):
    def test_normal_and_tamper_extremes_skip_learning_and_other_frames(self):
        samples = [(10, None, None), (50, 0.97, 0.02), (110, 0.9, 0.1), (125, 0.3, 0.8),
                   (150, 0.5, 0.6), (190, 0.2, 0.95), (-1, None, None)]
        got = ev.closest_approach(COVERED, samples)
        self.assertEqual(got, {"normal_min_sharpness": 0.9, "normal_max_scene_change": 0.1,
                               "tamper_min_sharpness": 0.2, "tamper_max_scene_change": 0.95,
                               "normal_min_light": None})
        # the light, on normal footage only
        got = ev.closest_approach(COVERED, [(50, 1.0, 0.0, 0.7), (110, 1.0, 0.0, 0.9),
                                            (150, 0.5, 0.6, 0.2)])
        self.assertEqual(got["normal_min_light"], 0.7)
        # a tamper that ends: frames from `ending` on are not the tamper's
        got = ev.closest_approach(FROZEN, [(130, 0.8, 0.3), (185, 0.1, 0.9)])
        self.assertEqual(got, {"normal_min_sharpness": 0.1, "normal_max_scene_change": 0.9,
                               "tamper_min_sharpness": 0.8, "tamper_max_scene_change": 0.3,
                               "normal_min_light": None})
        got = ev.closest_approach(LIGHT, [(5, None, None)])
        self.assertEqual(got, {"normal_min_sharpness": None, "normal_max_scene_change": None,
                               "tamper_min_sharpness": None, "tamper_max_scene_change": None,
                               "normal_min_light": None})


class SummaryTest(unittest.TestCase):
    def test_per_kind(self):
        other = labels("covered-coffee", "covered", 672, (300, 522))
        events = log(("tampered", COVERED["name"], "covered", 135),   # 0.5 s
                     ("tampered", "covered-coffee", "covered", 390),  # 3.0 s, late
                     ("tampered", LIGHT["name"], "covered", 90),      # false alarm
                     ("tampered", LIGHT["name"], "moved", 91))        # false alarm
        results = [ev.score_sequence(l, events) for l in (COVERED, other, FROZEN, LIGHT)]
        s = ev.summarize(results)
        # normal frames: 120 + (300 + 150) + (120 + 30) + 180 = 900, 30 s
        self.assertEqual(s["normal_seconds"], 30.0)
        self.assertEqual(s["kinds"]["covered"], {
            "sequences": 2, "detected": 2, "median_delay_s": 1.75, "max_delay_s": 3.0,
            "late": 1, "missed": 0, "false_alarms": 1, "false_alarms_per_hour": 120.0})
        self.assertEqual(s["kinds"]["frozen"], {
            "sequences": 1, "detected": 0, "median_delay_s": None, "max_delay_s": None,
            "late": 0, "missed": 1, "false_alarms": 0, "false_alarms_per_hour": 0.0})
        self.assertEqual(s["kinds"]["moved"]["sequences"], 0)
        self.assertEqual(s["kinds"]["moved"]["false_alarms"], 1)
        self.assertEqual(len(ev.check_failures(results)), 4)
        text = ev.format_tables(results, s)
        self.assertIn("MISSED", text)
        self.assertIn("3.00 s LATE", text)
        self.assertIn("normal footage: 30.0 s", text)


class MotionTest(unittest.TestCase):
    REGIONS = [{"name": "door", "x": 0, "y": 0, "w": 10, "h": 10},
               {"name": "sky", "x": 10, "y": 0, "w": 10, "h": 10}]

    def sequence(self, cover, tamper=None):
        l = labels("m", "nuisance", len(cover), tamper)
        l["motion"] = {"regions": self.REGIONS, "cover": cover}
        return l

    def events(self, *frames):
        return [{"event": "motion_began", "camera": "m", "roi": roi, "kind": None,
                 "frame": f} for roi, f in frames]

    def test_truth_runs_are_joined_across_short_gaps_and_short_ones_dropped(self):
        # door: 30-60 covered, a 10-frame gap, 70-100; then a 10-frame blip at 150.
        cover = [[0.0, 0.0] for _ in range(200)]
        for i in list(range(30, 60)) + list(range(70, 100)) + list(range(150, 160)):
            cover[i][0] = 0.2
        cover[80][0] = 0.04  # under TRUTH_COVER: a gap of one frame, joined
        self.assertEqual(motion_score.truth_events(self.sequence(cover), 0), [(30, 100)])
        self.assertEqual(motion_score.truth_events(self.sequence(cover), 1), [])

    def test_found_missed_false_and_within_a_tamper(self):
        cover = [[0.0, 0.0] for _ in range(300)]
        for i in range(30, 90):
            cover[i][0] = 0.3
        for i in range(200, 240):
            cover[i][0] = 0.3
        seq = self.sequence(cover, tamper=(250, None))
        got = motion_score.score_motion(seq, self.events(
            ("door", 45), ("door", 100), ("sky", 10), ("sky", 260), ("door", 299)))
        self.assertEqual(got[0], {"roi": "door", "truth": 2, "detected": 1, "events": 3,
                                  "delays_s": [0.5], "false": [100], "in_tamper": 1,
                                  "missed": [200]})
        self.assertEqual(got[1]["false"], [10])
        self.assertEqual(got[1]["in_tamper"], 1)
        results = [{"name": "m", "normal_frames": 250, "fps": 30, "motion": got}]
        summary = motion_score.summarize_motion(results)
        self.assertEqual((summary["truth_events"], summary["found"], summary["false_events"]),
                         (2, 1, 2))
        self.assertEqual(summary["in_tamper"], 2)
        total = motion_score.format_motion(results, summary, lambda rows: "").splitlines()[-1]
        self.assertTrue(total.endswith("2 false events (864.00 per hour of normal footage); "
                                       "2 events within tampers (not scored)"), total)
        self.assertEqual(summary["recall"], 0.5)
        self.assertEqual(summary["precision"], round(1 / 3, 3))
        self.assertEqual(len(motion_score.motion_failures(results)), 3)

    def test_real_footage_against_its_expectations(self):
        # 400 frames, no truth per frame: the sky must stay still (no event, window means
        # at most 0.02), the door must move.
        seq = self.sequence([[0.0, 0.0]] * 400)
        seq["motion"]["cover"] = None
        seq["motion"]["expect"] = {"sky": {"max_events": 0, "max_window_mean": 0.02},
                                   "door": {"min_events": 1}}
        # The sky's ratio sampled: 0 over the first window, 0.1 in two samples of the
        # second (mean 0.05), none in the third; a sample past the frames is ignored.
        ratios = {"sky": [(10, 0.0), (149, 0.0), (150, 0.1), (160, 0.1), (170, 0.0),
                          (180, 0.0), (401, 1.0)],
                  "door": [(10, 0.5)]}
        got = motion_score.score_motion(seq, self.events(("sky", 155), ("sky", 390)), ratios)
        self.assertEqual(got[1]["window_means"], [0.0, 0.05])
        self.assertEqual(got[1]["unmet"], [
            "2 events (frames 155, 390), at most 0 expected",
            "motion ratio's window mean up to 0.050, at most 0.02 expected"])
        self.assertEqual(got[0]["unmet"], ["0 events, at least 1 expected"])
        results = [{"name": "m", "normal_frames": 400, "fps": 30, "motion": got}]
        # Not scored as truth: no false events, nothing found or missed.
        summary = motion_score.summarize_motion(results)
        self.assertEqual((summary["truth_events"], summary["events_scored"],
                          summary["false_events"]), (0, 0, 0))
        self.assertEqual(motion_score.motion_failures(results), [
            "m: door: 0 events, at least 1 expected",
            "m: sky: 2 events (frames 155, 390), at most 0 expected",
            "m: sky: motion ratio's window mean up to 0.050, at most 0.02 expected"])
        lines = motion_score.format_motion(results, summary, lambda rows: "").splitlines()
        self.assertEqual(lines[-1], "m sky: 2 events, window means (150 frames) 0.00, 0.05: "
                         "2 events (frames 155, 390), at most 0 expected; motion ratio's "
                         "window mean up to 0.050, at most 0.02 expected")
        # Met: a still sky, a door that moved.
        got = motion_score.score_motion(seq, self.events(("door", 20)),
                                        {"sky": [(10, 0.01), (200, 0.02)]})
        self.assertEqual([r["unmet"] for r in got], [[], []])
        # A static region never sampled while watching fails: nothing shows it was still.
        got = motion_score.score_motion(seq, self.events(("door", 20)), {})
        self.assertEqual(got[1]["unmet"], ["motion ratio's window mean up to no sample, "
                                           "at most 0.02 expected"])

    def test_the_regions_are_the_cameras_rois(self):
        seq = self.sequence([[0.0, 0.0]])
        config = tomllib.loads(ev.config_text(8000, [(seq, pathlib.Path("/d"))], []))
        self.assertEqual(config["camera"][0]["roi"], [
            {"name": "door", "x": 0, "y": 0, "w": 10, "h": 10},
            {"name": "sky", "x": 10, "y": 0, "w": 10, "h": 10}])


class ConfigTest(unittest.TestCase):
    def test_replay_cameras_with_health_lines(self):
        seqs = [(COVERED, pathlib.Path("/data/subset-covered-coins")),
                (LIGHT, pathlib.Path("/data/subset-light-camera"))]
        health = ev.parse_set(["enabled=true", " learning_seconds = 2.5", 'mode="fast"'])
        config = tomllib.loads(ev.config_text(8000, seqs, health))
        self.assertEqual(config["web"], {"listen_address": "127.0.0.1:8000"})
        self.assertEqual(config["camera"][1], {
            "name": "subset-light-camera",
            "source": {"kind": "replay", "path": "/data/subset-light-camera", "fps": 30},
            "health": {"enabled": True, "learning_seconds": 2.5, "mode": "fast"}})
        self.assertNotIn("health", tomllib.loads(ev.config_text(8000, seqs, []))["camera"][0])

    def test_bad_set(self):
        for bad in ("mode=fast", "novalue", "a=1=2"):
            with self.assertRaises(SystemExit, msg=bad):
                ev.parse_set([bad])


if __name__ == "__main__":
    unittest.main()
