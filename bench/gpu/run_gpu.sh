#!/usr/bin/env bash
# Issue 28's GPU table on a machine with an NVIDIA GPU: rlrig's device-resident PPO
# (`rlrig train ppo --device gpu --seeds ...`) against PureJaxRL's way of using the GPU
# (bench/peers/ppo_jax.py: the whole training function compiled, jax.vmap over seeds),
# side by side in one run, with rlrig's CPU path for reference. Same hyperparameters
# (CleanRL's CartPole PPO: 4 envs x 128 steps, 4 epochs x 4 minibatches, 64-64 tanh).
#
#   RLRIG=target/release/rlrig OUT=dir bash bench/gpu/run_gpu.sh [SEEDS[:LAYOUT]...]
#
# Each SEEDS trains seeds 1..SEEDS in one launch, with `--gpu-layout LAYOUT` if given
# (else rlrig's choice for that run count); PureJaxRL trains the same seeds beside it
# (only for the counts in JAX_SEEDS, e.g. JAX_SEEDS="1", when that is set).
# Needs a release build with `--features gpu`, a Vulkan loader and driver, and JAX with
# its CUDA plugin plus gymnax (bench/peers/setup.sh installs them where pip works).
# Writes gpu.log (every command and its output) and gpu.jsonl (one line per run) in OUT.
. "$(dirname "$0")/../lib.sh"
log_files gpu
STEPS=${PPO_TOTAL_STEPS:-500000}
SEEDS=("$@")
[ ${#SEEDS[@]} -gt 0 ] || SEEDS=(1 256 1024)

say "# $(date -u +%FT%TZ) rlrig GPU benchmark, $STEPS steps per seed"
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current \
  --format=csv,noheader 2>&1 | tee -a "$LOG"
grep -m1 "model name" /proc/cpuinfo | tee -a "$LOG"
say "cores: $(nproc)"

# rlrig: wall clock of the whole process, and its own report.
rlrig_run() { # label, args...
  local label=$1; shift
  local out rc wall
  rlrig_timed 200 "$@"
  echo "$out" | tee -a "$LOG"
  say "rc $rc wall $wall s"
  local train; train=$(echo "$out" | grep -o 'in [0-9.]* s' | head -1 | grep -o '[0-9.]*')
  local ev; ev=$(echo "$out" | grep -o 'mean return[^,;]*[0-9.]*' | head -1)
  echo "{\"peer\": \"rlrig\", \"label\": \"$label\", \"rc\": $rc, \"process_seconds\": $wall, \"train_seconds\": ${train:-null}, \"eval\": \"$ev\"}" >> "$JSONL"
}

jax_run() { # seeds
  say "\$ JAX_PLATFORMS=cuda $PY bench/peers/ppo_jax.py --seeds $1 --total-steps $STEPS"
  local out
  out=$(cd "$ROOT" && JAX_PLATFORMS=cuda timeout 200 "$PY" bench/peers/ppo_jax.py --seeds "$1" --total-steps "$STEPS" 2>&1); local rc=$?
  echo "$out" | tee -a "$LOG"
  say "rc $rc"
  echo "$out" | grep '^{' >> "$JSONL"
}

rlrig_run "cpu 1 seed" train ppo --total-steps "$STEPS" --threads 1 --run-dir /tmp/rlrig-cpu-1
for arg in "${SEEDS[@]}"; do
  n=${arg%%:*} layout=()
  [ "$arg" = "$n" ] || layout=(--gpu-layout "${arg#*:}")
  rlrig_run "gpu $n seeds ${layout[*]}" train ppo --device gpu --seeds "1-$n" --total-steps "$STEPS" \
    --threads "$(nproc)" "${layout[@]}" --run-dir "/tmp/rlrig-gpu-$n"
  if [ -z "${JAX_SEEDS+x}" ] || [[ " $JAX_SEEDS " == *" $n "* ]]; then jax_run "$n"; fi
done
say "# done $(date -u +%FT%TZ)"
