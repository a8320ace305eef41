# boot: hmat
# terrace doctor on a correctly set-up two-tier guest: node 1 is slow because the kernel put it in
# a lower memory tier, soft-dirty and userfaultfd are available, and the CPU-less node is not
# reported as misconfigured.
. /lib/vmtest.sh

out=$(terrace doctor) || fail "terrace doctor failed"
echo "$out"
json=$(terrace doctor --json) || fail "terrace doctor --json failed"
echo "$json" | grep -q '"by": *"memory-tiers"' || fail "classification was not by memory tiers"
echo "$json" | tr -d ' \n' | grep -q '\[1,"slow"\]' || fail "node 1 is not classified slow"
echo "$out" | grep -q 'never demotes or promotes' && fail "doctor reports a same-tier misconfiguration on a good guest"
echo "$out" | grep -E '^\s*\[yes\] soft-dirty' >/dev/null || fail "soft-dirty not available in the guest"
note "doctor: node1 slow by memory tiers; soft-dirty available"
