#!/usr/bin/env bash
# Run flit's tests, each under a timeout.  Arguments: test names, i.e.
#   test_x        -> $BUILD/tests/test_x        (cmocka binary)
#   test_y        -> tests/test_y.sh            (shell test), if no binary
#   fuzz:fuzz_z   -> short libFuzzer run of $BUILD/fuzz/fuzz_z (skipped if not built)
# Exit status of a test: 0 pass, 77 skip (its last "SKIP: reason" line is
# shown), anything else fail (its output is shown).  Ends with the line
# "N passed, N failed, N skipped" and exits non-zero if anything failed.
# Lines a test prints as "RESULT: ..." (the verdict of each of its parts,
# e.g. each kernel of a matrix) are shown under its line.
# Each test gets TEST_TIMEOUT seconds, or what a shell test's header asks
# for with a line "# timeout: S" (in its first 80 lines), if that is more.
set -u
BUILD=${BUILD:-build}
TEST_TIMEOUT=${TEST_TIMEOUT:-120}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
export BUILD FLIT_TOOLS_DIR="$PWD/$BUILD/tools"
# Network tests build their own namespaces (tools/testbed) and ask for udp
# explicitly; every other context stays off the network, so nothing is ever
# sent to the host's own interfaces.
export FLIT_CONTEXT_TRANSPORTS=${FLIT_CONTEXT_TRANSPORTS:-shm}
logdir="$BUILD/test-logs"; mkdir -p "$logdir"
pass=0; fail=0; skip=0; failed=()
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

for t in "$@"; do
  log="$logdir/${t//[:\/]/_}.log"
  case "$t" in
    fuzz:*)
      f=${t#fuzz:}; bin="$BUILD/fuzz/$f"
      corpus="tests/fuzz/corpus/${f#fuzz_}"
      if [ ! -x "$bin" ]; then
        cmd=(sh -c "echo 'SKIP: $f not built (clang libFuzzer runtime missing: apt-get install libclang-rt-14-dev)'; exit 77")
      else
        mkdir -p "$BUILD/fuzz/corpus-$f"
        # libFuzzer's default error exit code is 77, this runner's "skip":
        # a crash must fail
        cmd=("$bin" -max_total_time="$FUZZ_SECONDS" -error_exitcode=1 -timeout_exitcode=1
             -artifact_prefix="$BUILD/fuzz/" "$BUILD/fuzz/corpus-$f" "$corpus")
      fi ;;
    *)
      if [ -x "$BUILD/tests/$t" ]; then cmd=("$BUILD/tests/$t")
      elif [ -f "tests/$t.sh" ]; then cmd=(bash "tests/$t.sh")
      else echo "  FAIL   $t (no such test)"; fail=$((fail+1)); failed+=("$t"); continue; fi ;;
  esac
  # a shell test may ask for more time than TEST_TIMEOUT in its header
  # ("# timeout: S": a suite that boots guests); never less
  tmo=$TEST_TIMEOUT
  if [ "${cmd[0]}" = bash ]; then
    want=$(sed -n '1,80s/^# timeout: *\([0-9][0-9]*\)$/\1/p' "${cmd[1]}" | head -1)
    [ -n "$want" ] && [ "$want" -gt "$tmo" ] && tmo=$want
  fi
  start=$(date +%s%N)
  timeout --kill-after=5 "$tmo" "${cmd[@]}" >"$log" 2>&1
  rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 )); secs="$((ms / 1000)).$(( (ms % 1000) / 100 ))"
  case $rc in
    0)  pass=$((pass+1)); printf '  PASS   %-32s %6ss\n' "$t" "$secs" ;;
    77) skip=$((skip+1))
        why=$(grep -h 'SKIP:' "$log" | tail -1 | sed 's/.*SKIP: *//')
        printf '  SKIP   %-32s %s\n' "$t" "${why:-no reason given}" ;;
    124|137) fail=$((fail+1)); failed+=("$t")
        printf '  FAIL   %-32s timed out after %ss\n' "$t" "$tmo"; tail -20 "$log" | sed 's/^/         | /' ;;
    *)  fail=$((fail+1)); failed+=("$t")
        printf '  FAIL   %-32s exit %s\n' "$t" "$rc"; tail -40 "$log" | sed 's/^/         | /' ;;
  esac
  # a test's own verdicts on its parts ("RESULT: ..."), under its line
  grep -h '^RESULT: ' "$log" 2>/dev/null | sed 's/^RESULT: /         /'
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]} (logs in $logdir)"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
