# boot: hmat
# timeout: 90
# Under first-touch nothing moves: the program's pages stay where they were first touched.
. /lib/vmtest.sh
kernel_balancing_off

terrace run --policy first-touch -- terrace-hotcold --hot-mib 4 --cold-mib 16 --seconds 10 --start-node 1 \
	>/tmp/out 2>/tmp/log
rc=$?
cat /tmp/out
tail -n 5 /tmp/log
[ $rc -eq 0 ] || fail "terrace run exited $rc"
grep -q 'hotcold end hot node1=1024 | cold node1=4096' /tmp/out || fail "pages moved under first-touch"
grep -q '0 pages moved' /tmp/log || fail "terrace reports moving pages"
