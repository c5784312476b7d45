#!/usr/bin/env bash
# Fetches the real footage the motion sequences are made from: OpenCV's sample video
# vtest.avi (pedestrians crossing a plaza below a building; 768x576, 10 fps, 795 frames,
# MS-MPEG4 v3), shipped in Debian 12's opencv-doc package. The .deb is downloaded (never
# installed) into target/health/deb/ and only the video is unpacked, next to the
# photographs in target/health/images/. Both are a cache: a .deb already there with the
# pinned hash is not downloaded again.
#
#   bench/health/fetch_footage.sh [DIR]        (default target/health)
#
# Debian's copyright file for opencv-doc covers the video under OpenCV's own license
# (Files: *, Apache-2.0 AND BSD-3-Clause).
set -euo pipefail

dir=${1:-target/health}
version=4.6.0+dfsg-12
deb=opencv-doc_${version}_all.deb
deb_sha256=4b12681df35878207ac7097dc66184b2ae552e4bf4ddd2af04a0f03ed0b8682a
member=./usr/share/doc/opencv-doc/examples/data/vtest.avi
video_sha256=45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf

mkdir -p "$dir/deb" "$dir/images"
# The video already unpacked with the pinned hash: nothing to do.
if echo "$video_sha256  $dir/images/vtest.avi" | sha256sum -c --quiet - >/dev/null 2>&1; then
    echo "fetch_footage: vtest.avi in $dir/images (cached)"
    exit 0
fi
have_hash() { [ -f "$dir/deb/$deb" ] && echo "$deb_sha256  $dir/deb/$deb" | sha256sum -c --quiet - 2>/dev/null; }

if ! have_hash; then
    rm -f "$dir/deb/$deb"
    echo "fetch_footage: downloading opencv-doc $version (96 MB, the .deb only, not installed)"
    # apt-get download writes into the working directory; as root it warns that the
    # download ran unsandboxed, which is harmless here. Without apt's lists (a fresh
    # machine) it finds nothing: they are fetched once and it is tried again.
    download() { (cd "$dir/deb" && apt-get download -q "opencv-doc=$version" 2>&1 | grep -v "unsandboxed" || true); }
    download
    if ! have_hash; then
        as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
        as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
        download
    fi
    have_hash || { echo "fetch_footage: $dir/deb/$deb is missing or does not have the pinned sha256 $deb_sha256 (is Debian 12's opencv-doc $version in apt's lists? run apt-get update)" >&2; exit 1; }
fi

# Only the video, written afresh.
dpkg-deb --fsys-tarfile "$dir/deb/$deb" | tar -xO "$member" > "$dir/images/vtest.avi.part"
echo "$video_sha256  $dir/images/vtest.avi.part" | sha256sum -c --quiet - \
    || { echo "fetch_footage: $member in $deb does not have the pinned sha256 $video_sha256" >&2; exit 1; }
mv "$dir/images/vtest.avi.part" "$dir/images/vtest.avi"
echo "fetch_footage: vtest.avi in $dir/images"
