#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run the spin tests and end with one line "N passed, N failed" (non-zero exit on any
# failure). Stages: core (host cargo tests of the pure Rust core and of tools/spin, then two
# checks of the tree's text, one result each: process_words.py and docs_check.py), vm (KUnit
# in the booted kernel + the VM behaviour tests). With "selfcheck", run the VM with the deliberately
# failing KUnit suite and test program and succeed only if the run turns red because of them.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
: "${BUILD:=$repo/build}"
core=$repo/tools/testing/spin/core/Cargo.toml
stages=${*:-core vm}
passed=0
failed=0
failures=()
log() { printf '[test] %s\n' "$*"; }

count() { # PASSED FAILED NAME...
	passed=$((passed + $1))
	failed=$((failed + $2))
}

run_core() {
	local out rc p f
	log "core: cargo test (host build of rust/spin/sched; tools/spin)"
	out=$(cargo test --manifest-path "$core" 2>&1 &&
		cargo test --locked --manifest-path "$repo/tools/spin/Cargo.toml" 2>&1)
	rc=$?
	printf '%s\n' "$out" | grep -E '^test .* FAILED$|panicked|^error' || true
	p=$(printf '%s\n' "$out" | awk '/^test result:/ {s += $4} END {print s + 0}')
	f=$(printf '%s\n' "$out" | awk '/^test result:/ {s += $6} END {print s + 0}')
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		f=1
		failures+=("core: cargo test failed (rc=$rc) before running tests")
		printf '%s\n' "$out" | tail -30
	fi
	[ "$f" != 0 ] && failures+=("core: $f cargo test(s) failed")
	log "core: $p passed, $f failed"
	count "$p" "$f"
	# Two checks of the tree's text, one result each.
	host_check "process words (tracked files)" "$here/process_words.py"
	host_check "Documentation/spin builds without warnings (docutils)" "$here/docs_check.py"
}

host_check() { # NAME SCRIPT: one passed or failed result, the script's output on failure
	local name=$1 out
	if out=$(/usr/bin/python3 "$2" 2>&1); then
		log "core: $name: ok"
		count 1 0
	else
		printf '%s\n' "$out" | tail -60
		log "core: $name: FAILED"
		failures+=("core: $name")
		count 0 1
	fi
}

# The tests run on the debug kernel: the spin fragment plus debug.config (lockdep,
# KASAN, KFENCE, UBSAN, DEBUG_VM/LIST/OBJECTS, Rust debug assertions, fault injection), built in
# its own object directory. The demo and the benches use the production kernel in $BUILD/obj.
debug_kernel() {
	local cfg=$repo/tools/testing/spin/config
	export KOBJ=${SPIN_TEST_KOBJ:-$BUILD/obj-debug}
	mkdir -p "$KOBJ"
	if [ "${SPIN_APPLY:-}" = committed ]; then
		git -C "$repo" show HEAD:tools/testing/spin/config/spin.config \
			HEAD:tools/testing/spin/config/debug.config > "$KOBJ/test.config"
	else
		cat "$cfg/spin.config" "$cfg/debug.config" > "$KOBJ/test.config"
	fi
	export FRAGMENT=$KOBJ/test.config
	log "vm: the debug kernel ($KOBJ, spin.config + debug.config)"
}

run_vm() { # MODE
	local mode=$1 summary=$BUILD/vm/$1/summary.json
	rm -f "$summary"
	debug_kernel
	# The guest takes about 35 min on a quiet host and up to ~60 min on a busy
	# one (every long program up to 1.7x its quiet-hour time). The watchdog
	# only has to catch a hang; the tests catch their own (router_consistency_test:
	# a reader without progress). 4200 s leaves room in a 5400 s budget for the
	# debug kernel (~5 min from a fresh clone with a warm ccache), the cargo
	# tests and the initramfs.
	export SPIN_VM_TIMEOUT=${SPIN_VM_TIMEOUT:-4200}
	# Build and boot under one lock: nobody may replace the kernel in between.
	if ! "$here/with-lock.sh" bash -c '"$0/build.sh" initramfs && { /usr/bin/python3 "$0/vm.py" --mode "$1" --summary "$2"; true; }' "$here" "$mode" "$summary"; then
		failures+=("vm: kernel or initramfs build failed")
		count 0 1
		return
	fi
	if [ ! -f "$summary" ]; then
		failures+=("vm: the runner produced no result")
		count 0 1
		return
	fi
	local p f
	p=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["passed"])' "$summary")
	f=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["failed"])' "$summary")
	[ "$f" != 0 ] && failures+=("vm: $f test(s) failed, see $BUILD/vm/$mode/")
	count "$p" "$f"
}

for s in $stages; do
	case $s in
	core) run_core ;;
	vm) run_vm test ;;
	selfcheck)
		run_vm selfcheck
		summary=$BUILD/vm/selfcheck/summary.json
		want=("kunit/spin_selfcheck/deliberate_failure" "vm/selfcheck_fail")
		ok=1
		for w in "${want[@]}"; do
			if /usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(not any(x.startswith(sys.argv[2]) for x in s["failures"]))' "$summary" "$w"; then
				log "selfcheck: '$w' failed, as it must"
			else
				log "selfcheck: '$w' did NOT fail: the harness would miss failures"
				ok=0
			fi
		done
		echo "$passed passed, $failed failed"
		if [ $ok = 1 ] && [ "$failed" -gt 0 ]; then
			log "selfcheck OK: deliberate failures turn the run red"
			exit 0
		fi
		log "selfcheck FAILED"
		exit 1
		;;
	*) log "unknown stage $s"; exit 2 ;;
	esac
done

for f in "${failures[@]}"; do log "FAILED: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
