# boot: hmat
# timeout: 240
# terrace bench migrate between the guest's two nodes: every cell of the grid (4 KiB and 2 MiB
# pages, 1 and 2 threads, batches of 64 and 512 pages, demote, promote and exchange) moves the
# whole region, checks where every page landed and prints a positive GB/s figure beside its ratio
# to the memcpy bandwidth measured in the same run. The ratios go to the report. One run per
# cell (--repeat 1): under emulation the grid takes 30 s on an idle host and minutes on a busy one.
. /lib/vmtest.sh
kernel_balancing_off

thp=/sys/kernel/mm/transparent_hugepage/enabled
if [ -f $thp ]; then
	# The benchmark asks for huge pages with MADV_HUGEPAGE: "madvise" or "always" both serve.
	grep -q '\[never\]' $thp && { echo madvise >$thp || fail "cannot enable THP"; }
	echo "THP: $(cat $thp)"
fi

terrace bench migrate --mib 32 --threads 2 --repeat 1 --json /tmp/bench.json >/tmp/out 2>/tmp/err
rc=$?
cat /tmp/out
cat /tmp/err
[ $rc -eq 0 ] || fail "terrace bench migrate exited $rc"

rows=$(grep -cE '^(4KiB|2MiB) ' /tmp/out)
[ "$rows" -eq 8 ] || fail "expected 8 rows (2 page sizes x 2 thread counts x 2 batch sizes), got $rows"
# Columns: page threads batch, then GB/s "GB/s" ratio"x" for demote, promote and exchange.
bad=$(awk '/^(4KiB|2MiB) / {
	if ($0 ~ /no THP/) { if ($1 != "2MiB") print; next }
	for (i = 4; i <= 10; i += 3) if (!($i + 0 > 0) || $(i + 1) != "GB/s" || !($(i + 2) + 0 > 0)) { print; next }
}' /tmp/out)
[ -z "$bad" ] || fail "cells without a positive figure: $bad"
grep -q '"memcpy"' /tmp/bench.json || fail "no memcpy figures in the JSON"

if grep -qE '^2MiB .*no THP' /tmp/out; then
	note "2 MiB cells: no THP in this guest ($(grep 'note:' /tmp/out | head -n 1))"
fi
grep '^memcpy' /tmp/out >/tmp/memcpy
while read -r line; do note "$line"; done </tmp/memcpy
awk '/^(4KiB|2MiB) / && $3 == 512 && $0 !~ /no THP/ {
	printf "%s, %s thread(s), batch 512: demote %s GB/s = %s memcpy, promote %s = %s, exchange %s = %s\n",
		$1, $2, $4, $6, $7, $9, $10, $12
}' /tmp/out >/tmp/notes
while read -r line; do note "$line"; done </tmp/notes
