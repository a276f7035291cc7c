#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs
# every test of the workspace. Used by README and by .ci/run. No standard input.
#
# Box2D and ALE are C++: a C++ compiler is installed when missing (apt-get). Box2D's
# source (box2d-py's sdist) is downloaded from PyPI (pinned by SHA-256) into the rlrig cache.
#
# The Atari tests need the ROMs of ale-py's wheel and ALE's source distribution, both
# downloaded from PyPI (pinned by SHA-256) into the rlrig cache (~/.cache/rlrig);
# RLRIG_SKIP_ATARI=1 skips them.
#
# The MPI tests (`rlrig train es|ga|ppo|sac|...` under `mpirun -n 2`) need Open MPI and libclang;
# on Debian/Ubuntu they are installed here when missing (as root or with password-less
# sudo). RLRIG_SKIP_MPI=1 skips them where that is impossible.
#
# The Python package's tests (pytest, python/tests) run in a venv made here
# (target/pyvenv) with Gymnasium and the package installed by `pip install ./python`,
# as the README tells users. They need python3 with venv; RLRIG_SKIP_PYTHON=1 skips them.
#
# The Burn tests (`--device burn-cpu|wgpu`) need a Vulkan driver: Mesa's software
# Vulkan is installed the same way when none is present. RLRIG_SKIP_BURN=1 skips them.
set -euo pipefail
cd "$(dirname "$0")/.."
exec </dev/null
# Each step's start on stderr, with the seconds since this script began and the CPU time
# its finished commands used (a step's CPU over its seconds: how busy it kept the cores),
# so a slow or stopped run shows where its time went.
T0=$(date +%s)
TICK=$(getconf CLK_TCK)
step() {
  local cpu
  cpu=$(awk -v t="$TICK" '{printf "%d", ($16 + $17) / t}' "/proc/$$/stat" 2>/dev/null || echo "?")
  echo "[test] $1 at $(( $(date +%s) - T0 )) s (CPU $cpu s)" >&2
}
echo "[test] $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | xargs), $(nproc) cores" >&2

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust from https://rustup.rs first" >&2
  exit 1
fi

vulkan_ready() {
  compgen -G "/usr/share/vulkan/icd.d/lvp_icd*.json" >/dev/null \
    || compgen -G "/usr/share/vulkan/icd.d/*.json" >/dev/null
}

# apt_install WHY HINT PACKAGE...: installs the packages (as root or with password-less
# sudo), saying why; on failure prints HINT and exits.
apt_install() {
  local why=$1 hint=$2; shift 2
  echo "[test] installing $* for $why (apt-get)" >&2
  local SUDO=; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  if ! { $SUDO apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
        $SUDO apt-get install -y -q "$@" >/dev/null; }; then
    echo "[test] could not install $*; $hint" >&2
    exit 1
  fi
}

mpi_ready() {
  command -v mpirun >/dev/null 2>&1 \
    && compgen -G "/usr/lib/*/openmpi/include/mpi.h" >/dev/null \
    && compgen -G "/usr/lib/llvm-*/lib/libclang*.so*" >/dev/null
}

if [ "${RLRIG_SKIP_MPI:-0}" != 1 ] && ! mpi_ready; then
  apt_install "the MPI tests" "install them, or set RLRIG_SKIP_MPI=1 to skip the MPI tests" \
    libopenmpi-dev openmpi-bin libclang-dev
fi

# Box2D 2.3 (the physics of LunarLander and BipedalWalker, crate rlrig-box2d) and ALE are
# C++ built with the `cc` crate: a C++ compiler is installed here when missing.
if ! command -v c++ >/dev/null 2>&1; then
  apt_install "Box2D and ALE" "install a C++ compiler" g++
fi

# Atari's ROMs, from ale-py's wheel (scripts/fetch_roms.sh), for the Atari tests of the
# workspace and of the Python package below.
if [ "${RLRIG_SKIP_ATARI:-0}" != 1 ]; then
  bash scripts/fetch_roms.sh
fi

# The binary's opt-in features, in the workspace's one build: MPI (its tests run under
# mpirun: ES/GA in tests/evolution.rs, the learners in tests/mpi.rs) and Atari (ALE
# 0.11.2, GPL-2.0: its C++ comes from ale-py's source distribution on PyPI, which
# rlrig-ale's build script downloads into the rlrig cache; the ROMs from ale-py's
# wheel): the Atari envs against ale-py and Gymnasium's wrappers step by step
# (rlrig-env's atari_golden), the executors' tests with Pong's two ids, and the CLI
# (tests/atari.rs). RLRIG_SKIP_MPI=1 and RLRIG_SKIP_ATARI=1 leave them out.
FEATURES=()
[ "${RLRIG_SKIP_MPI:-0}" = 1 ] || FEATURES+=(rlrig/mpi)
[ "${RLRIG_SKIP_ATARI:-0}" = 1 ] || FEATURES+=(rlrig/atari)

# The `ci` profile (Cargo.toml): optimised, as the learning tests train real agents and
# would crawl in debug, without release's slow single-unit LTO link. One build with
# every feature above; the Python package below reuses all of it and compiles only PyO3
# and its own crate: python/Cargo.toml names the features the tests' dev-dependencies and
# rlrig-sdist's defaults add to this build, and the extension takes the same MPI and
# Atari features.
# rlrig-burn and rlrig-gpu (wgpu) are left to their own (dev-profile) build below.
step "the workspace's tests (ci profile${FEATURES[*]:+, ${FEATURES[*]}})"
cargo test --workspace --exclude rlrig-burn --exclude rlrig-gpu --profile ci --locked \
  --features "$(IFS=,; echo "${FEATURES[*]}")"
# The binary those tests ran: every SIMD intrinsic inlined into its loop (the ci
# profile's 16 codegen units once left a kernel loop calling them one by one).
bash scripts/check_simd_inlined.sh target/ci/rlrig

if [ "${RLRIG_SKIP_PYTHON:-0}" != 1 ]; then
  step "the Python package and its tests"
  # The Python package, installed as a user installs it (maturin builds the extension
  # in the test build's profile and features, reusing the workspace's target directory,
  # as `MATURIN_PEP517_ARGS="--features atari"` builds it for a user), then its tests
  # against Gymnasium's own envs.
  PYV=target/pyvenv
  if ! "$PYV/bin/python" -c 'import sys' 2>/dev/null; then
    rm -rf "$PYV"
    if ! python3 -m venv "$PYV" 2>/dev/null; then
      apt_install "the Python tests" "install it, or set RLRIG_SKIP_PYTHON=1" python3-venv
      python3 -m venv "$PYV"
    fi
  fi
  PIP=("$PYV/bin/python" -m pip install -q --disable-pip-version-check --no-input)
  "${PIP[@]}" "gymnasium>=1.4,<1.5" numpy pytest hypothesis mypy
  # Users get the release profile (pyproject.toml); the tests the `ci` build above, with
  # its features (the extension's `atari` and `mpi` are the binary's).
  PY_ARGS="--profile ci"
  PY_FEATURES=("${FEATURES[@]#rlrig/}")
  [ ${#PY_FEATURES[@]} = 0 ] || PY_ARGS+=" --features $(IFS=,; echo "${PY_FEATURES[*]}")"
  MATURIN_PEP517_ARGS="$PY_ARGS" "${PIP[@]}" --force-reinstall --no-deps ./python
  "$PYV/bin/python" -m pytest -q -p no:cacheprovider python/tests
  # The type stubs agree with the native module, and the package type-checks.
  "$PYV/bin/python" -m mypy.stubtest rlrig._rlrig
  "$PYV/bin/python" -m mypy --config-file python/pyproject.toml python/rlrig
fi

if [ "${RLRIG_SKIP_BURN:-0}" != 1 ]; then
  step "the Burn and wgpu tests (dev profile)"
  # Burn devices (`--device burn-cpu|wgpu`): Burn's parity with the native path and
  # the binary's Burn tests. Without a GPU, wgpu runs on Mesa's software Vulkan
  # (lavapipe), installed here when no Vulkan driver is present. Dev profile with
  # optimised dependencies: a release build of Burn + wgpu would double CI's time.
  if ! vulkan_ready; then
    apt_install "the wgpu tests (Mesa's software Vulkan)" \
      "install them, or set RLRIG_SKIP_BURN=1 to skip the Burn tests" mesa-vulkan-drivers libvulkan1
  fi
  # One build for all of them: Burn + wgpu compile once. The binary's Burn and GPU
  # tests, and the device-resident kernels (rlrig-gpu) against rlrig-env and across runs.
  RLRIG_REQUIRE_WGPU=1 XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}" \
    cargo test --locked -p rlrig --features burn,gpu -p rlrig-gpu \
      --test burn_parity --test burn --test gpu --test device
fi
step "done"
