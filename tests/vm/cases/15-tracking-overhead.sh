# boot: hmat
# timeout: 300
# Tracking overhead: the program's update rate alone, under Terrace with no tracker, and with each
# tracker at a 1 s interval (age in dry-run mode: it tracks and decides but moves nothing), and
# the fault sampler at hemem's own 10 ms tick (dry run). Only ratios within this run mean
# anything: the guest is emulated.
. /lib/vmtest.sh
kernel_balancing_off

rate() { # command... -> updates per second of terrace-hotcold
	"$@" >/tmp/o 2>/tmp/e || { cat /tmp/o /tmp/e; fail "$* failed"; }
	grep -q 'checksum ok' /tmp/o || fail "checksum: $*"
	sed -n 's/^hotcold checksum ok after \([0-9]*\) updates/\1/p' /tmp/o
}
prog="terrace-hotcold --hot-mib 4 --cold-mib 32 --seconds 3"
# The program alone, first and last: the first run of a case has come out slower than the rest
# (the guest still settling after the previous case), so the baseline is the mean of both.
alone1=$(rate $prog)
none=$(rate terrace run --policy first-touch -- $prog)
printf '[trackers]\nreferenced = "soft-dirty"\n' >/tmp/sd.toml
sd=$(rate terrace run --dry-run --config /tmp/sd.toml --policy age -- $prog)
printf '[trackers]\nreferenced = "damon"\n' >/tmp/damon.toml
dm=$(rate terrace run --dry-run --config /tmp/damon.toml --policy age -- $prog)
fs=$(rate terrace run --dry-run --policy hemem -- $prog)
alone2=$(rate $prog)
alone=$(( (alone1 + alone2) / 2 ))
for v in "$alone1" "$alone2" "$none" "$sd" "$dm" "$fs"; do [ -n "$v" ] && [ "$v" -gt 0 ] || fail "no update count"; done
ratio() { awk -v a="$1" -v b="$alone" 'BEGIN { printf "%.3f", a / b }'; }
note "updates in 3 s: alone $alone1 first, $alone2 last; terrace, no tracker $(ratio $none)x; soft-dirty at 1 s $(ratio $sd)x; soft-dirty + DAMON at 1 s $(ratio $dm)x; fault sampler + DAMON at 10 ms (hemem) $(ratio $fs)x"
