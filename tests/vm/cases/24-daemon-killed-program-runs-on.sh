# boot: hmat
# timeout: 120
# Killing the daemon with SIGKILL in the middle of migrations (ping-pong) leaves the managed
# program running with its data intact; a new daemon replaces the stale socket.
. /lib/vmtest.sh
kernel_balancing_off
start_daemon ping-pong

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
start_daemon ping-pong
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
