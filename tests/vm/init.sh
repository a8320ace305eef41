#!/bin/sh
# Template for the guest's /init (busybox sh, PID 1). tests/vm/run fills in the @...@ placeholders
# and writes the result to /init in the initramfs. It runs every /cases/*.sh in sorted order and
# reports on the serial console, one line per case:
#   VMTEST <name> PASS|FAIL|SKIP <seconds>
# then `VMTEST-DONE passed=N failed=M skipped=K`, and powers the guest off.
# Exit code of a case: 0 = PASS, 77 = SKIP, anything else (including a timeout) = FAIL.

export PATH=/bin
export HOME=/root
export TERRACE_VM=1
export TERRACE_VM_VARIANT='@VARIANT@'
case_timeout_default='@CASE_TIMEOUT@'

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts 2>/dev/null
mount -t tmpfs -o mode=1777 tmpfs /dev/shm 2>/dev/null
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
echo +memory > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
if [ -d /sys/kernel/debug ]; then
	mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
fi
hostname terrace-vm 2>/dev/null
chown 1000:1000 /home/alice
chown 1001:1001 /home/bob
chmod 700 /root /home/alice /home/bob
# Only our lines on the console from here on (a kernel message in the middle of a VMTEST line would
# hide it from the host); a failing case's report includes what the kernel logged while it ran.
echo 1 > /proc/sys/kernel/printk 2>/dev/null

uptime_cs() { # uptime in hundredths of a second
	read -r up _ < /proc/uptime
	echo "${up%.*}${up#*.}"
}

echo "VMBOOT variant=$TERRACE_VM_VARIANT kernel=$(uname -r) uptime=$(cut -d' ' -f1 /proc/uptime)"

outdir=/tmp/.vmtest
mkdir -p "$outdir"
chmod 700 "$outdir"
passed=0
failed=0
skipped=0
for f in /cases/*.sh; do
	[ -f "$f" ] || continue
	name=$(basename "$f" .sh)
	out="$outdir/$name.out"
	limit=$(sed -n 's/^# *timeout: *\([0-9][0-9]*\).*/\1/p' "$f" | head -n 1)
	[ -n "$limit" ] || limit=$case_timeout_default
	dmesg -c > /dev/null 2>&1
	start=$(uptime_cs)
	(cd /tmp && CASE_NAME="$name" timeout -k 5 "$limit" sh "$f") > "$out" 2>&1 < /dev/null
	rc=$?
	end=$(uptime_cs)
	secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", (b - a) / 100 }')
	if [ "$rc" -eq 0 ]; then
		verdict=PASS
		passed=$((passed + 1))
	elif [ "$rc" -eq 77 ]; then
		verdict=SKIP
		skipped=$((skipped + 1))
	else
		verdict=FAIL
		failed=$((failed + 1))
		if [ $(((end - start) / 100)) -ge "$limit" ]; then
			echo "(timed out after $limit s)" >> "$out"
		else
			echo "(exit code $rc)" >> "$out"
		fi
		if dmesg | grep -q .; then
			echo "--- kernel log during the case (last 30 lines) ---" >> "$out"
			dmesg | tail -n 30 >> "$out"
		fi
	fi
	grep '^VMNOTE' "$out"
	echo "VMTEST $name $verdict $secs"
	# A failed or skipped case's output always; a passing one's too with TERRACE_VM_SHOW_OUTPUT=1.
	if [ "$verdict" != PASS ] || [ "@SHOW_OUTPUT@" = 1 ]; then
		n=$(wc -l < "$out")
		if [ "$n" -gt 200 ]; then
			echo "  | ... ($((n - 200)) earlier lines not shown)"
		fi
		tail -n 200 "$out" | sed 's/^/  | /'
	fi
done
echo "VMTEST-DONE passed=$passed failed=$failed skipped=$skipped"
sync
poweroff -f
