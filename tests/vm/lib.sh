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
