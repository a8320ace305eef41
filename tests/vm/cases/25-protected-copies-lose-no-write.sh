# boot: hmat
# timeout: 120
# Write-protected copies (hemem's and hpwp's migrator): ping-pong-wp moves every page to the
# other node five times a second, each batch write-protected with userfaultfd while move_pages
# copies it, while the program keeps writing and verifies every 2 s. Writes that hit a page being
# copied wait (the log counts them; there must be some, or the protection never engaged) and none
# is lost: the checksum holds.
. /lib/vmtest.sh
kernel_balancing_off

# terrace run exits with the program's status: 3 is a checksum mismatch.
manage ping-pong-wp --policy ping-pong-wp -- terrace-hotcold --hot-mib 1 --cold-mib 4 --seconds 20 --verify-every 2
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
moved=$(sed -n 's/.*done: \([0-9]*\) pages moved.*/\1/p' /tmp/log)
held=$(sed -n 's/.* \([0-9]*\) writes waited for a copy.*/\1/p' /tmp/log)
[ "${moved:-0}" -ge 2000 ] || fail "only ${moved:-0} pages moved"
[ "${held:-0}" -gt 0 ] || fail "no write waited for a copy: the protection never engaged"
note "ping-pong-wp: $moved page migrations, $held writes waited for a protected copy, checksum intact"
