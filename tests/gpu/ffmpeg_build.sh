#!/usr/bin/env bash
# tests/gpu/ffmpeg_build.sh OUT - a small static FFmpeg for a GPU machine
# that has no package manager: the libraries the video service links
# (libavformat, libavcodec, libswscale, libavutil), built from Debian's own
# source package of the version this machine has (apt-get source, with a
# private deb-src list, so the system's apt settings are left alone), with
# only what the service reads: H.264 and HEVC decoding, the mp4/mov, mkv,
# MPEG-TS, raw H.264/HEVC, RTSP/RTP/SDP demuxers and the file, udp, tcp,
# rtp and http protocols. Position-independent static archives, so they link
# into libvramkit-service.so (the inline assembly, which is not
# position-independent, is left out; the decoders' nasm assembly stays);
# their pkg-config files list the private libraries as public ones, so a
# plain pkg-config link is complete, and find their prefix from their own
# place, so OUT may move. Installs into OUT (lib/, include/, lib/pkgconfig/). Idempotent: a complete OUT is
# kept. Needs build-essential and nasm (the decoders' x86 assembly, which
# the CPU decoding of 1080p streams depends on), installed here if missing.
set -euo pipefail
out=${1:?usage: tests/gpu/ffmpeg_build.sh OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -f "$out/lib/pkgconfig/libavformat.pc" ] && [ -f "$out/.complete" ] && exit 0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/parts"
cat >"$work/parts/src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
apt=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$work/parts"
     -o Dir::State::Lists="$work/lists")
command -v nasm >/dev/null || apt-get install -y nasm >/dev/null
apt-get "${apt[@]}" update >/dev/null 2>&1
version=$(dpkg-query -W -f='${Version}' libavformat-dev 2>/dev/null || true)
spec=ffmpeg${version:+=$version}
(cd "$work" && apt-get "${apt[@]}" source --download-only "$spec" >/dev/null 2>&1) ||
  (cd "$work" && apt-get "${apt[@]}" source --download-only ffmpeg >/dev/null)
tar -xJf "$work"/ffmpeg_*.orig.tar.xz -C "$work"
src=$(find "$work" -maxdepth 1 -type d -name 'ffmpeg-*' | head -1)
cd "$src"
./configure --prefix="$out" --enable-pic --enable-static --disable-shared --disable-programs \
  --disable-doc --disable-debug --disable-autodetect --disable-inline-asm \
  --disable-everything --enable-pthreads --enable-network --enable-zlib \
  --disable-avdevice --disable-avfilter --disable-swresample --disable-postproc \
  --enable-decoder=h264,hevc --enable-parser=h264,hevc \
  --enable-demuxer=mov,matroska,mpegts,h264,hevc,rtsp,sdp,rtp \
  --enable-protocol=file,pipe,udp,tcp,rtp,http \
  --enable-bsf=h264_mp4toannexb,hevc_mp4toannexb >"$work/configure.log" 2>&1 ||
  { tail -30 "$work/configure.log"; exit 1; }
make -j "$(nproc)" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log"; exit 1; }
make install >/dev/null
for pc in "$out"/lib/pkgconfig/*.pc; do
  priv=$(sed -n 's/^Libs.private: *//p' "$pc")
  sed -i -e "s|^Libs: \(.*\)|Libs: \1 $priv|" -e '/^Libs.private:/d' -e '/^Requires.private:/d' \
    -e 's|^prefix=.*|prefix=${pcfiledir}/../..|' -e 's|^libdir=.*|libdir=${prefix}/lib|' \
    -e 's|^includedir=.*|includedir=${prefix}/include|' "$pc"
done
touch "$out/.complete"
echo "ffmpeg_build: $(cat "$src/RELEASE" 2>/dev/null || echo ffmpeg) static into $out"
