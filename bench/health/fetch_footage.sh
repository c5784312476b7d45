#!/usr/bin/env bash
# Fetches the real footage the motion sequences are made from: OpenCV's sample video
# vtest.avi (pedestrians crossing a plaza below a building; 768x576, 10 fps, 795 frames,
# MS-MPEG4 v3), shipped in Debian 12's opencv-doc package. The .deb is downloaded (never
# installed) into target/health/deb/ and only the video is unpacked, next to the
# photographs in target/health/images/. The video is pinned by its hash, not the package
# by its version: Debian's archive keeps only a suite's newest build of a package, and
# every build of opencv-doc 4.6 carries the same vtest.avi. A video already unpacked
# with the pinned hash is not fetched again.
#
#   bench/health/fetch_footage.sh [DIR]        (default target/health)
#
# Debian's copyright file for opencv-doc covers the video under OpenCV's own license
# (Files: *, Apache-2.0 AND BSD-3-Clause).
set -euo pipefail

dir=${1:-target/health}
member=./usr/share/doc/opencv-doc/examples/data/vtest.avi
video_sha256=45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf

mkdir -p "$dir/deb" "$dir/images"
# The video already unpacked with the pinned hash: nothing to do.
if echo "$video_sha256  $dir/images/vtest.avi" | sha256sum -c --quiet - >/dev/null 2>&1; then
    echo "fetch_footage: vtest.avi in $dir/images (cached)"
    exit 0
fi
# The .deb apt's lists name now, whatever its build.
deb_now() { ls -t "$dir"/deb/opencv-doc_*_all.deb 2>/dev/null | head -1; }
rm -f "$dir"/deb/opencv-doc_*_all.deb
echo "fetch_footage: downloading opencv-doc (about 96 MB, the .deb only, not installed)"
# apt-get download writes into the working directory; as root it warns that the download
# ran unsandboxed, which is harmless here. Without apt's lists (a fresh machine) it finds
# nothing: they are fetched once and it is tried again.
download() { (cd "$dir/deb" && apt-get download -q opencv-doc 2>&1 | grep -v "unsandboxed" || true); }
download
if [ -z "$(deb_now)" ]; then
    as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
    as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
    download
fi
deb=$(deb_now)
[ -n "$deb" ] || { echo "fetch_footage: apt-get download opencv-doc fetched nothing into $dir/deb (is Debian's main archive in apt's sources?)" >&2; exit 1; }

# Only the video, written afresh.
dpkg-deb --fsys-tarfile "$deb" | tar -xO "$member" > "$dir/images/vtest.avi.part"
echo "$video_sha256  $dir/images/vtest.avi.part" | sha256sum -c --quiet - \
    || { echo "fetch_footage: $member in $deb does not have the pinned sha256 $video_sha256: a build of opencv-doc with another vtest.avi" >&2; exit 1; }
mv "$dir/images/vtest.avi.part" "$dir/images/vtest.avi"
rm -f "$deb"
echo "fetch_footage: vtest.avi in $dir/images"
