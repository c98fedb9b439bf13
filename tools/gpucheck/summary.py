"""Summary of the device check (run.sh): the goals of docs/engine.md against
what was measured, as OUT/summary.json; or, with --realtime FILE, exit 0 if
the latency report FILE's every point is served in real time. A goal is
true or false where it was measured, else null with the reason in
"unmeasured" (no GPU, no PyTorch, a step that failed).

usage: summary.py --out OUT | --realtime LATENCY.json
"""
import argparse, glob, json, os, sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def last_line(path):
    """The last non-empty line of a log ("" if none or unreadable)."""
    try:
        with open(path) as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def tests(path):
    """Counts of a verbose Go test log's top-level results, with the first
    reason a test gave for skipping."""
    r = {"pass": 0, "fail": 0, "skip": 0}
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return {"error": "no log"}
    for i, l in enumerate(lines):
        for k in ("pass", "fail", "skip"):
            if l.startswith("--- " + k.upper() + ":"):
                r[k] += 1
                if k == "skip" and "skip_reason" not in r and i > 0:
                    r["skip_reason"] = lines[i - 1].strip()
    return r


def realtime(path):
    rep = load(path)
    return bool(rep and rep.get("points") and all(p.get("real_time") for p in rep["points"]))


def summary(out):
    s = {"goals": {}}
    steps = [json.loads(l) for l in open(os.path.join(out, "steps.jsonl")) if l.strip()]
    s["steps"] = steps
    gc = load(os.path.join(out, "gpucheck.json"))
    if gc is None:
        gc = {}
        no_gpu = "unknown: gpucheck wrote no report (gpucheck.log: %s)" % last_line(os.path.join(out, "gpucheck.log"))
    else:
        no_gpu = gc.get("no_gpu", "")
    s["gpu"] = gc.get("device") or no_gpu
    s["device"] = gc.get("device", "")
    s["date"] = gc.get("date", "")
    s["tests"] = {os.path.basename(f)[:-4]: tests(f) for f in sorted(glob.glob(os.path.join(out, "*-test.log")))}
    unmeasured = {}
    par = []
    for p in gc.get("parity") or []:
        r = p.get("report") or {}
        par.append({"config": p["config"], "weights": p.get("weights"), "ok": r.get("ok", False),
                    "first_over": r.get("first_over"), "first_over_diff": r.get("first_over_diff"),
                    "head_vs_engine": r.get("head_vs_engine"), "error": p.get("error")})
    s["parity"] = par
    errs = [p["error"] for p in par if p.get("error")]
    if any(p.get("first_over") is not None or p["ok"] for p in par) or (par and not errs):
        s["goals"]["parity_fp32_1e-4"] = all(p["ok"] for p in par)
    else:
        s["goals"]["parity_fp32_1e-4"] = None
        unmeasured["parity_fp32_1e-4"] = no_gpu or (errs[0] if errs else "no parity report")
    torch = {}
    try:
        for l in open(os.path.join(out, "torch.jsonl")):
            if l.strip():
                t = json.loads(l)
                torch[(t["stem"], t["batch"])] = t
    except OSError:
        pass
    if not torch:
        s["torch"] = "PyTorch eager not measured: " + (last_line(os.path.join(out, "torch-gpt-a-1.log")) or "no output")
    rows = []
    for t in gc.get("timing") or []:
        if t.get("error"):
            rows.append(t)
            continue
        stem = t["config"].rsplit("-", 1)[0]
        ref = torch.get((stem, t["batch"]))
        row = dict(t)
        if ref:
            row["torch_median_ms"] = ref["median_ms"]
            row["torch_windows_per_s"] = t["batch"] / (ref["median_ms"] / 1e3)
            row["speedup_vs_torch"] = row["windows_per_s"] / row["torch_windows_per_s"]
        rows.append(row)
    s["timing"] = rows
    b1 = [r["p50_ms"] for r in rows if r.get("batch") == 1 and not r.get("error")]
    terrs = [r["error"] for r in rows if r.get("error")]
    if b1:
        s["goals"]["batch1_at_most_0.3ms"] = min(b1) <= 0.3
    else:
        s["goals"]["batch1_at_most_0.3ms"] = None
        unmeasured["batch1_at_most_0.3ms"] = no_gpu or (terrs[0] if terrs else "no timing report")
    b1024 = [r for r in rows if r.get("batch") == 1024 and "speedup_vs_torch" in r]
    if b1024:
        s["goals"]["2x_torch_at_batch_1024"] = all(r["speedup_vs_torch"] >= 2 for r in b1024)
    else:
        s["goals"]["2x_torch_at_batch_1024"] = None
        why = [w for w in (no_gpu, s.get("torch", "")) if w]
        unmeasured["2x_torch_at_batch_1024"] = "; ".join(why) or "no timing at batch 1024"
    lat = []
    for f in sorted(glob.glob(os.path.join(out, "latency-*.json")), key=lambda f: int(f.rsplit("-", 1)[1].split(".")[0])):
        rep = load(f)
        for p in (rep or {}).get("points") or []:
            lat.append({"cells": p["cells"], "devices": p["devices"], "p99_ms": p["latency"]["p99_ms"],
                        "deadline_misses": p["deadline_misses"], "real_time": p["real_time"], "mean_batch": p.get("mean_batch")})
    s["latency"] = lat
    rt = [p["cells"] for p in lat if p["real_time"]]
    s["largest_real_time_cells"] = max(rt) if rt else 0
    if lat:
        s["goals"]["10000_cells_real_time"] = s["largest_real_time_cells"] >= 10000
    else:
        s["goals"]["10000_cells_real_time"] = None
        logs = sorted(glob.glob(os.path.join(out, "latency-*.log")))
        unmeasured["10000_cells_real_time"] = no_gpu or (last_line(logs[0]) if logs else "the latency bench did not run")
    s["unmeasured"] = unmeasured
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(s, f, indent=2)
    print("gpu:", s["gpu"] or "unknown")
    print(json.dumps({"goals": s["goals"], "unmeasured": unmeasured, "tests": s["tests"]}, indent=2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--realtime")
    a = ap.parse_args()
    if a.realtime:
        sys.exit(0 if realtime(a.realtime) else 1)
    summary(a.out)


if __name__ == "__main__":
    main()
