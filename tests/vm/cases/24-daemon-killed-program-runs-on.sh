# boot: hmat
# timeout: 120
# Killing the daemon with SIGKILL in the middle of migrations (ping-pong) leaves the managed
# program running with its data intact; a new daemon replaces the stale socket.
. /lib/vmtest.sh
kernel_balancing_off
# On failure, the daemon's log is part of the report; nothing this case started outlives it.
cleanup() {
	echo "--- daemon log"
	tail -n 40 /tmp/daemon.log 2>/dev/null
	for p in $dpid $hpid $rpid $apid $prog $p; do kill "$p" 2>/dev/null; done
}
trap cleanup EXIT
# The guest's loopback is down until someone brings it up (the metrics endpoint is on it).
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up

sock=/run/terrace.sock
cat >/tmp/terrace.toml <<CONF
[daemon]
socket = "$sock"
dry_run = false
policy = "ping-pong"
CONF
start_daemon() {
	terrace daemon --config /tmp/terrace.toml 2>>/tmp/daemon.log &
	dpid=$!
	i=0
	while ! terrace bind --raw '{"op":"list"}' >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -le 100 ] || { cat /tmp/daemon.log; fail "the daemon does not answer after 10 s"; }
		sleep 0.1
	done
}
start_daemon

terrace-hotcold --hot-mib 2 --cold-mib 8 --seconds 20 --verify-every 2 >/tmp/out 2>&1 &
prog=$!
terrace bind $prog || fail "bind failed"
sleep 5
grep -q "pid $prog: moved" /tmp/daemon.log || fail "the daemon had not started moving pages"
kill -9 $dpid
wait $dpid
sleep 1
running() { [ -d "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
running $prog || fail "the program died with the daemon"
[ -S $sock ] || fail "expected the killed daemon's socket to be left behind"
start_daemon
grep -q "removing the stale socket" /tmp/daemon.log || fail "the new daemon did not say it replaced the stale socket"
wait $prog
rc=$?
cat /tmp/out
[ $rc -eq 0 ] || fail "the program exited $rc (3 = checksum mismatch)"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum after the daemon was killed"
kill -TERM $dpid
wait $dpid || fail "the second daemon did not stop cleanly"
moved=$(grep -c "pid $prog: moved" /tmp/daemon.log)
note "daemon killed after $moved ping-pong batches; program finished with its checksum intact; stale socket replaced"
