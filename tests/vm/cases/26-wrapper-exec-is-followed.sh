# boot: hmat
# timeout: 120
# A program started through wrappers that exec it (`sh -c 'sleep 1; exec ...'`, `env`):
# Terrace attached to the wrapper, so it must see the exec (same pid, new address space), reopen
# pagemap and follow the real program. (`sleep 1` first: `terrace run` opens a program it does not
# trace once it runs, and `env` alone may have exec'd by then, which needs no following.) Under
# age and ambix (page-table bits) plans are made and pages move as in the direct runs (cases 10
# and 17, shorter); under hemem the fault sampler's
# userfaultfd was created in the wrapper, so it says once that sampling stopped at the exec and
# what to do, and counts it, while DAMON's reads keep the policy going. Data intact every time.
. /lib/vmtest.sh
kernel_balancing_off

printf '[trackers]\nreferenced = "soft-dirty"\n' >/tmp/sd.toml
hc="terrace-hotcold --hot-mib 4 --cold-mib 16 --start-node 1 --report-every 5"

# done_field WORD: the number before WORD in terrace run's "done:" line.
done_field() { grep ' done: ' /tmp/log | head -n 1 | sed -n "s/.*[^0-9]\([0-9][0-9]*\) $1.*/\1/p"; }

followed() {
	grep -q "exec'd .*terrace-hotcold: following it" /tmp/log || fail "$1: the exec was not followed"
	grep -q 'followed [12] exec' /tmp/log || fail "$1: the done line counts no exec followed"
	grep -q 'hotcold checksum ok' /tmp/out || fail "$1: checksum"
	plans=$(done_field plans)
	moved=$(done_field 'pages moved')
	[ "${plans:-0}" -gt 0 ] || fail "$1: no plan made"
}

manage 'age via env' --policy age --config /tmp/sd.toml -- sh -c "sleep 1; exec env TERRACE_WRAPPED=1 $hc --seconds 12"
followed 'age via env'
hot0=$(pages_at hot 0)
[ "${moved:-0}" -gt 0 ] || fail "age via env: no page moved"
[ "$hot0" -ge 973 ] || fail "age via env: only $hot0 of 1024 hot pages on node 0"
note "age via env: $plans plans, $moved pages moved, hot $hot0/1024 on node0"

manage 'ambix via sh -c exec' --policy ambix --config /tmp/sd.toml -- sh -c "sleep 1; exec $hc --seconds 12"
followed 'ambix via sh -c exec'
hot0=$(pages_at hot 0)
[ "${moved:-0}" -gt 0 ] || fail "ambix via sh -c exec: no page moved"
note "ambix via sh -c exec: $plans plans, $moved pages moved, hot $hot0/1024 on node0"

manage 'hemem via env' --policy hemem -- env TERRACE_WRAPPED=1 $hc --thp --seconds 10
followed 'hemem via env'
grep -q 'sampling of writes stopped at the exec' /tmp/log || fail "hemem via env: no warning that sampling stopped"
grep -q '1 tracker(s) lost' /tmp/log || fail "hemem via env: the lost sampler is not counted"
hot0=$(pages_at hot 0)
note "hemem via env: $plans plans, $moved pages moved (DAMON reads only), hot $hot0/1024 on node0"
