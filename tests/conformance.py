#!/usr/bin/env python3
"""Conformance test: edgesight's raw outputs must be bit-identical to OpenCV.

Usage:
    python3 tests/conformance.py --bin target/release/edgesight [--quick]
                                 [--board] [--device D] [--tuning T] [--jobs N]
                                 [--filter SUBSTR] [--verbose]

For every case the script writes an input (PNG / PGM / PPM / JPEG file or a
raw frame), runs

    edgesight process INPUT... --out DIR --raw --border B [--format F --size WxH]
                                                          [--scale 1/N]

(the inputs of the cases of one set of options in one run, each input's outputs in
DIR/<its name>/) and compares DIR/{luma.u8, sobel_dx.s16, sobel_dy.s16, mask.u8,
integral_sum.u32, integral_sqsum.u64, report.json} against what OpenCV
computes from the same pixels (np.array_equal, exact).  The luma of a raw
sensor frame (wide mono, Bayer) is its samples unpacked here with numpy and
reduced to 8 bits, min(255, (v + 2^(s-1)) >> s) for s = bits - 8, then for a
Bayer mosaic OpenCV's cvtColor(COLOR_Bayer..2GRAY); the luma of a YUV frame
with planes is its Y plane.  The luma of a JPEG (the MJPEG cameras' path) is
OpenCV's cv2.imdecode(buf, IMREAD_GRAYSCALE), or IMREAD_REDUCED_GRAYSCALE_N for
--scale 1/N: 4:2:0, 4:2:2, 4:4:4, grey, progressive, restart markers, without
Huffman tables.  One line per case is
printed (`ok  <label>` or `FAIL <label>: <what>`), then a final line
`conformance: N passed, N failed`.  Exit status is 1 if anything failed.

Requires Python 3 with numpy and opencv-python-headless.  OpenCV's optimized
paths (Intel IPP) are disabled with cv2.setUseOptimized(False) so Otsu uses
OpenCV's own reference code (IPP breaks ties differently).

Over 500 lines as one file: each case's input, the OpenCV call that defines it and the
comparison of edgesight's raw outputs sit together, so that a case is read in one place;
most of the length is the table of cases.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import cv2
import numpy as np


def reference_mode() -> None:
    """Disable OpenCV's optimized paths (Intel IPP) *for the calling thread*.

    cv2.setUseOptimized(False) flips a global flag, but OpenCV keeps the
    "use IPP" switch in thread-local storage: a thread that did not make the
    call itself still runs IPP (observed with OpenCV 5.0: Otsu on a 30x30
    image of equal 10/128/246 populations gives 10 in the main thread but 128
    in a ThreadPoolExecutor worker).  So every thread that computes an
    expectation calls this first.
    """
    cv2.setUseOptimized(False)
    if hasattr(cv2, "ipp"):
        cv2.ipp.setUseIPP(False)
        assert not cv2.ipp.useIPP(), "could not disable IPP in this thread"


reference_mode()

BORDERS = {
    "reflect101": cv2.BORDER_REFLECT_101,
    "replicate": cv2.BORDER_REPLICATE,
    "constant": cv2.BORDER_CONSTANT,  # constant value 0 (OpenCV's default)
}

# Bytes per pixel of the packed raw formats (YUV with planes and raw sensor
# formats handled separately).
RAW_BPP = {"grey": 1, "yuyv": 2, "uyvy": 2, "rgb24": 3, "bgr24": 3, "rgbx": 4, "bgrx": 4}

# YUV formats whose frame starts with the Y plane (the luma), then chroma.
YUV_PLANES = ("nv12", "nv21", "nv16", "nv61", "yu12", "yv12")

# How a raw sensor stores its samples, by the suffix of the format's name:
# (significant bits, storage).  "le16": a little-endian 16-bit word a sample;
# "mipi10": MIPI CSI-2 RAW10, 4 samples in 5 bytes (their high 8 bits, then a
# byte of their low 2 bits, the first sample's in bits 0-1); "mipi12": RAW12, 2
# samples in 3 bytes (high 8 bits each, then their low 4 bits, first in 0-3).
SAMPLE_STORAGE = {"": (8, "u8"), "10": (10, "le16"), "12": (12, "le16"),
                  "16": (16, "le16"), "10p": (10, "mipi10"), "12p": (12, "mipi12")}
MONO_FORMATS = ("y10", "y12", "y16", "y10p", "y12p")
# V4L2 names a pattern by its first row then its second; OpenCV by the 2x2
# cell at (1, 1), so V4L2's RGGB is OpenCV's BayerBG (check_raw_helpers proves
# the mapping on a mosaic of red alone).
BAYER_TO_GRAY = {"rggb": cv2.COLOR_BayerBG2GRAY, "grbg": cv2.COLOR_BayerGB2GRAY,
                 "gbrg": cv2.COLOR_BayerGR2GRAY, "bggr": cv2.COLOR_BayerRG2GRAY}
BAYER_TO_BGR = {"rggb": cv2.COLOR_BayerBG2BGR, "grbg": cv2.COLOR_BayerGB2BGR,
                "gbrg": cv2.COLOR_BayerGR2BGR, "bggr": cv2.COLOR_BayerRG2BGR}
BAYER_FORMATS = tuple(p + suffix for p in BAYER_TO_GRAY for suffix in SAMPLE_STORAGE)

PNG_COLOR_TYPES = {1: 0, 3: 2, 4: 6}  # channels -> PNG IHDR colour type


# --------------------------------------------------------------------------
# comparison helpers
# --------------------------------------------------------------------------

def compare_arrays(name: str, got: np.ndarray, exp: np.ndarray) -> Optional[str]:
    """None if identical, else a message naming the first differing (x, y)."""
    if got.shape != exp.shape:
        return f"{name}: shape {got.shape} != expected {exp.shape}"
    if np.array_equal(got, exp):
        return None
    diff = np.argwhere(got != exp)
    y, x = (int(v) for v in diff[0][:2])
    return (f"{name}: {len(diff)} of {got.size} values differ; first at (x={x}, y={y}): "
            f"got {got[y, x].item()} expected {exp[y, x].item()}")


def read_raw(path: str, dtype: str, shape) -> np.ndarray:
    """Read a little-endian, row-major, unpadded file; raise ValueError on size mismatch."""
    if not os.path.exists(path):
        raise ValueError(f"{os.path.basename(path)}: missing")
    dt = np.dtype(dtype)
    want = int(np.prod(shape)) * dt.itemsize
    have = os.path.getsize(path)
    if have != want:
        raise ValueError(f"{os.path.basename(path)}: {have} bytes, expected {want} "
                         f"({shape[1]}x{shape[0]} {dt.str})")
    return np.fromfile(path, dtype=dt).reshape(shape)


def expected_outputs(luma: np.ndarray, border: str) -> dict:
    """Everything OpenCV says the binary should produce for this luma plane."""
    reference_mode()
    b = BORDERS[border]
    luma = np.ascontiguousarray(luma, dtype=np.uint8)
    dx = cv2.Sobel(luma, cv2.CV_16S, 1, 0, ksize=3, borderType=b)
    dy = cv2.Sobel(luma, cv2.CV_16S, 0, 1, ksize=3, borderType=b)
    hist = cv2.calcHist([luma], [0], None, [256], [0, 256]).ravel()
    hist_i = hist.astype(np.int64)
    assert np.array_equal(hist_i, hist), "calcHist returned a non-integer count?"
    t, mask = cv2.threshold(luma, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
    s, sq = cv2.integral2(luma, sdepth=cv2.CV_32S, sqdepth=cv2.CV_64F)
    sq_u = sq.astype(np.uint64)
    assert np.array_equal(sq_u.astype(np.float64), sq), "sqsum not exactly representable"
    return {
        "luma": luma,
        "dx": dx.astype("<i2"),
        "dy": dy.astype("<i2"),
        "hist": [int(v) for v in hist_i],
        "otsu": int(t),
        "mask": mask,
        "isum": np.ascontiguousarray(s).view(np.uint32).astype("<u4"),
        "isq": sq_u.astype("<u8"),
    }


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_report(rep: dict, exp: dict) -> List[str]:
    errs = []
    luma = exp["luma"]
    h, w = luma.shape
    n = w * h
    for key in ("width", "height", "otsu_threshold", "histogram", "mean_luma",
                "foreground_ratio", "edge_ratio"):
        if key not in rep:
            errs.append(f"report.json: missing '{key}'")
    if errs:
        return errs
    if rep["width"] != w or rep["height"] != h:
        errs.append(f"report.json: size {rep['width']}x{rep['height']} != {w}x{h}")
    if not _is_int(rep["otsu_threshold"]):
        errs.append(f"report.json: otsu_threshold not an int: {rep['otsu_threshold']!r}")
    elif rep["otsu_threshold"] != exp["otsu"]:
        errs.append(f"report.json: otsu_threshold {rep['otsu_threshold']} != OpenCV {exp['otsu']}")
    hist = rep["histogram"]
    if not (isinstance(hist, list) and len(hist) == 256 and all(_is_int(v) for v in hist)):
        errs.append("report.json: histogram is not a list of 256 ints")
    else:
        if hist != exp["hist"]:
            i = next(k for k in range(256) if hist[k] != exp["hist"][k])
            errs.append(f"report.json: histogram[{i}] = {hist[i]} != OpenCV {exp['hist'][i]}")
        if sum(hist) != n:
            errs.append(f"report.json: sum(histogram) = {sum(hist)} != W*H = {n}")
    m = float(luma.mean())
    ml = rep["mean_luma"]
    if not _is_num(ml) or not math.isclose(float(ml), m, rel_tol=1e-9, abs_tol=1e-12):
        errs.append(f"report.json: mean_luma {ml!r} != {m!r}")
    fg = float(np.count_nonzero(exp["mask"])) / n
    fr = rep["foreground_ratio"]
    if not _is_num(fr) or not math.isclose(float(fr), fg, rel_tol=1e-9, abs_tol=1e-12):
        errs.append(f"report.json: foreground_ratio {fr!r} != mask fraction {fg!r}")
    er = rep["edge_ratio"]
    if not _is_num(er) or not (0.0 <= float(er) <= 1.0):
        errs.append(f"report.json: edge_ratio {er!r} not a number in [0, 1]")
    return errs


def check_outputs(outdir: str, exp: dict) -> List[str]:
    """Compare everything the binary wrote in outdir against the expectation."""
    errs: List[str] = []
    h, w = exp["luma"].shape
    files = [
        ("luma.u8", "u1", (h, w), "luma"),
        ("sobel_dx.s16", "<i2", (h, w), "dx"),
        ("sobel_dy.s16", "<i2", (h, w), "dy"),
        ("mask.u8", "u1", (h, w), "mask"),
        ("integral_sum.u32", "<u4", (h + 1, w + 1), "isum"),
        ("integral_sqsum.u64", "<u8", (h + 1, w + 1), "isq"),
    ]
    for fname, dt, shape, key in files:
        try:
            got = read_raw(os.path.join(outdir, fname), dt, shape)
        except ValueError as e:
            errs.append(str(e))
            continue
        msg = compare_arrays(fname, got, exp[key])
        if msg:
            errs.append(msg)
    rpath = os.path.join(outdir, "report.json")
    try:
        with open(rpath) as f:
            rep = json.load(f)
    except FileNotFoundError:
        errs.append("report.json: missing")
    except ValueError as e:
        errs.append(f"report.json: invalid JSON ({e})")
    else:
        if isinstance(rep, dict):
            errs.extend(check_report(rep, exp))
        else:
            errs.append("report.json: top level is not an object")
    return errs


# --------------------------------------------------------------------------
# input writers: each returns (path, extra CLI args, expected luma)
# --------------------------------------------------------------------------

def _png_color_type(path: str) -> int:
    with open(path, "rb") as f:
        head = f.read(26)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    assert head[24] == 8, f"{path}: bit depth {head[24]}"
    return head[25]


def write_image(tmp: str, arr: np.ndarray, ext: str = "png"):
    """arr is grey (HxW), RGB (HxWx3) or RGBA (HxWx4) in *RGB* channel order."""
    path = os.path.join(tmp, "input." + ext)
    if arr.ndim == 2:
        bgr, luma = arr, arr.copy()
    elif arr.shape[2] == 3:
        bgr = cv2.cvtColor(arr, cv2.COLOR_RGB2BGR)
        luma = cv2.cvtColor(arr, cv2.COLOR_RGB2GRAY)
    elif arr.shape[2] == 4:
        bgr = cv2.cvtColor(arr, cv2.COLOR_RGBA2BGRA)
        luma = cv2.cvtColor(arr, cv2.COLOR_RGBA2GRAY)
    else:
        raise ValueError(arr.shape)
    if not cv2.imwrite(path, np.ascontiguousarray(bgr)):
        raise RuntimeError(f"cv2.imwrite failed for {path}")
    if ext == "png":
        ch = 1 if arr.ndim == 2 else arr.shape[2]
        ct = _png_color_type(path)
        assert ct == PNG_COLOR_TYPES[ch], f"PNG colour type {ct} for {ch} channels"
    # The file must round-trip exactly, or the expectation is meaningless.
    back = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    assert back is not None and np.array_equal(back, bgr), f"{path} did not round-trip"
    return path, [], luma


JPEG_SAMPLING = {
    "420": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
    "422": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
    "444": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444,
}
JPEG_REDUCED = {2: cv2.IMREAD_REDUCED_GRAYSCALE_2, 4: cv2.IMREAD_REDUCED_GRAYSCALE_4,
                8: cv2.IMREAD_REDUCED_GRAYSCALE_8}


def without_huffman_tables(jpeg: bytes) -> bytes:
    """An image without its DHT segments, as UVC cameras send MJPEG (AVI1 style)."""
    out, at = bytearray(jpeg[:2]), 2
    while at < len(jpeg):
        code = jpeg[at + 1]
        if code == 0xDA:
            return bytes(out + jpeg[at:])
        length = jpeg[at + 2] << 8 | jpeg[at + 3]
        if code != 0xC4:
            out += jpeg[at:at + 2 + length]
        at += 2 + length
    raise ValueError("no scan")


def write_jpeg(tmp: str, arr: np.ndarray, params, scale: int = 1, huffman_tables: bool = True):
    """arr is grey (HxW) or BGR (HxWx3). The expected luma is OpenCV's grayscale decode of
    the file (IMREAD_GRAYSCALE, or IMREAD_REDUCED_GRAYSCALE_N at 1/N), which edgesight's
    MJPEG path must equal byte for byte."""
    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(arr), list(params))
    assert ok, "cv2.imencode failed"
    jpeg = buf.tobytes()
    if not huffman_tables:
        jpeg = without_huffman_tables(jpeg)
    path = os.path.join(tmp, "input.jpg")
    with open(path, "wb") as f:
        f.write(jpeg)
    flag = cv2.IMREAD_GRAYSCALE if scale == 1 else JPEG_REDUCED[scale]
    luma = cv2.imdecode(np.frombuffer(jpeg, np.uint8), flag)
    assert luma is not None, "OpenCV cannot decode the JPEG"
    extra = [] if scale == 1 else ["--scale", f"1/{scale}"]
    return path, extra, luma


def use_existing_file(path: str):
    img = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if img is None or img.dtype != np.uint8:
        raise RuntimeError(f"cannot load {path} as an 8-bit image")
    if img.ndim == 2:
        luma = img
    elif img.shape[2] == 3:
        luma = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)  # imread gives BGR
    elif img.shape[2] == 4:
        luma = cv2.cvtColor(img, cv2.COLOR_BGRA2GRAY)
    else:
        raise RuntimeError(f"{path}: unsupported channel count {img.shape}")
    return path, [], luma


def sensor_format(fmt: str):
    """(Bayer pattern or None, bits, storage) of a raw sensor format, else None."""
    if fmt in MONO_FORMATS:
        return (None,) + SAMPLE_STORAGE[fmt[1:]]
    if fmt[:4] in BAYER_TO_GRAY and fmt[4:] in SAMPLE_STORAGE:
        return (fmt[:4],) + SAMPLE_STORAGE[fmt[4:]]
    return None


def sensor_row_bytes(storage: str, w: int) -> int:
    """A row's bytes; a partial MIPI group takes a whole group's."""
    return {"u8": w, "le16": 2 * w, "mipi10": -(-w // 4) * 5, "mipi12": -(-w // 2) * 3}[storage]


def unpack_samples(storage: str, buf: np.ndarray, w: int, h: int) -> np.ndarray:
    """The stored words of a packed sensor frame, uint32 (h, w)."""
    rows = buf.reshape(h, sensor_row_bytes(storage, w)).astype(np.uint32)
    if storage == "u8":
        return rows
    if storage == "le16":
        return rows[:, 0::2] | rows[:, 1::2] << 8
    per_group, low_bits = {"mipi10": (4, 2), "mipi12": (2, 4)}[storage]
    groups = rows.reshape(h, -1, per_group + 1)
    shifts = low_bits * np.arange(per_group, dtype=np.uint32)
    low = groups[:, :, per_group:] >> shifts & ((1 << low_bits) - 1)
    return (groups[:, :, :per_group] << low_bits | low).reshape(h, -1)[:, :w]


def reduce_to_8(v: np.ndarray, bits: int) -> np.ndarray:
    """Round half up and saturate: min(255, (v + 2^(s-1)) >> s), s = bits - 8."""
    if bits == 8:
        return v.astype(np.uint8)
    s = bits - 8
    return np.minimum(255, (v + (1 << (s - 1))) >> s).astype(np.uint8)


def raw_luma(fmt: str, buf: np.ndarray, w: int, h: int) -> np.ndarray:
    """Expected luma plane of a tightly packed raw frame."""
    if fmt in YUV_PLANES:
        return buf[: w * h].reshape(h, w).copy()
    sensor = sensor_format(fmt)
    if sensor:
        pattern, bits, storage = sensor
        mosaic = reduce_to_8(unpack_samples(storage, buf, w, h), bits)
        return cv2.cvtColor(mosaic, BAYER_TO_GRAY[pattern]) if pattern else mosaic
    px = buf.reshape(h, w * RAW_BPP[fmt]) if fmt != "grey" else buf.reshape(h, w)
    if fmt == "grey":
        return px.copy()
    if fmt == "yuyv":
        return np.ascontiguousarray(px[:, 0::2])
    if fmt == "uyvy":
        return np.ascontiguousarray(px[:, 1::2])
    conv = {"rgb24": (3, cv2.COLOR_RGB2GRAY), "bgr24": (3, cv2.COLOR_BGR2GRAY),
            "rgbx": (4, cv2.COLOR_RGBA2GRAY), "bgrx": (4, cv2.COLOR_BGRA2GRAY)}[fmt]
    return cv2.cvtColor(np.ascontiguousarray(px.reshape(h, w, conv[0])), conv[1])


def raw_frame_size(fmt: str, w: int, h: int) -> int:
    """Bytes of a packed frame, every plane: what edgesight must ask for (it
    reads exactly FrameLayout::frame_bytes() and refuses another size)."""
    half_w, half_h = -(-w // 2), -(-h // 2)
    if fmt in ("nv12", "nv21"):
        return w * h + w * half_h
    if fmt in ("nv16", "nv61"):
        return 2 * w * h
    if fmt in ("yu12", "yv12"):
        return w * h + 2 * half_w * half_h
    sensor = sensor_format(fmt)
    if sensor:
        return sensor_row_bytes(sensor[2], w) * h
    return w * h * RAW_BPP[fmt]


def pack_samples(storage: str, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Store samples (h, w) as the format does; the unused samples of a
    partial MIPI group are random, so reading them would show."""
    h, w = v.shape
    if storage == "u8":
        return v.astype(np.uint8).ravel()
    if storage == "le16":
        return v.astype("<u2").view(np.uint8).ravel()
    per_group, low_bits = {"mipi10": (4, 2), "mipi12": (2, 4)}[storage]
    width = -(-w // per_group) * per_group
    full = rng.integers(0, 1 << (8 + low_bits), (h, width), dtype=np.uint32)
    full[:, :w] = v
    groups = full.reshape(h, -1, per_group)
    low = np.zeros(groups.shape[:2], np.uint32)
    for k in range(per_group):
        low |= (groups[:, :, k] & ((1 << low_bits) - 1)) << (low_bits * k)
    packed = np.concatenate([groups >> low_bits, low[:, :, None]], axis=2)
    return packed.astype(np.uint8).ravel()


def sensor_samples(label: str, bits: int, w: int, h: int, above_depth: bool) -> np.ndarray:
    """Random samples of `bits` bits: an eighth just below a rounding boundary
    (low bits 2^(s-1) - 1), an eighth on one (2^(s-1)), a sixteenth in the
    top 2^(s+1) values, where rounding saturates.  With above_depth, a quarter
    of the 16-bit words have bits set above the depth (they saturate)."""
    rng = rng_for(label)
    v = rng.integers(0, 1 << bits, (h, w), dtype=np.uint32)
    if bits == 8:
        return v
    s = bits - 8
    half = 1 << (s - 1)
    kind = rng.integers(0, 16, (h, w))
    high = rng.integers(0, 256, (h, w), dtype=np.uint32) << s
    v = np.where(kind < 2, high | (half - 1), v)
    v = np.where((kind == 2) | (kind == 3), high | half, v)
    v = np.where(kind == 4, (1 << bits) - 1 - rng.integers(0, 4 * half, (h, w)), v)
    if above_depth:
        assert bits < 16, "a 16-bit word has no bits above its depth"
        word = rng.integers(1 << bits, 1 << 16, (h, w), dtype=np.uint32)
        v = np.where(kind >= 12, word, v)
    return v.astype(np.uint32)


def write_raw(tmp: str, fmt: str, buf: np.ndarray, w: int, h: int):
    assert buf.dtype == np.uint8 and buf.size == raw_frame_size(fmt, w, h)
    path = os.path.join(tmp, f"frame.{fmt}")
    buf.tofile(path)
    return path, ["--format", fmt, "--size", f"{w}x{h}"], raw_luma(fmt, buf, w, h)


def write_sensor(tmp: str, label: str, fmt: str, w: int, h: int, above_depth: bool):
    _, bits, storage = sensor_format(fmt)
    v = sensor_samples(label, bits, w, h, above_depth)
    buf = pack_samples(storage, v, rng_for(label + " padding"))
    # The expectation unpacks the bytes; they must give back the samples.
    assert np.array_equal(unpack_samples(storage, buf, w, h), v), f"{fmt} did not round-trip"
    return write_raw(tmp, fmt, buf, w, h)


def write_flat_bayer(tmp: str, fmt: str, w: int, h: int, rgb):
    """A Bayer mosaic with each colour one 8-bit value, stored in words that
    round down to it."""
    pattern, bits, storage = sensor_format(fmt)
    s = bits - 8
    low = (1 << (s - 1)) - 1 if s else 0
    v = np.zeros((h, w), np.uint32)
    for i, colour in enumerate(pattern):
        v[i // 2::2, i % 2::2] = rgb["rgb".index(colour)] << s | low
    buf = pack_samples(storage, v, rng_for(fmt + " flat"))
    return write_raw(tmp, fmt, buf, w, h)


def check_raw_helpers() -> None:
    """The unpacking and the Bayer codes checked against hand-made examples,
    so the expectations do not rest on the packing code alone."""
    # RAW10: high bytes 1..4, low bits 0, 1, 2, 3 (first sample in bits 0-1).
    raw10 = np.array([1, 2, 3, 4, 0b11100100], np.uint8)
    assert unpack_samples("mipi10", raw10, 4, 1).tolist() == [[4, 9, 14, 19]]
    assert unpack_samples("mipi10", raw10, 1, 1).tolist() == [[4]]
    # RAW12: high bytes 0xAB, 0xCD, low nibbles 0x1 (first) and 0x2.
    raw12 = np.array([0xAB, 0xCD, 0x21], np.uint8)
    assert unpack_samples("mipi12", raw12, 2, 1).tolist() == [[0xAB1, 0xCD2]]
    le = np.array([0x01, 0x02, 0xFF, 0xFF], np.uint8)
    assert unpack_samples("le16", le, 2, 1).tolist() == [[0x0201, 0xFFFF]]
    # 10 bits: 513 = 128 * 4 + 1 rounds down, 514 up; 1021 to 255, 1022 saturates.
    words = np.array([513, 514, 1021, 1022, 1023, 0xFFFF], np.uint32)
    assert reduce_to_8(words, 10).tolist() == [128, 129, 255, 255, 255, 255]
    assert reduce_to_8(np.array([127, 128, 65407, 65408], np.uint32), 16).tolist() == [0, 1, 255, 255]
    # A mosaic of red alone, red where V4L2's name puts its 'r', demosaics to red.
    for pattern, code in BAYER_TO_BGR.items():
        red_x, red_y = pattern.index("r") % 2, pattern.index("r") // 2
        mosaic = np.zeros((6, 6), np.uint8)
        mosaic[red_y::2, red_x::2] = 200
        assert cv2.cvtColor(mosaic, code)[2, 2].tolist() == [0, 0, 200], pattern


# --------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------

@dataclass
class Case:
    label: str
    make_input: Callable  # (tmpdir) -> (path, extra args, expected luma)
    border: str = "reflect101"
    expect_otsu: Optional[int] = None  # sanity check of our own expectation


def rng_for(label: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(label.encode()))


def random_image(label: str, w: int, h: int, channels: int) -> np.ndarray:
    shape = (h, w) if channels == 1 else (h, w, channels)
    return rng_for(label).integers(0, 256, shape, dtype=np.uint8)


def synth_natural(w: int = 320, h: int = 240) -> np.ndarray:
    """Smooth RGB gradient with a few shapes: large flat regions, soft and hard edges."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((h, w, 3), np.float32)
    img[..., 0] = 30 + 180 * xx / (w - 1)
    img[..., 1] = 60 + 120 * yy / (h - 1)
    img[..., 2] = 200 - 150 * (xx + yy) / (w + h - 2)
    img = np.clip(img, 0, 255).astype(np.uint8)
    cv2.circle(img, (w // 4, h // 3), h // 5, (250, 240, 40), -1, cv2.LINE_AA)
    cv2.rectangle(img, (w // 2, h // 2), (w - 20, h - 15), (20, 25, 30), -1)
    cv2.ellipse(img, (w // 2, h // 4), (w // 6, h // 10), 30, 0, 360, (240, 240, 240), 3, cv2.LINE_AA)
    tri = np.array([[10, h - 10], [w // 3, h // 2], [w // 2 - 10, h - 10]], np.int32)
    cv2.fillPoly(img, [tri], (90, 20, 140))
    for k in range(5):
        cv2.line(img, (k * w // 5, 0), (k * w // 5 + w // 3, h - 1), (255, 255, 255), 1, cv2.LINE_AA)
    cv2.putText(img, "Otsu", (w // 2 + 10, h - 30), cv2.FONT_HERSHEY_SIMPLEX, 1.0, (230, 230, 230), 2)
    return cv2.GaussianBlur(img, (5, 5), 1.0)


def levels_image(w: int, h: int, levels, weights=None, label: str = "") -> np.ndarray:
    """w x h image made of exact populations of the given grey levels, shuffled."""
    n = w * h
    weights = weights or [1] * len(levels)
    counts = [n * wt // sum(weights) for wt in weights]
    counts[-1] += n - sum(counts)
    flat = np.concatenate([np.full(c, v, np.uint8) for v, c in zip(levels, counts)])
    rng_for(label or str(levels)).shuffle(flat)
    return flat.reshape(h, w)


# For an emulated board (--board): of the formats below the first eight raw ones, one
# case for each kernel variant and each reading of the samples (every mono storage,
# every Bayer pattern, every sample storage, the rounding ties), each YUV plane layout
# and a few JPEGs. Under qemu-user each case costs seconds of start-up (POCL builds every
# kernel from its cache, preprocessing its headers), and the board's kernels are checked
# against the reference at every format and size by tests/kernels/, whose reference
# the full x86 run holds to OpenCV.
BOARD_PICKS = {
    "raw nv21 33x7", "raw nv16 34x6", "raw nv61 33x7", "raw yu12 33x7", "raw yv12 34x6",
    "raw y10 33x7 (words above the depth)", "raw y12p 33x7", "raw y16 34x6",
    "raw rggb 34x6", "raw grbg10 33x7 (words above the depth)", "raw gbrg12p 33x7",
    "raw bggr16 34x6", "raw rggb10p 33x7", "raw bggr12 34x6",
    "raw rggb 34x6 flat field (128, 12, 63) on a rounding tie",
    "raw gbrg12p 33x7 flat field (255, 199, 153) on a rounding tie",
    "jpeg 420 641x479 random", "jpeg 422 33x7 random", "jpeg grey 17x3 random",
    "jpeg natural samples/scene.png q85 without Huffman tables",
    "jpeg natural samples/scene.png q85 restart markers",
    "jpeg 422 641x479 random at 1/2",
}


def build_cases(quick: bool, repo_root: str, board: bool = False) -> List[Case]:
    cases: List[Case] = []

    # --- random content at awkward sizes, grey PNG and RGB PNG
    sizes = [(1, 1), (2, 2), (3, 3), (15, 7), (17, 3), (16, 16), (33, 2), (641, 479), (1920, 1080)]
    if quick:
        sizes = [s for s in sizes if s != (1920, 1080)]
    all_borders = {(1, 1), (2, 2), (17, 3), (641, 479)}
    for (w, h) in sizes:
        for kind, ch in (("grey", 1), ("rgb", 3)):
            borders = list(BORDERS) if (w, h) in all_borders else ["reflect101"]
            for b in borders:
                seed_label = f"random-{kind}-{w}x{h}"
                cases.append(Case(f"png-{kind} {w}x{h} random border={b}",
                                  lambda tmp, L=seed_label, w=w, h=h, ch=ch:
                                  write_image(tmp, random_image(L, w, h, ch)), b))
    # 1-pixel-wide / 1-pixel-tall strips, all borders
    for (w, h) in [(1, 9), (9, 1), (2, 5)]:
        for b in BORDERS:
            L = f"random-grey-{w}x{h}"
            cases.append(Case(f"png-grey {w}x{h} random border={b}",
                              lambda tmp, L=L, w=w, h=h: write_image(tmp, random_image(L, w, h, 1)), b))
    # RGBA PNG (processed as rgbx; alpha ignored)
    for (w, h) in [(17, 3), (641, 479)]:
        L = f"random-rgba-{w}x{h}"
        cases.append(Case(f"png-rgba {w}x{h} random",
                          lambda tmp, L=L, w=w, h=h: write_image(tmp, random_image(L, w, h, 4))))
    # PGM / PPM
    for (w, h) in [(17, 3), (641, 479)]:
        for kind, ch, ext in (("grey", 1, "pgm"), ("rgb", 3, "ppm")):
            L = f"random-{ext}-{w}x{h}"
            cases.append(Case(f"{ext} {w}x{h} random",
                              lambda tmp, L=L, w=w, h=h, ch=ch, ext=ext:
                              write_image(tmp, random_image(L, w, h, ch), ext)))

    # --- natural content
    scene = os.path.join(repo_root, "samples", "scene.png")
    if os.path.exists(scene):
        for b in BORDERS:
            cases.append(Case(f"natural samples/scene.png border={b}",
                              lambda tmp, p=scene: use_existing_file(p), b))
    for b in BORDERS:
        cases.append(Case(f"natural synth-gradient-shapes rgb 320x240 border={b}",
                          lambda tmp: write_image(tmp, synth_natural()), b))
    cases.append(Case("natural synth-gradient-shapes grey 320x240",
                      lambda tmp: write_image(tmp, cv2.cvtColor(synth_natural(), cv2.COLOR_RGB2GRAY))))
    cases.append(Case("natural synth-gradient-shapes rgb 33x17 (downscaled)",
                      lambda tmp: write_image(tmp, cv2.resize(synth_natural(), (33, 17),
                                                              interpolation=cv2.INTER_AREA))))

    # --- Otsu edge cases (grey PNG); expect_otsu = value observed in OpenCV 5.0
    # reference code (IPP off), checked so a change of behaviour in cv2 is
    # noticed (printed as a "note" on stderr; the case still compares with cv2).
    # Ties are decided by double rounding, not by "first maximum wins" in
    # exact arithmetic: equal 10/128/246 populations give 10 for 300 px per
    # level but 128 for 800 px per level (IPP gives 128 for all).
    def grey(arr):
        return lambda tmp: write_image(tmp, arr)

    otsu_cases = [
        ("constant 77 16x16", np.full((16, 16), 77, np.uint8), 0),
        ("all 0 16x16", np.zeros((16, 16), np.uint8), 0),
        ("all 255 16x16", np.full((16, 16), 255, np.uint8), 0),
        ("two-level 40/200 equal 32x32", levels_image(32, 32, [40, 200]), 40),
        ("two-level 40/200 1:3 31x9", levels_image(31, 9, [40, 200], [1, 3]), 40),
        ("two adjacent levels 127/128 20x20", levels_image(20, 20, [127, 128]), 127),
        ("three levels 10/128/246 equal 30x30", levels_image(30, 30, [10, 128, 246]), 10),
        ("three levels 10/128/246 equal 40x60", levels_image(40, 60, [10, 128, 246]), 128),
        ("three levels 10/128/246 equal 1x3", np.array([[10, 128, 246]], np.uint8), 10),
        ("four levels 0/85/170/255 equal 20x20", levels_image(20, 20, [0, 85, 170, 255]), 85),
        ("four levels 20/100/156/236 equal 16x16", levels_image(16, 16, [20, 100, 156, 236]), 100),
        ("five symmetric levels 10/60/128/196/246 equal 20x20 (tie 60 vs 128)",
         levels_image(20, 20, [10, 60, 128, 196, 246]), 128),
        ("three levels 10/128/246 1:2:1 24x10 (tie 10 vs 128)", levels_image(24, 10, [10, 128, 246], [1, 2, 1]), 10),
        ("two-level 0/255 2x1", np.array([[0, 255]], np.uint8), 0),
        ("1x1 value 123", np.array([[123]], np.uint8), 0),
        ("2x1 10/200", np.array([[10, 200]], np.uint8), 10),
        ("1x2 10/200", np.array([[10], [200]], np.uint8), 10),
        ("3x1 5/5/250", np.array([[5, 5, 250]], np.uint8), 5),
    ]
    for name, arr, t in otsu_cases:
        cases.append(Case(f"otsu {name}", grey(arr), expect_otsu=t))

    # --- raw formats
    raw_sizes = [(34, 6), (640, 480), (2, 2)]
    for (w, h) in raw_sizes:
        for fmt in ("grey", "yuyv", "uyvy", "nv12", "rgb24", "bgr24", "rgbx", "bgrx"):
            L = f"raw-{fmt}-{w}x{h}"

            def mk(tmp, L=L, fmt=fmt, w=w, h=h):
                buf = rng_for(L).integers(0, 256, raw_frame_size(fmt, w, h), dtype=np.uint8)
                return write_raw(tmp, fmt, buf, w, h)
            cases.append(Case(f"raw {fmt} {w}x{h}", mk))

    first_new = len(cases)
    # --- YUV with planes: any bytes; odd sizes round the chroma planes up
    # (the binary takes only a file of exactly FrameLayout::frame_bytes()).
    yuv_sizes = {f: [(34, 6), (33, 7)] for f in YUV_PLANES if f != "nv12"}
    yuv_sizes["nv12"] = [(33, 7)]
    for fmt, extra in (("yu12", (640, 480)), ("yv12", (1, 1))):
        yuv_sizes[fmt].append(extra)
    for fmt, sizes in yuv_sizes.items():
        for (w, h) in sizes:
            L = f"raw-{fmt}-{w}x{h}"

            def mk(tmp, L=L, fmt=fmt, w=w, h=h):
                buf = rng_for(L).integers(0, 256, raw_frame_size(fmt, w, h), dtype=np.uint8)
                return write_raw(tmp, fmt, buf, w, h)
            cases.append(Case(f"raw {fmt} {w}x{h}", mk))

    # --- raw sensor formats: every one at 34x6 (samples within the depth) and
    # at 33x7 (a partial MIPI group at each row's end; for the 10 and 12-bit
    # words, a quarter of them above the depth), a few at 640x480 and at sizes
    # below Bayer's 3x3 (all 0) or at it.
    sensor_sizes = {f: [(34, 6, False), (33, 7, f[-2:] in ("10", "12"))]
                    for f in MONO_FORMATS + BAYER_FORMATS}
    for fmt, size in (("y12", (640, 480, True)), ("rggb10p", (640, 480, False)),
                      ("gbrg16", (640, 480, False)), ("bggr12p", (640, 480, False)),
                      ("y10p", (1, 1, False)), ("rggb", (2, 2, False)),
                      ("bggr12p", (1, 1, False)), ("grbg10p", (3, 3, False))):
        sensor_sizes[fmt].append(size)
    for fmt, sizes in sensor_sizes.items():
        for (w, h, above) in sizes:
            L = f"raw-{fmt}-{w}x{h}" + (" above depth" if above else "")
            cases.append(Case(f"raw {fmt} {w}x{h}" + (" (words above the depth)" if above else ""),
                              lambda tmp, L=L, fmt=fmt, w=w, h=h, above=above:
                              write_sensor(tmp, L, fmt, w, h, above)))
    # Flat fields where every pixel's luma is exactly halfway between two
    # values: 4899 r + 9617 g + 1868 b = 16384 (k + 1/2), 52.5 and 210.5.
    for fmt, (w, h), rgb in (("rggb", (34, 6), (128, 12, 63)),
                             ("gbrg12p", (33, 7), (255, 199, 153))):
        cases.append(Case(f"raw {fmt} {w}x{h} flat field {rgb} on a rounding tie",
                          lambda tmp, fmt=fmt, w=w, h=h, rgb=rgb: write_flat_bayer(tmp, fmt, w, h, rgb)))
    # --- JPEG (the MJPEG path: luma only, as OpenCV's IMREAD_GRAYSCALE)
    for (w, h) in [(1, 1), (17, 3), (33, 7), (641, 479)]:
        for sub in JPEG_SAMPLING:
            L = f"jpeg-rgb-{w}x{h}-{sub}"
            cases.append(Case(f"jpeg {sub} {w}x{h} random",
                              lambda tmp, L=L, w=w, h=h, sub=sub: write_jpeg(
                                  tmp, random_image(L, w, h, 3),
                                  [cv2.IMWRITE_JPEG_QUALITY, 90,
                                   cv2.IMWRITE_JPEG_SAMPLING_FACTOR, JPEG_SAMPLING[sub]])))
    for (w, h) in [(17, 3), (641, 479)]:
        L = f"jpeg-grey-{w}x{h}"
        cases.append(Case(f"jpeg grey {w}x{h} random",
                          lambda tmp, L=L, w=w, h=h: write_jpeg(
                              tmp, random_image(L, w, h, 1), [cv2.IMWRITE_JPEG_QUALITY, 90])))
    scene_bgr = cv2.imread(scene, cv2.IMREAD_COLOR) if os.path.exists(scene) else None
    if scene_bgr is not None:
        natural = [
            ("q50 420", [cv2.IMWRITE_JPEG_QUALITY, 50], 1, True),
            ("q85 422", [cv2.IMWRITE_JPEG_QUALITY, 85,
                         cv2.IMWRITE_JPEG_SAMPLING_FACTOR, JPEG_SAMPLING["422"]], 1, True),
            ("q95 progressive", [cv2.IMWRITE_JPEG_QUALITY, 95,
                                 cv2.IMWRITE_JPEG_PROGRESSIVE, 1], 1, True),
            ("q85 restart markers", [cv2.IMWRITE_JPEG_QUALITY, 85,
                                     cv2.IMWRITE_JPEG_RST_INTERVAL, 2], 1, True),
            ("q85 without Huffman tables", [cv2.IMWRITE_JPEG_QUALITY, 85], 1, False),
        ] + [(f"q85 at 1/{n}", [cv2.IMWRITE_JPEG_QUALITY, 85], n, True) for n in (2, 4, 8)]
        for label, params, n, tables in natural:
            cases.append(Case(f"jpeg natural samples/scene.png {label}",
                              lambda tmp, p=params, n=n, t=tables: write_jpeg(
                                  tmp, scene_bgr, p, scale=n, huffman_tables=t)))
    for (w, h, n, sub) in [(641, 479, 2, "422"), (641, 479, 8, "420"), (17, 3, 8, "444")]:
        L = f"jpeg-rgb-{w}x{h}-{sub}"
        cases.append(Case(f"jpeg {sub} {w}x{h} random at 1/{n}",
                          lambda tmp, L=L, w=w, h=h, n=n, sub=sub: write_jpeg(
                              tmp, random_image(L, w, h, 3),
                              [cv2.IMWRITE_JPEG_QUALITY, 90,
                               cv2.IMWRITE_JPEG_SAMPLING_FACTOR, JPEG_SAMPLING[sub]], scale=n)))
    if board:
        labels = {c.label for c in cases[first_new:]}
        missing = BOARD_PICKS - labels
        assert not missing, f"BOARD_PICKS names no case: {sorted(missing)}"
        cases = cases[:first_new] + [c for c in cases[first_new:] if c.label in BOARD_PICKS]
    return cases


# --------------------------------------------------------------------------
# runner
# --------------------------------------------------------------------------

@dataclass
class Result:
    label: str
    errors: List[str] = field(default_factory=list)
    seconds: float = 0.0


# Cases of one set of options share a run of edgesight (`process IN... --out DIR`, each
# input's outputs in DIR/<its file name>/): under emulation or with a compiler that caches
# little, starting OpenCL and loading the kernels cost more than the frames.  Runs hold at
# most GROUP_CASES cases, so that a large set spreads over the parallel jobs.
GROUP_CASES = 12


def case_groups(cases: List[Case]) -> List[List[Case]]:
    """The cases in runs: by their options (extra arguments and border), in order, at most
    GROUP_CASES a run."""
    by_options: dict = {}
    with tempfile.TemporaryDirectory(prefix="edgesight-conf-") as tmp:
        for c in cases:
            # The extra arguments come from making the input (cheap for every case).
            _, extra, _ = c.make_input(tmp)
            by_options.setdefault((tuple(extra), c.border), []).append(c)
    groups = []
    for same in by_options.values():
        for at in range(0, len(same), GROUP_CASES):
            groups.append(same[at:at + GROUP_CASES])
    return groups


def run_group(binary: str, cases: List[Case], timeout: float, verbose: bool,
              device: str = "", tuning: str = "") -> List[Result]:
    """Runs edgesight once on the inputs of `cases` (one set of options) and checks each
    case's outputs."""
    t0 = time.monotonic()
    results = [Result(c.label) for c in cases]
    try:
        with tempfile.TemporaryDirectory(prefix="edgesight-conf-") as tmp:
            inputs, outdirs, expected = [], [], []
            extra = []
            for n, case in enumerate(cases):
                own = os.path.join(tmp, f"case{n}")
                os.mkdir(own)
                inp, extra, luma = case.make_input(own)
                exp = expected_outputs(luma, case.border)
                if case.expect_otsu is not None and exp["otsu"] != case.expect_otsu:
                    # Not a failure of the binary; flag that OpenCV itself changed.
                    print(f"note {case.label}: OpenCV Otsu gave {exp['otsu']}, "
                          f"script expected {case.expect_otsu}", file=sys.stderr)
                # A name of its own in the run, where its outputs' directory takes it.
                name = f"c{n:03d}{os.path.splitext(inp)[1]}"
                os.symlink(os.path.abspath(inp), os.path.join(tmp, name))
                inputs.append(os.path.join(tmp, name))
                expected.append(exp)
            out = os.path.join(tmp, "out")
            os.mkdir(out)
            # One input's outputs go into --out itself.
            outdirs = [out] if len(cases) == 1 else [
                os.path.join(out, os.path.basename(i)) for i in inputs]
            cmd = ([binary, "process"] + inputs + ["--out", out, "--raw", "--border",
                                                   cases[0].border] + list(extra))
            if device:
                cmd += ["--device", device]
            if tuning:
                cmd += ["--tuning", tuning]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True,
                                   timeout=timeout * len(cases))
            except subprocess.TimeoutExpired:
                for r in results:
                    r.errors.append(f"timed out after {timeout * len(cases):.0f}s: "
                                    f"{' '.join(cmd)}")
                return results
            stderr = (p.stderr or p.stdout or "").strip().splitlines()
            for r, inp, outdir, exp in zip(results, inputs, outdirs, expected):
                # Its own failure names its input; a run that failed before any input
                # fails every case.
                said = [line for line in stderr if os.path.basename(inp) in line]
                if p.returncode != 0 and (said or len(cases) == 1 or not os.path.isdir(outdir)):
                    tail = said or stderr[-3:]
                    r.errors.append(f"exit code {p.returncode}: {' | '.join(tail)}"
                                    + (f" [cmd: {' '.join(cmd)}]" if verbose else ""))
                    continue
                r.errors.extend(check_outputs(outdir, exp))
                if r.errors and verbose:
                    r.errors.append(f"[cmd: {' '.join(cmd)}]")
    except Exception as e:  # a bug in the harness should show up, not crash the run
        for r in results:
            r.errors.append(f"harness error: {type(e).__name__}: {e}")
    finally:
        for r in results:
            r.seconds = (time.monotonic() - t0) / len(cases)
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Check that edgesight's raw outputs are bit-identical to OpenCV.")
    ap.add_argument("--bin", required=True, help="path to the edgesight binary")
    ap.add_argument("--quick", action="store_true", help="skip the 1920x1080 cases")
    ap.add_argument("--board", action="store_true",
                    help="for an emulated board: of the formats added since the first eight, "
                         "one case per kernel variant (BOARD_PICKS)")
    ap.add_argument("--device", default="",
                    help="edgesight's --device for every run (default: its own default)")
    ap.add_argument("--tuning", default="",
                    help="edgesight's --tuning for every run (default: the device's own)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel binary runs (default 2)")
    ap.add_argument("--filter", default="", help="only run cases whose label contains this")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="timeout in seconds per case (a run's is this times its cases)")
    ap.add_argument("--verbose", action="store_true", help="print commands and per-case times")
    args = ap.parse_args(argv)

    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = os.path.abspath(args.bin)
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print(f"FAIL setup: {args.bin} is not an executable file")
        print("conformance: 0 passed, 1 failed")
        return 1

    try:
        check_raw_helpers()
    except AssertionError as e:
        print(f"FAIL setup: the raw format helpers disagree with their examples ({e!r})")
        print("conformance: 0 passed, 1 failed")
        return 1
    cases = [c for c in build_cases(args.quick, repo_root, args.board) if args.filter in c.label]
    t0 = time.monotonic()
    passed = failed = 0
    groups = case_groups(cases)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs), initializer=reference_mode) as pool:
        runs = pool.map(lambda g: run_group(binary, g, args.timeout, args.verbose, args.device,
                                            args.tuning),
                        groups)
        for r in (r for results in runs for r in results):
            timing = f" ({r.seconds:.2f}s)" if args.verbose else ""
            if r.errors:
                failed += 1
                print(f"FAIL {r.label}: {'; '.join(r.errors)}{timing}", flush=True)
            else:
                passed += 1
                print(f"ok  {r.label}{timing}", flush=True)
    if args.verbose:
        print(f"({len(cases)} cases in {len(groups)} runs, {time.monotonic() - t0:.1f}s)")
    print(f"conformance: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
