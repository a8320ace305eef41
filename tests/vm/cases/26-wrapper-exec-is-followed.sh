# boot: hmat
# timeout: 200
# host-programs: numactl
# A program started through wrappers that exec it (`sh -c 'sleep 1; exec ...'`, `env`, numactl):
# Terrace attached to the wrapper, so it must see the exec (same pid, new address space), reopen
# pagemap and follow the real program. (`sleep 1` first: `terrace run` opens a program it does not
# trace once it runs, and `env` alone may have exec'd by then, which needs no following.) Under
# age and ambix (page-table bits) plans are made and pages move as in the direct runs (cases 10
# and 17, shorter). Under hemem the fault sampler's first userfaultfd was created in the wrapper;
# at the exec Terrace makes a new one inside the running program (ptrace, a few system calls'
# time) and sampling goes on: writes are sampled after the exec, nothing is lost, and the hot
# huge pages are promoted as in a direct run (case 19). Data intact every time.
. /lib/vmtest.sh
kernel_balancing_off
echo always >/sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true

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

manage 'age via env' --policy age --config /tmp/sd.toml -- sh -c "sleep 1; exec env TERRACE_WRAPPED=1 $hc --seconds 8"
followed 'age via env'
hot0=$(pages_at hot 0)
[ "${moved:-0}" -gt 0 ] || fail "age via env: no page moved"
[ "$hot0" -ge 973 ] || fail "age via env: only $hot0 of 1024 hot pages on node 0"
note "age via env: $plans plans, $moved pages moved, hot $hot0/1024 on node0"

manage 'ambix via sh -c exec' --policy ambix --config /tmp/sd.toml -- sh -c "sleep 1; exec $hc --seconds 8"
followed 'ambix via sh -c exec'
hot0=$(pages_at hot 0)
[ "${moved:-0}" -gt 0 ] || fail "ambix via sh -c exec: no page moved"
note "ambix via sh -c exec: $plans plans, $moved pages moved, hot $hot0/1024 on node0"

# hemem_followed LABEL: the fault sampler followed every exec (a new userfaultfd made inside the
# program, no tracker lost), sampled writes after the last one, and hemem moved the hot pages.
hemem_followed() {
	followed "$1"
	grep -q 'made a new userfaultfd inside pid' /tmp/log || fail "$1: no userfaultfd made inside the exec'd program"
	grep -q '0 tracker(s) lost' /tmp/log || fail "$1: a tracker was lost at the exec"
	! grep -q 'cannot follow' /tmp/log || fail "$1: $(grep 'cannot follow' /tmp/log | head -n 1)"
	before=$(grep 'made a new userfaultfd inside pid' /tmp/log | tail -n 1 | sed -n 's/.*(\([0-9]*\) write faults sampled before).*/\1/p')
	faults=$(sed -n 's/.*; \([0-9]*\) sampled write faults.*/\1/p' /tmp/log)
	after=$((${faults:-0} - ${before:-0}))
	[ "$after" -ge 20 ] || fail "$1: only $after write faults sampled after the exec ($faults in all)"
	hot0=$(pages_at hot 0)
	[ "${moved:-0}" -gt 0 ] || fail "$1: no page moved"
	[ "$hot0" -ge 973 ] || fail "$1: only $hot0 of 1024 hot pages on node 0"
	note "$1: $after write faults sampled after the exec (${before:-0} before), $plans plans, $moved pages moved, hot $hot0/1024 on node0; $(policy_cost)"
}

manage 'hemem via env' --policy hemem -- env TERRACE_WRAPPED=1 $hc --thp --seconds 7
hemem_followed 'hemem via env'

manage 'hemem via sh -c exec' --policy hemem -- sh -c "sleep 1; exec $hc --thp --seconds 7"
hemem_followed 'hemem via sh -c exec'

numactl=$(host_program numactl)
manage 'hemem via numactl' --policy hemem -- "$numactl" --preferred=1 $hc --thp --seconds 7
hemem_followed 'hemem via numactl'
