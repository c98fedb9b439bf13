#!/usr/bin/env bash
# Builds, on a machine with Go, everything the device check needs on a GPU
# machine that has CUDA, PyTorch and python3 but no Go, into out/gpucheck
# (ignored by git; carry it to the GPU machine): static test binaries of
# base/cuda and model/gpu, gpucheck, the latency bench, predictord (pure
# Go, CGO_ENABLED=0, stripped), the recording, the shipped checkpoints,
# PyTorch's reference model (torchref.py, by default the repository's
# neighbour ../shared/tools/torchref.py) with torchcmp.py, which times it,
# and run.sh, the one command to run there. docs/engine.md, "The device
# check".
#
#   tools/gpucheck/build.sh [path/to/torchref.py]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
torchref=${1:-../shared/tools/torchref.py}
if [ ! -f "$torchref" ]; then
	echo "build.sh: no $torchref (give torchref.py's path as the argument)" >&2
	exit 1
fi
dst=out/gpucheck
rm -rf "$dst"
mkdir -p "$dst/bin" "$dst/data" "$dst/models"
export CGO_ENABLED=0
flags=(-trimpath -ldflags=-s\ -w)
go test -c "${flags[@]}" -o "$dst/bin/cuda.test" ./base/cuda
go test -c "${flags[@]}" -o "$dst/bin/gpu.test" ./model/gpu
go build "${flags[@]}" -o "$dst/bin/gpucheck" ./bench/cmd/gpucheck
go build "${flags[@]}" -o "$dst/bin/latency" ./bench/cmd/latency
go build "${flags[@]}" -o "$dst/bin/predictord" ./cmd/predictord
cp -r data/chicken-17-08-21 "$dst/data/"
cp models/*.ckpt "$dst/models/"
cp "$torchref" "$dst/torchref.py"
cp tools/gpucheck/run.sh tools/gpucheck/summary.py tools/gpucheck/torchcmp.py "$dst/"
# The binaries compress about 3x: the copy to the GPU machine is limited.
tar -C "$dst" -czf "$dst/bin.tar.gz" bin
rm -rf "$dst/bin"
size=$(du -sm "$dst" | cut -f1)
echo "built $dst: ${size} MiB"
if [ "$size" -gt 60 ]; then
	echo "build.sh: $dst is ${size} MiB, over the 60 MiB that the GPU machine's copy allows" >&2
	exit 1
fi
