# boot: hmat
# timeout: 300
# host-programs: sort python3 numactl
# Real programs the way users start them (issue 11): behind a wrapper that execs them, and under
# the live policies case 27 leaves out (real programs as a process tree are case 33's). Every run's output must be what the
# program prints without Terrace (sha256).
# 1. `terrace run --policy hemem -- numactl --membind=1 python3 ...`, the form that used to manage
#    nothing: the fault sampler must follow the exec (a userfaultfd made inside python3, writes
#    sampled after it) and hemem must make plans and move pages, as it does with numactl outside.
# 2. sort under hpwp and under kernel-tiering, started on node 1 (numactl --preferred=1 outside):
#    kernel-tiering must say that the kernel's NUMA balancing leaves memory under that policy
#    alone, and a dry run of it must leave kernel.numa_balancing as it was.
. /lib/vmtest.sh
kernel_balancing_off
echo always >/sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true
sort=$(host_program sort)
py=$(host_program python3)
numactl=$(host_program numactl)
export PYTHONHOME=/usr

random_lines 100000 7 /tmp/lines
cat >/tmp/p.py <<'PY'
import hashlib
d = {i: str(i * 7919 % 1000003) for i in range(150000)}
for r in range(6):
    s = sorted(d.values(), reverse=bool(r % 2))
    d = {k: v + "x" for k, v in d.items()}
print(len(d), hashlib.sha256("".join(s).encode()).hexdigest())
PY
want_py=$("$py" /tmp/p.py | sha256sum | cut -d' ' -f1)
want_sort=$("$sort" /tmp/lines | sha256sum | cut -d' ' -f1)

# done_field WORD: the number before WORD in terrace run's "done:" line in /tmp/log.
done_field() { grep ' done: ' /tmp/log | head -n 1 | sed -n "s/.*[^0-9]\([0-9][0-9]*\) $1.*/\1/p"; }
# output_ok LABEL WANT: the program's output (/tmp/out) is WANT's.
output_ok() {
	[ "$(sha256sum </tmp/out | cut -d' ' -f1)" = "$2" ] || { head -n 3 /tmp/out; fail "$1: output differs from the run without Terrace"; }
}

# 1. numactl outside, then inside.
"$numactl" --membind=1 terrace run --policy hemem -- "$py" /tmp/p.py >/tmp/out 2>/tmp/log || { tail -n 5 /tmp/log; fail "hemem, numactl outside: terrace run failed"; }
output_ok 'hemem, numactl outside' "$want_py"
outside_moved=$(done_field 'pages moved')
outside_plans=$(done_field plans)
outside_faults=$(sed -n 's/.*; \([0-9]*\) sampled write faults.*/\1/p' /tmp/log)
manage 'hemem via numactl --membind=1' --policy hemem -- "$numactl" --membind=1 "$py" /tmp/p.py
output_ok 'hemem via numactl' "$want_py"
grep -q 'made a new userfaultfd inside pid' /tmp/log || fail "hemem via numactl: no userfaultfd made inside python3"
! grep -q 'cannot follow' /tmp/log || fail "hemem via numactl: $(grep 'cannot follow' /tmp/log | head -n 1)"
before=$(grep 'made a new userfaultfd inside pid' /tmp/log | tail -n 1 | sed -n 's/.*(\([0-9]*\) write faults sampled before).*/\1/p')
faults=$(sed -n 's/.*; \([0-9]*\) sampled write faults.*/\1/p' /tmp/log)
after=$((${faults:-0} - ${before:-0}))
plans=$(done_field plans)
moved=$(done_field 'pages moved')
[ "$after" -gt 0 ] || fail "hemem via numactl: no write sampled after the exec"
[ "${plans:-0}" -gt 0 ] || fail "hemem via numactl: no plan made"
if [ "${outside_moved:-0}" -gt 0 ]; then
	[ "${moved:-0}" -gt 0 ] || fail "hemem via numactl: nothing moved, where numactl outside moved $outside_moved pages"
fi
note "python3 under hemem: numactl outside $outside_plans plans, $outside_moved pages moved, $outside_faults write faults sampled; numactl inside $plans plans, $moved pages moved, $after write faults sampled after the exec ($before before)"

# 2. sort under hpwp and kernel-tiering, on node 1.
for policy in hpwp kernel-tiering; do
	on_node 1 terrace run --policy "$policy" -- "$sort" /tmp/lines >/tmp/out 2>/tmp/log || { tail -n 5 /tmp/log; fail "sort under $policy: terrace run failed"; }
	output_ok "sort under $policy" "$want_sort"
	! grep -q 'please report' /tmp/log || fail "sort under $policy: $(grep 'please report' /tmp/log | head -n 1)"
	if [ "$policy" = kernel-tiering ]; then
		grep -q 'kernel-tiering: pid [0-9]* runs under the memory policy `prefer:1`' /tmp/log ||
			fail "kernel-tiering under numactl --preferred=1: no warning that NUMA balancing leaves it alone"
	fi
	note "sort under $policy: output ok; $(grep ' done: ' /tmp/log | sed 's/.*done: //' | head -n 1)"
done
terrace run --dry-run --policy kernel-tiering -- "$sort" /tmp/lines >/tmp/out 2>/tmp/log || { tail -n 5 /tmp/log; fail "kernel-tiering dry run failed"; }
output_ok 'kernel-tiering dry run' "$want_sort"
[ "$(cat /proc/sys/kernel/numa_balancing)" = 0 ] || fail "a dry run of kernel-tiering changed kernel.numa_balancing"
grep -q 'numa_balancing = 2' /tmp/log && fail "a dry run of kernel-tiering switched NUMA balancing on"
note "kernel-tiering dry run: kernel.numa_balancing left at 0"
