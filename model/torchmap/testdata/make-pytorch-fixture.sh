#!/usr/bin/env bash
# Regenerates the PyTorch fixture of model/torchmap's TestPyTorchFixture:
#   pytorch-gpt-a-cat-cpu.safetensors  the state_dict of a freshly initialised
#       SpikeModel (shared/tools/torchref.py, built at the gpt-a-cat-cpu sizes
#       with the tanh GELU; random norms and running statistics; seed 1)
#   pytorch-probe.safetensors  8 test-split windows of data/chicken-17-08-21
#       and PyTorch's logits and class probabilities for them
# Needs Go, and torch for /usr/bin/python3 (apt-get install python3-torch;
# the fixture was made with Debian's torch 1.13). Run from the repository
# root; torchref.py is read where tools/torchcheck.py expects it, or at
# $TORCHREF.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run ./cmd/trainer export --ckpt models/gpt-a-cat-cpu.ckpt --out "$tmp/like.safetensors" \
	--probe "$tmp/probe.safetensors" --data data/chicken-17-08-21 --probe-windows 8
out=model/torchmap/testdata
/usr/bin/python3 tools/torchcheck.py write "$tmp/like.safetensors" "$tmp/probe.safetensors" \
	"$out/pytorch-gpt-a-cat-cpu.safetensors" "$out/pytorch-probe.safetensors" --seed 1 \
	${TORCHREF:+--torchref "$TORCHREF"}
