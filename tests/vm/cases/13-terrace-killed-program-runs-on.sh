# boot: hmat
# timeout: 150
# Killing Terrace in the middle of its migrations leaves the program running and its data intact:
# under ping-pong (move_pages in flight), and under hpwp, whose fault sampler has pages of the
# program write-protected at the moment of the kill (the kernel lifts them when it closes
# Terrace's userfaultfd, so the program's next writes go through).
. /lib/vmtest.sh
kernel_balancing_off

# The program is Terrace's child.
ppid_of() { awk '{print $4}' "/proc/$1/stat"; }
# Orphans are reaped by init only eventually: a zombie counts as exited.
running() { [ -d "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

for policy in ping-pong hpwp; do
	terrace run --policy $policy -- terrace-hotcold --hot-mib 2 --cold-mib 8 --seconds 12 --verify-every 2 \
		--start-node 1 >/tmp/out 2>/tmp/log &
	tpid=$!
	sleep 6
	prog=""
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$(cat /proc/$p/comm 2>/dev/null)" = terrace-hotcold ] && [ "$(ppid_of $p)" = "$tpid" ] && prog=$p
	done
	[ -n "$prog" ] || fail "$policy: the program is not running under terrace"
	grep -q 'moved' /tmp/log || fail "$policy: terrace had not started moving pages"
	kill -9 "$tpid"
	sleep 1
	running "$prog" || fail "$policy: the program died with terrace"
	while running "$prog"; do sleep 1; done
	cat /tmp/out
	grep -q 'hotcold checksum ok' /tmp/out || fail "$policy: checksum after terrace was killed"
	note "$policy: terrace killed at 6 s; the program finished with its checksum intact"
done
