#!/usr/bin/env bash
# Thread scaling on a many-core machine (issue 21): the env executor, the data-parallel
# learner (PPO CartPole, SAC 256-256), AlphaZero's actors and PPO BipedalWalker, each at
# 1, 2, 4, ... up to every core, with the CPU peers (PureJaxRL's compiled PPO, the JAX SAC)
# on the same cores in the same run when JAX is importable.
#
#   RLRIG=target/release/rlrig OUT=dir bash bench/scaling/run_cores.sh
#
# Writes cores.log (every command and its output) and cores.jsonl (one line per run).
. "$(dirname "$0")/../lib.sh"
log_files cores
rm -rf /tmp/sc-ppo-* /tmp/sc-sac-* /tmp/sc-sac64 /tmp/sc-bw-*
N=$(nproc)
THREADS=(1 2 4 8 16 32 64)
ts=(); for t in "${THREADS[@]}"; do [ "$t" -le "$N" ] && ts+=("$t"); done
[ "${ts[-1]}" = "$N" ] || ts+=("$N")

JSON_KEYS='steps_per_sec|samples_per_sec|actors_samples_per_sec|train_seconds|updates_per_sec|compile_seconds'
JSON_TIMEOUT=120
say "# $(date -u +%FT%TZ) rlrig thread scaling, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $N cores, rev $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"

train() { # label, args... : wall clock and rlrig's own first lines
  local label=$1; shift
  local out rc wall
  rlrig_timed 150 "$@"
  echo "$out" | tee -a "$LOG" >/dev/null
  local first; first=$(echo "$out" | head -1 | sed 's/"/'"'"'/g')
  local busy; busy=$(echo "$out" | grep -m1 'cpu busy per core' | sed 's/"/'"'"'/g')
  local pool; pool=$(echo "$out" | grep -m1 'pool tasks' | sed 's/"/'"'"'/g')
  echo "{\"label\": \"$label\", \"rc\": $rc, \"wall\": $wall, \"summary\": \"$first\", \"busy\": \"$busy\", \"pool\": \"$pool\"}" >> "$JSONL"
  echo "$label rc $rc wall $wall | $first"
}

for t in "${ts[@]}"; do json_run "env CartPole 4096 t$t" "$RLRIG" bench env --num-envs 4096 --threads "$t" --steps 40000000 --json; done
json_run "env CartPole 65536 t$N" "$RLRIG" bench env --num-envs 65536 --threads "$N" --steps 200000000 --json
for t in "${ts[@]}"; do json_run "env Breakout 1024 t$t" "$RLRIG" bench env --env MinAtar/Breakout-v1 --num-envs 1024 --threads "$t" --steps 4000000 --json; done
for t in "${ts[@]}"; do train "ppo CartPole 500k t$t" train ppo --total-steps 500000 --threads "$t" --run-dir "/tmp/sc-ppo-$t"; done
for t in $(printf '%s\n' 1 4 "$N" | awk -v n="$N" '$1 <= n' | sort -un); do train "sac 256-256 3000 t$t" train sac --env Pendulum-v1 --total-steps 3000 --threads "$t" --set "hidden=[256, 256]" --run-dir "/tmp/sc-sac-$t"; done
train "sac 64-64 20000 t$N" train sac --env Pendulum-v1 --total-steps 20000 --threads "$N" --run-dir /tmp/sc-sac64
for t in $(printf '%s\n' 2 "$N" | sort -un); do train "ppo BipedalWalker 200k t$t" train ppo --env BipedalWalker-v3 --total-steps 200000 --threads "$t" --run-dir "/tmp/sc-bw-$t"; done
json_run "alphazero actors 1" "$RLRIG" bench alphazero --actors 1 --json
json_run "alphazero actors $N" "$RLRIG" bench alphazero --actors "$N" --json

if "$PY" -c 'import jax, gymnax' 2>/dev/null; then
  json_run "purejaxrl cpu 1 seed" env JAX_PLATFORMS=cpu "$PY" "$ROOT/bench/peers/ppo_jax.py" --seeds 1 --total-steps 500000
fi
if "$PY" -c 'import jax, gymnasium, flax, optax' 2>/dev/null; then
  json_run "sac jax cpu 256-256 3000" env JAX_PLATFORMS=cpu "$PY" "$ROOT/bench/peers/sac_jax.py" --seed 1 --hidden 256 --total-steps 3000
fi
say "# done $(date -u +%FT%TZ)"
