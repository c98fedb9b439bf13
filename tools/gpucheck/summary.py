"""Summary of the device check (run.sh): the goals of docs/engine.md against
what was measured, as OUT/summary.json; or, with --realtime FILE, exit 0 if
the latency report FILE's every point is served in real time.

usage: summary.py --out OUT | --realtime LATENCY.json
"""
import argparse, glob, json, os, sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def realtime(path):
    rep = load(path)
    return bool(rep and rep.get("points") and all(p.get("real_time") for p in rep["points"]))


def summary(out):
    s = {"goals": {}}
    steps = [json.loads(l) for l in open(os.path.join(out, "steps.jsonl")) if l.strip()]
    s["steps"] = steps
    gc = load(os.path.join(out, "gpucheck.json")) or {}
    s["device"] = gc.get("device", "")
    s["date"] = gc.get("date", "")
    par = []
    for p in gc.get("parity") or []:
        r = p.get("report") or {}
        par.append({"config": p["config"], "weights": p.get("weights"), "ok": r.get("ok", False),
                    "first_over": r.get("first_over"), "first_over_diff": r.get("first_over_diff"),
                    "head_vs_engine": r.get("head_vs_engine"), "error": p.get("error")})
    s["parity"] = par
    s["goals"]["parity_fp32_1e-4"] = bool(par) and all(p["ok"] for p in par)
    torch = {}
    try:
        for l in open(os.path.join(out, "torch.jsonl")):
            if l.strip():
                t = json.loads(l)
                torch[(t["stem"], t["batch"])] = t
    except OSError:
        pass
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
    s["goals"]["batch1_at_most_0.3ms"] = bool(b1) and min(b1) <= 0.3
    b1024 = [r for r in rows if r.get("batch") == 1024 and "speedup_vs_torch" in r]
    s["goals"]["2x_torch_at_batch_1024"] = bool(b1024) and all(r["speedup_vs_torch"] >= 2 for r in b1024)
    lat = []
    for f in sorted(glob.glob(os.path.join(out, "latency-*.json")), key=lambda f: int(f.rsplit("-", 1)[1].split(".")[0])):
        rep = load(f)
        for p in (rep or {}).get("points") or []:
            lat.append({"cells": p["cells"], "devices": p["devices"], "p99_ms": p["latency"]["p99_ms"],
                        "deadline_misses": p["deadline_misses"], "real_time": p["real_time"], "mean_batch": p.get("mean_batch")})
    s["latency"] = lat
    rt = [p["cells"] for p in lat if p["real_time"]]
    s["largest_real_time_cells"] = max(rt) if rt else 0
    s["goals"]["10000_cells_real_time"] = s["largest_real_time_cells"] >= 10000
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(s, f, indent=2)
    print(json.dumps(s["goals"], indent=2))


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
