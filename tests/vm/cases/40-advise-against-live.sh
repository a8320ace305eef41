# boot: hmat
# timeout: 300
# host-programs: python3
# Issue 17's validation (docs/your-program.md, "What the guest validates"): the three-command
# path against the live machine. `terrace profile measure --quick` measures the guest's two nodes;
# `terrace record` records terrace-hotcold with one tracker (DAMON); the recording is
# replayed under age, hemem and kernel-tiering on the measured profile with a fast tier of 8 MiB
# (`terrace advise` runs the same replays under every policy: its rules are tested on the host,
# crates/terrace/tests/advise.rs, and here would cost a minute of emulated CPU); then the
# same program runs live under the same three policies, node 0 limited to 8 MiB for age and
# hemem. The kernel's own tiering does not keep to that limit (its run says so in a warning,
# checked here): it has all of node 0, so kernel-tiering is replayed with a fast tier that holds
# every page, the machine it ran on. The program
# starts its pages on node 1, so the replays start every page in the slow tier too
# (`--start-tier slow`; with the default first-touch start, which pages the replay held fast from
# the start hung on the order the recording first saw them, and one CI run's replays held the
# whole hot set from the start and promoted nothing). The hot pages the replay promoted (in the
# fast tier at its end) must overlap the hot pages the live policy promoted (on node 0 at the end)
# by at least 90%; the overlap of all the pages promoted (hot and cold sets) is reported beside it
# (docs/your-program.md says where and why they part). QEMU's two nodes are the same host DRAM behind an emulated CPU, and the program
# paces itself (it runs for a set time): run times cannot rank the policies here, so the case
# reports predicted and measured side by side and checks no ranking.
. /lib/vmtest.sh
kernel_balancing_off
py=$(host_program python3)
export PYTHONHOME=/usr
policies="age hemem kernel-tiering"
prog="terrace-hotcold --hot-mib 4 --cold-mib 16 --start-node 1"

terrace profile measure --quick -o /tmp/guest.toml >/tmp/pm.out 2>/tmp/pm.log || fail "profile measure: $(tail -n 2 /tmp/pm.log)"
cat /tmp/pm.out
tail -n 3 /tmp/pm.log

# --writes: soft-dirty beside DAMON tells the written pages (the hot set) from the read ones.
# DAMON reads the program's layout every aggregation (docs/live.md, "Recording a program"), so
# the buffers the program maps at its start are monitored within 100 ms, not 1 s.
terrace record -o /tmp/hc.trace --tracker damon --writes -- $prog --seconds 8 >/tmp/rec.out 2>/tmp/rec.log &
rec=$!
sleep 2
update_us=$(cat /sys/kernel/mm/damon/admin/kdamonds/0/contexts/0/monitoring_attrs/intervals/update_us)
wait $rec || fail "record exited $?: $(tail -n 2 /tmp/rec.log)"
[ "$update_us" = 100000 ] || fail "DAMON read the layout every ${update_us:-?} us, not every aggregation"
grep -q 'hotcold checksum ok' /tmp/rec.out || fail "the recorded program's checksum"
terrace trace info /tmp/hc.trace >/tmp/info || fail "the recording is no valid trace"
cat /tmp/info
grep -Eq '^accesses +[0-9]+ \([0-9]+ reads, [1-9][0-9]* writes\)$' /tmp/info || fail "the recording with --writes has no writes"
note "DAMON recording with --writes: $(grep -E '^(accesses|pages touched)' /tmp/info | tr -s ' \n' ' ')"
grep '^hotcold pid=' /tmp/rec.out >/tmp/rec.ranges || fail "no address ranges from the recorded program"

# Without DAMON, recording scans the page table (docs/live.md, "Recording a program"): with
# soft-dirty alone it sees writes only. The hot set (1,024 pages) is rewritten all the time, the
# cold set only filled, so over 2 s (about 20 intervals) the writes must come to far more than
# one interval's fill of every page, and there are no reads.
terrace record -o /tmp/sd.trace --tracker soft-dirty -- terrace-hotcold --hot-mib 4 --cold-mib 4 --seconds 2 \
	>/tmp/sd.out 2>/tmp/sd.log || fail "record --tracker soft-dirty exited $?: $(tail -n 2 /tmp/sd.log)"
grep -q 'hotcold checksum ok' /tmp/sd.out || fail "the program recorded with soft-dirty: its checksum"
terrace trace info /tmp/sd.trace >/tmp/sd.info || fail "the soft-dirty recording is no valid trace"
set -- $(sed -n 's/^accesses *\([0-9]*\) (\([0-9]*\) reads, \([0-9]*\) writes)$/\1 \2 \3/p' /tmp/sd.info)
sd_pages=$(sed -n 's/^pages touched *\([0-9]*\) .*/\1/p' /tmp/sd.info)
[ "${2:-x}" = 0 ] && [ "${3:-0}" -ge $((1024 * 64 * 10)) ] && [ "${sd_pages:-0}" -ge 1024 ] && [ "$sd_pages" -le 3072 ] ||
	{ cat /tmp/sd.info; fail "soft-dirty recording: accesses/reads/writes '$*', pages '$sd_pages'"; }
note "soft-dirty recording: $(grep -E '^(accesses|pages touched)' /tmp/sd.info | tr -s ' \n' ' ')"
# A shell that starts the program is recorded with the processes it starts (docs/live.md, "Process
# trees" under "Recording a program"): two copies started at once are both in the trace, each in a
# range of its own: their hot sets are 2,048 pages, where one copy's pages are at most 1,280 and a
# few (its cold set is filled before its first scan, which only resets its bits: 2,050 pages of
# two copies of 4 MiB hot and 4 MiB cold in the first run). DAMON follows them too: each
# process the shell starts becomes one more target of its kdamond (docs/live.md, "Process trees"),
# and both hot sets must be in its trace.
two="terrace-hotcold --hot-mib 4 --cold-mib 1 --seconds 2"
# record_tree TRACKER LABEL: the shell recorded with TRACKER (LABEL in the summary line): both
# programs end well, and the trace holds three processes and both hot sets (`tree_pages`).
record_tree() {
	RUST_LOG=terrace=debug terrace record -o /tmp/tree.trace --tracker "$1" -- sh -c "$two & $two; wait" \
		>/tmp/tree.out 2>/tmp/tree.log || fail "record --tracker $1 of a shell exited $?: $(grep -v DEBUG /tmp/tree.log | tail -n 2)"
	[ "$(grep -c 'hotcold checksum ok' /tmp/tree.out)" = 2 ] || fail "the shell's two programs under $1: their checksums"
	grep -q "and the 2 processes it started with $2" /tmp/tree.log ||
		fail "$1 on a shell: $(grep -v DEBUG /tmp/tree.log | tail -n 3)"
	terrace trace info /tmp/tree.trace >/tmp/tree.info || fail "$1's recording of a shell is no valid trace"
	tree_pages=$(sed -n 's/^pages touched *\([0-9]*\) .*/\1/p' /tmp/tree.info)
	grep -q '3 processes, the program and those it started' /tmp/tree.info && [ "${tree_pages:-0}" -ge 2048 ] ||
		{ cat /tmp/tree.info; fail "$1's recording of a shell: pages '$tree_pages'"; }
}
record_tree soft-dirty soft-dirty
note "soft-dirty recording of a shell starting two copies: $tree_pages pages"
record_tree damon DAMON
note "DAMON recording of a shell starting two copies: $tree_pages pages; $(grep -c 'aggregation .*: 3 targets' /tmp/tree.log) aggregations of 3 targets"
# Read from sysfs, DAMON's regions do not say whose they are: it follows no one, and says so.
TERRACE_DAMON_REGIONS=sysfs terrace record -o /tmp/ds.trace --tracker damon -- sh -c "$two; true" >/dev/null 2>/tmp/ds.log
grep -q 'DAMON did not follow 1 process the program started (.*terrace-hotcold.*whose tried_regions' /tmp/ds.log ||
	fail "DAMON through sysfs on a shell: $(cat /tmp/ds.log)"
note "DAMON through sysfs on a shell: $(tail -n 1 /tmp/ds.log)"
# DAMON's own vaddr ranges, as a kernel before 6.7 runs them, take in the gap between the
# dynamically linked program's binary and its heap: the log says so, once, with the figures,
# where that gap is at least 64 MiB and the program's mappings. The kernel puts the heap
# anywhere up to 1 GiB above the binary, so the gap is read from the program's maps while it
# runs: beyond 72 MiB (its mappings are about 24 MiB) the warning must come, below 48 MiB it
# must not (1 run in 20 or so; the other gaps between its mappings count too), and in between
# either is right.
TERRACE_DAMON_OPS=vaddr terrace record -o /tmp/dv.trace --tracker damon -- terrace-hotcold --seconds 3 >/dev/null 2>/tmp/dv.log &
rpid=$!
sleep 1
hpid=$(pidof terrace-hotcold)
cat "/proc/$hpid/maps" > /tmp/dv.maps 2>/dev/null
wait "$rpid" || fail "record with DAMON's vaddr: $(tail -n 1 /tmp/dv.log)"
grep -q 'DAMON: vaddr operations (its own three ranges, as TERRACE_DAMON_OPS=vaddr asks)' /tmp/dv.log ||
	fail "DAMON did not run vaddr as asked: $(grep -m 2 'DAMON: .*operations' /tmp/dv.log)"
heap=$(awk '/\[heap\]/ { print $1; exit }' /tmp/dv.maps | cut -d- -f1)
binary_end=$(awk '/\[heap\]/ { print last; exit } { last = $1 }' /tmp/dv.maps | cut -d- -f2)
[ -n "$heap" ] && [ -n "$binary_end" ] || fail "no heap in the program's maps: $(cat /tmp/dv.maps)"
gap_mib=$(( (0x$heap - 0x$binary_end) >> 20 ))
warnings=$(grep -c "DAMON's vaddr monitors [0-9]* MiB for the" /tmp/dv.log)
if [ "$gap_mib" -gt 72 ]; then
	[ "$warnings" -eq 1 ] || fail "heap $gap_mib MiB above the binary, and $warnings warnings of vaddr's gaps: $(grep -m 3 'DAMON' /tmp/dv.log)"
elif [ "$gap_mib" -lt 48 ]; then
	[ "$warnings" -eq 0 ] || fail "heap only $gap_mib MiB above the binary, and still warned: $(grep -m 3 'DAMON' /tmp/dv.log)"
fi
note "DAMON's vaddr on a PIE whose heap is $gap_mib MiB above its binary: $warnings warning(s) $(grep -o "vaddr monitors [0-9]* MiB for the [0-9.]* MiB the program maps" /tmp/dv.log)"
# Without address-space randomisation the heap follows the binary: nothing to warn of.
aslr=$(cat /proc/sys/kernel/randomize_va_space)
echo 0 > /proc/sys/kernel/randomize_va_space
TERRACE_DAMON_OPS=vaddr terrace record -o /tmp/dv0.trace --tracker damon -- terrace-hotcold --seconds 2 >/dev/null 2>/tmp/dv0.log
rc=$?
echo "$aslr" > /proc/sys/kernel/randomize_va_space
[ "$rc" -eq 0 ] || fail "record with DAMON's vaddr, no randomisation: $(tail -n 1 /tmp/dv0.log)"
grep -q 'DAMON: vaddr operations' /tmp/dv0.log || fail "DAMON did not run vaddr: $(grep -m 2 'DAMON' /tmp/dv0.log)"
! grep -q "DAMON's vaddr monitors" /tmp/dv0.log || fail "warned with the heap beside the binary: $(grep -m 1 "vaddr monitors" /tmp/dv0.log)"
if [ -e /sys/kernel/mm/page_idle/bitmap ]; then
	terrace record -o /tmp/ip.trace --tracker idle-page -- terrace-hotcold --seconds 2 >/dev/null 2>/tmp/ip.log ||
		fail "record --tracker idle-page: $(tail -n 1 /tmp/ip.log)"
else
	terrace record -o /tmp/ip.trace --tracker idle-page -- terrace-hotcold --seconds 2 >/dev/null 2>/tmp/ip.log &&
		fail "record --tracker idle-page ran without the bitmap"
	[ "$(wc -l </tmp/ip.log)" -eq 1 ] && grep -q 'lacks the idle-page bitmap' /tmp/ip.log ||
		fail "record --tracker idle-page without the bitmap: $(cat /tmp/ip.log)"
fi

for p in $policies; do
	fast=8MiB
	[ "$p" = kernel-tiering ] && fast=100%
	terrace sim -w /tmp/hc.trace -p "$p" --profile /tmp/guest.toml --fast-capacity $fast --start-tier slow --json "/tmp/sim-$p.json" \
		--final-placement "/tmp/sim-$p.txt" >/dev/null 2>"/tmp/sim-$p.log" || fail "sim $p: $(tail -n 1 "/tmp/sim-$p.log")"
done

printf '[tiers]\nfast_limit_mib = 8\n[trackers]\nreferenced = "soft-dirty"\n' >/tmp/limit.toml
# The kernel's NUMA scanner can be slow to start under a loaded CI host (case 18: it promoted the
# hot set 4-6 s into the program when run alone, once at 10 s and once not within 12 s beside the
# doc's reproductions): kernel-tiering runs live for 24 s, the others for the recording's 8 s.
for p in $policies; do
	seconds=8
	[ "$p" = kernel-tiering ] && seconds=24
	echo "$seconds" >"/tmp/seconds-$p"
	manage "$p" --policy "$p" --config /tmp/limit.toml -- $prog --placement-file "/tmp/live-$p.txt" --seconds $seconds
	grep -q 'hotcold checksum ok' /tmp/out || fail "$p: checksum"
	cp /tmp/out "/tmp/out-$p"
	if [ "$p" = kernel-tiering ]; then
		grep -q 'tiers.fast_limit_mib = 8 does not bind the kernel' /tmp/log || fail "kernel-tiering ran with a fast limit and did not say it ignores it"
	fi
done

# Predicted beside measured, and the overlap of the fast sets, by page of the program's sets.
"$py" - $policies >/tmp/validation <<'PY' || { cat /tmp/validation; fail "the hot set the replay promotes is not the one the live policy promoted"; }
import json, re, sys
ranges = open("/tmp/rec.ranges").read()
sets = {m[0]: (int(m[1], 16), int(m[2], 16)) for m in re.findall(r"(hot|cold)=(0x[0-9a-f]+)-(0x[0-9a-f]+)", ranges)}
fast_tier = re.search(r'^\[\[tiers\]\]\nname = "([^"]+)"', open("/tmp/guest.toml").read(), re.M).group(1)
ok = True
def replay_fast(p):
    fast = set()
    for line in open(f"/tmp/sim-{p}.txt"):
        if line.startswith("#"):
            continue
        first, pages, tier = line.split()
        if tier != fast_tier:
            continue
        for page in range(int(pages)):
            addr = int(first, 16) + 4096 * page
            for name, (lo, hi) in sets.items():
                if lo <= addr < hi:
                    fast.add((name, (addr - lo) // 4096))
    return fast
for p in sys.argv[1:]:
    sim = replay_fast(p)
    live = set()
    for line in open(f"/tmp/live-{p}.txt"):
        name, index, node = line.split()
        if name in sets and node == "0":
            live.add((name, int(index)))
    overlap = len(sim & live) / max(len(sim), len(live), 1)
    hot = lambda s: sum(1 for n, _ in s if n == "hot")
    hot_sim, hot_live = {q for q in sim if q[0] == "hot"}, {q for q in live if q[0] == "hot"}
    hot_overlap = len(hot_sim & hot_live) / max(len(hot_sim), len(hot_live), 1)
    predicted = json.load(open(f"/tmp/sim-{p}.json"))["runtime_ns"] / 1e9
    updates = re.search(r"checksum ok after (\d+) updates", open(f"/tmp/out-{p}").read()).group(1)
    seconds = int(open(f"/tmp/seconds-{p}").read())
    print(f"{p}: predicted {predicted:.3f} s simulated; measured {int(updates) / seconds:.0f} updates/s over {seconds} s; "
          f"promoted by the replay {len(sim)} pages ({hot(sim)} hot), live {len(live)} ({hot(live)} hot); "
          f"hot set promoted: overlap {hot_overlap:.1%}; all pages promoted: overlap {overlap:.1%}")
    ok &= hot_overlap >= 0.9
sys.exit(0 if ok else 1)
PY
cat /tmp/validation
while read -r line; do note "$line"; done </tmp/validation
note "measured profile: $(grep -E '^(read_latency_random_ns|read_bandwidth_gb_s)' /tmp/guest.toml | tr '\n' ' ')"
