"""Writes the benchmark frames: samples/scene.png scaled to 1920x1080 and 3840x2160 with
mild noise (natural-looking content, not zeros, not pure noise).

    python3 bench/make_frames.py [OUT_DIR]      (default target/bench)
"""
import pathlib
import sys

import cv2
import numpy as np

out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/bench")
out.mkdir(parents=True, exist_ok=True)
scene = cv2.imread(str(pathlib.Path(__file__).resolve().parent.parent / "samples/scene.png"))
rng = np.random.default_rng(1)
for name, size in {"scene1080.png": (1920, 1080), "scene2160.png": (3840, 2160)}.items():
    frame = cv2.resize(scene, size, interpolation=cv2.INTER_CUBIC).astype(np.int16)
    frame = np.clip(frame + rng.integers(-3, 4, size=frame.shape), 0, 255).astype(np.uint8)
    cv2.imwrite(str(out / name), frame)
    print(out / name)
