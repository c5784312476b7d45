#!/usr/bin/env python3
"""Makes the JPEG corpus in tests/fixtures/jpeg: small JPEG images of the kinds cameras
send, each with OpenCV's grayscale decode of it beside it as a PGM (the expected luma).

    python3 tests/jpeg/make_corpus.py [OUTDIR]     (default: tests/fixtures/jpeg)

The images are crops of samples/scene.png (a photograph), encoded by OpenCV's
libjpeg-turbo:
    scene-420.jpg         4:2:0, 160x120, quality 85 (what most UVC webcams send)
    scene-422.jpg         4:2:2, 161x121 (odd sides: partial MCUs at the right and bottom)
    scene-444.jpg         4:4:4, 96x64
    grey.jpg              one component (a mono camera's MJPEG), 97x33
    restarts.jpg          4:2:0 with a restart marker every 3 MCUs
    progressive.jpg       progressive 4:2:0, 160x120
    no-huffman-tables.jpg scene-420.jpg without its DHT segments and with an AVI1 APP0
                          segment, as UVC cameras send MJPEG (the decoder must use the
                          standard tables, which OpenCV's encoder used)
and for each NAME.jpg a NAME.pgm: cv2.imdecode(NAME.jpg, IMREAD_GRAYSCALE); for
scene-420.jpg also scene-420.half.pgm, .quarter.pgm and .eighth.pgm
(IMREAD_REDUCED_GRAYSCALE_2/4/8). The streams made of them (cut at every byte, garbage
after the end, padding between images, empty) are made by the tests themselves.

The output is deterministic for one OpenCV build; the tests compare edgesight's decode
with the PGMs, and tests/conformance.py compares with OpenCV itself at test time.
"""

import os
import sys

import cv2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def strip_huffman_tables(jpeg: bytes) -> bytes:
    """The JPEG without its DHT segments, with an AVI1 APP0 segment after SOI."""
    out = bytearray(jpeg[:2])
    out += b"\xff\xe0\x00\x10AVI1" + bytes(10)
    at = 2
    while at < len(jpeg):
        assert jpeg[at] == 0xFF, f"no marker at byte {at}"
        code = jpeg[at + 1]
        if code == 0xDA:
            out += jpeg[at:]
            break
        length = jpeg[at + 2] << 8 | jpeg[at + 3]
        if code != 0xC4:
            out += jpeg[at:at + 2 + length]
        at += 2 + length
    return bytes(out)


def main() -> None:
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/fixtures/jpeg")
    os.makedirs(out_dir, exist_ok=True)
    scene = cv2.imread(os.path.join(ROOT, "samples/scene.png"), cv2.IMREAD_COLOR)
    assert scene is not None, "samples/scene.png"

    def crop(w, h, x=200, y=150):
        return np.ascontiguousarray(scene[y:y + h, x:x + w])

    def encode(img, *params):
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 85, *params])
        assert ok
        return buf.tobytes()

    sampling = cv2.IMWRITE_JPEG_SAMPLING_FACTOR
    images = {
        "scene-420": encode(crop(160, 120), sampling, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420),
        "scene-422": encode(crop(161, 121), sampling, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422),
        "scene-444": encode(crop(96, 64), sampling, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444),
        "grey": encode(cv2.cvtColor(crop(97, 33), cv2.COLOR_BGR2GRAY)),
        "restarts": encode(crop(160, 120), cv2.IMWRITE_JPEG_RST_INTERVAL, 3),
        "progressive": encode(crop(160, 120), cv2.IMWRITE_JPEG_PROGRESSIVE, 1),
    }
    images["no-huffman-tables"] = strip_huffman_tables(images["scene-420"])
    for name, jpeg in images.items():
        with open(os.path.join(out_dir, name + ".jpg"), "wb") as f:
            f.write(jpeg)
        grey = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_GRAYSCALE)
        assert grey is not None, name
        cv2.imwrite(os.path.join(out_dir, name + ".pgm"), grey)
    # The DHT-less image decodes with the standard tables to the same luma.
    a = cv2.imread(os.path.join(out_dir, "scene-420.pgm"), cv2.IMREAD_GRAYSCALE)
    b = cv2.imread(os.path.join(out_dir, "no-huffman-tables.pgm"), cv2.IMREAD_GRAYSCALE)
    assert np.array_equal(a, b), "the standard tables decode differently"
    reduced = {
        "half": cv2.IMREAD_REDUCED_GRAYSCALE_2,
        "quarter": cv2.IMREAD_REDUCED_GRAYSCALE_4,
        "eighth": cv2.IMREAD_REDUCED_GRAYSCALE_8,
    }
    for name, flag in reduced.items():
        grey = cv2.imdecode(np.frombuffer(images["scene-420"], np.uint8), flag)
        cv2.imwrite(os.path.join(out_dir, f"scene-420.{name}.pgm"), grey)
    print(f"make_corpus: {len(images)} JPEG images in {out_dir}")


if __name__ == "__main__":
    main()
