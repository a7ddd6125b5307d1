# SPDX-License-Identifier: GPL-2.0
#
# The spin workshop. `make run` (the demo) and `make test` (every test) do all set-up on a
# fresh Debian 12 machine as root; see README.md. The kernel tree and its objects live under
# $(BUILD) and are reused: only what changed is rebuilt.

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

REPO    := $(abspath .)
BUILD   ?= $(REPO)/build
KSRC    := $(BUILD)/src/linux-source-7.3
KOBJ    := $(BUILD)/obj
PY      := /usr/bin/python3
SCRIPTS := $(REPO)/tools/testing/spin/scripts
CORE    := $(REPO)/tools/testing/spin/core/Cargo.toml
TARBALL := /usr/src/linux-source-7.3.tar.xz
KTREE   := $(PY) $(SCRIPTS)/ktree.py --tree $(KSRC)
LOCK    := $(SCRIPTS)/with-lock.sh
STAMP   := /var/lib/spin-workshop
export BUILD KSRC KOBJ

# VM knobs (see Documentation/spin/development.rst): SPIN_VM_BPS, SPIN_VM_IOPS, SPIN_VM_TIMEOUT, SPIN_GPU_MIB;
# RIG=real: the benchmarks' drives at a real system's proportions (below).

.PHONY: help setup tree apply config kernel initramfs run test test-core test-vm \
	test-selfcheck bench-core bench-gpumem bench-router bench-replay bench-cpu bench-prof bench-writer bench-uring bench-stack bench-atomic bench-pipe bench-remote bench-insn series series-check series-bisect export clean \
	distclean

help:
	@echo "The spin workshop (README.md: quick start; Documentation/spin/development.rst: the rest)."
	@sed -n 's/^## /  /p' $(REPO)/Makefile

## setup: install the toolchain, QEMU and the kernel source package (root, idempotent)
setup:
	@$(SCRIPTS)/setup-host.sh

## tree: the pristine kernel source as a git tree under build/
tree: setup
	@$(KTREE) init --tarball $(TARBALL)

## apply: build the repo's series on top of the pristine tree (only changed files are touched)
apply: tree
	@$(LOCK) $(KTREE) apply $(if $(FORCE),--force)

## kernel: apply, configure (fragment checked) and build bzImage + modules
kernel: tree
	@$(SCRIPTS)/build.sh kernel

## initramfs: the kernel, then busybox, fio, mkfs and the test programs for the guest
initramfs: tree
	@$(SCRIPTS)/build.sh initramfs

## run: the demo, end to end
run: tree
	@$(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && $(PY) $(SCRIPTS)/vm.py --mode demo'

## test: every test (host cargo tests, KUnit in the booted kernel, VM tests)
test: tree
	@$(SCRIPTS)/test-all.sh

## test-core / test-vm: one stage of `make test` (test-core: cargo tests and the text checks)
test-core: setup
	@$(SCRIPTS)/test-all.sh core

test-vm: tree
	@$(SCRIPTS)/test-all.sh vm

## test-selfcheck: prove that a failing KUnit case and a failing VM test turn `make test` red
test-selfcheck: tree
	@$(SCRIPTS)/test-all.sh selfcheck

## bench-core: the decision-core simulator and decision-cost benchmark
bench-core: setup
	@cargo run --release --manifest-path $(CORE) --bin spin-sim -- --out $(BUILD)/bench-core
	@$(PY) $(REPO)/tools/testing/spin/core/plot.py $(BUILD)/bench-core

## bench-gpumem: struct page cost, O_DIRECT into GPU vs host memory, mapping type (one guest run)
bench-gpumem: tree
	@$(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && $(PY) $(SCRIPTS)/vm.py --mode bench \
		--bench gpumem_bench --out $(BUILD)/bench-gpumem'
	@grep -v '^@@' $(BUILD)/bench-gpumem/results.log | tr -d '\r' > $(BUILD)/bench-gpumem/summary.md
	@echo "[bench] report: $(BUILD)/bench-gpumem/summary.md"

## bench-router: the router: auto vs p2p vs pagecache over a read matrix into GPU memory
# The NVMe drives are throttled to model an SSD against TCG's memcpy (~300 MB/s page-cache
# copies into GPU memory, ~0.3 ms per emulated I/O): 180 MB/s makes the device 1.5-1.8x
# slower per byte than the copy (Gen4: 6.5 vs 10 GB/s); 2000 IOPS keeps a small P2P read at
# 0.3-0.5 ms. SPIN_VM_BPS / SPIN_VM_IOPS override (see Documentation/spin/measurements.rst). ROUTER_BENCH_ARGS adds router_bench.* options
# (see router_bench.c). NOSPIN=1 also builds the same tree with CONFIG_SPIN=n in
# build/obj-nospin (a second kernel build: cold ~30 min) and runs the CPU-only check on it.
# The CPU-only check runs in boots of its own with guest time counted in instructions
# (vm.py --icount CPU_ICOUNT, ~2.5 min each), where cached reads repeat within 0.1% however
# busy the host is; CPU_ICOUNT= keeps it in the matrix boot, on the host's clock.
# SPIN_VM_ICOUNT=N runs the matrix under instruction counting too (vm.py --icount).
# The fully resident cells (no device I/O, CPU-bound) run again in a boot of their own under
# instruction counting (CACHED_ICOUNT, ~5 min; empty: none), their verdict in the report.
# RIG=real throttles the drives to 400 MB/s instead: with the calibrated copy into GPU memory
# at about 500 MB/s the disk and the copy then stand as a PCIe 4 drive (7 GB/s) and a
# write-combined copy into a GPU's BAR (10 GB/s) do, where splitting a request pays; at
# 180 MB/s the disk alone bounds every mixed cell (Documentation/spin/measurements.rst).
# bench-router then runs with the cost model that `spin calibrate --apply` fits in the guest
# (router_bench.model=tool).
CPU_ICOUNT  ?= 2
CACHED_ICOUNT ?= $(CPU_ICOUNT)
ifeq ($(RIG),real)
ROUTER_BPS  ?= 400000000
RIG_ARGS    := router_bench.model=tool
else ifneq ($(RIG),)
$(error RIG=$(RIG): the rig modes are RIG=real and none)
endif
ROUTER_BPS  ?= 180000000
ROUTER_IOPS ?= 2000
ROUTER_OUT  := $(BUILD)/bench-router
NOSPIN_OBJ  := $(BUILD)/obj-nospin
ROUTER_VM    = $(PY) $(SCRIPTS)/vm.py --mode bench --bench router_bench \
	--bps $${SPIN_VM_BPS:-$(ROUTER_BPS)} --iops $${SPIN_VM_IOPS:-$(ROUTER_IOPS)} \
	--timeout $${SPIN_VM_TIMEOUT:-2400}
ROUTER_ARGS  = router_bench.bps=$${SPIN_VM_BPS:-$(ROUTER_BPS)} \
	router_bench.iops=$${SPIN_VM_IOPS:-$(ROUTER_IOPS)} $(RIG_ARGS) $(ROUTER_BENCH_ARGS)
# The fragment minus spin (from HEAD under SPIN_APPLY=committed, like build-kernel.sh).
NOSPIN_KERNEL = mkdir -p $(NOSPIN_OBJ) && \
	{ if [ "$${SPIN_APPLY:-}" = committed ]; then \
		git -C $(REPO) show HEAD:tools/testing/spin/config/spin.config; \
	else cat $(REPO)/tools/testing/spin/config/spin.config; fi; } | \
	sed -e "s/^CONFIG_SPIN=y/CONFIG_SPIN=n/" -e "/^CONFIG_SPIN_KUNIT_TEST=/d" \
		> $(NOSPIN_OBJ)/nospin.config && \
	KOBJ=$(NOSPIN_OBJ) FRAGMENT=$(NOSPIN_OBJ)/nospin.config $(SCRIPTS)/build-kernel.sh

bench-router: tree
	@rm -rf $(ROUTER_OUT)/nospin $(ROUTER_OUT)/cpu $(ROUTER_OUT)/cached
	@rc=0; $(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && \
		$(if $(NOSPIN),$(NOSPIN_KERNEL) &&) \
		{ $(ROUTER_VM) --out $(ROUTER_OUT) \
			--append "$(if $(CPU_ICOUNT),router_bench.cpu_rounds=0 )$(ROUTER_ARGS)" || rc=$$?; \
		$(if $(CPU_ICOUNT),$(ROUTER_VM) --icount $(CPU_ICOUNT) --out $(ROUTER_OUT)/cpu \
			--append "$(ROUTER_ARGS) router_bench.cpuonly=1" || rc=$$?;) \
		$(if $(CACHED_ICOUNT),$(ROUTER_VM) --icount $(CACHED_ICOUNT) --out $(ROUTER_OUT)/cached \
			--append "$(ROUTER_ARGS) router_bench.only_res=100 router_bench.cpu_rounds=0 \
			$$($(PY) $(REPO)/tools/testing/spin/bench/router_report.py --fit-args $(ROUTER_OUT))" \
			|| rc=$$?;) \
		$(if $(NOSPIN),$(ROUTER_VM) $(if $(CPU_ICOUNT),--icount $(CPU_ICOUNT)) \
			--out $(ROUTER_OUT)/nospin --kernel $(NOSPIN_OBJ)/arch/x86/boot/bzImage \
			--append "$(ROUTER_ARGS) router_bench.cpuonly=1" || rc=$$?;) \
		exit $${rc:-0}; }' || rc=$$?; \
	$(PY) $(REPO)/tools/testing/spin/bench/router_report.py $(ROUTER_OUT) || rc=$$?; \
	exit $$rc

## bench-replay: the router's own decisions, costed on real devices' models (spin-replay)
# One boot of router_bench.replay: for each device model of spin-replay (a PCIe 4 and a PCIe 5
# NVMe drive with a GPU on the same generation), the kernel's cost model is set to the
# device's knobs and every cell of the matrix (residencies REPLAY_RES) is read once in auto
# mode with the router's tracepoints on; spin-replay then charges those decisions, and the
# two fixed paths, to the device model (Documentation/spin/measurements.rst). ~15 min.
REPLAY_OUT := $(BUILD)/bench-replay
REPLAY_RES ?= 0,25,50,75,100
REPLAY_BIN := $(REPO)/tools/testing/spin/core/target/release/spin-replay
bench-replay: tree
	@cargo build --release --quiet --manifest-path $(CORE) --bin spin-replay
	@models=$$(for d in gen4 gen5; do printf '%s:%s,' $$d "$$($(REPLAY_BIN) --knobs $$d)"; \
		done); rc=0; \
	$(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && $(ROUTER_VM) --out $(REPLAY_OUT) \
		--append "router_bench.cpu_rounds=0 router_bench.res=$(REPLAY_RES) \
		router_bench.replay='"$${models%,}"' $(ROUTER_ARGS)"' || rc=$$?; \
	$(REPLAY_BIN) $(REPLAY_OUT)/results.log > $(REPLAY_OUT)/summary.md || rc=$$?; \
	cat $(REPLAY_OUT)/summary.md; exit $$rc

## bench-cpu: CPU-only reads, this kernel against the same tree with CONFIG_SPIN=n
# Builds the CONFIG_SPIN=n kernel in build/obj-nospin (cold ~30 min; with ccache a few
# minutes) and boots the two kernels CPU_PAIRS times each, back to back in alternating order
# (ABBA), running router_bench.cpuonly=1 with CPU_ROUNDS rounds; cpu_report.py reports the
# median over pairs of boots of the ratios with their spread, and the median of every
# adjacent off/on pair of rounds of the spin boots pooled, with a 95% confidence interval.
# Guest time is counted in instructions (CPU_ICOUNT, as bench-router's CPU-only boots).
# About 2.5 min per boot.
CPU_OUT   := $(BUILD)/bench-cpu
CPU_PAIRS ?= 4
CPU_ROUNDS ?= 32
bench-cpu: tree
	@rm -rf $(CPU_OUT); rc=0; $(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && $(NOSPIN_KERNEL) && \
		for i in $$(seq 1 $(CPU_PAIRS)); do \
			order="spin nospin"; [ $$((i % 2)) -eq 0 ] && order="nospin spin"; \
			for k in $$order; do \
				kern=$(KOBJ)/arch/x86/boot/bzImage; \
				[ $$k = nospin ] && kern=$(NOSPIN_OBJ)/arch/x86/boot/bzImage; \
				$(ROUTER_VM) $(if $(CPU_ICOUNT),--icount $(CPU_ICOUNT)) \
					--kernel $$kern --out $(CPU_OUT)/pair-$$i-$$k \
					--append "$(ROUTER_ARGS) router_bench.cpuonly=1 \
					router_bench.cpu_rounds=$(CPU_ROUNDS)" || exit 1; \
				rm -f $(CPU_OUT)/pair-$$i-$$k/*.img; \
			done; \
		done' || rc=$$?; \
	$(PY) $(REPO)/tools/testing/spin/bench/cpu_report.py $(CPU_OUT) || rc=$$?; \
	exit $$rc

## bench-prof: where the CPU time of one read pattern goes, auto against pagecache mode
# A sampling profile of the kernel (perf_event_open, cpu-clock) in one guest run of
# prof_bench (see tools/testing/spin/bench/prof_bench.c); PROF_ARGS adds prof_bench.*
# options (size, res, rnd, secs, rounds, top, ra_limit, trace, ra_kb, annotate, sample). Same
# throttled drives as bench-router.
PROF_OUT := $(BUILD)/bench-prof
bench-prof: tree
	@rc=0; $(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && $(PY) $(SCRIPTS)/vm.py --mode bench \
		--bench prof_bench --out $(PROF_OUT) \
		--bps $${SPIN_VM_BPS:-$(ROUTER_BPS)} --iops $${SPIN_VM_IOPS:-$(ROUTER_IOPS)} \
		--append "prof_bench.bps=$${SPIN_VM_BPS:-$(ROUTER_BPS)} \
		prof_bench.iops=$${SPIN_VM_IOPS:-$(ROUTER_IOPS)} $(PROF_ARGS)"' || rc=$$?; \
	grep -v '^@@' $(PROF_OUT)/results.log | tr -d '\r' > $(PROF_OUT)/summary.md; \
	echo "[bench] report: $(PROF_OUT)/summary.md"; exit $$rc

## bench-insn: exact guest instructions per request of one read pattern, per kernel function
# prof_bench's timed passes counted by a QEMU TCG plugin (tools/testing/spin/qemu/insn_count.c,
# built with the host's gcc; no QEMU source needed), auto against pagecache mode, no sampling:
# the breakdown of what instruction-counted guest time (SPIN_VM_ICOUNT) measures. PROF_ARGS as
# for bench-prof (sample is forced to 0). Report: build/insn-prof/summary.md.
INSN_OUT := $(BUILD)/insn-prof
bench-insn: tree
	@$(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && \
		$(PY) $(SCRIPTS)/insn_prof.py --out $(INSN_OUT) $(PROF_ARGS)'

## bench-writer: writes from GPU memory: auto vs pagecache, 4 KiB-8 MiB, and a checkpoint
# Same throttled drives as bench-router (SPIN_VM_BPS / SPIN_VM_IOPS override); WRITER_BENCH_ARGS
# adds writer_bench.* options (see writer_bench.c). Report: build/bench-writer/summary.md.
WRITER_OUT := $(BUILD)/bench-writer
bench-writer: tree
	@rc=0; $(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && $(PY) $(SCRIPTS)/vm.py --mode bench \
		--bench writer_bench --out $(WRITER_OUT) \
		--bps $${SPIN_VM_BPS:-$(ROUTER_BPS)} --iops $${SPIN_VM_IOPS:-$(ROUTER_IOPS)} \
		--timeout $${SPIN_VM_TIMEOUT:-1800} --append "writer_bench.bps=$${SPIN_VM_BPS:-$(ROUTER_BPS)} \
		writer_bench.iops=$${SPIN_VM_IOPS:-$(ROUTER_IOPS)} $(WRITER_BENCH_ARGS)"' || rc=$$?; \
	grep -v '^@@' $(WRITER_OUT)/results.log | tr -d '\r' > $(WRITER_OUT)/summary.md; \
	echo "[bench] report: $(WRITER_OUT)/summary.md"; \
	if grep -q '^not ok' $(WRITER_OUT)/summary.md; then rc=1; fi; exit $$rc

## bench-uring: io_uring reads into GPU memory: buffered (routed) vs O_DIRECT, iodepth 32
# Same throttled drives as bench-router. URING_BENCH_ARGS adds uring_bench.* options.
URING_OUT := $(BUILD)/bench-uring
bench-uring: tree
	@rc=0; $(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && $(PY) $(SCRIPTS)/vm.py --mode bench \
		--bench uring_bench --out $(URING_OUT) \
		--bps $${SPIN_VM_BPS:-$(ROUTER_BPS)} --iops $${SPIN_VM_IOPS:-$(ROUTER_IOPS)} \
		--timeout $${SPIN_VM_TIMEOUT:-1800} --append "$(URING_BENCH_ARGS)"' || rc=$$?; \
	grep -v '^@@' $(URING_OUT)/results.log | tr -d '\r' > $(URING_OUT)/summary.md; \
	echo "[bench] report: $(URING_OUT)/summary.md"; \
	if grep -q '^not ok' $(URING_OUT)/summary.md; then rc=1; fi; exit $$rc

## bench-stack: sequential reads into GPU memory, md RAID-0 over both drives vs one drive
# Same throttled drives as bench-router. STACK_BENCH_ARGS adds stack_bench.* options.
STACK_OUT := $(BUILD)/bench-stack
bench-stack: tree
	@rc=0; $(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && $(PY) $(SCRIPTS)/vm.py --mode bench \
		--bench stack_bench --out $(STACK_OUT) \
		--bps $${SPIN_VM_BPS:-$(ROUTER_BPS)} --iops $${SPIN_VM_IOPS:-$(ROUTER_IOPS)} \
		--timeout $${SPIN_VM_TIMEOUT:-1800} --append "stack_bench.bps=$${SPIN_VM_BPS:-$(ROUTER_BPS)} \
		stack_bench.iops=$${SPIN_VM_IOPS:-$(ROUTER_IOPS)} $(STACK_BENCH_ARGS)"' || rc=$$?; \
	grep -v '^@@' $(STACK_OUT)/results.log | tr -d '\r' > $(STACK_OUT)/summary.md; \
	echo "[bench] report: $(STACK_OUT)/summary.md"; \
	if grep -q '^not ok' $(STACK_OUT)/summary.md; then rc=1; fi; exit $$rc

## bench-atomic: XFS reads into GPU memory, synchronous P2P legs (atomic_reads 1) vs asynchronous
# Same throttled drives as bench-router. ATOMIC_BENCH_ARGS adds atomic_bench.* options.
ATOMIC_OUT := $(BUILD)/bench-atomic
bench-atomic: tree
	@rc=0; $(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && $(PY) $(SCRIPTS)/vm.py --mode bench \
		--bench atomic_bench --out $(ATOMIC_OUT) \
		--bps $${SPIN_VM_BPS:-$(ROUTER_BPS)} --iops $${SPIN_VM_IOPS:-$(ROUTER_IOPS)} \
		--timeout $${SPIN_VM_TIMEOUT:-1800} --append "atomic_bench.bps=$${SPIN_VM_BPS:-$(ROUTER_BPS)} \
		atomic_bench.iops=$${SPIN_VM_IOPS:-$(ROUTER_IOPS)} $(ATOMIC_BENCH_ARGS)"' || rc=$$?; \
	grep -v '^@@' $(ATOMIC_OUT)/results.log | tr -d '\r' > $(ATOMIC_OUT)/summary.md; \
	echo "[bench] report: $(ATOMIC_OUT)/summary.md"; \
	if grep -q '^not ok' $(ATOMIC_OUT)/summary.md; then rc=1; fi; exit $$rc

## bench-pipe: chunk pipelining of routed reads, /sys/kernel/spin/pipeline 1 vs 0
# Same throttled drives as bench-router. PIPE_BENCH_ARGS adds pipe_bench.* options.
PIPE_OUT := $(BUILD)/bench-pipe
bench-pipe: tree
	@rc=0; $(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && $(PY) $(SCRIPTS)/vm.py --mode bench \
		--bench pipe_bench --out $(PIPE_OUT) \
		--bps $${SPIN_VM_BPS:-$(ROUTER_BPS)} --iops $${SPIN_VM_IOPS:-$(ROUTER_IOPS)} \
		--timeout $${SPIN_VM_TIMEOUT:-1800} --append "pipe_bench.bps=$${SPIN_VM_BPS:-$(ROUTER_BPS)} \
		pipe_bench.iops=$${SPIN_VM_IOPS:-$(ROUTER_IOPS)} $(PIPE_BENCH_ARGS)"' || rc=$$?; \
	grep -v '^@@' $(PIPE_OUT)/results.log | tr -d '\r' > $(PIPE_OUT)/summary.md; \
	echo "[bench] report: $(PIPE_OUT)/summary.md"; \
	if grep -q '^not ok' $(PIPE_OUT)/summary.md; then rc=1; fi; exit $$rc

## bench-remote: buffered reads into GPU memory from NVMe/TCP, mode auto vs off, 4 KiB-8 MiB
# One guest run: nvmet exports spin-nvme2 over TCP on the loopback device, the guest connects
# to it; cold and cached passes per read size, the two modes in alternating order.
# REMOTE_BENCH_ARGS adds remote_bench.* options (see remote_bench.c); SPIN_VM_ICOUNT=N counts
# guest time in instructions. Report: build/bench-remote/summary.md.
REMOTE_OUT := $(BUILD)/bench-remote
bench-remote: tree
	@rc=0; $(LOCK) bash -c '$(SCRIPTS)/build.sh initramfs && $(PY) $(SCRIPTS)/vm.py --mode bench \
		--bench remote_bench --out $(REMOTE_OUT) \
		--timeout $${SPIN_VM_TIMEOUT:-1800} --append "$(REMOTE_BENCH_ARGS)"' || rc=$$?; \
	grep -v '^@@' $(REMOTE_OUT)/results.log | tr -d '\r' > $(REMOTE_OUT)/summary.md; \
	echo "[bench] report: $(REMOTE_OUT)/summary.md"; \
	if grep -q '^not ok' $(REMOTE_OUT)/summary.md; then rc=1; fi; exit $$rc

## series: emit the patch series with a cover letter into build/series
series: tree
	@$(KTREE) series --out $(BUILD)/series

## series-check: git am the series onto a scratch pristine tree
series-check: series
	@$(KTREE) check --out $(BUILD)/series

## series-bisect: build every prefix of the series (production config; about 2 h on 2 cores)
series-bisect: tree
	@$(SCRIPTS)/series-bisect.sh

## export: turn edits made in build/src/linux-source-7.3 back into this repo's files/patches
export:
	@$(KTREE) export

## clean / distclean: remove run outputs / the whole build/
clean:
	rm -rf $(BUILD)/vm $(BUILD)/initramfs $(BUILD)/series $(BUILD)/bench-core $(BUILD)/bench-router

distclean:
	rm -rf $(BUILD)
