# boot: hmat
# timeout: 300
# host-programs: sort python3 numactl
# terrace run manages the whole process tree it starts (issue 11 item 2): a shell that starts
# programs in the background, one of them through a second shell. First two copies of the test
# program, whose hot pages must each reach node 0 under age as in a direct run (case 26's
# threshold); then one under hemem, whose fault sampler needs a userfaultfd made inside the
# child as it joins: its writes must be sampled and its hot huge pages reach node 0 (case 19's
# threshold); then GNU sort and python3 (copied from the host) started the same way on node 1,
# whose outputs must be what they print without Terrace, with pages moved in both.
. /lib/vmtest.sh
kernel_balancing_off

printf '[trackers]\nreferenced = "soft-dirty"\n' >/tmp/sd.toml
hc="terrace-hotcold --hot-mib 4 --cold-mib 16 --start-node 1 --report-every 5 --seconds 14"

# hot_on0 FILE: hot pages on node 0 in the end report of the test program's output FILE.
hot_on0() {
	_end=$(grep '^hotcold end' "$1") || fail "$1: the program printed no end report"
	_count hot 0 "$_end"
}
# done_field WORD: the number before WORD in terrace run's "done:" line.
done_field() { grep ' done: ' /tmp/log | head -n 1 | sed -n "s/.*[^0-9]\([0-9][0-9]*\) $1.*/\1/p"; }

manage 'tree of two' --policy age --config /tmp/sd.toml -- \
	sh -c "$hc >/tmp/out1 & sh -c '$hc >/tmp/out2' & wait"
joined=$(grep -c 'managing pid [0-9]* (.*terrace-hotcold) too\|pid [0-9]* exec.d .*terrace-hotcold: following it' /tmp/log)
grep 'managing pid' /tmp/log | head -n 4
for f in /tmp/out1 /tmp/out2; do
	grep -q 'hotcold checksum ok' "$f" || fail "tree of two: $f: checksum"
done
h1=$(hot_on0 /tmp/out1)
h2=$(hot_on0 /tmp/out2)
more=$(sed -n 's/.*managed \([0-9]*\) more process.*/\1/p' /tmp/log)
moved=$(done_field 'pages moved')
note "tree of two: ${more:-0} processes joined, $moved pages moved, hot on node0: $h1/1024 and $h2/1024"
[ "${more:-0}" -ge 2 ] || fail "tree of two: the done line counts ${more:-0} processes joined, not both programs"
[ "$h1" -ge 973 ] || fail "tree of two: the first program has only $h1 of 1024 hot pages on node 0"
[ "$h2" -ge 973 ] || fail "tree of two: the second program (through a second shell) has only $h2 of 1024 hot pages on node 0"

# hemem: the child joins with a userfaultfd of its own, made inside it.
echo always >/sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true
printf '[tiers]\nfast_limit_mib = 6\n' >/tmp/limit.toml
manage 'hemem tree' --policy hemem --config /tmp/limit.toml -- \
	sh -c "terrace-hotcold --thp --hot-mib 4 --cold-mib 16 --seconds 15 --start-node 1 --report-every 5 >/tmp/out1; echo done"
grep -q 'hotcold checksum ok' /tmp/out1 || fail "hemem tree: checksum"
grep -q 'joins without a userfaultfd' /tmp/log && fail "hemem tree: $(grep -m1 'joins without' /tmp/log)"
faults=$(sed -n 's/.*; \([0-9]*\) sampled write faults.*/\1/p' /tmp/log)
h=$(hot_on0 /tmp/out1)
note "hemem tree: $faults write faults sampled, hot on node0: $h/1024"
[ "${faults:-0}" -gt 0 ] || fail "hemem tree: no write of the child was sampled"
[ "$h" -ge 973 ] || fail "hemem tree: the child has only $h of 1024 hot pages on node 0"

# Real programs, started the same way.
sort=$(host_program sort)
py=$(host_program python3)
export PYTHONHOME=/usr
random_lines 300000 11 /tmp/lines
cat >/tmp/p.py <<'PY'
import hashlib
d = {i: str(i * 7919 % 1000003) for i in range(300000)}
s = sorted(d.values())
print(len(d), hashlib.sha256("".join(s).encode()).hexdigest())
PY
want_sort=$("$sort" /tmp/lines | sha256sum | cut -d' ' -f1)
want_py=$("$py" /tmp/p.py | sha256sum | cut -d' ' -f1)
# age decides once an interval, 1 s by default; the two programs can finish within a second when
# the emulator runs fast (0.8 s in one CI run, which moved nothing), so age ticks every 200 ms here.
on_node 1 terrace run --policy age:interval=200ms -- sh -c "$sort /tmp/lines >/tmp/sort.out & sh -c '$py /tmp/p.py >/tmp/py.out' & wait" \
	>/dev/null 2>/tmp/log || fail "real programs: terrace run exited $?"
grep 'managing pid\|done:' /tmp/log | tail -n 4
[ "$(sha256sum </tmp/sort.out | cut -d' ' -f1)" = "$want_sort" ] || fail "real programs: sort's output differs"
[ "$(sha256sum </tmp/py.out | cut -d' ' -f1)" = "$want_py" ] || fail "real programs: python3's output differs"
more=$(sed -n 's/.*managed \([0-9]*\) more process.*/\1/p' /tmp/log)
moved=$(done_field 'pages moved')
sort_pid=$(sed -n 's/.*managing pid \([0-9]*\) (.*sort) too.*/\1/p' /tmp/log | head -n 1)
sort_moved=$(grep "pid ${sort_pid:-none}: moved" /tmp/log | sed -n 's/.*moved \([0-9]*\)\/.*/\1/p' | awk '{ n += $1 } END { print n + 0 }')
note "real programs: ${more:-0} processes joined, $moved pages moved ($sort_moved of them sort's)"
[ "${more:-0}" -ge 2 ] || fail "real programs: ${more:-0} processes joined"
[ "${moved:-0}" -gt 0 ] || fail "real programs: no page moved"
