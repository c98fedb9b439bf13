"""Summary of the device check (run.sh): the goals of docs/engine.md against
what was measured, as OUT/summary.json; or, with --realtime FILE, exit 0 if
the latency report FILE's every point is served in real time.

A goal is true or false only where it was measured: false needs a
measurement that misses it. Anything not measured (no GPU, no PyTorch, a
part skipped or killed for time, a crash) makes it null, with the reason in
"unmeasured"; a crash's reason is its panic line, not the last stack frame.

usage: summary.py --out OUT | --realtime LATENCY.json
"""
import argparse, glob, json, os, sys

# The latency goal's cell count, and the largest count run.sh tries.
GOAL_CELLS = 10000
KILLED = (124, 137)  # timeout's status for a step past its limit, and after its -k KILL


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def crash_reason(path):
    """Why a log's program stopped: its first panic or fatal error line (with
    the signal line after it), else its last non-empty line ("" if none)."""
    try:
        with open(path) as f:
            lines = [l.rstrip("\n") for l in f]
    except OSError:
        return ""
    for i, l in enumerate(lines):
        if l.startswith("panic: ") or l.startswith("fatal error: "):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            return l + (" " + nxt if nxt.startswith("[signal ") else "")
    lines = [l.strip() for l in lines if l.strip()]
    return lines[-1] if lines else ""


def tests(path):
    """Counts of a verbose Go test log's top-level results, with the first
    reason a test gave for skipping, and the panic if the binary crashed."""
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
        if l.startswith("panic: ") and "crash" not in r:
            r["crash"] = crash_reason(path)
    return r


def realtime(path):
    rep = load(path)
    return bool(rep and rep.get("points") and all(p.get("real_time") for p in rep["points"]))


def step_status(steps, name):
    """A step's outcome in words: "ok", "skipped: out of time", "killed at
    its N s limit", "exit N", or "" when it did not run."""
    for s in steps:
        if s.get("step") == name:
            st = s.get("status")
            if st == "skipped":
                return "skipped: out of time"
            if st in KILLED:
                return "killed at its %s s limit" % s.get("limit_s")
            return "ok" if st == 0 else "exit %s" % st
    return ""


def parity_goal(par, skipped, no_gpu):
    """fp32 parity: false where a report misses 1e-4; true where every
    configuration asked for has a passing report; else null and why."""
    if any(p["report"] and not p["ok"] for p in par):
        return False, ""
    errs = [p["config"] + ": " + p["error"] for p in par if p.get("error")]
    psk = [s for s in skipped if s.startswith("parity ")]
    if par and not errs and not psk:
        return True, ""
    why = [w for w in [no_gpu] if w] or errs[:1] + psk[:1] or ["no parity report"]
    return None, "; ".join(why)


def torch_rows(out):
    rows, why = {}, ""
    try:
        for l in open(os.path.join(out, "torch.jsonl")):
            if l.strip():
                t = json.loads(l)
                rows[(t["stem"], t["batch"], t["precision"])] = t
    except (OSError, ValueError, KeyError) as e:
        why = str(e)
    if not rows:
        logs = sorted(glob.glob(os.path.join(out, "torch-*.log")))
        why = "PyTorch eager not measured: " + ((crash_reason(logs[0]) if logs else "") or why or "no output")
    return rows, why


def latency_goal(lat, steps):
    """10,000 cells in real time: true where a point of at least that many
    is; false where a point of at most the largest count tried is measured
    and missed (more cells would miss too); else null, naming the step that
    did not finish."""
    if any(p["real_time"] and p["cells"] >= GOAL_CELLS for p in lat):
        return True, ""
    missed = [p for p in lat if not p["real_time"]]
    if missed:
        return False, ""
    names = [s["step"] for s in steps if s.get("step", "").startswith("latency-")]
    for n in names:
        st = step_status(steps, n)
        if st != "ok":
            return None, "%s: %s" % (n, st)
    return None, "no latency point of %d cells or more" % GOAL_CELLS


def summary(out):
    s = {"goals": {}}
    steps = [json.loads(l) for l in open(os.path.join(out, "steps.jsonl")) if l.strip()]
    s["steps"] = steps
    gc = load(os.path.join(out, "gpucheck.json"))
    if gc is None:
        gc = {}
        st = step_status(steps, "gpucheck")
        no_gpu = "unknown: gpucheck wrote no report (%s; gpucheck.log: %s)" % (
            st or "did not run", crash_reason(os.path.join(out, "gpucheck.log")))
    else:
        no_gpu = gc.get("no_gpu", "")
    s["gpu"] = gc.get("device") or no_gpu
    s["device"] = gc.get("device", "")
    s["date"] = gc.get("date", "")
    s["libraries"] = gc.get("libraries") or []
    s["tests"] = {os.path.basename(f)[:-4]: tests(f) for f in sorted(glob.glob(os.path.join(out, "*-test*.log")))}
    skipped = gc.get("skipped") or []
    s["skipped"] = skipped
    unmeasured = {}

    par = []
    for p in gc.get("parity") or []:
        r = p.get("report") or {}
        par.append({"config": p["config"], "weights": p.get("weights"), "report": bool(r), "ok": r.get("ok", False),
                    "windows": p.get("windows") or r.get("windows"), "windows_asked": p.get("windows_asked"),
                    "first_over": r.get("first_over"), "first_over_diff": r.get("first_over_diff"),
                    "head_vs_engine": r.get("head_vs_engine"), "error": p.get("error")})
    s["parity"] = par
    g, why = parity_goal(par, skipped, no_gpu)
    s["goals"]["parity_fp32_1e-4"] = g
    if g is None:
        unmeasured["parity_fp32_1e-4"] = why

    torch, torch_why = torch_rows(out)
    if torch_why:
        s["torch"] = torch_why
    rows = []
    for t in gc.get("timing") or []:
        row = dict(t)
        if not t.get("error"):
            stem = t["config"].rsplit("-", 1)[0]
            ref = torch.get((stem, t["batch"], t["precision"]))  # the precision in effect
            if ref:
                row["torch_e2e_p50_ms"] = ref["e2e_p50_ms"]
                row["torch_device_ms"] = ref["device_ms"]
                row["speedup_e2e"] = ref["e2e_p50_ms"] / t["p50_ms"]
                if t.get("device_ms"):
                    row["speedup_device"] = ref["device_ms"] / t["device_ms"]
        rows.append(row)
    s["timing"] = rows
    tskip = [x for x in skipped if x.startswith("timing ")]
    terrs = [r["error"] for r in rows if r.get("error")]
    b1 = [r["p50_ms"] for r in rows if r.get("batch") == 1 and not r.get("error")]
    if b1:
        s["goals"]["batch1_at_most_0.3ms"] = min(b1) <= 0.3
    else:
        s["goals"]["batch1_at_most_0.3ms"] = None
        unmeasured["batch1_at_most_0.3ms"] = no_gpu or (terrs[:1] + tskip[:1] or ["no timing report"])[0]
    b1024 = [r for r in rows if r.get("batch") == 1024 and "speedup_e2e" in r]
    if b1024 and not tskip:
        s["goals"]["2x_torch_at_batch_1024"] = all(r["speedup_e2e"] >= 2 for r in b1024)
    elif any(r["speedup_e2e"] < 2 for r in b1024):
        s["goals"]["2x_torch_at_batch_1024"] = False
    else:
        s["goals"]["2x_torch_at_batch_1024"] = None
        unmatched = ["PyTorch has no %s row at batch 1024 for %s" % (r["precision"], r["config"])
                     for r in rows if r.get("batch") == 1024 and not r.get("error")]
        why = [w for w in (no_gpu, torch_why) if w] or tskip[:1] or terrs[:1] or unmatched[:1] or ["no timing at batch 1024"]
        unmeasured["2x_torch_at_batch_1024"] = "; ".join(why)

    lat = []
    for f in sorted(glob.glob(os.path.join(out, "latency-*.json")), key=lambda f: int(f.rsplit("-", 1)[1].split(".")[0])):
        rep = load(f)
        for p in (rep or {}).get("points") or []:
            lat.append({"cells": p["cells"], "devices": p["devices"], "p99_ms": p["latency"]["p99_ms"],
                        "deadline_misses": p["deadline_misses"], "real_time": p["real_time"], "mean_batch": p.get("mean_batch")})
    s["latency"] = lat
    rt = [p["cells"] for p in lat if p["real_time"]]
    s["largest_real_time_cells"] = max(rt) if rt else 0
    g, why = latency_goal(lat, steps)
    s["goals"]["10000_cells_real_time"] = g
    if g is None:
        logs = sorted(glob.glob(os.path.join(out, "latency-*.log")))
        unmeasured["10000_cells_real_time"] = no_gpu or (why + (" (" + crash_reason(logs[-1]) + ")" if logs else ""))
    s["unmeasured"] = unmeasured
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(s, f, indent=2)
    print("gpu:", s["gpu"] or "unknown")
    print(json.dumps({"goals": s["goals"], "unmeasured": unmeasured, "skipped": skipped, "tests": s["tests"]}, indent=2))


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
