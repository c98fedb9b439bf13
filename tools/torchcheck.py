"""Check the safetensors interchange with PyTorch (docs/interop.md).

Loads a file written by `trainer export` into the reference module
(SpikeModel of shared/tools/torchref.py, built with the file's CNN sizes) with
load_state_dict(strict=True), runs it on the real windows of a probe file
written by `trainer export --probe` and compares its probabilities with the Go
engine's. It also writes a PyTorch state_dict as safetensors for `trainer
import`. Safetensors is read and written with struct/json only (the format is an
8-byte header length, a JSON header and little-endian tensor bytes), so only
torch is needed.

usage:
  torchcheck.py check  MODEL.safetensors PROBE.safetensors [--torchref PATH]
  torchcheck.py write  LIKE.safetensors PROBE.safetensors OUT.safetensors OUT_PROBE.safetensors [--seed N]
      (a freshly initialised SpikeModel of LIKE's configuration, its state_dict
      and its probabilities on PROBE's windows)
  torchcheck.py compare A_PROBE.safetensors B_PROBE.safetensors
"""
import argparse, importlib.util, json, os, struct, sys

import torch
import torch.nn as nn

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "I8": torch.int8, "BOOL": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        buf = bytearray(data[base + b:base + end])
        t = torch.frombuffer(buf, dtype=DTYPES[e["dtype"]]) if buf else torch.empty(0, dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return meta, out


def write_safetensors(path, tensors, meta):
    header, blobs, off = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        raw = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load_torchref(path):
    spec = importlib.util.spec_from_file_location("torchref", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(tr, cfg, gelu):
    """SpikeModel with the configuration's sizes; torchref's module names."""
    d = cfg["heads"] * cfg["head_dim"]
    nout = 81 if cfg["head"] == "cat" else 3 * cfg["mixtures"]
    m = tr.SpikeModel(cfg["layers"], cfg["heads"], cfg["head_dim"], ncells=cfg["num_cells"], nout=nout)
    c, k, mid, out = cfg["stem_ch"], cfg["stem_kernel"], cfg["block_mid"], cfg["block_out"]
    if (c, mid, out) != (16, 128, 64):  # torchref's CNN is the paper preset; rebuild it at these sizes
        cnn = tr.CNN.__new__(tr.CNN)
        nn.Module.__init__(cnn)
        cnn.conv1 = nn.Conv1d(cfg["in_rows"], c, k, stride=2, padding=k // 2, bias=False); cnn.bn1 = nn.BatchNorm1d(c)
        cnn.conv2 = nn.Conv1d(c, c, k, stride=1, padding=k // 2, bias=False); cnn.bn2 = nn.BatchNorm1d(c)
        cnn.blocks = nn.Sequential(tr.Bottleneck(c, mid, out, 2), tr.Bottleneck(out, mid, out, 2),
                                   tr.Bottleneck(out, mid, out, 2), tr.Bottleneck(out, mid, out, 1))
        m.cnn = cnn
    if gelu == "tanh":
        for b in m.blocks:
            b.mlp[1] = nn.GELU(approximate="tanh")
    return m.eval()


def run(m, probe):
    with torch.inference_mode():
        logits = m(probe["input"], probe["cell_row"])
    return logits, torch.softmax(logits.double(), -1).float()


def check(a):
    tr = load_torchref(a.torchref)
    meta, sd = read_safetensors(a.model)
    _, probe = read_safetensors(a.probe)
    cfg = json.loads(meta["rgcpred.config"])
    res = {"model": os.path.basename(a.model), "windows": int(probe["input"].shape[0])}
    for gelu in ("tanh", "exact"):
        m = build(tr, cfg, gelu)
        m.load_state_dict(sd, strict=True)
        logits, prob = run(m, probe)
        res[gelu] = {"max_abs_prob_diff": float((prob - probe["prob"]).abs().max()),
                     "max_abs_logit_diff": float((logits - probe["logits"]).abs().max()),
                     "max_prob": float(probe["prob"].max())}
    print(json.dumps(res, indent=1))
    ok = res["tanh"]["max_abs_prob_diff"] < a.tol
    print("OK" if ok else "MISMATCH", f"(tolerance {a.tol} on probabilities, GELU tanh as in the Go engine)")
    return 0 if ok else 1


def write(a):
    tr = load_torchref(a.torchref)
    meta, _ = read_safetensors(a.like)
    _, probe = read_safetensors(a.probe)
    cfg = json.loads(meta["rgcpred.config"])
    torch.manual_seed(a.seed)
    m = build(tr, cfg, "tanh")
    with torch.no_grad():  # non-trivial norms and running statistics, so every tensor matters
        for name, t in m.state_dict().items():
            if name.endswith("running_var"):
                t.uniform_(0.5, 1.5)
            elif name.endswith(("running_mean", "bias")) or ".ln" in name or "lnf" in name:
                t.add_(0.1 * torch.randn_like(t))
            elif name in ("pos", "cell.weight"):
                t.normal_(0, 0.1)
    write_safetensors(a.out, m.state_dict(), {"format": "pt"})
    logits, prob = run(m, probe)
    write_safetensors(a.out_probe, {"input": probe["input"], "cell_row": probe["cell_row"],
                                    "cluster_id": probe["cluster_id"], "end": probe["end"],
                                    "logits": logits, "prob": prob}, {"format": "pt"})
    print(f"wrote {a.out} ({len(m.state_dict())} tensors) and {a.out_probe}")
    return 0


def compare(a):
    _, x = read_safetensors(a.a)
    _, y = read_safetensors(a.b)
    assert torch.equal(x["input"], y["input"]) and torch.equal(x["cell_row"], y["cell_row"]), "different windows"
    d = float((x["prob"] - y["prob"]).abs().max())
    print(json.dumps({"windows": int(x["input"].shape[0]), "max_abs_prob_diff": d,
                      "max_abs_logit_diff": float((x["logits"] - y["logits"]).abs().max())}))
    ok = d < a.tol
    print("OK" if ok else "MISMATCH", f"(tolerance {a.tol})")
    return 0 if ok else 1


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["check", "write", "compare"])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--torchref", default=os.path.join(here, "..", "..", "shared", "tools", "torchref.py"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tol", type=float, default=1e-5)
    a = ap.parse_args()
    torch.set_num_threads(1)
    want = {"check": 2, "write": 4, "compare": 2}[a.mode]
    if len(a.files) != want:
        ap.error(f"{a.mode} takes {want} files")
    if a.mode == "check":
        a.model, a.probe = a.files
        return check(a)
    if a.mode == "write":
        a.like, a.probe, a.out, a.out_probe = a.files
        return write(a)
    a.a, a.b = a.files
    return compare(a)


if __name__ == "__main__":
    sys.exit(main())
