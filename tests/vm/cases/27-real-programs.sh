# boot: hmat
# timeout: 300
# host-programs: sort sqlite3 python3 numactl
# Real, unmodified Debian programs under the live policies (issue 11): GNU sort, sqlite3 and
# python3, started with their memory preferred on node 1 (numactl, outside terrace run), each
# under age, ambix and hemem. Each run's output must be what the program prints without Terrace
# (sha256), its exit status 0, and the pages it holds per node are read while it runs. (Under the
# object runtime they run in case 39.)
. /lib/vmtest.sh
kernel_balancing_off
sort=$(host_program sort)
sqlite=$(host_program sqlite3)
py=$(host_program python3)
export PYTHONHOME=/usr

# Inputs: 100,000 random lines to sort; a table of 50,000 rows to build and query; a Python
# dictionary of 100,000 entries, sorted and hashed: each run lasts a few seconds under TCG, long
# enough for age's and ambix's 1 s ticks to act on most of them (about 45 s in all in CI).
random_lines 100000 7 /tmp/lines
sqlite_script 50000 /tmp/q.sql
python_script 100000 /tmp/p.py

# run_program LABEL POLICY CMD...: CMD on node 1 under `terrace run --policy POLICY`; checks its
# exit status and output against the direct run's ($want), notes its pages per node while it runs
# and what Terrace did.
run_program() {
	_label=$1
	_policy=$2
	shift 2
	on_node 1 terrace run --policy "$_policy" -- "$@" >/tmp/pout 2>/tmp/plog &
	_rp=$!
	_first=''
	_last=''
	while kill -0 "$_rp" 2>/dev/null; do
		sleep 1
		_child=$(child_of "$_rp")
		[ -n "$_child" ] || continue
		_now=$(pages_per_node "$_child")
		[ -n "$_now" ] || continue
		[ -n "$_first" ] || _first=$_now
		_last=$_now
	done
	wait "$_rp"
	_rc=$?
	[ "$_rc" -eq 0 ] || { tail -n 5 /tmp/plog; fail "$_label under $_policy: terrace run exited $_rc"; }
	_got=$(sha256sum </tmp/pout | cut -d' ' -f1)
	[ "$_got" = "$want" ] || { head -n 3 /tmp/pout; fail "$_label under $_policy: output differs from the run without Terrace"; }
	_done=$(sed -n 's/.*done: \([0-9]*\) pages moved, [0-9]* not moved, \([0-9]*\) plans.*/\1 moved, \2 plans/p' /tmp/plog)
	note "$_label under $_policy: output ok; pages while running: first ${_first:-(none seen)}, last ${_last:-(none seen)}; ${_done:-no done line}"
}

for prog in sort sqlite python; do
	case $prog in
	sort) set -- "$sort" /tmp/lines ;;
	sqlite) set -- "$sqlite" :memory: -init /tmp/q.sql .quit ;;
	python) set -- "$py" /tmp/p.py ;;
	esac
	want=$("$@" | sha256sum | cut -d' ' -f1)
	[ -n "$want" ] || fail "$prog printed nothing without Terrace"
	for policy in age ambix hemem; do
		run_program "$prog" "$policy" "$@"
	done
done
