#!/usr/bin/env bash
# A one-off, not CI: checks the C types base/cuda's purego calls assume
# (base/cuda/testdata/headercheck.c) against CUDA's own headers with gcc.
# The headers come from $CUDA_INCLUDE, else from Debian's non-free
# nvidia-cuda-dev (CUDA 11.8; a 774 MB download: apt-get download, only
# usr/include extracted). docs/engine.md, "The GPU backend".
#
#   tools/gpucheck/headercheck.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
inc=${CUDA_INCLUDE:-}
if [ -z "$inc" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download nvidia-cuda-dev >/dev/null)
	dpkg-deb --fsys-tarfile "$tmp"/nvidia-cuda-dev_*.deb | tar -x -C "$tmp" --wildcards './usr/include/*'
	inc=$tmp/usr/include
	echo "headers of $(basename "$tmp"/nvidia-cuda-dev_*.deb)"
fi
gcc -std=gnu11 -fsyntax-only -Wall -Werror -I "$inc" base/cuda/testdata/headercheck.c
echo "headercheck: every binding's C types match $inc"
