# boot: hmat
# timeout: 90
# A daemon killed with SIGKILL leaves the kdamond it started (DAMON keeps watching its program
# until the program exits); the next daemon finds it by the record it left and stops it at start,
# and the program runs on with its data intact.
. /lib/vmtest.sh
kernel_balancing_off
kd=/sys/kernel/mm/damon/admin/kdamonds
[ -d $kd ] || fail "this guest kernel should have DAMON's sysfs interface"
start_daemon age

terrace-hotcold --hot-mib 2 --cold-mib 8 --seconds 20 >/tmp/out 2>&1 &
prog=$!
terrace bind $prog || fail "bind failed"
i=0
while [ "$(cat $kd/0/state 2>/dev/null)" != on ]; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "age started no kdamond within 10 s"
	sleep 0.1
done
killed=$dpid
kill -9 $dpid
wait $dpid
sleep 1
[ "$(cat $kd/0/state 2>/dev/null)" = on ] || fail "expected the killed daemon's kdamond to be left on"
start_daemon age
grep -q "stopped the kdamond that Terrace pid $killed (gone) left running on pid $prog" /tmp/daemon.log ||
	fail "the new daemon did not say it stopped the leftover kdamond"
[ "$(cat $kd/nr_kdamonds)" = 0 ] || fail "kdamonds left: $(cat $kd/nr_kdamonds), state $(cat $kd/0/state 2>/dev/null)"
wait $prog
rc=$?
cat /tmp/out
[ $rc -eq 0 ] || fail "the program exited $rc (3 = checksum mismatch)"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
kill -TERM $dpid
wait $dpid || fail "the second daemon did not stop cleanly"
note "the kdamond of a daemon killed with SIGKILL was left on; the next daemon stopped it at start"
