#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs
# every test of the workspace. Used by README and by .ci/run. No standard input.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust from https://rustup.rs first" >&2
  exit 1
fi

# Release profile: the learning tests train real agents and would crawl in debug.
cargo test --workspace --release --locked
