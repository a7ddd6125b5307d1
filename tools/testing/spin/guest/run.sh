#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs in the guest. Sends results to the host over ttyS1 in the format that
# tools/testing/spin/scripts/results.py parses, then powers off.
mode=$1
stty -F /dev/ttyS1 raw -echo 2>/dev/null
exec 3>/dev/ttyS1
emit() { printf '%s\n' "$*" >&3; }

finish() {
	emit "@@ done"
	sync
	poweroff -f
}

emit "@@ begin mode=$mode kernel=$(uname -r)"
case $mode in
demo)
	/spin/demo.sh >&3 2>&1
	finish
	;;
shell)
	setsid cttyhack sh
	finish
	;;
bench)
	bench=$(sed -n 's/.*spintest\.bench=\([a-z_]*\).*/\1/p' /proc/cmdline)
	"/spin/bench/$bench" >&3 2>&1
	finish
	;;
esac

# KUnit ran at boot (built-in suites, kunit.filter_glob on the command line).
glob=$(sed -n 's/.*kunit\.filter_glob=\([^ ]*\).*/\1/p' /proc/cmdline)
for d in /sys/kernel/debug/kunit/*/; do
	suite=$(basename "$d")
	case $suite in $glob) ;; *) continue ;; esac
	emit "@@ kunit $suite"
	cat "$d/results" >&3
done

# VM tests: every program in /spin/tests (and /spin/selfcheck in selfcheck mode).
dirs=/spin/tests
[ "$mode" = selfcheck ] && dirs="$dirs /spin/selfcheck"
for dir in $dirs; do
	emit "@@ expect $(ls "$dir" | tr '\n' ' ')"
done
# spintest.only=NAME[,NAME...] on the command line runs only those (debugging: the others
# are then reported missing).
only=$(sed -n 's/.*spintest\.only=\([a-z0-9_,]*\).*/\1/p' /proc/cmdline)
for dir in $dirs; do
	for t in "$dir"/*; do
		name=$(basename "$t")
		case ",$only," in ,,|*",$name,"*) ;; *) continue ;; esac
		emit "@@ tap $name"
		echo "spin-test: $name" > /dev/kmsg
		(cd /tmp && "$t") >&3 2>/dev/console
		emit "@@ exit $name $?"
	done
done
finish
