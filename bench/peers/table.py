#!/usr/bin/env python3
"""Markdown table of a results/env-*.jsonl file written by run_env.sh.

    python3 table.py results/env-2025-01-01.jsonl

The ratio column is rlrig's steps/s for the same env, num_envs, threads and mode
(sync rows against rlrig sync, async rows against rlrig async) divided by the
row's steps/s (> 1: rlrig is faster). Stdlib only.
"""

from __future__ import annotations

import json
import sys


def human(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g}"


def label(r: dict) -> str:
    batch = f" (batch {r['batch_size']})" if r["mode"] == "async" else ""
    if r["peer"] == "rlrig":
        args = " ".join(f"{k}={v}" for k, v in sorted((r.get("env_args") or {}).items()))
        return f"rlrig {r['mode']}{batch}" + (f" ({args})" if args else "")
    return r["peer"] + batch


def main(path: str) -> int:
    meta, rows = {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            d = json.loads(line)
            if d.get("meta"):
                meta = d
            else:
                rows.append(d)
    # Ratios are against rlrig with default env parameters; rows with --env-arg
    # (opt-in modes such as Acrobot's fast_trig) get their own ratios below.
    base = {(r["env"], r["num_envs"], r["threads"], r["mode"]): r["steps_per_sec"]
            for r in rows if r["peer"] == "rlrig" and not r.get("env_args")}

    if meta:
        print(f"{meta.get('date', '')} | {meta.get('cpu', '')} | {meta.get('logical_cores')} logical cores | "
              f"load at start {meta.get('loadavg_at_start', 0):.2f} | rlrig {meta.get('rlrig_git', '')} | "
              f"~{meta.get('target_seconds')} s per run")
        print()
    print("| env | num_envs | threads | peer | steps/s | steps/s per thread | rlrig/peer |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for r in rows:
        b = base.get((r["env"], r["num_envs"], r["threads"], r.get("mode", "sync")))
        ratio = f"{b / r['steps_per_sec']:.2f}" if b else "n/a"
        if r["peer"] == "rlrig" and r.get("env_args"):
            ratio = "below"
        print(f"| {r['env']} | {r['num_envs']} | {r['threads']} | {label(r)} | {human(r['steps_per_sec'])} | "
              f"{human(r['steps_per_sec_per_thread'])} | {ratio} |")
    for o in [r for r in rows if r["peer"] == "rlrig" and r.get("env_args")]:
        key = (o["env"], o["num_envs"], o["threads"], o["mode"])
        peers = [r for r in rows if r["peer"] != "rlrig"
                 and (r["env"], r["num_envs"], r["threads"], r.get("mode", "sync")) == key]
        ratios = ", ".join(f"{o['steps_per_sec'] / r['steps_per_sec']:.2f}x {label(r)}" for r in peers)
        default = base.get(key)
        vs = f"{o['steps_per_sec'] / default:.2f}x rlrig's default, " if default else ""
        print()
        print(f"{label(o)} on {o['env']}, {o['num_envs']} envs, {o['threads']} thread(s): "
              f"{vs}{ratios or 'no peer rows'}")
    versions = sorted({f"{r['peer']}: {r.get('version', '?')}" for r in rows})
    if versions:
        print()
        print("Versions: " + "; ".join(versions))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
