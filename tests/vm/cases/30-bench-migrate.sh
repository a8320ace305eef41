# boot: hmat
# timeout: 240
# terrace bench migrate between the guest's two nodes: every cell of the grid (4 KiB and 2 MiB
# pages, 1 and 2 callers, batches of 8 and 512 pages, demote, promote, exchange as the live
# machine does it (pairs of batches) and the same swap as two one-way moves) moves the whole
# region, checks where every page landed and prints a positive GB/s figure beside its ratio to
# the memcpy bandwidth measured in the same run, each row the paired exchange over the two
# one-way moves, and a closing summary for 2 MiB pages against the goal of half of memcpy. The
# ratios and the summary go to the report. One run per cell (--repeat 1) and two of the default
# batch sizes (1, 8, 64, 512): batches of 1 make one move_pages call per 4 KiB page, 4,096 per
# cell, and a call cost 0.3 to 9 ms in the guest runs measured (docs/live.md, "In the guest"):
# up to 10 minutes on a busy host, which the suite's time cannot afford. 8 and 512 still show the
# per-call cost of 4 KiB pages, and the summary separates it.
. /lib/vmtest.sh
kernel_balancing_off

thp=/sys/kernel/mm/transparent_hugepage/enabled
if [ -f $thp ]; then
	# The benchmark asks for huge pages with MADV_HUGEPAGE: "madvise" or "always" both serve.
	grep -q '\[never\]' $thp && { echo madvise >$thp || fail "cannot enable THP"; }
	echo "THP: $(cat $thp)"
fi

terrace bench migrate --mib 16 --threads 2 --batches 8,512 --repeat 1 --json /tmp/bench.json >/tmp/out 2>/tmp/err
rc=$?
cat /tmp/out
cat /tmp/err
[ $rc -eq 0 ] || fail "terrace bench migrate exited $rc"

rows=$(grep -cE '^(4KiB|2MiB) ' /tmp/out)
[ "$rows" -eq 8 ] || fail "expected 8 rows (2 page sizes x 2 thread counts x 2 batch sizes), got $rows"
# Columns: page threads batch, then GB/s "GB/s" ratio"x" for demote, promote, exchange (paired)
# and two one-way, then exchange over two one-way ("1.05x").
bad=$(awk '/^(4KiB|2MiB) / {
	if ($0 ~ /no THP/) { if ($1 != "2MiB") print; next }
	for (i = 4; i <= 13; i += 3) if (!($i + 0 > 0) || $(i + 1) != "GB/s" || !($(i + 2) + 0 > 0)) { print; next }
	if (!($16 + 0 > 0)) print
}' /tmp/out)
[ -z "$bad" ] || fail "cells without a positive figure: $bad"
grep -q '"memcpy"' /tmp/bench.json || fail "no memcpy figures in the JSON"
grep -q '"op": *"two-one-way"' /tmp/bench.json || fail "no two-one-way cells in the JSON"
grep -q '^summary: 2 MiB pages, 2 callers: ' /tmp/out || fail "no closing summary for 2 MiB pages"

if grep -qE '^2MiB .*no THP' /tmp/out; then
	note "2 MiB cells: no THP in this guest ($(grep 'note:' /tmp/out | head -n 1))"
fi
grep '^memcpy' /tmp/out >/tmp/memcpy
while read -r line; do note "$line"; done </tmp/memcpy
awk '/^(4KiB|2MiB) / && $0 !~ /no THP/ {
	printf "%s, %s caller(s), batch %s: demote %s GB/s = %s memcpy, promote %s = %s, exchange %s = %s, two one-way %s = %s, exchange/two one-way %s\n",
		$1, $2, $3, $4, $6, $7, $9, $10, $12, $13, $15, $16
}' /tmp/out >/tmp/notes
grep '^summary:' /tmp/out >>/tmp/notes
while read -r line; do note "$line"; done </tmp/notes
