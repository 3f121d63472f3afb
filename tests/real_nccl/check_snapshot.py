#!/usr/bin/env python3
"""Reads an ncclprof snapshot (Chrome trace JSON, optionally .gz) taken from a real NCCL job and
prints what a reviewer checks by hand: events per kind and rank, drops, completion flags, and
the GPU-clock conversion of KernelCh events (spec §4.10: a converted GPU time is never later
than the callback that reported it, and a kernel runs inside its collective).
Exits 1 when a hard invariant fails. Usage: check_snapshot.py SNAPSHOT.json[.gz]"""
import collections
import gzip
import json
import sys

F_END_UNKNOWN, F_FOREIGN, F_GPU_CONVERTED, F_PARENT_UNKNOWN, F_IN_FLIGHT = 1 << 1, 1 << 2, 1 << 4, 1 << 6, 1 << 9
path = sys.argv[1]
doc = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
od = doc["otherData"]
bad = []
print(f"== {path}: retained {od['retained']}, evicted {od['evicted']}, dropped {od['dropped']}")
for p in od["processes"]:
    comms = [(c["name"] or hex(c["comm_hash"]), f"rank {c['rank']}/{c['nranks']}", f"{c['nnodes']} nodes") for c in p["comms"]]
    lost = {r: n for r, n in zip(p["dropped_reasons"], p["dropped"]) if n}
    print(f"  pid {p['pid']} api v{p['api_version']} mask {p['mask_names']} state {p['state']} "
          f"captured {p['captured']} completed {p['completed']} lost {lost or 0} comms {comms}")
evs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
rec = [e["args"]["ncclprof"] | {"cat": e["cat"], "args": e["args"]} for e in evs if "ncclprof" in e["args"]]
hung = sorted((e for e in evs if e["cat"] == "InFlight"), key=lambda e: -e["args"]["AgeUs"])
for e in hung[:8]:
    a = e["args"]
    run = a.get("RunningUs")
    ran = f" (running {run / 1e6:.2f} s)" if run is not None else " (not started)"
    print(f"  in flight at the snapshot: rank {a['Rank']} {e['name']} seq {a['SeqNum']} for {a['AgeUs'] / 1e6:.2f} s{ran}, "
          f"{a['ChannelsDone']}/{a['nChannels']} channels done, {a['StepsDone']} steps done")
print(f"  in flight at the snapshot: {len(hung)} ops" + (", oldest 8 above" if len(hung) > 8 else ""))
by = collections.Counter((r["proc"], r["rank"], r["cat"]) for r in rec)
for (proc, rank, cat), n in sorted(by.items()):
    print(f"  proc {proc} rank {rank:>2} {cat:<12} {n:>7}")
flags = collections.Counter()
for r in rec:
    for bit, name in ((F_END_UNKNOWN, "end unknown"), (F_FOREIGN, "foreign"), (F_PARENT_UNKNOWN, "parent unknown"), (F_IN_FLIGHT, "in flight")):
        if r["flags"] & bit:
            flags[(r["cat"], name)] += 1
print("  flags:", dict(flags) or "none")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def us(ns):
    return "-" if ns is None else f"{ns / 1000:.1f}"


# Event ids are handle slots, reused over time: a child's parent is the latest record with the
# parent's id that started before the child's callback.
by_id = collections.defaultdict(list)
for r in rec:
    by_id[(r["proc"], r["id"])].append(r)
for v in by_id.values():
    v.sort(key=lambda r: r["start_ns"])


def parent_of(r, before):
    cands = [p for p in by_id.get((r["proc"], r["parent"]), ()) if p["start_ns"] <= before]
    return cands[-1] if cands else None


kch = [r for r in rec if r["cat"] == "KernelCh"]
if kch:
    conv = [r for r in kch if r["flags"] & F_GPU_CONVERTED]
    lag_start = [r["p"][2] - r["start_ns"] for r in conv]
    lag_stop = [r["p"][3] - r["end_ns"] for r in conv]
    gpu_dur = [r["p"][1] - r["p"][0] for r in conv]
    host_dur = [r["end_ns"] - r["start_ns"] for r in conv]
    print(f"  KernelCh: {len(conv)}/{len(kch)} converted; callback minus converted GPU time, µs "
          f"start p50 {us(pct(lag_start, .5))} p99 {us(pct(lag_start, .99))} min {us(min(lag_start, default=None))}; "
          f"stop p50 {us(pct(lag_stop, .5))} p99 {us(pct(lag_stop, .99))} min {us(min(lag_stop, default=None))}")
    print(f"  KernelCh duration µs: GPU clock p50 {us(pct(gpu_dur, .5))} max {us(max(gpu_dur, default=None))}; "
          f"converted p50 {us(pct(host_dur, .5))}")
    early = sum(1 for d in lag_start + lag_stop if d < 0)
    if early:
        bad.append(f"{early} converted KernelCh times later than the callback that reported them")
    stretched = sum(1 for g, h in zip(gpu_dur, host_dur) if abs(g - h) > 1000)
    print(f"  KernelCh converted duration ≠ GPU duration (> 1 µs apart): {stretched}")
    # Not a hard check: NCCL calls a Coll's start on the host before it launches the kernel,
    # so a converted kernel start before it means the conversion is early, but the fake NCCL
    # host models GPU time on its own schedule.
    before, after, parented = 0, 0, 0
    for r in conv:
        p = parent_of(r, r["p"][2])
        if p is None or p["cat"] not in ("Coll", "P2p"):
            continue
        parented += 1
        before += r["start_ns"] < p["start_ns"]
        after += r["end_ns"] > p["end_ns"] + 1000
    print(f"  KernelCh with a Coll/P2p parent: {parented}; starting before it: {before}; "
          f"ending > 1 µs after it: {after}")
steps = [r for r in rec if r["cat"] == "ProxyStep"]
if steps:
    phases = collections.defaultdict(list)
    for r in steps:
        for k, v in r["args"].items():
            if k.endswith("wait"):
                phases[k].append(v)
    print("  ProxyStep phases, µs p50 / p99 (n):",
          "; ".join(f"{k} {pct(v, .5):.1f} / {pct(v, .99):.1f} ({len(v)})" for k, v in sorted(phases.items())))
ops = [r for r in rec if r["cat"] == "ProxyOp"]
if ops:
    per_parent = collections.Counter((r["proc"], r["parent"]) for r in ops)
    print(f"  ProxyOp: {len(ops)}, per parent p50 {pct(list(per_parent.values()), .5)}, "
          f"peers {sorted(collections.Counter(r['x'] for r in ops).items())}")
for cat in ("Coll", "P2p"):
    for proc in sorted({r["proc"] for r in rec}):
        d = [r["end_ns"] - r["start_ns"] for r in rec if r["cat"] == cat and r["proc"] == proc]
        seqs = [r["p"][0] for r in rec if r["cat"] == cat and r["proc"] == proc]
        if d:
            print(f"  {cat} proc {proc}: {len(d)}, duration p50 {us(pct(d, .5))} p99 {us(pct(d, .99))} µs, "
                  f"last seq {max(seqs)}")
for b in bad:
    print("  FAIL:", b)
sys.exit(1 if bad else 0)
