#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs
# every test of the workspace. Used by README and by .ci/run. No standard input.
#
# The MPI tests (`rlrig train es|ga` under `mpirun -n 2`) need Open MPI and libclang;
# on Debian/Ubuntu they are installed here when missing (as root or with password-less
# sudo). RLRIG_SKIP_MPI=1 skips them where that is impossible.
set -euo pipefail
cd "$(dirname "$0")/.."
exec </dev/null

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust from https://rustup.rs first" >&2
  exit 1
fi

mpi_ready() {
  command -v mpirun >/dev/null 2>&1 \
    && compgen -G "/usr/lib/*/openmpi/include/mpi.h" >/dev/null \
    && compgen -G "/usr/lib/llvm-*/lib/libclang*.so*" >/dev/null
}

if [ "${RLRIG_SKIP_MPI:-0}" != 1 ] && ! mpi_ready; then
  echo "[test] installing Open MPI and libclang for the MPI tests (apt-get)" >&2
  SUDO=; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  if ! { $SUDO apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
        $SUDO apt-get install -y -q libopenmpi-dev openmpi-bin libclang-dev >/dev/null; }; then
    echo "[test] could not install libopenmpi-dev openmpi-bin libclang-dev; install them, or set RLRIG_SKIP_MPI=1 to skip the MPI tests" >&2
    exit 1
  fi
fi

# Release profile: the learning tests train real agents and would crawl in debug.
cargo test --workspace --release --locked

if [ "${RLRIG_SKIP_MPI:-0}" != 1 ]; then
  # The same binary with MPI, and its tests under mpirun (tests/evolution.rs).
  cargo test --release --locked -p rlrig --features mpi --test evolution
fi
