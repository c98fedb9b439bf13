"""PyTorch eager's times for the device check (run.sh), like for like with
gpucheck's: torchref.py's model (the same architecture, cat head), its
precision flags set as asked, and two timings per batch, as gpucheck's:

- end to end (e2e_p50_ms, e2e_p99_ms): one call at a time, float32 windows
  in pinned host memory copied in, the forward pass, the softmax, the
  probabilities copied back to the host;
- device (device_ms): calls queued back to back with one wait at the end,
  the copy in from pinned memory, the forward pass and the softmax.

--precision fp32 turns TF32 off for matrix products and cuDNN's
convolutions (PyTorch's default lets cuDNN use TF32); tf32 turns it on for
both, as gpucheck's tf32 runs every GEMM in TF32. One JSON line a batch.

usage: torchcmp.py --stem gpt-a|gpt-b --precision fp32|tf32 --batches 1,64,1024 [--iters 20]
"""
import argparse, json, time

import torch

from torchref import SpikeModel, nparams


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stem", default="gpt-a")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32"])
    ap.add_argument("--batches", default="1,64,1024,8192")
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    cfg = {"gpt-a": (2, 4, 16), "gpt-b": (6, 4, 32)}[a.stem]
    m = SpikeModel(*cfg).to("cuda").eval()
    for b in [int(x) for x in a.batches.split(",")]:
        host = torch.randn(b, 5, 1024).pin_memory()
        cells = torch.randint(0, 1611, (b,), device="cuda")
        x = torch.empty(b, 5, 1024, device="cuda")
        out = torch.empty(b, 81).pin_memory()

        def call():
            x.copy_(host, non_blocking=True)
            p = torch.softmax(m(x, cells), dim=-1)
            out.copy_(p, non_blocking=True)

        with torch.inference_mode():
            for _ in range(5):
                call()
            torch.cuda.synchronize()
            ts = []
            for _ in range(a.iters):
                t = time.perf_counter()
                call()
                torch.cuda.synchronize()
                ts.append(time.perf_counter() - t)
            t = time.perf_counter()
            for _ in range(a.iters):
                x.copy_(host, non_blocking=True)
                torch.softmax(m(x, cells), dim=-1)
            torch.cuda.synchronize()
            dev = (time.perf_counter() - t) / a.iters
        ts.sort()
        print(json.dumps({"stem": a.stem, "precision": a.precision, "batch": b, "params": nparams(m),
                          "torch": torch.__version__, "cuda": torch.version.cuda,
                          "cudnn": torch.backends.cudnn.version(),
                          "e2e_p50_ms": 1e3 * ts[len(ts) // 2], "e2e_p99_ms": 1e3 * ts[-1],
                          "device_ms": 1e3 * dev}), flush=True)


if __name__ == "__main__":
    main()
