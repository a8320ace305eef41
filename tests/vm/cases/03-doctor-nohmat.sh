# boot: nohmat
# Without HMAT the kernel puts the CPU-less node in DRAM's tier, so its own tiering never moves
# anything: terrace doctor must say so, with the fix.
. /lib/vmtest.sh

out=$(terrace doctor) || fail "terrace doctor failed"
echo "$out"
echo "$out" | grep -q 'never demotes or promotes' || fail "doctor did not report the CPU-less node in DRAM's tier"
echo "$out" | grep -qi 'hmat' || fail "the finding does not mention HMAT as the fix"
note "doctor reports the CPU-less node sharing DRAM's tier"
