#!/usr/bin/env bash
# Issue 28's env-stepping table on a GPU machine: `rlrig bench env --device gpu` (the
# device kernels, random actions, auto-reset) against gymnax on the same GPU
# (bench/peers/env_peers.py --peer gymnax: jit(scan(vmap(step))), every observation
# consumed), with rlrig's CPU engine on every core beside them, in one run.
#
#   RLRIG=target/release/rlrig OUT=dir bash bench/gpu/run_envs.sh
#
# Needs a release build with `--features gpu`, a Vulkan loader and driver, and JAX with
# its CUDA plugin plus gymnax. Writes envs.log and envs.jsonl in OUT.
. "$(dirname "$0")/../lib.sh"
log_files envs
JSON_KEYS='steps_per_sec|seconds|mean_return|episodes'
say "# $(date -u +%FT%TZ) device env stepping, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1), $(nproc) cores, rev $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
for n in 4096 65536 1048576; do
  json_run "rlrig gpu CartPole-v1 $n" "$RLRIG" bench env --device gpu --env CartPole-v1 --num-envs "$n" --steps 2000000000 --json
  json_run "gymnax gpu CartPole-v1 $n" env JAX_PLATFORMS=cuda "$PY" "$ROOT/bench/peers/env_peers.py" --peer gymnax --env CartPole-v1 --num-envs "$n" --threads "$(nproc)"
done
json_run "rlrig cpu CartPole-v1 65536" "$RLRIG" bench env --env CartPole-v1 --num-envs 65536 --steps 400000000 --json
for e in Acrobot-v1 MountainCar-v0 MountainCarContinuous-v0 Pendulum-v1; do
  json_run "rlrig gpu $e 65536" "$RLRIG" bench env --device gpu --env "$e" --num-envs 65536 --steps 1000000000 --json
  json_run "rlrig cpu $e 65536" "$RLRIG" bench env --env "$e" --num-envs 65536 --steps 100000000 --json
done
for n in 1024 16384 65536 262144; do
  json_run "rlrig gpu Breakout $n" "$RLRIG" bench env --device gpu --env MinAtar/Breakout-v1 --num-envs "$n" --steps 1000000000 --json
  json_run "rlrig cpu Breakout $n" "$RLRIG" bench env --env MinAtar/Breakout-v1 --num-envs "$n" --steps 40000000 --json
done
json_run "gymnax gpu Breakout 65536" env JAX_PLATFORMS=cuda "$PY" "$ROOT/bench/peers/env_peers.py" --peer gymnax --env MinAtar/Breakout-v1 --num-envs 65536 --threads "$(nproc)"
for e in Acrobot-v1 Pendulum-v1; do
  json_run "gymnax gpu $e 65536" env JAX_PLATFORMS=cuda "$PY" "$ROOT/bench/peers/env_peers.py" --peer gymnax --env "$e" --num-envs 65536 --threads "$(nproc)"
done
say "# done $(date -u +%FT%TZ)"
