#!/usr/bin/env bash
# Fails when a SIMD intrinsic was compiled as a function of its own in BINARY: a loop
# that lost its target features (a closure inside a #[target_feature] function that was
# not inlined, say) then calls _mm256_fmadd_ps & co. one by one, 9x slower, with the
# same bits, so no other test notices. Feature detection (cpuid, xgetbv) is allowed.
# Usage: scripts/check_simd_inlined.sh BINARY
set -euo pipefail
bin=${1:?usage: $0 BINARY}
if ! command -v nm >/dev/null 2>&1; then
  echo "[simd] nm not found (binutils): cannot check $bin" >&2
  exit 1
fi
out=$(nm -C "$bin" | grep -E 'core::core_arch::(x86|x86_64|aarch64|arm_shared)::' \
  | grep -vE '::(xsave|cpuid)::' || true)
if [ -n "$out" ]; then
  echo "[simd] $bin calls SIMD intrinsics out of line (a hot loop without its target features):" >&2
  echo "$out" | head -20 >&2
  exit 1
fi
echo "[simd] $bin: every SIMD intrinsic inlined"
