#!/usr/bin/env bash
# The device check, on a GPU machine, from the folder tools/gpucheck/build.sh
# made: at most 8 minutes, every result as JSON (and the raw logs) in OUT.
#
#   out/gpucheck/run.sh OUT
#
# 0. env.txt: the CUDA libraries found (path, file, version), the
#    kernel module's release, PyTorch's versions;
# 1. the device tests of base/cuda and model/gpu (bindings, kernels,
#    graphs, parity on random weights, allocations), model/gpu's each in a
#    process of its own;
# 2. gpucheck: layer-by-layer parity against the CPU on up to 256 real
#    windows for every configuration (shipped checkpoints first), then the
#    GPU engine's batch-1 latency and throughput at batches 64, 1024 and
#    8192 (fp32 and tf32), each part in a child process of its own;
# 3. PyTorch eager (torchcmp.py over torchref.py's model) at the same
#    batches and precisions, end to end and on the device;
# 4. the latency bench, --backend cuda, N devices of 60 cells, N rising
#    until a count is not served in real time;
# 5. summary.json: the goals of docs/engine.md against what was measured.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: run.sh OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$here"
start=$(date +%s)
bin=$(mktemp -d)
tar -C "$bin" -xzf bin.tar.gz
bin=$bin/bin
limit=${GPUCHECK_LIMIT_S:-470}
left() { echo $((limit - ($(date +%s) - start))); }
step() { # step NAME SECONDS CMD...: run CMD with at most SECONDS (and what is left), log and status to OUT
	local name=$1 max=$2
	shift 2
	local t
	t=$(left)
	[ "$t" -gt "$max" ] && t=$max
	if [ "$t" -lt 5 ]; then
		echo "skipped: out of time" >"$out/$name.log"
		echo '{"step":"'"$name"'","status":"skipped"}' >>"$out/steps.jsonl"
		return
	fi
	local t0=$(date +%s)
	# -k: a process stuck in the driver ignores TERM; KILL it 10 s later,
	# so that the script always reaches its summary.
	timeout -k 10 "$t" "$@" >"$out/$name.log" 2>&1
	local rc=$?
	echo '{"step":"'"$name"'","status":'"$rc"',"seconds":'"$(($(date +%s) - t0))"',"limit_s":'"$t"'}' >>"$out/steps.jsonl"
}
: >"$out/steps.jsonl"
if command -v nvidia-smi >/dev/null; then nvidia-smi >"$out/nvidia-smi.txt" 2>&1; else echo "no nvidia-smi here: no NVIDIA driver installed" >"$out/nvidia-smi.txt"; fi
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' >"$out/torch-version.txt" 2>&1
# The CUDA libraries: PyTorch's wheels carry NVRTC and cuBLAS.
libs=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted(d for p in nvidia.__path__ for d in glob.glob(os.path.join(p, "*", "lib")))))' 2>/dev/null || true)
tlib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null || true)
libs=${libs}${tlib:+:$tlib}
export RGCPRED_CUDA_LIB=${RGCPRED_CUDA_LIB:-$libs}
# Lazy module loading stays as the driver sets it (the engine runs each
# batch size once before capturing its graph): what is checked is what
# predictord does.
{
	echo "RGCPRED_CUDA_LIB=$RGCPRED_CUDA_LIB"
	echo "CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-unset (the driver default)}"
	echo "torch: $(cat "$out/torch-version.txt")"
	timeout -k 5 20 "$bin/gpucheck" --libs 2>&1
} >"$out/env.txt"

step cuda-test 40 "$bin/cuda.test" -test.v -test.count=1
# The device tests and NVRTC's compile of the kernels (the CPU-side tests
# ran where the folder was built), each test in a process of its own: a
# sticky CUDA error spoils its process's context, not the tests after it.
for t in $("$bin/gpu.test" -test.list 'Device|KernelsCompile|NVRTC|AttentionInRegisters|HeadDim'); do
	step "gpu-test-$t" 60 "$bin/gpu.test" -test.v -test.count=1 -test.run "^$t\$"
done
step gpucheck 200 "$bin/gpucheck" --data data/chicken-17-08-21 --models models --json "$out/gpucheck.json" --budget 150s
: >"$out/torch.jsonl"
for stem in gpt-a gpt-b; do
	for prec in fp32 tf32; do
		step "torch-$stem-$prec" 40 python3 torchcmp.py --stem "$stem" --precision "$prec" --batches 1,64,1024,8192 --iters 20
		grep '^{' "$out/torch-$stem-$prec.log" >>"$out/torch.jsonl"
	done
done
# The latency bench: the paper CNN's gpt-a-cat, devices of 60 cells each.
stim=causal
for n in 1 10 40 100 167; do
	cells=$((60 * n))
	for try in 1 2; do
		step "latency-$cells" 60 "$bin/latency" --backend cuda --ckpt models/gpt-a-cat.ckpt --data data/chicken-17-08-21 --stim "$stim" \
			--cells "$cells" --seconds 5 --max-batch 4096 --json "$out/latency-$cells.json" --svg ""
		grep -q "stimulus mode mismatch" "$out/latency-$cells.log" || break
		# The checkpoint was trained on the other stimulus mode.
		if [ "$stim" = causal ]; then stim=zero-phase; else stim=causal; fi
	done
	python3 summary.py --realtime "$out/latency-$cells.json" || break
done
python3 summary.py --out "$out" >"$out/summary.log" 2>&1
cat "$out/summary.log"
grep -h -E '^(--- FAIL|FAIL|panic)' "$out"/*-test*.log
echo "device check done in $(($(date +%s) - start)) s; $out/summary.json"
