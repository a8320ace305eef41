# boot: hmat
# timeout: 200
# needs: test-binaries
# terrace-linux's own unit and integration tests against this kernel, the ignored ones included:
# they are ignored elsewhere because they need what a development machine may lack and this guest
# has (userfaultfd write-protect, ptrace of a child, perf events, two NUMA nodes), so here they
# must pass. A test this guest kernel cannot run is skipped by name and named in a VMNOTE line
# with the reason; every other test must pass, and the counts are reported.
. /lib/vmtest.sh

ls /tests/* > /dev/null 2>&1 || fail "no test executables in /tests (tests/vm/run copies them for '# needs: test-binaries')"
# The daemon's metrics endpoint listens on loopback, which the guest brings up only on demand.
ip link set lo up 2> /dev/null || ifconfig lo 127.0.0.1 up
# The tests read their fixtures under the source tree's path on the host (CARGO_MANIFEST_DIR);
# tests/vm/run put them in /source and that path in /etc/terrace-source.
src=$(cat /etc/terrace-source) || fail "no /etc/terrace-source"
if [ ! -e "$src" ]; then
	mkdir -p "$(dirname "$src")" && ln -s /source "$src" || fail "cannot link $src to /source"
	trap 'rm -f "$src"' EXIT
fi

# Tests this guest kernel cannot run, one per line: executable, test name, why.
cannot_run=''

# Each executable's time limit: together they take about 10 s here, so this only stops one that
# hangs from hiding the others' results (six at most 30 s each stay within the case's limit).
exe_limit=30
passed=0
failed=0
skipped=0
helpers=0
for t in /tests/*; do
	exe=$(basename "$t")
	skips=$(echo "$cannot_run" | awk -v e="$exe" '$1 == e { printf " --skip %s", $2 }')
	# A test's child process (named child_*) is an ignored test function that the test starts
	# itself with --ignored: not a test of its own, so it is left out here and not counted.
	children=$("$t" --list --include-ignored 2> /dev/null | sed -n 's/^\(child_[A-Za-z0-9_]*\): test$/\1/p')
	for c in $children; do
		skips="$skips --skip $c"
	done
	nchildren=$(echo "$children" | grep -c . || true)
	echo "=== $exe --include-ignored --test-threads=1 --exact$skips"
	# To a file, not a pipe: a child process a test leaves behind would hold a pipe open.
	# shellcheck disable=SC2086 # $skips is a list of arguments
	timeout -k 5 "$exe_limit" "$t" --include-ignored --test-threads=1 --exact $skips > "/tmp/$exe.out" 2>&1
	rc=$?
	cat "/tmp/$exe.out"
	echo
	# A test's child processes outlive a test that was stopped: end them, for the next cases.
	for p in /proc/[0-9]*; do
		case $(readlink "$p/exe" 2> /dev/null) in /tests/*) kill -9 "${p#/proc/}" 2> /dev/null ;; esac
	done
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] || [ "$rc" -eq 143 ]; then
		echo "FAIL: $exe did not finish within $exe_limit s (exit code $rc)"
		running=$(grep '^test .* \.\.\. ' "/tmp/$exe.out" | grep -v ' \.\.\. \(ok\|FAILED\|ignored.*\)$' | tail -n 1)
		note "TIMED OUT $exe after $exe_limit s, in $(echo "$running" | sed 's/^test \(.*\) \.\.\. .*/\1/')"
		failed=$((failed + 1))
		continue
	fi
	result=$(grep '^test result:' "/tmp/$exe.out" | tail -n 1)
	if [ -z "$result" ]; then
		echo "FAIL: $exe printed no result (exit code $rc)"
		failed=$((failed + 1))
		continue
	fi
	# test result: ok. P passed; F failed; I ignored; M measured; S filtered out; finished in T
	p=$(echo "$result" | awk '{ print $4 }')
	f=$(echo "$result" | awk '{ print $6 }')
	s=$(($(echo "$result" | awk '{ print $12 }') - nchildren))
	helpers=$((helpers + nchildren))
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL: $exe exited $rc"
		failed=$((failed + 1))
	fi
	grep ' \.\.\. FAILED$' "/tmp/$exe.out" | sed "s/^test \(.*\) \.\.\. FAILED$/VMNOTE $CASE_NAME: FAILED $exe \1/"
done
echo "$cannot_run" | while read -r exe test why; do
	[ -n "$exe" ] && note "skipped $exe $test: $why"
done
note "$passed passed, $failed failed, $skipped skipped (this kernel cannot run them) in $(ls /tests | wc -l) test executables; $helpers child-process helpers run only by their tests"
[ "$failed" -eq 0 ] || fail "$failed of terrace-linux's tests failed"
