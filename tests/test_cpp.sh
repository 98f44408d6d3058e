#!/usr/bin/env bash
# The C++ header include/flit/flit.hpp, built with g++ against $BUILD's library:
#   - flit.hpp, flit.h, clock.h, hist.h and tstamp.h compile alone in C++20 with
#     -Wall -Wextra -Werror -pedantic; flit.h (the C API) also in C++17, where
#     flit.hpp stops with an #error naming -std=c++20 (it needs std::span);
#   - tests/cpp/test_flit_hpp.cpp over shm: pub/sub with lambdas and every
#     send overload, claim/commit through spans, patterns, flit::error with
#     flit_errmsg()'s text on bad set-up, the print hook, moves (moved-from
#     objects inert, a moved subscriber's callback still runs), EOS when a
#     publisher is destroyed, a throwing callback ends in std::terminate;
#   - docs/examples/pubsub.cpp (the README's example) builds and prints both
#     messages;
#   - zero cost: tools/bench-cpp.sh --zerocost (the C++ send is the C call's
#     instructions; RESULT lines).
# With SAN=1 the C++ programs are built with the sanitizers, like the library.
# Exit: 0 pass, 77 skip ("SKIP: reason"), 1 fail.
set -u
BUILD=${BUILD:-build}
CXX=${CXX:-g++}
command -v "$CXX" >/dev/null || { echo "SKIP: $CXX not installed (apt-get install g++)"; exit 77; }
"$CXX" -std=c++20 -x c++ -E - </dev/null >/dev/null 2>&1 ||
  { echo "SKIP: $CXX has no -std=c++20"; exit 77; }
[ -e "$BUILD/libflit.so" ] || { echo "FAIL: $BUILD/libflit.so not built (make lib)"; exit 1; }
W=$BUILD/cpp; mkdir -p "$W"
san=()
[ "${SAN:-0}" = 1 ] && san=(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
STRICT=(-Wall -Wextra -Werror -pedantic -Iinclude)
LINK=(-L"$BUILD" -lflit -Wl,-rpath,"$PWD/$BUILD")
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# each public header alone, as a C++ translation unit's first include
for h in flit.hpp flit.h clock.h hist.h tstamp.h; do
  printf '#include <flit/%s>\n' "$h" | "$CXX" -std=c++20 "${STRICT[@]}" -x c++ -fsyntax-only - ||
    bad "<flit/$h> does not compile in C++20"
done
printf '#include <flit/flit.h>\n' | "$CXX" -std=c++17 "${STRICT[@]}" -x c++ -fsyntax-only - ||
  bad "<flit/flit.h> does not compile in C++17"
out=$(printf '#include <flit/flit.hpp>\n' | "$CXX" -std=c++17 -Iinclude -x c++ -fsyntax-only - 2>&1) &&
  bad "flit.hpp compiled in C++17 (it should stop with an #error)"
grep -q 'needs C++20.*-std=c++20' <<<"$out" || bad "C++17: no #error naming -std=c++20: $out"
[ "$(grep -c 'error' <<<"$out")" -le 2 ] || bad "C++17: errors after the #error: $out"
echo "RESULT: headers: C++20 -Wall -Wextra -Werror -pedantic clean; C++17: flit.h ok, flit.hpp #error"

# the behaviour test
"$CXX" -std=c++20 -O2 -g "${STRICT[@]}" "${san[@]}" tests/cpp/test_flit_hpp.cpp \
  -o "$W/test_flit_hpp" "${LINK[@]}" || { echo "FAIL: test_flit_hpp.cpp does not build"; exit 1; }
"$W/test_flit_hpp" || bad "test_flit_hpp"

# the README's example
"$CXX" -std=c++20 -O2 "${STRICT[@]}" "${san[@]}" docs/examples/pubsub.cpp -o "$W/pubsub" "${LINK[@]}" ||
  bad "docs/examples/pubsub.cpp does not build"
if [ -x "$W/pubsub" ]; then
  out=$(timeout 10 "$W/pubsub" 2>&1)
  [ "$out" = $'prices.eur #0: 1.0842\nprices.eur #1: 1.0843' ] || bad "pubsub example printed: $out"
fi
"$CXX" -std=c++20 -O2 "${STRICT[@]}" -fsyntax-only docs/examples/pong.cpp || bad "docs/examples/pong.cpp does not build"

# zero cost (not meaningful with sanitizers: it builds its own -O2 objects anyway)
BUILD=$BUILD tools/bench-cpp.sh --zerocost || bad "zero-cost check (tools/bench-cpp.sh --zerocost)"

[ "$fail" = 0 ] || exit 1
echo "PASS"
