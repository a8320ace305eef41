# boot: hmat
# timeout: 150
# The daemon manages a running program handed over with `terrace bind`: under age its hot set,
# first touched on the slow node, moves to node 0 within a bounded time; the metrics endpoint
# reports its pages; `terrace unbind` stops managing it and its pages stay; SIGTERM stops the
# daemon and removes its socket.
. /lib/vmtest.sh
kernel_balancing_off
start_daemon
mode=$(stat -c %a $sock)
[ "$mode" = 666 ] || fail "socket mode $mode, expected 666"

terrace-hotcold --hot-mib 4 --cold-mib 16 --seconds 25 --start-node 1 --report-every 5 >/tmp/out 2>&1 &
hpid=$!
i=0
until grep -q '^hotcold start' /tmp/out; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "the program did not start"
	sleep 0.1
done
started_on /tmp/out 1 1024 4096
bound=$(date +%s)
out=$(terrace bind $hpid --policy age 2>&1) || fail "terrace bind failed: $out"
echo "bind: $out"
echo "$out" | grep -q "managing pid $hpid with policy age" || fail "unexpected bind output: $out"
list=$(terrace bind --raw '{"op":"list"}') || fail "list failed: $list"
echo "list: $list"
echo "$list" | grep -q "\"pid\":$hpid" || fail "list does not show pid $hpid"

# Within 30 s of the bind, a report shows >= 95% of the hot set on node 0.
hot0=""
while [ $(($(date +%s) - bound)) -le 15 ]; do
	hot0=$(sed -n 's/^hotcold t=[0-9.]*s hot [^|]*node0=\([0-9]*\).*/\1/p' /tmp/out | awk '$1 >= 973' | tail -n 1)
	[ -n "$hot0" ] && break
	sleep 1
done
cat /tmp/out
[ -n "$hot0" ] || fail "the hot set was not on node 0 within 15 s of the bind"
took=$(($(date +%s) - bound))

metrics=$(wget -qO- http://127.0.0.1:9464/metrics) || fail "no metrics at 127.0.0.1:9464"
echo "$metrics" | grep "pid=\"$hpid\""
m0=$(echo "$metrics" | sed -n "s/^terrace_pages{pid=\"$hpid\",tier=\"0\"} \([0-9]*\)$/\1/p")
[ -n "$m0" ] && [ "$m0" -ge 973 ] || fail "metrics show ${m0:-no} tier-0 pages for pid $hpid"
echo "$metrics" | grep -q "^terrace_managed_processes 1$" || fail "metrics do not count one managed process"
echo "$metrics" | grep -q "^# TYPE terrace_pages_moved_total counter$" || fail "no TYPE line for pages moved"
moved=$(echo "$metrics" | sed -n "s/^terrace_pages_moved_total{pid=\"$hpid\"} \([0-9]*\)$/\1/p")
[ -n "$moved" ] && [ "$moved" -ge 973 ] || fail "metrics show ${moved:-no} pages moved"

out=$(terrace unbind $hpid 2>&1) || fail "terrace unbind failed: $out"
echo "unbind: $out"
grep -q "unbound pid $hpid" /tmp/daemon.log || fail "no unbind log line"
wget -qO- http://127.0.0.1:9464/metrics | grep -q "pid=\"$hpid\"" && fail "metrics still show pid $hpid after unbind"
lines=$(grep -c 'moved [0-9]*/' /tmp/daemon.log)
sleep 3
[ "$(grep -c 'moved [0-9]*/' /tmp/daemon.log)" = "$lines" ] || fail "pages moved after unbind"

wait $hpid || fail "the program failed after unbind"
cat /tmp/out
end=$(grep '^hotcold end' /tmp/out)
hot0=$(echo "$end" | sed -n 's/.*hot [^|]*node0=\([0-9]*\).*/\1/p')
[ -n "$hot0" ] && [ "$hot0" -ge 973 ] || fail "after unbind only ${hot0:-0} hot pages stayed on node 0"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"

kill -TERM $dpid
wait $dpid
rc=$?
tail -n 20 /tmp/daemon.log
[ $rc -eq 0 ] || fail "the daemon exited $rc on SIGTERM"
[ -e $sock ] && fail "the socket is still there after SIGTERM"
note "daemon+age: hot set on node0 within ${took}s of bind ($m0 tier-0 pages in metrics, $moved moved); unbind left them there"
