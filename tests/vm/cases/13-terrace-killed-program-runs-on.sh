# boot: hmat
# timeout: 120
# Killing Terrace in the middle of its migrations leaves the program running and its data intact.
. /lib/vmtest.sh
kernel_balancing_off

terrace run --policy ping-pong -- terrace-hotcold --hot-mib 2 --cold-mib 8 --seconds 20 --verify-every 2 \
	>/tmp/out 2>/tmp/log &
tpid=$!
sleep 6
# The program is Terrace's child.
ppid_of() { awk '{print $4}' "/proc/$1/stat"; }
prog=""
for p in /proc/[0-9]*; do
	p=${p#/proc/}
	[ "$(cat /proc/$p/comm 2>/dev/null)" = terrace-hotcold ] && [ "$(ppid_of $p)" = "$tpid" ] && prog=$p
done
[ -n "$prog" ] || fail "the program is not running under terrace"
grep -q 'moved' /tmp/log || fail "terrace had not started moving pages"
kill -9 "$tpid"
sleep 1
# Orphans are reaped by init only eventually: a zombie counts as exited.
running() { [ -d "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
running "$prog" || fail "the program died with terrace"
while running "$prog"; do sleep 1; done
cat /tmp/out
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum after terrace was killed"
note "terrace killed mid-migration at 6 s; program finished with its checksum intact"
