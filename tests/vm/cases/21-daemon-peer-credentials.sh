# boot: hmat
# timeout: 120
# Who may bind what is decided by the caller's uid from the socket (SO_PEERCRED): an
# unprivileged user cannot bind or unbind a root-owned process or another user's, but can bind and
# unbind their own.
. /lib/vmtest.sh
kernel_balancing_off
start_daemon

sleep 60 &
rpid=$!
out=$(as_user alice "terrace bind $rpid" 2>&1)
rc=$?
echo "alice binds root's $rpid: rc=$rc $out"
[ $rc -ne 0 ] || fail "alice could bind root's process"
echo "$out" | grep -q "terrace: permission denied: uid 1000 may not manage pid $rpid (owned by uid 0)" ||
	fail "unexpected refusal: $out"
[ "$(echo "$out" | wc -l)" = 1 ] || fail "the refusal is not one line"

apid=$(as_user alice 'terrace-hotcold --hot-mib 2 --cold-mib 8 --seconds 30 --start-node 1 >/tmp/alice.out 2>&1 & echo $!')
echo "alice's program: $apid"
[ -n "$apid" ] && [ -d /proc/$apid ] || fail "alice's program did not start"
[ "$(awk '/^Uid:/ { print $2 }' /proc/$apid/status)" = 1000 ] || fail "alice's program is not alice's"
out=$(as_user bob "terrace bind $apid" 2>&1) && fail "bob could bind alice's process: $out"
echo "bob binds alice's: $out"
echo "$out" | grep -q "permission denied: uid 1001 may not manage pid $apid (owned by uid 1000)" || fail "unexpected: $out"
out=$(as_user alice "terrace bind $apid" 2>&1) || fail "alice cannot bind her own process: $out"
echo "alice binds her own: $out"
out=$(as_user bob "terrace unbind $apid" 2>&1) && fail "bob could unbind alice's process: $out"
echo "bob unbinds alice's: $out"
echo "$out" | grep -q "permission denied: uid 1001" || fail "unexpected: $out"
grep -q "pid $apid (uid 1000) with policy age, bound by uid 1000" /tmp/daemon.log || fail "no bind log line"
sleep 3
grep -q "pid $apid: moved" /tmp/daemon.log || fail "the daemon moved none of alice's pages"
out=$(as_user alice "terrace unbind $apid" 2>&1) || fail "alice cannot unbind her own process: $out"
echo "alice unbinds her own: $out"

kill $rpid $apid
kill -TERM $dpid
wait $dpid || fail "the daemon did not stop cleanly"
tail -n 20 /tmp/daemon.log
note "alice refused for root's and bob for alice's process (SO_PEERCRED); alice bound and unbound her own"
