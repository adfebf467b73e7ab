#!/usr/bin/env bash
# The whole suite on a build without any x86 SIMD body: CKernels compiled with -DFORGE_PORTABLE
# (no AVX2 / AVX-512 / F16C code at all, the portable C bodies only, as on a CPU forge-ir has no
# intrinsics for), in a build folder of its own (.build-portable). Checks that the CKernels
# objects hold no ymm / zmm instruction, then runs every test. About as long as scripts/test.sh
# plus a full build.
set -euo pipefail
cd "$(dirname "$0")/.."
B=.build-portable
swift build --build-tests --build-path "$B" -Xcc -DFORGE_PORTABLE
objs=$(find "$B" -path '*CKernels.build/*.o')
[ -n "$objs" ] || { echo "test-portable: no CKernels object under $B" >&2; exit 1; }
# grep -c reads all of objdump's output: `objdump | grep -q` under pipefail is false whenever
# grep's early exit kills objdump (SIGPIPE), so it passed on a build full of AVX code.
avx=$(objdump -d $objs | grep -cE '%[yz]mm' || true)
if [ "$avx" -gt 0 ]; then
    echo "test-portable: CKernels objects built with -DFORGE_PORTABLE still hold AVX code:" >&2
    objdump -d $objs | grep -E '%[yz]mm' | head -5 >&2 || true  # head's early exit: SIGPIPE
    exit 1
fi
echo "test-portable: no ymm / zmm instruction in $(echo "$objs" | wc -w) CKernels objects" >&2
swift test --skip-build --build-path "$B"
