# boot: hmat
# timeout: 150
# ping-pong sends every page to the other node five times a second while the program keeps
# writing: after thousands of migrations its checksum (and every cold word) is intact.
. /lib/vmtest.sh
kernel_balancing_off

terrace run --policy ping-pong -- terrace-hotcold --hot-mib 1 --cold-mib 4 --seconds 18 --verify-every 3 \
	>/tmp/out 2>/tmp/log
rc=$?
cat /tmp/out
tail -n 5 /tmp/log
[ $rc -eq 0 ] || fail "terrace run exited $rc (3 = checksum mismatch)"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
moved=$(sed -n 's/.*done: \([0-9]*\) pages moved.*/\1/p' /tmp/log)
[ -n "$moved" ] && [ "$moved" -ge 2000 ] || fail "only ${moved:-0} pages moved"
note "ping-pong: $moved page migrations, checksum intact"
