# Helpers for guest test cases: `. /lib/vmtest.sh` at the top of a case (busybox sh).
# Exit codes: 0 = pass, 77 = skip, anything else = fail.

fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
# A figure for the report; the host prints VMNOTE lines as they are.
note() { echo "VMNOTE ${CASE_NAME:-?}: $*"; }
# The memory tier a NUMA node is in, as the number in memory_tierN ("" if none).
node_tier() {
	for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
		[ -f "$t/nodelist" ] || continue
		if in_list "$1" "$(cat "$t/nodelist")"; then
			echo "${t##*memory_tier}"
			return 0
		fi
	done
	echo ""
}
# in_list N LIST: whether N is in a kernel list such as "0-2,5".
in_list() {
	_n=$1
	for _r in $(echo "$2" | tr ',' ' '); do
		case $_r in
		*-*) [ "$_n" -ge "${_r%-*}" ] && [ "$_n" -le "${_r#*-}" ] && return 0 ;;
		*) [ "$_n" -eq "$_r" ] && return 0 ;;
		esac
	done
	return 1
}
# Run a command as an unprivileged user: as_user alice 'id -u'
as_user() { su -s /bin/sh "$1" -c "$2"; }
# Turn the kernel's own NUMA balancing off, so that any page that moves was moved by Terrace.
kernel_balancing_off() { echo 0 >/proc/sys/kernel/numa_balancing || fail "cannot turn NUMA balancing off"; }

# The daemon cases' common start: a config with the socket, the metrics endpoint and POLICY
# (default age), the daemon in the background appending to /tmp/daemon.log, waited for until it
# answers. Sets $sock and $dpid; may be called again to start a new daemon. On exit the daemon's
# log joins the report and everything the case started ($dpid $hpid $rpid $apid $prog) is
# stopped. The guest's loopback, where the metrics endpoint listens, is brought up first.
start_daemon() {
	trap 'echo "--- daemon log"; tail -n 40 /tmp/daemon.log 2>/dev/null
		for p in $dpid $hpid $rpid $apid $prog; do kill "$p" 2>/dev/null; done' EXIT
	ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
	sock=/run/terrace.sock
	cat >/tmp/terrace.toml <<CONF
[daemon]
socket = "$sock"
metrics = "127.0.0.1:9464"
dry_run = false
policy = "${1:-age}"
CONF
	terrace daemon --config /tmp/terrace.toml 2>>/tmp/daemon.log &
	dpid=$!
	i=0
	while ! terrace bind --raw '{"op":"list"}' >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -le 100 ] || { cat /tmp/daemon.log; fail "the daemon does not answer after 10 s"; }
		sleep 0.1
	done
}

# Reading terrace-hotcold's reports in /tmp/out ("hotcold end hot node0=N | cold node1=M ...").
# _count SET NODE LINE: pages of SET on NODE in one report line (0 if none).
_count() {
	_n=$(echo "$3" | sed 's/^hotcold [^ ]* //' | tr '|' '\n' | grep "^ *$1 " | sed -n "s/.* node$2=\([0-9]*\).*/\1/p")
	echo "${_n:-0}"
}
# pages_at SET NODE: pages of SET (hot, cold or read) on NODE in the end report; fails the case
# if the program printed none.
pages_at() {
	_end=$(grep '^hotcold end' /tmp/out) || fail "the program printed no end report"
	_count "$1" "$2" "$_end"
}
# started_on FILE NODE HOT COLD: fails the case unless the program's start report in FILE has
# none of its hot and cold pages on another node and at least 95% of each set (HOT and COLD pages)
# on NODE. A page the kernel reports as absent at that instant (one a compaction is moving, say)
# is no sign of a wrong start, so it is allowed; the report is printed on failure.
started_on() {
	_start=$(grep '^hotcold start' "$1") || fail "the program printed no start report in $1"
	for _set in hot cold; do
		_want=$3
		[ "$_set" = cold ] && _want=$4
		_on=$(_count "$_set" "$2" "$_start")
		_elsewhere=$(echo "$_start" | sed 's/^hotcold [^ ]* //' | tr '|' '\n' | grep "^ *$_set " | tr ' ' '\n' |
			grep '^node[0-9]*=' | grep -v "^node$2=" | head -n 1)
		[ -z "$_elsewhere" ] && [ "$_on" -ge $((_want * 95 / 100)) ] ||
			fail "the program did not start on node $2 ($_set: $_on of $_want there${_elsewhere:+, $_elsewhere}): $_start"
	done
}
# first_report SET NODE MIN: the time ("5.0s") of the first periodic report with at least MIN
# pages of SET on NODE, or "(never)".
first_report() {
	_t=$(grep '^hotcold t=' /tmp/out | while read -r _l; do
		[ "$(_count "$1" "$2" "$_l")" -ge "$3" ] && { echo "$_l" | sed -n 's/^hotcold t=\([0-9.]*s\).*/\1/p'; break; }
	done)
	echo "${_t:-(never)}"
}
# policy_cost: the policy's tracking and decision time per second of the run, from the
# "done:" line terrace run logs in /tmp/log.
policy_cost() {
	sed -n 's/.*tracking \([0-9.]*\) s, decisions \([0-9.]*\) s, migration [0-9.]* s over \([0-9.]*\) s.*/\1 \2 \3/p' /tmp/log |
		awk '{ printf "tracking %.1f ms/s, decisions %.2f ms/s", 1000 * $1 / $3, 1000 * $2 / $3 }'
}
# manage LABEL ARGS...: `terrace run ARGS`, the program's reports to /tmp/out and Terrace's log to
# /tmp/log; shows the reports and the log's first batches and last lines, and fails the case
# unless Terrace exited 0.
manage() {
	_label=$1
	shift
	terrace run "$@" >/tmp/out 2>/tmp/log
	_rc=$?
	cat /tmp/out
	grep -v 'moved' /tmp/log | tail -n 4
	grep 'moved' /tmp/log | head -n 3
	[ $_rc -eq 0 ] || fail "$_label: terrace run exited $_rc"
}

# host_program NAME: the path of a program of the host that tests/vm/run copied in for a case
# whose `# host-programs:` line names it; fails the case if it is not there.
host_program() {
	[ -x "/host/bin/$1" ] || fail "no host program $1 in /host/bin (name it on the case's '# host-programs:' line)"
	echo "/host/bin/$1"
}
# vmstat NAME: the kernel's counter NAME from /proc/vmstat (0 if this kernel does not count it).
vmstat() { awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }' /proc/vmstat; }
# hotcold_ok FILE [WHO]: fails unless the object test program (tests/vm/programs/objects-hotcold.c;
# WHO names it in the message) whose output is FILE read every value back and finished its checks.
hotcold_ok() {
	grep -q 'MISMATCH' "$1" && fail "a value of ${2:-the program} read back wrong: $(grep MISMATCH "$1")"
	grep -q 'objects-hotcold values ok' "$1" || fail "${2:-the program} did not finish its checks: $(tail -n 2 "$1")"
}
# hotcold_end FILE: sets `end` to the object test program's end line in FILE ("objects-hotcold
# end: hot H of HA pages on node 0, cold C of CA on node 1") and hot0, hotall, cold1, coldall to
# its four numbers; fails if there is none.
hotcold_end() {
	end=$(grep 'objects-hotcold end:' "$1")
	set -- $(echo "$end" | sed 's/.*hot \([0-9]*\) of \([0-9]*\) pages on node 0, cold \([0-9]*\) of \([0-9]*\) on node 1/\1 \2 \3 \4/')
	[ $# -eq 4 ] || fail "no end line: $end"
	hot0=$1 hotall=$2 cold1=$3 coldall=$4
}
# random_lines N SEED FILE: N lines "NUMBER INDEX" with seeded random numbers, for sort to sort.
random_lines() {
	awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed); for (i = 0; i < n; i++) printf "%09d %d\n", int(rand() * 1e9), i }' >"$3"
}
# sqlite_script ROWS FILE: an sqlite3 script that builds a table of ROWS rows, indexes it and
# queries it (its output is the same on every run).
sqlite_script() {
	cat >"$2" <<SQL
CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < $1)
INSERT INTO t SELECT x, printf('%08x', (x * 2654435761) % 4294967296) FROM c;
CREATE INDEX tv ON t(v);
SELECT count(*), sum(length(v)), min(v), max(v) FROM t;
SELECT v FROM t ORDER BY v LIMIT 3;
SQL
}
# python_script ENTRIES FILE: a python3 script that builds a dictionary of ENTRIES entries, sorts
# its values and prints their hash.
python_script() {
	cat >"$2" <<PY
import hashlib
d = {i: str(i * 7919 % 1000003) for i in range($1)}
s = sorted(d.values())
print(len(d), hashlib.sha256("".join(s).encode()).hexdigest())
PY
}
# pages_per_node PID: "node0=N node1=M", the pages the process has on each node (from
# /proc/PID/numa_maps; empty once it has exited).
pages_per_node() {
	awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^N[0-9]+=/) { split(substr($i, 2), a, "="); n[a[1]] += a[2] } }
		END { for (k in n) printf "node%s=%d\n", k, n[k] }' "/proc/$1/numa_maps" 2>/dev/null | sort | tr '\n' ' '
}
# on_node NODE CMD...: runs CMD with its memory preferred on NODE (numactl --preferred, which
# needs `numactl` on the case's '# host-programs:' line).
on_node() {
	_node=$1
	shift
	"$(host_program numactl)" --preferred="$_node" "$@"
}
# child_of PID: the first child process of PID (busybox has no pgrep -P), from /proc/*/stat,
# whose fields after the command's name in parentheses are: state, parent pid, ...
child_of() {
	for _s in /proc/[0-9]*/stat; do
		_pp=$(sed 's/.*) [A-Za-z] \([0-9]*\) .*/\1/' "$_s" 2>/dev/null) || continue
		if [ "$_pp" = "$1" ]; then
			_c=${_s#/proc/}
			echo "${_c%/stat}"
			return 0
		fi
	done
	return 1
}
