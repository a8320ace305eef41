# boot: hmat
# timeout: 240
# The daemon manages a cgroup (`terrace bind --cgroup DIR`): two programs moved into it and a third
# that joins it after the bind are managed as one group under age; each one's hot set, first
# touched on the slow node, moves to node 0 and its cold set stays (the third's too, though it wrote
# every page before it joined); list and the metrics count 3 processes; unbind stops the moves.
# A cgroup bound again ends its binding when it is removed after its programs exit. alice cannot
# bind root's cgroup; bound by her in a cgroup delegated to her, only her processes in it are
# managed.
. /lib/vmtest.sh
kernel_balancing_off
start_daemon
cg=/sys/fs/cgroup/terrace-test
dg=/sys/fs/cgroup/terrace-alice
trap 'echo "--- daemon log"; tail -n 60 /tmp/daemon.log 2>/dev/null
	for p in $dpid $p1 $p2 $p3 $rpid $apid; do kill "$p" 2>/dev/null; done
	sleep 0.5; rmdir $cg $dg 2>/dev/null' EXIT
rmdir $cg $dg 2>/dev/null
mkdir $cg || fail "cannot make the cgroup $cg"

# hotcold N SECONDS: a program with its 2 MiB hot set and 8 MiB cold set first touched on node 1,
# reporting to /tmp/cgN.out every 2 s; waited for until it has filled its sets.
hotcold() {
	i=0
	until grep -q '^hotcold start' /tmp/cg$1.out 2>/dev/null; do
		i=$((i + 1))
		[ $i -le 200 ] || fail "program $1 did not start"
		sleep 0.1
	done
	started_on /tmp/cg$1.out 1 512 2048
}
# hot0 N, cold1 N: the hot pages of program N on node 0, its cold pages on node 1, in its last
# report.
hot0() { _count hot 0 "$(grep '^hotcold t=' /tmp/cg$1.out | tail -n 1)"; }
cold1() { _count cold 1 "$(grep '^hotcold t=' /tmp/cg$1.out | tail -n 1)"; }
list() { terrace bind --raw '{"op":"list"}' || fail "list failed"; }

# alice may not bind root's cgroup.
out=$(as_user alice "terrace bind --cgroup $cg" 2>&1) && fail "alice could bind root's cgroup: $out"
echo "alice binds root's cgroup: $out"
echo "$out" | grep -q "terrace: permission denied: uid 1000 may not manage cgroup $cg (its directory is owned by uid 0" ||
	fail "unexpected refusal: $out"
[ "$(echo "$out" | wc -l)" = 1 ] || fail "the refusal is not one line"

terrace-hotcold --hot-mib 2 --cold-mib 8 --seconds 35 --start-node 1 --report-every 2 >/tmp/cg1.out 2>&1 &
p1=$!
terrace-hotcold --hot-mib 2 --cold-mib 8 --seconds 35 --start-node 1 --report-every 2 >/tmp/cg2.out 2>&1 &
p2=$!
hotcold 1
hotcold 2
echo $p1 >$cg/cgroup.procs || fail "cannot move $p1 into $cg"
echo $p2 >$cg/cgroup.procs || fail "cannot move $p2 into $cg"
before1=$(pages_per_node $p1)
before2=$(pages_per_node $p2)
echo "before: $p1 $before1, $p2 $before2"

bound=$(date +%s)
out=$(terrace bind --cgroup $cg --policy age 2>&1) || fail "terrace bind --cgroup failed: $out"
echo "bind: $out"
echo "$out" | grep -q "managing cgroup $cg with policy age (2 processes now" || fail "unexpected bind output: $out"
out=$(terrace bind --cgroup $cg 2>&1) && fail "the cgroup was bound twice: $out"
echo "$out" | grep -q "cgroup $cg is already managed (policy age)" || fail "unexpected second bind: $out"

# The third program starts after the bind and joins the cgroup once it has written all its pages
# (each soft-dirty since it started: its first scan must not take them as this tick's writes).
terrace-hotcold --hot-mib 2 --cold-mib 8 --seconds 28 --start-node 1 --report-every 2 >/tmp/cg3.out 2>&1 &
p3=$!
hotcold 3
echo $p3 >$cg/cgroup.procs || fail "cannot move $p3 into $cg"
moved_in=$(date +%s)
joined=""
i=0
while [ $i -le 150 ]; do
	l=$(list)
	echo "$l" | grep -q "\"cgroup\":\"$cg\",\"processes\":3," && { joined=$(($(date +%s) - moved_in)); break; }
	i=$((i + 1))
	sleep 0.1
done
echo "list: $l"
[ -n "$joined" ] || fail "list does not show 3 processes in the cgroup within 15 s of program 3 joining it"
grep -q "cgroup $cg: managing pid $p3 (" /tmp/daemon.log || fail "no log line for program 3 joining"

# Within 25 s of the bind, each program's report shows >= 95% of its hot set on node 0 (the
# programs run 35 s and 28 s, so they still run for the unbind and the second bind after it).
done_at=""
while [ $(($(date +%s) - bound)) -le 25 ]; do
	a=$(hot0 1) b=$(hot0 2) c=$(hot0 3)
	if [ "${a:-0}" -ge 487 ] && [ "${b:-0}" -ge 487 ] && [ "${c:-0}" -ge 487 ]; then
		done_at=$(($(date +%s) - bound))
		break
	fi
	sleep 1
done
for n in 1 2 3; do
	echo "--- program $n"
	cat /tmp/cg$n.out
done
[ -n "$done_at" ] || fail "hot sets on node 0 within 25 s of the bind: $(hot0 1), $(hot0 2), $(hot0 3) of 512"
# The cold sets stay (the third program's too: it is not seen as writing everything at once).
for n in 1 2 3; do
	[ "$(cold1 $n)" -ge 1946 ] || fail "program $n has only $(cold1 $n) of its 2048 cold pages on node 1"
done
for p in $p1 $p2 $p3; do
	grep -q "pid $p: moved" /tmp/daemon.log || fail "the daemon moved no page of pid $p"
done
after1=$(pages_per_node $p1)
after2=$(pages_per_node $p2)
after3=$(pages_per_node $p3)
echo "after: $p1 $after1, $p2 $after2, $p3 $after3"
for a in "$after1" "$after2" "$after3"; do
	n0=$(echo "$a" | sed -n 's/.*node0=\([0-9]*\).*/\1/p')
	[ "${n0:-0}" -ge 487 ] || fail "numa_maps shows ${n0:-no} pages on node 0: $a"
done

# terrace_pages is the pages per tier at the last scan, taken before that scan's moves: the
# pages moved since show at the next (one CI run read 1072 while numa_maps showed 2796).
labels="pid=\"0\",cgroup=\"$cg\""
for i in $(seq 10); do
	metrics=$(wget -qO- http://127.0.0.1:9464/metrics) || fail "no metrics at 127.0.0.1:9464"
	m0=$(echo "$metrics" | sed -n "s|^terrace_pages{$labels,tier=\"0\"} \([0-9]*\)$|\1|p")
	[ -n "$m0" ] && [ "$m0" -ge 1461 ] && break
	sleep 1
done
echo "$metrics" | grep "cgroup=\"$cg\""
echo "$metrics" | grep -q "^terrace_processes{$labels} 3$" || fail "metrics do not count 3 processes in the cgroup"
echo "$metrics" | grep -q "^terrace_process_info{$labels,policy=\"age\"} 1$" || fail "no info series for the cgroup"
[ -n "$m0" ] && [ "$m0" -ge 1461 ] || fail "metrics show ${m0:-no} tier-0 pages for the cgroup 10 s after numa_maps showed the hot sets on node 0"
moved=$(echo "$metrics" | sed -n "s|^terrace_pages_moved_total{$labels} \([0-9]*\)$|\1|p")
[ -n "$moved" ] && [ "$moved" -ge 1461 ] || fail "metrics show ${moved:-no} pages moved for the cgroup"

out=$(terrace unbind --cgroup $cg 2>&1) || fail "terrace unbind --cgroup failed: $out"
echo "unbind: $out"
echo "$out" | grep -q "stopped managing cgroup $cg" || fail "unexpected unbind output: $out"
grep -q "unbound cgroup $cg at the request of uid 0" /tmp/daemon.log || fail "no unbind log line"
list | grep -q '"processes":\[\]' || fail "the cgroup is still listed after unbind"
lines=$(grep -c 'moved [0-9]*/' /tmp/daemon.log)
sleep 3
[ "$(grep -c 'moved [0-9]*/' /tmp/daemon.log)" = "$lines" ] || fail "pages moved after unbind"

# Bound again; the programs finish (checksums intact), the cgroup is removed: the binding ends.
out=$(terrace bind --cgroup $cg 2>&1) || fail "second bind failed: $out"
echo "bind again: $out"
for p in $p1 $p2 $p3; do
	wait $p || fail "program $p failed (3 = checksum mismatch)"
done
for n in 1 2 3; do
	grep -q 'hotcold checksum ok' /tmp/cg$n.out || fail "checksum of program $n"
done
echo "list after the programs exited: $(list)"
rmdir $cg || fail "cannot remove $cg"
i=0
until grep -q "cgroup $cg was removed; stopped managing it" /tmp/daemon.log; do
	i=$((i + 1))
	[ $i -le 50 ] || fail "no log line for the removed cgroup"
	sleep 0.1
done
list | grep -q '"processes":\[\]' || fail "the removed cgroup is still listed"
wget -qO- http://127.0.0.1:9464/metrics | grep -q "cgroup=\"$cg\"" && fail "metrics still show the removed cgroup"

# A cgroup delegated to alice (chowned to her) holding her process and root's: she may bind it,
# and only her process is managed.
mkdir $dg && chown alice $dg $dg/cgroup.procs || fail "cannot delegate $dg to alice"
sleep 30 &
rpid=$!
apid=$(as_user alice 'sleep 30 >/dev/null 2>&1 & echo $!')
echo $rpid >$dg/cgroup.procs && echo $apid >$dg/cgroup.procs || fail "cannot move the sleepers into $dg"
out=$(as_user alice "terrace bind --cgroup $dg" 2>&1) || fail "alice cannot bind her delegated cgroup: $out"
echo "alice binds $dg: $out"
echo "$out" | grep -q "managing cgroup $dg with policy age (1 process of uid 1000 now" || fail "unexpected: $out"
grep -q "cgroup $dg (uid 1000) with policy age, bound by uid 1000, 1 process of uid 1000" /tmp/daemon.log ||
	fail "no bind log line for alice's cgroup"
out=$(as_user bob "terrace unbind --cgroup $dg" 2>&1) && fail "bob could unbind alice's cgroup: $out"
echo "$out" | grep -q "permission denied: uid 1001 may not manage cgroup $dg" || fail "unexpected: $out"
out=$(as_user alice "terrace unbind --cgroup $dg" 2>&1) || fail "alice cannot unbind her cgroup: $out"
echo "alice unbinds: $out"
kill $rpid $apid
wait $rpid 2>/dev/null
sleep 0.5
rmdir $dg || fail "cannot remove $dg"

kill -TERM $dpid
wait $dpid || fail "the daemon did not stop cleanly"
note "cgroup of 2 programs + 1 that joined (listed as 3 ${joined}s after it joined): 3 hot sets on node0 within ${done_at}s of bind ($m0 tier-0 pages, $moved moved); unbind, removal and alice's refusal and delegated cgroup ok"
