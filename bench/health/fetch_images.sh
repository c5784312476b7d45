#!/usr/bin/env bash
# Fetches the photographs the camera-health sequences are made from: the sample images
# shipped inside the scikit-image wheel. The wheel is downloaded (never installed) into
# target/health/wheel/ and only its sample images are unpacked, into target/health/images/.
# Both are a cache: a wheel already there with the pinned hash is not downloaded again.
#
#   bench/health/fetch_images.sh [DIR]        (default target/health)
#
# The wheel is pinned to one file (CPython 3.11, manylinux x86-64) whatever the host, so
# that its hash can be pinned too; only its data files are used, never its code.
# Licenses of the images used: bench/health/README.md ("Images").
set -euo pipefail

dir=${1:-target/health}
version=0.25.2
wheel=scikit_image-$version-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
sha256=24cc986e1f4187a12aa319f777b36008764e856e5013666a4a83f8df083c2641
# The photographs and textures the sequences use (skimage/data/NAME). moon.png and page.png
# are left out: scikit-image states no license for them.
images=(camera.png astronaut.png coffee.png chelsea.png rocket.jpg coins.png
        brick.png grass.png gravel.png)

mkdir -p "$dir/wheel" "$dir/images"
have_hash() { [ -f "$dir/wheel/$wheel" ] && echo "$sha256  $dir/wheel/$wheel" | sha256sum -c --quiet - 2>/dev/null; }

if ! have_hash; then
    rm -f "$dir/wheel/$wheel"
    echo "fetch_images: downloading scikit-image $version (the wheel only, not installed)"
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux2014_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
        --dest "$dir/wheel" "scikit-image==$version"
    have_hash || { echo "fetch_images: $dir/wheel/$wheel does not have the pinned sha256 $sha256" >&2; exit 1; }
fi

# Unpacks the images with Python's zipfile (unzip may not be installed), each written
# afresh so that an image damaged in the cache is replaced.
python3 - "$dir/wheel/$wheel" "$dir/images" "${images[@]}" <<'EOF'
import pathlib
import sys
import zipfile

wheel, out, names = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        (out / name).write_bytes(z.read(f"skimage/data/{name}"))
print(f"fetch_images: {len(names)} images in {out}")
EOF
