# boot: hmat
# timeout: 90
# Garbage on the daemon's socket (not JSON, unknown ops, missing fields, binary junk, a line over
# 64 KiB, many connections at once) gets a one-line error reply; the daemon keeps answering.
. /lib/vmtest.sh
kernel_balancing_off
start_daemon

alive() {
	if [ ! -d /proc/$dpid ]; then
		wait $dpid
		fail "the daemon died (exit status $?) after $1"
	fi
	out=$(terrace bind --raw '{"op":"list"}') || fail "the daemon does not answer list after $1: $out"
	echo "$out" | grep -q '"ok":true' || fail "list after $1: $out"
}
# expect WHAT WANT: send /tmp/req raw, expect an error reply mentioning WANT.
expect() {
	out=$(terrace bind --raw - </tmp/req 2>/dev/null)
	rc=$?
	echo "$1 -> rc=$rc $out"
	[ $rc -ne 0 ] || fail "accepted: $1"
	echo "$out" | grep -q '"ok":false' || fail "no error reply for $1: $out"
	echo "$out" | grep -q "$2" || fail "the reply for $1 does not mention $2: $out"
	alive "$1"
}
echo garbage >/tmp/req && expect "garbage" "not JSON"
printf 'garbage' >/tmp/req && expect "garbage without a newline" "not JSON"
echo '{"op":"frob","pid":1}' >/tmp/req && expect "an unknown op" "frob"
echo '{"op":"bind"}' >/tmp/req && expect "a bind without a pid" "missing field"
echo '{"op":"bind","pid":"1"}' >/tmp/req && expect "a pid that is a string" "bad request"
echo '[1,2,3]' >/tmp/req && expect "an array" "bad request"
echo '{"op":"bind","pid":999999}' >/tmp/req && expect "a pid that does not exist" "no process 999999"
head -c 70000 /dev/zero | tr '\0' a >/tmp/req && expect "a 70000-byte line" "longer than 65536"
head -c 4096 /dev/urandom >/tmp/req && expect "binary junk" "JSON"
out=$(as_user alice "echo nonsense | terrace bind --raw -") && fail "accepted nonsense from alice"
echo "alice: $out"
alive "nonsense from alice"
out=$(terrace bind --raw garbage) && fail "terrace bind --raw garbage succeeded"
alive "--raw garbage"

# Many at once, some hanging up without a word.
pids=""
i=0
while [ $i -lt 30 ]; do
	echo "junk $i" | terrace bind --raw - >/dev/null 2>&1 &
	pids="$pids $!"
	terrace bind --raw - </dev/null >/dev/null 2>&1 &
	pids="$pids $!"
	i=$((i + 1))
done
for p in $pids; do wait $p; done
alive "60 concurrent connections"

kill -TERM $dpid
wait $dpid || fail "the daemon did not stop cleanly"
n=$(grep -c 'malformed request\|longer than' /tmp/daemon.log)
note "daemon answered on after $n malformed requests (each got a one-line error reply)"
