#!/usr/bin/env bash
# Builds bench/cpu/ale_bare.cc against the ALE that rlrig's `atari` feature compiled (the
# same 0.11.2 sources and the same objects) and prints its steps/s on Pong:
#
#   cargo build --release -p rlrig --features atari      # once: builds ALE's libale.a
#   bash bench/cpu/ale_bare.sh [STEPS] [PROFILE]           # default 8000 steps, release
#
# The ROM comes from the rlrig cache (scripts/fetch_roms.sh). See BENCHMARKS.md "Atari".
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-8000}
profile=${2:-release}
out=$(ls -td target/"$profile"/build/rlrig-ale-*/out 2>/dev/null | head -1)
if [ -z "$out" ] || [ ! -f "$out/libale.a" ]; then
  echo "no libale.a under target/$profile/build/rlrig-ale-*/out:" \
    "build with 'cargo build --profile $profile -p rlrig --features atari' first" >&2
  exit 1
fi
src=$out/ale_py-0.11.2/src
bin=target/ale_bare
if [ ! -x "$bin" ] || [ "$bin" -ot "$out/libale.a" ] || [ "$bin" -ot bench/cpu/ale_bare.cc ]; then
  g++ -O3 -std=c++17 -I"$src" -I"$out/generated" bench/cpu/ale_bare.cc "$out/libale.a" -lz \
    -o "$bin"
fi
rom=${RLRIG_ROM:-${RLRIG_CACHE_DIR:-$HOME/.cache/rlrig}/roms/pong.bin}
"$bin" "$rom" "$steps"
