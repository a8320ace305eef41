# boot: hmat
# timeout: 120
# Managed programs that exit at any moment (right after the bind, in the middle of a scan or a
# migration, killed with SIGKILL, or before the bind completes) end only their own management: the
# daemon logs the exit, forgets the process and keeps answering.
. /lib/vmtest.sh
kernel_balancing_off
start_daemon

# wait_log TEXT SECONDS
wait_log() {
	i=0
	until grep -q "$1" /tmp/daemon.log; do
		i=$((i + 1))
		[ $i -le $(($2 * 10)) ] || return 1
		sleep 0.1
	done
}

n=0
for policy in age ping-pong age ping-pong; do
	terrace-hotcold --hot-mib 2 --cold-mib 32 --seconds 3 >/tmp/p.out 2>&1 &
	p=$!
	out=$(terrace bind $p --policy $policy 2>&1) || echo "bind $p refused (it may have exited already): $out"
	wait $p || fail "program $p failed"
	grep -q 'hotcold checksum ok' /tmp/p.out || fail "checksum of $p"
	if echo "$out" | grep -q managing; then
		wait_log "pid $p exited; stopped managing it" 5 || fail "no exit log line for pid $p"
		n=$((n + 1))
	fi
	[ -d /proc/$dpid ] || fail "the daemon died when pid $p exited"
done
[ $n -ge 2 ] || fail "only $n of 4 short programs were bound before they exited"

# Killed in the middle of ping-pong's migrations.
terrace-hotcold --hot-mib 2 --cold-mib 16 --seconds 30 >/dev/null 2>&1 &
p=$!
terrace bind $p --policy ping-pong || fail "bind $p"
wait_log "pid $p: moved" 10 || fail "nothing moved for $p"
kill -9 $p
wait $p
wait_log "pid $p exited; stopped managing it" 5 || fail "no exit log line for killed pid $p"

# Gone before the bind completes: refused or bound then dropped; either way the daemon answers on.
sleep 0.3 &
p=$!
terrace bind $p >/dev/null 2>&1
wait $p
sleep 1

list=$(terrace bind --raw '{"op":"list"}') || fail "the daemon does not answer: $list"
echo "$list"
echo "$list" | grep -q '"processes":\[\]' || fail "exited programs are still listed: $list"
wget -qO- http://127.0.0.1:9464/metrics | grep -q '^terrace_managed_processes 0$' || fail "metrics still count programs"
grep 'exited; stopped managing' /tmp/daemon.log
kill -TERM $dpid
wait $dpid || fail "the daemon did not stop cleanly"
note "$((n + 1)) managed programs exited (one by SIGKILL mid-migration); the daemon logged each and answered on"
