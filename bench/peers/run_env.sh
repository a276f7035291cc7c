#!/usr/bin/env bash
# Runs `rlrig bench env` and every installed peer (bench/peers/env_peers.py) on
# the same configurations, one run at a time, writes the JSON lines to
# bench/peers/results/env-<date>.jsonl and prints a markdown table with
# rlrig/peer ratios (table.py).
#
#   bench/peers/run_env.sh [--quick] [--no-build] [--target-seconds X] [--only GROUP]
#
#   --quick           ~0.3 s per timed run instead of ~2 s; results go to
#                     env-<date>-quick.jsonl (git-ignored)
#   --no-build        use target/release/rlrig as it is (default: cargo build
#                     --release -p rlrig first, which is a no-op when fresh)
#   --target-seconds  length of each timed run (default 2)
#   --only GROUP      run one block of the matrix: classic, box2d, minatar or atari
#
# Matrix: CartPole-v1 x 4096 envs x threads {1,2} (rlrig sync and async, all
# peers; single-threaded peers only at threads=1), then every env x 256 envs x
# 1 thread, then the Box2D envs x 256 envs x threads {1,2}, then MinAtar Breakout x
# {256, 4096} envs x threads {1,2} against gymnax and pgx, then Atari Pong-v5 (standard
# preprocessing; needs an rlrig built with --features atari and the ROMs of
# scripts/fetch_roms.sh) x {8, 16} envs x threads {1,2} against EnvPool and ale-py's
# AtariVectorEnv (ATARI_THREADS="1 2 ..." overrides the thread counts). Run ./setup.sh first;
# peers that are missing are skipped.
# Environment: RLRIG=/path/to/rlrig overrides the binary.

# shellcheck source=../lib.sh
source "$(dirname "$0")/../lib.sh"

QUICK=0 BUILD=1 TARGET=2 ONLY=
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1; TARGET=0.3 ;;
        --no-build) BUILD=0 ;;
        --target-seconds) TARGET=$2; shift ;;
        --only)
            case "${2:-}" in classic|box2d|minatar|atari) ONLY=$2 ;;
                *) echo "run_env.sh: --only takes classic, box2d, minatar or atari" >&2; exit 2 ;; esac
            shift ;;
        *) help_or_unknown "$1" ;;
    esac
    shift
done

PY="$HERE/.venv/bin/python"
if [ ! -x "$PY" ]; then
    echo "run_env.sh: $PY missing; run bench/peers/setup.sh first (only rlrig will be measured)" >&2
    PY=python3
fi
FEAT=(); [ "$ONLY" = atari ] && FEAT=(--features atari)
rlrig_binary "$BUILD" "${FEAT[@]}"

DATE=$(date +%Y-%m-%d)
OUT=$(results_file "env-$DATE${ONLY:+-$ONLY}$([ "$QUICK" = 1 ] && echo -quick).jsonl")
LOG=$(mktemp /tmp/rlrig-peers-XXXX.log)
: > "$OUT"

# one meta line: where and when
python3 - "$RLRIG" "$ROOT" "$TARGET" >>"$OUT" <<'EOF'
import json, os, platform, subprocess, sys, time
rlrig, root, target = sys.argv[1:4]
def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=20).stdout.strip()
    except Exception:
        return ""
cpu = ""
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip(); break
except OSError:
    pass
print(json.dumps({"meta": True, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cpu": cpu,
                  "logical_cores": os.cpu_count(), "loadavg_at_start": os.getloadavg()[0],
                  "python": platform.python_version(), "rlrig_git": sh("git", "rev-parse", "--short", "HEAD")
                  + ("+dirty" if sh("git", "status", "--porcelain", "--untracked-files=no") else ""),
                  "rlrig_version": sh(rlrig, "--version"), "target_seconds": float(target)}))
EOF

say() { echo "[run] $*" >&2; }
rate() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%.3g steps/s in %.2f s" % (d["steps_per_sec"], d["seconds"]))'; }

# rlrig: probe with a small step count (doubling until >= 0.2 s), then one timed
# run sized to TARGET seconds. Adds "peer" and "version" to rlrig's JSON line.
# Further arguments are env parameters (KEY=VALUE, passed as --env-arg).
run_rlrig() {  # env num_envs threads mode [KEY=VALUE...]
    local env=$1 n=$2 t=$3 mode=$4 steps line secs a
    local extra=()
    for a in "${@:5}"; do extra+=(--env-arg "$a"); done
    steps=$(( n * 64 ))
    while :; do
        line=$("$RLRIG" bench env --env "$env" --num-envs "$n" --threads "$t" --mode "$mode" \
               "${extra[@]}" --steps "$steps" --json 2>>"$LOG") || { say "rlrig $env $n T$t $mode FAILED (see $LOG)"; return; }
        secs=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["seconds"])' "$line")
        if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 0.2 else 1)' "$secs"; then break; fi
        steps=$(( steps * 4 ))
    done
    steps=$(python3 -c 'import json,sys,math; d=json.loads(sys.argv[1]); print(max(1, math.ceil(float(sys.argv[2]) * d["steps_per_sec"])))' "$line" "$TARGET")
    line=$("$RLRIG" bench env --env "$env" --num-envs "$n" --threads "$t" --mode "$mode" \
           "${extra[@]}" --steps "$steps" --json 2>>"$LOG") || { say "rlrig $env $n T$t $mode FAILED (see $LOG)"; return; }
    line=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["peer"]="rlrig"; d["version"]=sys.argv[2]; print(json.dumps(d))' \
           "$line" "$("$RLRIG" --version 2>/dev/null || echo rlrig)")
    echo "$line" >>"$OUT"
    say "$env n=$n T=$t rlrig $mode${5:+ (${*:5})}: $(echo "$line" | rate)"
}

run_peer() {  # peer env num_envs threads
    local peer=$1 env=$2 n=$3 t=$4 line rc
    line=$("$PY" -W ignore "$HERE/env_peers.py" --peer "$peer" --env "$env" --num-envs "$n" --threads "$t" \
           --target-seconds "$TARGET" 2>>"$LOG")
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "$line" >>"$OUT"
        say "$env n=$n T=$t $peer: $(echo "$line" | rate)"
    elif [ $rc -eq 2 ]; then
        say "$env n=$n T=$t $peer: skipped ($(tail -n 1 "$LOG" | sed 's/^env_peers: //'))"
    else
        say "$env n=$n T=$t $peer: FAILED rc=$rc (see $LOG)"
    fi
}

PEERS=(gymnasium-sync gymnasium-numpy envpool gymnax operant)
SINGLE_THREADED=" gymnasium-sync gymnasium-numpy "

want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }

# CartPole-v1, 4096 envs, threads 1 and 2
want classic && for t in 1 2; do
    run_rlrig CartPole-v1 4096 "$t" sync
    run_rlrig CartPole-v1 4096 "$t" async
    run_peer envpool-async CartPole-v1 4096 "$t"
    for p in "${PEERS[@]}"; do
        if [ "$t" != 1 ] && [[ "$SINGLE_THREADED" == *" $p "* ]]; then continue; fi
        run_peer "$p" CartPole-v1 4096 "$t"
    done
done
# every env, 256 envs, 1 thread
want classic && for env in CartPole-v1 Acrobot-v1 MountainCar-v0 MountainCarContinuous-v0 Pendulum-v1; do
    run_rlrig "$env" 256 1 sync
    # Acrobot's opt-in fast sin/cos (not libm's bits), next to the default.
    [ "$env" = Acrobot-v1 ] && run_rlrig "$env" 256 1 sync fast_trig=true
    for p in "${PEERS[@]}"; do run_peer "$p" "$env" 256 1; done
done
# Box2D envs, 256 envs, threads 1 and 2 (all on Box2D 2.3: rlrig and Gymnasium pybox2d's 2.3.0, EnvPool its own 2.3 build)
want box2d && for env in BipedalWalker-v3 BipedalWalkerHardcore-v3 LunarLander-v3 LunarLanderContinuous-v3; do
    for t in 1 2; do
        run_rlrig "$env" 256 "$t" sync
        run_peer envpool "$env" 256 "$t"
    done
    run_peer gymnasium-sync "$env" 256 1
done

# The MinAtar games against the JAX MinAtar ports (gymnax, pgx): Breakout at 256 and
# 4096 envs x threads {1,2}, the other four at 4096 envs x threads {1,2}.
want minatar && for n in 256 4096; do
    for t in 1 2; do
        run_rlrig MinAtar/Breakout-v1 "$n" "$t" sync
        run_peer gymnax MinAtar/Breakout-v1 "$n" "$t"
        run_peer pgx MinAtar/Breakout-v1 "$n" "$t"
    done
done
want minatar && for g in Asterix Freeway Seaquest SpaceInvaders; do
    for t in 1 2; do
        run_rlrig "MinAtar/$g-v1" 4096 "$t" sync
        run_peer gymnax "MinAtar/$g-v1" 4096 "$t"
        run_peer pgx "MinAtar/$g-v1" 4096 "$t"
    done
done

# Atari: the same emulator (ALE) everywhere, so the ratios are batching and preprocessing.
# Alternating rlrig and the peers, twice.
want atari && for n in 8 16; do
    for t in ${ATARI_THREADS:-1 2}; do
        [ "$n" -lt "$t" ] && continue
        for rep in 1 2; do
            run_rlrig Pong-v5 "$n" "$t" sync
            run_peer envpool Pong-v5 "$n" "$t"
            run_peer ale-vector Pong-v5 "$n" "$t"
        done
    done
done

say "results: $OUT (stderr of the runs: $LOG)"
echo
python3 "$HERE/table.py" "$OUT"
