// SPDX-License-Identifier: GPL-2.0
/*
 * router_bench: the router measured in one guest run.
 *
 * 1. CPU-only check: buffered pread() into host memory (malloc'ed), cached and
 *    uncached, by a process that never mapped GPU memory ("off": the router
 *    costs it one bit test, MMF_P2PDMA) and by one with a GPU buffer mapped
 *    ("on": the router looks at every destination's VMA), two children
 *    forked alike, rounds interleaved off/on/on/off. make bench-cpu compares
 *    boots of this kernel with boots of a CONFIG_SPIN=n build of the same
 *    tree (.cpuonly=1).
 * 2. The cost model of the disk (/sys/block/<disk>/spin/{s_cutoff,c_p2p_ns,
 *    bw_p2p,bw_pc}) fitted to the rig: P2P reads of 4 KiB .. 4 MiB in p2p mode
 *    and page-cache copies in pagecache mode, written to sysfs so that auto
 *    decides with the rig's costs and not a Gen4 SSD's (router_bench.model=
 *    default keeps the kernel's defaults; .model=tool applies the fit of the
 *    user tool instead, /usr/bin/spin calibrate --apply on the bench's file;
 *    .model=both keeps both fits and adds a fourth mode to every round,
 *    "tool": auto with the tool's fit, while auto runs with the bench's, so
 *    that one run compares the two fits cell by cell).
 * 3. The TIOtest-like matrix: sequential reads of 512 B .. 8 MiB per call and
 *    random reads of 512 B .. 1 MiB over a file on ext4 on spin-nvme0, with 0,
 *    50 (alternating chunks, 1 MiB by default) and 100% of the file resident in
 *    the page cache (.res=0,25,50,75,100 adds 25%: the first chunk of every
 *    four, and 75%: all but the last of every four), each under
 *    /sys/kernel/spin/mode auto, p2p and pagecache.
 *    Destination: GPU memory from the stand-in GPU's DMA-BUF heap, mmapped;
 *    plain buffered pread(). The three modes of a cell are measured
 *    interleaved in every round; each measurement sets its residency first
 *    (fsync + POSIX_FADV_DONTNEED + pread into host memory of the chosen
 *    chunks, checked with mincore()), drains QEMU's throttling burst, and
 *    records the deltas of /sys/block/<disk>/spin/stat and of the disk's
 *    reads (/sys/block/<disk>/stat: how many the device served, how many
 *    KiB; rb-cell's <mode>_dev_reads, _dev_kib). One untimed read per
 *    measurement is checked against the file's pattern.
 *
 * Output (stdout is the results channel in bench mode): "rb-*" key=value lines
 * for tools/testing/spin/bench/router_report.py (one "rb-run" per timed run,
 * with the speedometer's reading, see below), "# ..." progress lines, a
 * Markdown table, and numbered TAP lines ("not ok N" fails the run).
 *
 * Options on the kernel command line (vm.py --append): router_bench.file_mib
 * (64), .rounds (5), .max_rounds (12: a cell whose auto / best ratios spread
 * (median absolute deviation > 0.04) gets more rounds while the run is ahead
 * of .budget_s, 1200 s), .cpu_rounds (16; 0: no CPU-only check, when a boot
 * of its own under instruction counting makes it), .chunk_kib (1024),
 * .tmax_ms (1000: a timed run stops after this, at a chunk-pair boundary for
 * sequential reads, so that a slow mode does not take minutes), .model=default,
 * .fit=s_cutoff,c_p2p_ns,bw_p2p,bw_pc (the model an earlier run fitted, written
 * instead of fitting: make bench-router's boot under instruction counting takes
 * the timed boot's), .cpuonly=1 (only step 1, also on a kernel without
 * spin), .bps and .iops (the QEMU throttling, to
 * drain its burst; the Makefile passes them), .max_size (bytes: only the
 * cells of requests up to this size, for a quick look), .only_res (0, 50 or
 * 100: only the cells of that residency; -1, the default, all: the fully
 * resident cells do no device I/O, so that a boot under instruction counting
 * measures them free of the host's noise), .ra_limit (pages: writes
 * /sys/kernel/spin/ra_partition_pages first, e.g. a partition larger than the file, so
 * that GPU read-ahead evicts nothing; the header says so), .norouter=1 (a self-test of the
 * bench on a kernel without the router: modes and counters are not touched,
 * every "mode" is the kernel's plain buffered read; the header says so),
 * .replay=NAME:S_CUTOFF:C_P2P_NS:BW_P2P:BW_PC[,...] (instead of the timed
 * matrix: for each device model, its knobs written to the disk's cost model,
 * every cell read once in auto mode with the router's tracepoints on, printed
 * as rp-* lines for spin-replay, the decision core's replay of those
 * decisions on the model's costs; make bench-replay).
 *
 * Emulator figures (QEMU TCG, the BAR is host RAM): compare ratios only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <linux/fs.h>
#include <time.h>
#include <unistd.h>

#include "bench_lib.h"
#include "spin_lib.h"

#define KiB (1UL << 10)
#define MiB (1UL << 20)
#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif
#define GPU_LEN (16 * MiB)	/* the GPU buffer */
#define DST_MOD (8 * MiB)	/* destination = gpu + file offset % DST_MOD */
#define HOST_LEN (8 * MiB)
#define HOST_ADDR 0x600000000000UL	/* the CPU-only children's buffer */
#define SEED 0x5b1dULL
#define MNT "/mnt/router_bench"
#define PATH MNT "/data"
#define MODE_PATH "/sys/kernel/spin/mode"
#define MAX_ROUNDS 15

/* M_TOOL: auto with the user tool's fit (.model=both only). */
enum { M_AUTO, M_P2P, M_PC, M_TOOL, NMODES };
static const char *const mode_name[NMODES] = { "auto", "p2p", "pagecache", "tool" };
static int nmodes = M_TOOL;	/* M_TOOL too with .model=both */
static long long fit_model[4], tool_model[4];

static struct {
	long file_mib, rounds, max_rounds, budget_s, chunk_kib, cpu_rounds, tmax_ms, only_res;
	long long bps, iops, max_size;
	int cpuonly, model_default, model_tool, model_both, norouter;
} opt = { 64, 5, 12, 1200, 1024, 16, 1000, -1, 0, 0, 0, 0, 0, 0, 0, 0 };

static long long ra_limit = -1;	/* router_bench.ra_limit; -1: the partition as it is */
/* router_bench.res: the residencies of the matrix, in percent. */
static int res_list[5] = { 0, 50, 100 }, nres = 3;
/* router_bench.replay: device models whose decisions are traced instead of timed. */
static struct {
	char name[16];
	long long knobs[4];
} replay_dev[4];
static int nreplay;
static long long given_fit[4];	/* router_bench.fit: a fit of an earlier run */
static int have_fit;
static char gpu_dir[PATH_MAX], dev[64], disk[64], stat_path[PATH_MAX];
static size_t file_len, chunk;
static int setup_fd = -1, raw_fd = -1;
static uint8_t *host, *drain_buf, *gpu;
static long long dev_size;
static double t_start;

static double elapsed(void)
{
	return bench_now() - t_start;
}

__printf(1, 2) static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bench_vfail(fmt, ap);
	va_end(ap);
	printf("# router_bench stopped after %.0f s\n", elapsed());
	exit(1);
}

/* router_bench.<key>=<value> from the kernel command line, or NULL. */
static const char *cmdline_opt(const char *key)
{
	return bench_opt("router_bench", key);
}

static long long cmdline_ll(const char *key, long long def)
{
	return bench_opt_ll("router_bench", key, def);
}

/* router_bench.res=0,25,50,75,100: residencies, multiples of 25, in order. */
static void parse_res(const char *v)
{
	const char *p = v;
	int end;

	for (nres = 0; *p; p += end + (p[end] == ',')) {
		if (nres == ARRAY_SIZE(res_list) ||
		    sscanf(p, "%d%n", &res_list[nres], &end) != 1 || res_list[nres] % 25 ||
		    res_list[nres] < 0 || res_list[nres] > 100 ||
		    (nres && res_list[nres] <= res_list[nres - 1]) ||
		    (p[end] && p[end] != ','))
			die("router_bench.res=%s: want increasing residencies among 0,25,50,75,100",
			    v);
		nres++;
	}
	if (!nres)
		die("router_bench.res is empty");
}

/*
 * router_bench.replay=NAME:S_CUTOFF:C_P2P_NS:BW_P2P:BW_PC[,NAME:...]: the
 * device models of spin-replay --knobs.
 */
static void parse_replay(const char *v)
{
	const char *p = v;
	int end;

	for (nreplay = 0; *p; p += end + (p[end] == ',')) {
		long long *k = replay_dev[nreplay].knobs;

		end = 0;
		if (nreplay == ARRAY_SIZE(replay_dev) ||
		    sscanf(p, "%15[a-z0-9]:%lld:%lld:%lld:%lld%n", replay_dev[nreplay].name,
			   &k[0], &k[1], &k[2], &k[3], &end) != 5 ||
		    (p[end] && p[end] != ',') || k[0] < 0 || k[1] <= 0 || k[2] <= 0 || k[3] <= 0)
			die("router_bench.replay=%s: want NAME:S_CUTOFF:C_P2P_NS:BW_P2P:BW_PC, "
			    "comma-separated", v);
		nreplay++;
	}
}

static void parse_opts(void)
{
	const char *model = cmdline_opt("model");

	opt.file_mib = cmdline_ll("file_mib", opt.file_mib);
	opt.rounds = cmdline_ll("rounds", opt.rounds);
	opt.max_rounds = cmdline_ll("max_rounds", opt.max_rounds);
	opt.budget_s = cmdline_ll("budget_s", opt.budget_s);
	opt.cpu_rounds = cmdline_ll("cpu_rounds", opt.cpu_rounds);
	opt.chunk_kib = cmdline_ll("chunk_kib", opt.chunk_kib);
	opt.tmax_ms = cmdline_ll("tmax_ms", opt.tmax_ms);
	opt.bps = cmdline_ll("bps", opt.bps);
	opt.iops = cmdline_ll("iops", opt.iops);
	opt.max_size = cmdline_ll("max_size", opt.max_size);
	opt.only_res = cmdline_ll("only_res", opt.only_res);
	if (opt.only_res != -1 && (opt.only_res < 0 || opt.only_res > 100 || opt.only_res % 25))
		die("router_bench.only_res=%ld: want 0, 25, 50, 75 or 100 (or -1: all)",
		    opt.only_res);
	if (cmdline_opt("res"))
		parse_res(cmdline_opt("res"));
	if (cmdline_opt("replay"))
		parse_replay(cmdline_opt("replay"));
	opt.cpuonly = cmdline_ll("cpuonly", opt.cpuonly);
	opt.norouter = cmdline_ll("norouter", opt.norouter);
	ra_limit = cmdline_ll("ra_limit", ra_limit);
	opt.model_default = model && !strcmp(model, "default");
	opt.model_tool = model && !strcmp(model, "tool");
	opt.model_both = model && !strcmp(model, "both");
	if (model && !opt.model_default && !opt.model_tool && !opt.model_both &&
	    strcmp(model, "fit"))
		die("router_bench.model=%s: want fit (the default), default, tool or both", model);
	if (opt.model_both && !opt.norouter)
		nmodes = NMODES;
	if (cmdline_opt("fit")) {
		const char *f = cmdline_opt("fit");
		int end = 0;

		if (opt.model_default || opt.model_tool || opt.model_both ||
		    sscanf(f, "%lld,%lld,%lld,%lld%n", &given_fit[0], &given_fit[1],
			   &given_fit[2], &given_fit[3], &end) != 4 || f[end] ||
		    given_fit[0] < 0 || given_fit[1] <= 0 || given_fit[2] <= 0 || given_fit[3] <= 0)
			die("router_bench.fit=%s: want s_cutoff,c_p2p_ns,bw_p2p,bw_pc", f);
		have_fit = 1;
	}
	if (opt.file_mib < 16 || opt.file_mib > 512 || opt.file_mib % 8)
		die("router_bench.file_mib=%ld: want a multiple of 8 in 16..512", opt.file_mib);
	if (opt.max_rounds < opt.rounds)
		opt.max_rounds = opt.rounds;
	if (opt.rounds < 1 || opt.max_rounds > MAX_ROUNDS ||
	    opt.cpu_rounds < (opt.cpuonly ? 2 : 0) ||
	    opt.cpu_rounds > 4 * MAX_ROUNDS || opt.cpu_rounds % 2 || opt.tmax_ms < 50)
		die("router_bench.rounds=%ld (1..%d) / cpu_rounds=%ld (even, 2..%d; 0 skips the "
		    "CPU-only check) / tmax_ms=%ld (>= 50) out of range", opt.rounds, MAX_ROUNDS,
		    opt.cpu_rounds, 4 * MAX_ROUNDS, opt.tmax_ms);
	if (opt.chunk_kib < 4 || (opt.chunk_kib & (opt.chunk_kib - 1)) || opt.chunk_kib > 4096)
		die("router_bench.chunk_kib=%ld: want a power of two in 4..4096", opt.chunk_kib);
	file_len = opt.file_mib * MiB;
	chunk = opt.chunk_kib * KiB;
}

static int sysfs_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	int ret = fd < 0 || write(fd, val, strlen(val)) < 0 ? -errno : 0;

	if (fd >= 0)
		close(fd);
	return ret;
}

static void set_mode(int m)
{
	char got[32];

	const char *k = mode_name[m == M_TOOL ? M_AUTO : m];

	if (opt.norouter)
		return;
	if (sysfs_write(MODE_PATH, k) || spin_read_file(MODE_PATH, got, sizeof(got)))
		die("cannot set %s to %s: %s", MODE_PATH, k, strerror(errno));
	/* The file may mark the current mode, e.g. "[auto] p2p pagecache". */
	if (!strstr(got, k))
		die("%s reads \"%s\" after writing %s", MODE_PATH, got, k);
}

/* --- /sys/block/<disk>/spin/stat --- */

struct counters {
	long long requests, bytes_pc, bytes_p2p, fallback, io_error;
	long long dev_reads, dev_sectors;	/* /sys/block/<disk>/stat */
};

/* The disk's reads: how many requests the device saw, and how large. */
static void read_disk_stat(struct counters *c)
{
	char path[PATH_MAX];
	long long merged;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/block/%s/stat", disk);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%lld %lld %lld", &c->dev_reads, &merged, &c->dev_sectors) != 3)
		die("%s: %s", path, f ? "unreadable" : strerror(errno));
	fclose(f);
}

static void read_counters(struct counters *c)
{
	char name[64];
	long long v;
	FILE *f = fopen(stat_path, "r");

	memset(c, 0, sizeof(*c));
	read_disk_stat(c);
	if (opt.norouter) {
		if (f)
			fclose(f);
		return;
	}
	if (!f)
		die("%s: %s", stat_path, strerror(errno));
	while (fscanf(f, "%63s %lld", name, &v) == 2) {
		if (!strcmp(name, "requests"))
			c->requests = v;
		else if (!strcmp(name, "bytes_pagecache"))
			c->bytes_pc = v;
		else if (!strcmp(name, "bytes_p2p"))
			c->bytes_p2p = v;
		else if (!strcmp(name, "fallback_io_error"))
			c->io_error = v;
		else if (!strncmp(name, "fallback_", 9))
			c->fallback += v;
	}
	fclose(f);
}

static void sub_counters(struct counters *acc, const struct counters *a, const struct counters *b)
{
	acc->requests += b->requests - a->requests;
	acc->bytes_pc += b->bytes_pc - a->bytes_pc;
	acc->bytes_p2p += b->bytes_p2p - a->bytes_p2p;
	acc->fallback += b->fallback - a->fallback;
	acc->io_error += b->io_error - a->io_error;
	acc->dev_reads += b->dev_reads - a->dev_reads;
	acc->dev_sectors += b->dev_sectors - a->dev_sectors;
}

/* --- the rig: throttling burst, residency --- */

/* QEMU's throttling burst, spent before every timed run (see bench_drain()). */
static void drain(void)
{
	int ret = bench_drain(raw_fd, dev_size, opt.bps, opt.iops, drain_buf);

	if (ret)
		die("draining the throttle: %s", strerror(-ret));
}

/*
 * Whether the chunk at @off is resident at @res percent: 25, the first chunk
 * of every four; 50, every other chunk from the first; 75, all but the last
 * of every four.
 */
static int resident_by_pattern(off_t off, int res)
{
	long i = off / chunk;

	return res == 100 || (res == 75 && i % 4 != 3) || (res == 50 && i % 2 == 0) ||
	       (res == 25 && i % 4 == 0);
}

/* Bytes after which the pattern of @res repeats. */
static size_t pattern_period(int res)
{
	return (res == 25 || res == 75 ? 4 : 2) * chunk;
}

/*
 * Make [lo, hi) of the file resident per @res (see resident_by_pattern()) and
 * the rest of the file not resident.
 */
static void set_residency(int res, off_t lo, off_t hi)
{
	int ret = posix_fadvise(setup_fd, 0, 0, POSIX_FADV_DONTNEED);

	if (ret)
		die("POSIX_FADV_DONTNEED: %s", strerror(ret));
	if (!res)
		return;
	for (off_t off = lo - lo % chunk; off < hi; off += chunk)
		if (resident_by_pattern(off, res) &&
		    pread(setup_fd, host, chunk, off) != (ssize_t)chunk)
			die("populating the page cache: %s", strerror(errno));
}

/* Percentage of the pages of [lo, hi) in the page cache (mincore()). */
/* mincore() of the file's pages [lo, hi), malloc()'ed: bit 0 set if resident. */
static unsigned char *resident_pages(off_t lo, off_t hi)
{
	unsigned char *vec = malloc((hi - lo) / 4096);
	void *p = mmap(NULL, hi - lo, PROT_READ, MAP_SHARED, setup_fd, lo);

	if (!vec || p == MAP_FAILED || mincore(p, hi - lo, vec))
		die("mincore: %s", strerror(errno));
	munmap(p, hi - lo);
	return vec;
}

static double residency(off_t lo, off_t hi)
{
	size_t pages = (hi - lo) / 4096, in = 0;
	unsigned char *vec = resident_pages(lo, hi);

	for (size_t i = 0; i < pages; i++)
		in += vec[i] & 1;
	free(vec);
	return 100.0 * in / pages;
}

static double median(const double *v, int n)
{
	return bench_median(v, n);
}

static double vmin(const double *v, int n)
{
	double m = v[0];

	for (int i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

static double vmax(const double *v, int n)
{
	double m = v[0];

	for (int i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

static double vsum(const double *v, int n)
{
	double m = 0;

	for (int i = 0; i < n; i++)
		m += v[i];
	return m;
}

static unsigned long long rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rng(void)
{
	return bench_rng(&rng_state);
}

/* --- 1. the CPU-only check --- */

enum { C_CACHED_4K, C_CACHED_1M, C_UNCACHED_4K, C_UNCACHED_1M, NCPU };
static const char *const cpu_name[NCPU] = { "cached-4k", "cached-1m", "uncached-4k",
					    "uncached-1m" };

/* MB/s of buffered reads of the whole file into host memory, @passes times. */
static double host_rate(size_t bs, int cached, int passes)
{
	double t0, t;
	int fd;

	if (cached) {
		set_residency(100, 0, file_len);
	} else {
		set_residency(0, 0, 0);
		drain();
	}
	fd = open(PATH, O_RDONLY);
	if (fd < 0)
		die("open %s: %s", PATH, strerror(errno));
	t0 = bench_now();
	for (int p = 0; p < passes; p++)
		for (size_t off = 0; off < file_len; off += bs)
			if (pread(fd, host + off % HOST_LEN, bs, off) != (ssize_t)bs)
				die("pread into host memory: %s", strerror(errno));
	t = bench_now() - t0;
	close(fd);
	return (double)file_len * passes / t / 1e6;
}

struct gpu_buf {
	int fd;
	uint8_t *p;
};

static int gpu_buf_get(struct gpu_buf *b, size_t len)
{
	int heap = spin_heap_open(gpu_dir);

	b->fd = heap < 0 ? -1 : spin_heap_alloc(heap, len, O_RDWR | O_CLOEXEC, 0);
	if (heap >= 0)
		close(heap);
	if (b->fd < 0) {
		errno = heap < 0 ? errno : -b->fd;
		return -1;
	}
	b->p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
	if (b->p == MAP_FAILED) {
		close(b->fd);
		return -1;
	}
	memset(b->p, 0, len);	/* fault it all in */
	return 0;
}

/*
 * The rounds run in two children forked alike: "off" never maps GPU memory
 * (MMF_P2PDMA is never set in it, so the router costs it one bit test per
 * read), "on" maps a 2 MiB GPU buffer first (every read's destination is then
 * looked at). Each allocates and faults in its own host buffer after the
 * fork, at the same address, so that neither inherits the other's page tables. A
 * child measures a round when asked and writes back the four rates.
 */
struct server {
	int cmd, res;
	pid_t pid;
};

static void server_start(struct server *sv, int map_gpu)
{
	int cmd[2], res[2];

	if (pipe(cmd) || pipe(res))
		die("pipe: %s", strerror(errno));
	sv->pid = fork();
	if (sv->pid < 0)
		die("fork: %s", strerror(errno));
	if (sv->pid == 0) {
		struct gpu_buf b;
		double r[NCPU];
		char c;

		close(cmd[1]);
		close(res[0]);
		/*
		 * The same buffer in every child and every kernel: the same
		 * virtual address (the emulator's TLB is indexed by it, which
		 * moves large copies by several percent) and 4 KiB pages
		 * (where the kernel has huge pages at all).
		 */
		host = mmap((void *)HOST_ADDR, HOST_LEN, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (host != (void *)HOST_ADDR)
			die("host buffer at %#lx: %s", HOST_ADDR, strerror(errno));
		madvise(host, HOST_LEN, MADV_NOHUGEPAGE);
		memset(host, 1, HOST_LEN);
		if (map_gpu && gpu_buf_get(&b, 2 * MiB))
			die("allocating a GPU buffer for the on rounds: %s", strerror(errno));
		while (read(cmd[0], &c, 1) == 1 && c == 'r') {
			r[C_CACHED_4K] = host_rate(4096, 1, 2);
			r[C_CACHED_1M] = host_rate(MiB, 1, 2);
			r[C_UNCACHED_4K] = host_rate(4096, 0, 1);
			r[C_UNCACHED_1M] = host_rate(MiB, 0, 1);
			if (write(res[1], r, sizeof(r)) != (ssize_t)sizeof(r))
				_exit(1);
		}
		_exit(0);
	}
	close(cmd[0]);
	close(res[1]);
	sv->cmd = cmd[1];
	sv->res = res[0];
}

static void server_round(struct server *sv, double r[NCPU])
{
	char c = 'r';

	if (write(sv->cmd, &c, 1) != 1 || read(sv->res, r, NCPU * sizeof(*r)) !=
	    (ssize_t)(NCPU * sizeof(*r)))
		die("a CPU-only child failed");
}

static void server_stop(struct server *sv)
{
	char c = 'q';

	/* A word, not EOF: the other child holds a copy of this pipe's end. */
	if (write(sv->cmd, &c, 1) != 1)
		die("stopping a CPU-only child: %s", strerror(errno));
	close(sv->cmd);
	close(sv->res);
	waitpid(sv->pid, NULL, 0);
}

/*
 * Rounds go off, on, on, off, off, on, ...: every pair of rounds (2p, 2p + 1)
 * has one of each, and the ratio is the median of the pairs' ratios, which
 * cancels slow drift of the emulator; its spread is printed. Without a heap
 * (a kernel without spin), only "off", in the same kind of child, so that a
 * boot of this kernel and one of a CONFIG_SPIN=n kernel compare alike
 * (make bench-cpu).
 */
static void cpu_check(int have_heap)
{
	double rate[NCPU][4 * MAX_ROUNDS], ratio[NCPU][2 * MAX_ROUNDS];
	int key_of[4 * MAX_ROUNDS];
	struct server sv[2];

	printf("# [%4.0f s] CPU-only check: buffered reads into host memory, %ld rounds, "
	       "%s\n", elapsed(), opt.cpu_rounds,
	       have_heap ? "off (a process that never mapped GPU memory) / on (a process with "
	       "a GPU buffer mapped)" : "no spin");
	/*
	 * Warm-up, not counted: the first rounds after boot run slower (QEMU
	 * allocates guest RAM on first touch, TCG translates code anew).
	 */
	for (int r = 0; r < 3; r++) {
		host_rate(4096, 1, 1);
		host_rate(MiB, 1, 1);
		host_rate(MiB, 0, 1);
	}
	server_start(&sv[0], 0);
	if (have_heap)
		server_start(&sv[1], 1);
	printf("# [%4.0f s] CPU-only check: warmed up\n", elapsed());
	for (int r = 0; r < opt.cpu_rounds; r++) {
		int key = have_heap ? ((r + 1) / 2) % 2 : 0;
		double v[NCPU];

		key_of[r] = key;
		server_round(&sv[key], v);
		for (int t = 0; t < NCPU; t++)
			rate[t][r] = v[t];
		printf("# [%4.0f s] CPU-only round %d/%ld %s: %.0f %.0f %.0f %.0f MB/s\n",
		       elapsed(), r + 1, opt.cpu_rounds, key ? "on " : "off",
		       rate[0][r], rate[1][r], rate[2][r], rate[3][r]);
	}
	server_stop(&sv[0]);
	if (have_heap)
		server_stop(&sv[1]);
	for (int t = 0; t < NCPU; t++) {
		double v[2][4 * MAX_ROUNDS];
		int n[2] = { 0, 0 }, np = opt.cpu_rounds / 2;

		for (int r = 0; r < opt.cpu_rounds; r++)
			v[key_of[r]][n[key_of[r]]++] = rate[t][r];
		for (int p = 0; p < np && n[1]; p++) {
			int on = key_of[2 * p] ? 2 * p : 2 * p + 1;

			ratio[t][p] = rate[t][on] / rate[t][4 * p + 1 - on];
		}
		printf("rb-cpu test=%s kernel=%s off=%.2f off_min=%.2f off_max=%.2f n_off=%d",
		       cpu_name[t], have_heap ? "spin" : "nospin", median(v[0], n[0]),
		       vmin(v[0], n[0]), vmax(v[0], n[0]), n[0]);
		if (n[1])
			printf(" on=%.2f on_min=%.2f on_max=%.2f n_on=%d ratio=%.4f ratio_min=%.4f "
			       "ratio_max=%.4f", median(v[1], n[1]), vmin(v[1], n[1]),
			       vmax(v[1], n[1]), n[1], median(ratio[t], np), vmin(ratio[t], np),
			       vmax(ratio[t], np));
		printf("\n");
		if (n[1]) {
			/* Every pair's on / off, for reports that pool boots. */
			printf("rb-cpu-pairs test=%s ratios=", cpu_name[t]);
			for (int p = 0; p < np; p++)
				printf("%s%.4f", p ? "," : "", ratio[t][p]);
			printf("\n");
		}
	}
}

/* --- 2. the cost model --- */

static const char *const model_attr[] = { "s_cutoff", "c_p2p_ns", "bw_p2p", "bw_pc" };

static void read_model(long long v[4])
{
	static const long long defaults[4] = { 131072, 80000, 6500000000LL, 10000000000LL };
	char path[PATH_MAX];

	for (int i = 0; i < 4; i++) {
		if (opt.norouter) {
			v[i] = defaults[i];
			continue;
		}
		snprintf(path, sizeof(path), "/sys/block/%s/spin/%s", disk, model_attr[i]);
		v[i] = spin_read_ll(path);
		if (v[i] < 0)
			die("%s is missing or unreadable", path);
	}
}

static void write_model(const long long v[4])
{
	/* Every step keeps the set consistent: c_p2p_ns >= s_cutoff / bw_p2p. */
	static const int order[] = { 1, 0, 2, 3, 1 };
	char path[PATH_MAX], val[32];

	for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
		int a = order[i];
		long long x = i == 0 ? 1000000000LL : v[a];
		int ret;

		snprintf(path, sizeof(path), "/sys/block/%s/spin/%s", disk, model_attr[a]);
		snprintf(val, sizeof(val), "%lld", x);
		ret = sysfs_write(path, val);
		if (ret)
			die("writing %s to %s: %s", val, path, strerror(-ret));
	}
}

/* Writes @v to the disk's model and checks that it reads back. */
static void write_model_checked(const long long v[4])
{
	long long got[4];

	write_model(v);
	read_model(got);
	for (int i = 0; i < 4; i++)
		if (got[i] != v[i])
			die("%s reads %lld after writing %lld", model_attr[i], got[i], v[i]);
}

/* Median seconds per call of reads of @s bytes at random aligned offsets. */
static double call_time(int mode, size_t s, int calls, int res)
{
	double t[64];
	int fd;

	calls = calls > 64 ? 64 : calls;
	set_residency(res, 0, file_len);
	drain();
	set_mode(mode);
	fd = open(PATH, O_RDONLY);
	if (fd < 0)
		die("open %s: %s", PATH, strerror(errno));
	for (int i = 0; i < calls; i++) {
		off_t off = (off_t)(rng() % (file_len / s)) * s;
		double t0 = bench_now();

		if (pread(fd, gpu + off % DST_MOD, s, off) != (ssize_t)s)
			die("pread %zu B into GPU memory (%s mode): %s", s, mode_name[mode],
			    strerror(errno));
		t[i] = bench_now() - t0;
	}
	close(fd);
	return median(t, calls);
}

/*
 * Fit SPIN's model to the rig. P2P: T(s) = C below S, C + (s - S) / BW above.
 * BW is the slope between 256 KiB and 4 MiB, the line's intercept
 * a = T(4M) - 4M / BW, C = T(4 KiB) and S where the line reaches C:
 * S = (C - a) * BW, so C >= S / BW holds (if a > C: S = 0, C = a).
 * Page cache: BW_pc from cached 1 MiB copies into GPU memory.
 */
static void calibrate(void)
{
	static const size_t sz[] = { 4096, 16384, 65536, 262144, MiB, 4 * MiB };
	static const int calls[] = { 32, 32, 16, 16, 8, 8 };
	enum { NSZ = ARRAY_SIZE(sz), S256K = 3, S4M = 5 };
	double t[NSZ][3], tm[NSZ], pc[3], bw, a, c, s, bw_pc;
	struct counters c0, c1, d = { 0 };
	long long old[4], fit[4];

	read_model(old);
	if (have_fit) {
		/*
		 * The fit of an earlier run (make bench-router's instruction-counted
		 * boot takes the timed boot's: p2p mode's times mean nothing there).
		 */
		printf("rb-calib");
		for (int i = 0; i < 4; i++)
			printf(" default_%s=%lld fit_%s=%lld", model_attr[i], old[i],
			       model_attr[i], given_fit[i]);
		printf(" used=given\n");
		if (!opt.norouter)
			write_model_checked(given_fit);
		return;
	}
	printf("# [%4.0f s] fitting the cost model to the rig (p2p and pagecache modes)\n",
	       elapsed());
	read_counters(&c0);
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < NSZ; i++)
			t[i][r] = call_time(M_P2P, sz[i], calls[i], 0);
		set_residency(100, 0, file_len);
		set_mode(M_PC);
		{
			int fd = open(PATH, O_RDONLY);
			double t0 = bench_now();

			for (size_t off = 0; off < file_len; off += MiB)
				if (pread(fd, gpu + off % DST_MOD, MiB, off) != (ssize_t)MiB)
					die("pread 1 MiB into GPU memory (pagecache mode): %s",
					    strerror(errno));
			pc[r] = file_len / (bench_now() - t0);
			close(fd);
		}
	}
	read_counters(&c1);
	sub_counters(&d, &c0, &c1);
	if (d.bytes_p2p <= 0 && !opt.norouter)
		die("p2p mode moved no byte by P2P (bytes_p2p +%lld, bytes_pagecache +%lld, "
		    "fallbacks +%lld): reads into GPU memory are not routed", d.bytes_p2p,
		    d.bytes_pc, d.fallback);
	for (int i = 0; i < NSZ; i++)
		tm[i] = median(t[i], 3);
	bw_pc = median(pc, 3);
	bw = (double)(sz[S4M] - sz[S256K]) / (tm[S4M] - tm[S256K]);
	if (!(bw > 0))
		bw = sz[S4M] / tm[S4M];
	a = tm[S4M] - sz[S4M] / bw;
	a = a > 0 ? a : 0;
	c = tm[0];
	s = c > a ? (c - a) * bw : 0;
	c = c > a ? c : a;
	fit[0] = s > 16.0 * MiB ? (long long)(16 * MiB) : (long long)s;	/* rounded down */
	fit[1] = (long long)(c * 1e9) + 1;			/* rounded up */
	fit[2] = (long long)bw + 1;
	fit[3] = (long long)bw_pc;
	for (int i = 2; i < 4; i++)
		fit[i] = fit[i] < 1000000 ? 1000000 : fit[i];
	printf("rb-calib");
	for (int i = 0; i < NSZ; i++)
		printf(" t_p2p_%zu=%.1f", sz[i], tm[i] * 1e6);
	printf(" bw_pc_meas=%.0f", bw_pc);
	for (int i = 0; i < 4; i++)
		printf(" default_%s=%lld fit_%s=%lld", model_attr[i], old[i], model_attr[i],
		       fit[i]);
	printf(" used=%s\n", opt.model_default || opt.norouter ? "default" :
	       opt.model_tool ? "tool" : opt.model_both ? "both" : "fit");
	printf("# cost model: s_cutoff %lld -> %lld B, c_p2p %lld -> %lld ns, bw_p2p %lld -> "
	       "%lld B/s, bw_pc %lld -> %lld B/s (%s)\n", old[0], fit[0], old[1], fit[1],
	       old[2], fit[2], old[3], fit[3],
	       opt.model_default ? "kept the kernel's defaults" :
	       opt.model_tool ? "not used: spin calibrate --apply decides" :
	       opt.model_both ? "auto uses it, tool uses spin calibrate --apply's" :
	       "written to sysfs");
	if ((opt.model_tool || opt.model_both) && !opt.norouter) {
		char cmd[PATH_MAX + 64], line[512];
		long long got[4];
		FILE *f;
		int st;

		/* The user tool's fit instead of the bench's (model=tool or both). */
		set_mode(M_AUTO);
		drain();
		snprintf(cmd, sizeof(cmd), "/usr/bin/spin calibrate %s --apply 2>&1", PATH);
		f = popen(cmd, "r");
		if (!f)
			die("%s: %s", cmd, strerror(errno));
		while (fgets(line, sizeof(line), f))
			printf("# spin calibrate: %s", line);
		st = pclose(f);
		if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st))
			die("%s failed", cmd);
		read_model(got);
		printf("rb-calib-tool");
		for (int i = 0; i < 4; i++)
			printf(" %s=%lld", model_attr[i], got[i]);
		printf("\n");
		memcpy(tool_model, got, sizeof(tool_model));
	}
	if (opt.model_both && !opt.norouter) {
		memcpy(fit_model, fit, sizeof(fit_model));
		write_model(fit);
	} else if (!opt.model_default && !opt.norouter) {
		write_model_checked(fit);
	}
}

/*
 * --- the speedometer ---
 *
 * This host's speed moves between two levels every 0.5 to 5 s (a shared
 * machine; no steal time shows), and a CPU-bound cell's rounds move with it,
 * by up to 3x for 512 B reads. So every timed run also samples the speed of
 * the kernel work it does: every REF_EVERY_S, and once before and after the
 * run, it times ref_sample(), cached 4 KiB reads into host memory spread over
 * HOST_LEN as the matrix's destinations are over DST_MOD (about REF_TARGET_S
 * when the host is fast), on the CPU that reads. The samples inside the run
 * count in its time, the same for every mode (0.2-0.4%). Each run's rate and
 * median sample go to the results ("rb-run" lines), so that a noisy cell can
 * be told from a slow path: whether a round's modes ran at one speed.
 *
 * A diagnostic, not a correction: an adjustment of the ratios by it (a line
 * of log(rate) against log(speed) per mode) was tried on the norouter
 * self-test, whose three modes are one workload, and gave 0.81 (95% interval
 * 0.72-0.96) for a 512 B cell: the samples track the host (correlation
 * 0.5-0.98 with the rates) but not closely enough to correct a ratio.
 */
#define REF_EVERY_S 0.05
#define REF_TARGET_S 0.0001
#define REF_MAX 64
#define REF_PATH MNT "/speedometer"
#define REF_LEN (64 * KiB)

static long ref_iters = 8;
static int ref_fd = -1;

/* Times ref_iters cached 4 KiB pread() calls into host memory. */
static double ref_sample(void)
{
	static unsigned long at;
	double t = bench_now();

	for (long i = 0; i < ref_iters; i++) {
		/* Destinations spread over HOST_LEN, as the matrix's over DST_MOD. */
		at = (at + 37 * 4096 + 512) % (HOST_LEN - 4096);
		if (pread(ref_fd, host + at, 4096, (i * 4096) % REF_LEN) != 4096)
			die("pread %s: %s", REF_PATH, strerror(errno));
	}
	return bench_now() - t;
}

/* Writes the speedometer's file, sizes its sample to about REF_TARGET_S. */
static void ref_calibrate(void)
{
	double best = 1e9;

	memset(host, 0x5a, REF_LEN);
	ref_fd = open(REF_PATH, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (ref_fd < 0 || pwrite(ref_fd, host, REF_LEN, 0) != REF_LEN)
		die("writing %s: %s", REF_PATH, strerror(errno));
	for (int i = 0; i < 20; i++) {
		double t = ref_sample();

		best = t < best ? t : best;
	}
	ref_iters = (long)(ref_iters * REF_TARGET_S / best);
	if (ref_iters < 4)
		ref_iters = 4;
	printf("# speedometer: %ld cached 4 KiB reads per sample, %.1f us when sized\n",
	       ref_iters, 1e6 * ref_sample());
}

/* --- 3. the matrix --- */

struct cell {
	int rnd, res;
	size_t size, n;
	off_t *offs, lo, hi;	/* what the reads touch */
	double mixed;		/* share of requests with resident and non-resident pages */
	double rate[NMODES][MAX_ROUNDS], calls[NMODES][MAX_ROUNDS], res_min, res_max;
	/* The speedometer's median sample during each run (seconds). */
	double ref_med[NMODES][MAX_ROUNDS];
	struct counters cnt[NMODES];
	int nr;			/* rounds done */
};

#define MIN_CALLS 16

static void cell_init(struct cell *c, int rnd, size_t s, int res)
{
	size_t g = s < 4096 ? 4096 : s, slots, mixed = 0;

	memset(c, 0, sizeof(*c));
	c->rnd = rnd;
	c->size = s;
	c->res = res;
	c->res_min = 101;
	c->res_max = -1;
	if (!rnd) {
		/* The whole file; measure() may stop earlier (tmax_ms). */
		c->n = file_len / s;
		c->offs = malloc(c->n * sizeof(off_t));
		for (size_t i = 0; i < c->n; i++)
			c->offs[i] = (off_t)i * s;
		c->lo = 0;
		c->hi = file_len;
	} else {
		/*
		 * Distinct slots of max(s, 4 KiB) in random order, shifted by
		 * half a slot (page-aligned) so that large reads straddle the
		 * residency chunks; below 4 KiB, one random s-aligned piece
		 * per page, so that no read finds a page an earlier one cached.
		 */
		off_t shift = (g / 2) & ~4095UL;
		size_t *perm;

		slots = file_len / g - 1;
		c->n = slots;
		perm = malloc(slots * sizeof(*perm));
		c->offs = malloc(c->n * sizeof(off_t));
		rng_state = s * 1000003 + res;
		for (size_t i = 0; i < slots; i++)
			perm[i] = i;
		for (size_t i = 0; i < c->n; i++) {
			size_t j = i + rng() % (slots - i), x = perm[j];

			perm[j] = perm[i];
			perm[i] = x;
			c->offs[i] = (off_t)x * g + shift;
			if (s < 4096)
				c->offs[i] += (rng() % (4096 / s)) * s;
		}
		free(perm);
		c->lo = 0;
		c->hi = file_len;
	}
	for (size_t i = 0; i < c->n; i++) {
		int first = resident_by_pattern(c->offs[i], res);

		for (off_t o = c->offs[i] - c->offs[i] % 4096; o < c->offs[i] + (off_t)s; o += 4096)
			if (resident_by_pattern(o, res) != first) {
				mixed++;
				break;
			}
	}
	c->mixed = (double)mixed / c->n;
}

static void check_data(const struct cell *c, int mode, int fd)
{
	off_t off = c->offs[c->n / 2];
	uint8_t *dst = gpu + off % DST_MOD;
	size_t s = c->size, w = s < 4096 ? s : 4096;
	size_t at[3] = { 0, (s / 2) & ~(w - 1), s - w };
	ssize_t bad;

	memset(dst, 0, s);
	if (pread(fd, dst, s, off) != (ssize_t)s) {
		bench_fail("%s %zu B res %d%% %s: check read: %s", c->rnd ? "random" : "seq", s, c->res,
		     mode_name[mode], strerror(errno));
		return;
	}
	for (int i = 0; i < 3; i++) {
		bad = spin_pattern_check(dst + at[i], off + at[i], w, SEED);
		if (bad >= 0) {
			bench_fail("%s %zu B res %d%% %s: GPU memory at file offset %lld holds the wrong "
			     "byte", c->rnd ? "random" : "seq", s, c->res, mode_name[mode],
			     (long long)(off + at[i] + bad));
			return;
		}
	}
}

/*
 * One timed run of @c in @mode. It stops after tmax_ms (at least MIN_CALLS
 * calls; sequential runs only where a pair of residency chunks ends, so that
 * what was read has the cell's residency).
 */
static void measure(struct cell *c, int mode, int round)
{
	double t0, t, r, tmax = opt.tmax_ms / 1e3, ref[REF_MAX], next_ref;
	struct counters a, b;
	size_t done = 0;
	int fd, nref = 0;

	/* .model=both: auto decides with the bench's fit, tool with the tool's. */
	if (opt.model_both && (mode == M_AUTO || mode == M_TOOL))
		write_model(mode == M_TOOL ? tool_model : fit_model);
	set_residency(c->res, c->lo, c->hi);
	r = residency(c->lo, c->hi);
	c->res_min = r < c->res_min ? r : c->res_min;
	c->res_max = r > c->res_max ? r : c->res_max;
	drain();
	set_mode(mode);
	fd = open(PATH, O_RDONLY);
	if (fd < 0)
		die("open %s: %s", PATH, strerror(errno));
	read_counters(&a);
	ref[nref++] = ref_sample();
	t0 = bench_now();
	next_ref = t0 + REF_EVERY_S;
	while (done < c->n) {
		off_t off = c->offs[done++];
		double now;

		if (pread(fd, gpu + off % DST_MOD, c->size, off) != (ssize_t)c->size)
			die("pread %zu B at %lld into GPU memory (%s mode): %s", c->size,
			    (long long)off, mode_name[mode], strerror(errno));
		now = bench_now();
		if (now >= next_ref && nref < REF_MAX - 1) {
			ref[nref++] = ref_sample();
			now = bench_now();
			next_ref = now + REF_EVERY_S;
		}
		if (done >= MIN_CALLS && (c->rnd || (off + c->size) % pattern_period(c->res) == 0) &&
		    now - t0 >= tmax)
			break;
	}
	t = bench_now() - t0;
	ref[nref++] = ref_sample();
	c->ref_med[mode][round] = median(ref, nref);
	read_counters(&b);
	sub_counters(&c->cnt[mode], &a, &b);
	if (b.requests == a.requests && !opt.norouter)
		die("%s mode: the router saw none of %zu reads into GPU memory (%s requests "
		    "unchanged)", mode_name[mode], c->n, stat_path);
	check_data(c, mode, fd);
	close(fd);
	c->rate[mode][round] = (double)done * c->size / t / 1e6;
	c->calls[mode][round] = done;
	printf("rb-run kind=%s size=%zu res=%d mode=%s round=%d rate=%.3f ref_us=%.2f refs=%d\n",
	       c->rnd ? "rand" : "seq", c->size, c->res, mode_name[mode], round,
	       c->rate[mode][round], 1e6 * c->ref_med[mode][round], nref);
}

static const char *kind(const struct cell *c)
{
	return c->rnd ? "rand" : "seq";
}

/*
 * The best fixed path is the mode with the higher median; auto / best is the
 * median over rounds of auto's rate over that mode's rate in the same round
 * (the three modes of a round run back to back). Taking the better of the
 * two per round instead would favour whichever was lucky.
 */
static int best_mode(const struct cell *c)
{
	return median(c->rate[M_P2P], c->nr) > median(c->rate[M_PC], c->nr) ?
	       M_P2P : M_PC;
}

static void auto_ratio(const struct cell *c, double *med, double *lo, double *hi)
{
	double r[MAX_ROUNDS];
	int b = best_mode(c);

	for (int i = 0; i < c->nr; i++)
		r[i] = c->rate[M_AUTO][i] / c->rate[b][i];
	*med = median(r, c->nr);
	*lo = vmin(r, c->nr);
	*hi = vmax(r, c->nr);
}

/* Median absolute deviation of the rounds' auto / best ratios. */
static double ratio_mad(const struct cell *c)
{
	double r[MAX_ROUNDS], med, lo, hi;
	int b = best_mode(c);

	auto_ratio(c, &med, &lo, &hi);
	for (int i = 0; i < c->nr; i++) {
		r[i] = c->rate[M_AUTO][i] / c->rate[b][i] - med;
		r[i] = r[i] < 0 ? -r[i] : r[i];
	}
	return median(r, c->nr);
}

static double p2p_share(const struct counters *k)
{
	long long all = k->bytes_p2p + k->bytes_pc;

	return all ? (double)k->bytes_p2p / all : 0;
}

static void report_cell(const struct cell *c)
{
	double r, lo, hi;

	auto_ratio(c, &r, &lo, &hi);
	printf("rb-cell kind=%s size=%zu res=%d max_calls=%zu reps=%ld mixed=%.3f res_min=%.1f "
	       "res_max=%.1f best=%s ratio=%.4f ratio_min=%.4f ratio_max=%.4f", kind(c), c->size,
	       c->res, c->n, (long)c->nr, c->mixed, c->res_min, c->res_max,
	       mode_name[best_mode(c)], r, lo, hi);
	if (nmodes == NMODES) {
		double t[MAX_ROUNDS];

		for (int i = 0; i < c->nr; i++)
			t[i] = c->rate[M_TOOL][i] / c->rate[M_AUTO][i];
		printf(" tool_ratio=%.4f tool_ratio_min=%.4f tool_ratio_max=%.4f",
		       median(t, c->nr), vmin(t, c->nr), vmax(t, c->nr));
	}
	for (int m = 0; m < nmodes; m++) {
		const struct counters *k = &c->cnt[m];
		const char *n = mode_name[m];

		printf(" %s=%.2f %s_min=%.2f %s_max=%.2f %s_calls=%.0f", n,
		       median(c->rate[m], c->nr), n, vmin(c->rate[m], c->nr), n,
		       vmax(c->rate[m], c->nr), n, median(c->calls[m], c->nr));
		printf(" %s_p2p=%lld %s_pc=%lld %s_req=%lld %s_fb=%lld %s_ioerr=%lld", n,
		       k->bytes_p2p, n, k->bytes_pc, n, k->requests, n, k->fallback, n,
		       k->io_error);
		printf(" %s_dev_reads=%lld %s_dev_kib=%lld %s_calls_all=%.0f", n, k->dev_reads, n,
		       k->dev_sectors / 2, n, vsum(c->calls[m], c->nr));
	}
	printf("\n");
}

/* --- router_bench.replay: the router's decisions, for spin-replay --- */

static const char *const replay_events[] = {
	"spin/spin_route", "spin/spin_route_segment", "spin/spin_readahead",
};

/* Prints the file's residency as runs of pages: c<N> resident, u<N> not. */
static void print_residency(void)
{
	size_t pages = file_len / 4096, run;
	unsigned char *vec = resident_pages(0, file_len);
	const char *sep = "";

	printf(" resident=");
	for (size_t i = 0; i < pages; i += run) {
		int in = vec[i] & 1;

		for (run = 1; i + run < pages && (vec[i + run] & 1) == in; run++)
			;
		printf("%s%c%zu", sep, in ? 'c' : 'u', run);
		sep = ",";
	}
	printf("\n");
	free(vec);
}

/*
 * One untimed run of @c in auto mode with the router's tracepoints on: the
 * residency when it starts, then every event of the router ("rp-ev", the
 * trace line from the event's name on), then how many reads were made.
 * Sequential cells read at least one period of the residency pattern and
 * 16 MiB, random cells at least MIN_CALLS reads and 16 MiB, at most 8192
 * reads either way.
 */
static void replay_cell(const struct cell *c, const char *name)
{
	size_t want = (16 * MiB > pattern_period(c->res) ? 16 * MiB : pattern_period(c->res)) /
		      c->size;
	size_t n = want < MIN_CALLS ? MIN_CALLS : want > 8192 ? 8192 : want;
	char line[512], *ev;
	int fd, ret, lost = 0;
	size_t events = 0;
	FILE *f;

	n = n > c->n ? c->n : n;
	set_residency(c->res, c->lo, c->hi);
	drain();
	printf("rp-cell device=%s kind=%s size=%zu res=%d", name, c->rnd ? "rand" : "seq",
	       c->size, c->res);
	print_residency();
	set_mode(M_AUTO);
	fd = open(PATH, O_RDONLY);
	if (fd < 0)
		die("open %s: %s", PATH, strerror(errno));
	ret = bench_trace_on(replay_events, ARRAY_SIZE(replay_events), 65536);
	if (ret)
		die("tracefs: %s", strerror(-ret));
	for (size_t i = 0; i < n; i++) {
		off_t off = c->offs[i];

		if (pread(fd, gpu + off % DST_MOD, c->size, off) != (ssize_t)c->size)
			die("pread %zu B at %lld into GPU memory: %s", c->size, (long long)off,
			    strerror(errno));
	}
	f = bench_trace_off(replay_events, ARRAY_SIZE(replay_events));
	if (!f)
		die("tracefs: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		lost |= bench_trace_lost(line);
		ev = line[0] == '#' ? NULL : strstr(line, " spin_");
		if (ev) {
			printf("rp-ev%s", ev);
			events++;
		}
	}
	fclose(f);
	check_data(c, M_AUTO, fd);
	close(fd);
	if (lost)
		bench_fail("replay %s %s %zu B res %d%%: the trace buffer lost events", name,
			   c->rnd ? "random" : "seq", c->size, c->res);
	printf("rp-end requests=%zu events=%zu\n", n, events);
}

/* router_bench.replay: every cell once per device model, traced. */
static void replay(const struct cell *cells, int nc)
{
	for (int d = 0; d < nreplay; d++) {
		write_model_checked(replay_dev[d].knobs);
		printf("# [%4.0f s] replay: %d cells with the cost model of %s\n", elapsed(), nc,
		       replay_dev[d].name);
		for (int i = 0; i < nc; i++)
			replay_cell(&cells[i], replay_dev[d].name);
	}
	set_mode(M_AUTO);
	if (!bench_failures)
		printf("ok %d - router_bench: %d cells traced for %d device model(s)\n",
		       ++bench_tapn, nc, nreplay);
}

static void human_size(size_t s, char *out, size_t len)
{
	if (s >= MiB)
		snprintf(out, len, "%zu MiB", s / MiB);
	else if (s >= KiB)
		snprintf(out, len, "%zu KiB", s / KiB);
	else
		snprintf(out, len, "%zu B", s);
}

int main(void)
{
	static const size_t seq_sizes[] = { 512, 4 * KiB, 16 * KiB, 64 * KiB, 128 * KiB,
					    512 * KiB, 2 * MiB, 8 * MiB };
	static const size_t rnd_sizes[] = { 512, 4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, MiB };
	enum { NSEQ = ARRAY_SIZE(seq_sizes), NRND = ARRAY_SIZE(rnd_sizes),
	       NCELL = (NSEQ + NRND) * ARRAY_SIZE(res_list) };
	static struct cell cells[NCELL];
	char cmd[512], path[PATH_MAX], ra[32], release[128] = "?";
	struct gpu_buf gbuf;
	int spin, heap, nc = 0;
	double matrix_start;

	setvbuf(stdout, NULL, _IOLBF, 0);
	t_start = bench_now();
	parse_opts();
	spin = access(MODE_PATH, F_OK) == 0;
	if (!opt.cpuonly && !opt.norouter && !spin)
		die("%s is absent: this kernel has no spin router; router_bench "
		    "measures the router and cannot run without it", MODE_PATH);
	if (spin_gpu_find(gpu_dir, sizeof(gpu_dir)) ||
	    spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev, sizeof(dev)))
		die("rig devices not found (stand-in GPU, %s)", SPIN_NVME0_SERIAL);
	snprintf(disk, sizeof(disk), "%s", strrchr(dev, '/') + 1);
	snprintf(stat_path, sizeof(stat_path), "/sys/block/%s/spin/stat", disk);
	heap = spin_heap_open(gpu_dir);
	if (heap >= 0)
		close(heap);
	if (!opt.cpuonly && !opt.norouter && access(stat_path, R_OK))
		die("%s is absent: the router does not count this disk", stat_path);
	snprintf(path, sizeof(path), "/sys/block/%s/queue/read_ahead_kb", disk);
	if (spin_read_file(path, ra, sizeof(ra)))
		snprintf(ra, sizeof(ra), "?");
	spin_read_file("/proc/sys/kernel/osrelease", release, sizeof(release));

	/* The file: pattern of seed SEED, on a fresh ext4 on spin-nvme0. */
	/*
	 * No lazy init: ext4lazyinit would zero the inode tables in the
	 * background for the first minute, competing for the CPU and the
	 * throttled disk with the first measurements.
	 */
	snprintf(cmd, sizeof(cmd), "mkdir -p " MNT " && mkfs.ext4 -q -F -E nodiscard,"
		 "lazy_itable_init=0,lazy_journal_init=0 %s && mount -t ext4 %s " MNT, dev, dev);
	if (system(cmd))
		die("no ext4 on %s (%s)", dev, SPIN_NVME0_SERIAL);
	host = malloc(HOST_LEN);
	drain_buf = spin_alloc_aligned(MiB);
	raw_fd = open(dev, O_RDONLY | O_DIRECT);
	if (!host || !drain_buf || raw_fd < 0 || ioctl(raw_fd, BLKGETSIZE64, &dev_size))
		die("setting up the file and the disk: %s", strerror(errno));
	setup_fd = bench_pattern_file(PATH, file_len, SEED, host, HOST_LEN);
	if (setup_fd < 0)
		die("writing %s: %s", PATH, strerror(errno));

	printf("rb-header kernel=%s disk=%s file_mib=%ld chunk=%zu rounds=%ld max_rounds=%ld "
	       "budget_s=%ld cpu_rounds=%ld tmax_ms=%ld ra_kb=%s bps=%lld iops=%lld max_size=%lld "
	       "only_res=%ld model=%s cpuonly=%d router=%d heap=%d norouter=%d\n", release, disk,
	       opt.file_mib, chunk, opt.rounds, opt.max_rounds, opt.budget_s, opt.cpu_rounds,
	       opt.tmax_ms, ra, opt.bps, opt.iops, opt.max_size, opt.only_res,
	       opt.model_default || opt.norouter ? "default" : opt.model_tool ? "tool" :
	       opt.model_both ? "both" : "fit",
	       opt.cpuonly, spin,
	       heap >= 0, opt.norouter);
	if (opt.norouter)
		printf("# warning: router_bench.norouter=1: a self-test of the bench; no router "
		       "is measured, the three \"modes\" are the same plain buffered read\n");
	if (!opt.bps && !opt.iops)
		printf("# warning: the disks are not throttled (router_bench.bps/iops unset): "
		       "the emulated NVMe is faster than TCG's memcpy, unlike a real SSD\n");
	if (ra_limit >= 0) {
		char v[32];

		snprintf(v, sizeof(v), "%lld", ra_limit);
		if (spin_write_file("/sys/kernel/spin/ra_partition_pages", v))
			die("router_bench.ra_limit=%s: %s", v, strerror(errno));
		printf("# warning: router_bench.ra_limit=%lld: the GPU read-ahead partition is not "
		       "its default\n", ra_limit);
	}

	/* 1. */
	if (opt.cpu_rounds)
		cpu_check(heap >= 0);
	else
		printf("# the CPU-only check is skipped (router_bench.cpu_rounds=0)\n");
	if (opt.cpuonly) {
		printf("ok %d - router_bench: CPU-only check (%s)\n", ++bench_tapn,
		       heap >= 0 ? "spin kernel" : "kernel without spin");
		return 0;
	}

	/* 2. */
	if (gpu_buf_get(&gbuf, GPU_LEN))
		die("allocating %lu MiB of GPU memory from the DMA-BUF heap of %s: %s",
		    GPU_LEN / MiB, gpu_dir, strerror(errno));
	gpu = gbuf.p;
	if (!nreplay) {
		calibrate();
		ref_calibrate();
	}

	/* 3. */
	for (int k = 0; k < NSEQ + NRND; k++) {
		size_t size = k < NSEQ ? seq_sizes[k] : rnd_sizes[k - NSEQ];

		if (opt.max_size && size > (size_t)opt.max_size)
			continue;
		for (int r = 0; r < nres; r++)
			if (opt.only_res < 0 || res_list[r] == opt.only_res)
				cell_init(&cells[nc++], k >= NSEQ, size, res_list[r]);
	}
	if (nreplay) {
		replay(cells, nc);
		return bench_failures ? 1 : 0;
	}
	printf("# [%4.0f s] matrix: %d cells x %d modes x %ld rounds (up to %ld for noisy cells "
	       "within %ld s), file %ld MiB, 50%% = alternating %zu KiB chunks\n", elapsed(), nc,
	       nmodes, opt.rounds, opt.max_rounds, opt.budget_s, opt.file_mib, chunk / KiB);
	matrix_start = elapsed();
	for (int i = 0; i < nc; i++) {
		struct cell *c = &cells[i];
		double r, lo, hi;
		char sz[32];

		double t0 = elapsed(), per_round, deadline;

		for (; c->nr < opt.rounds; c->nr++)
			for (int m = 0; m < nmodes; m++)
				measure(c, (c->nr + m) % nmodes, c->nr);
		/*
		 * More rounds for a noisy cell, while the run is ahead of its
		 * schedule: cell i may use the budget up to its share.
		 */
		per_round = (elapsed() - t0) / c->nr;
		deadline = matrix_start + (opt.budget_s - matrix_start) * (i + 1) / nc;
		while (c->nr < opt.max_rounds && ratio_mad(c) > 0.04 &&
		       elapsed() + per_round < deadline) {
			for (int m = 0; m < nmodes; m++)
				measure(c, (c->nr + m) % nmodes, c->nr);
			c->nr++;
		}
		report_cell(c);
		auto_ratio(c, &r, &lo, &hi);
		human_size(c->size, sz, sizeof(sz));
		printf("# [%4.0f s] %2d/%d %-4s %7s res %3d%%: MB/s auto %6.1f p2p %6.1f ",
		       elapsed(), i + 1, nc, kind(c), sz, c->res,
		       median(c->rate[M_AUTO], c->nr), median(c->rate[M_P2P], c->nr));
		printf("pagecache %6.1f, auto/best %.2f, auto by P2P %3.0f%%",
		       median(c->rate[M_PC], c->nr), r, 100 * p2p_share(&c->cnt[M_AUTO]));
		if (nmodes == NMODES)
			printf(", tool %6.1f (tool/auto %.2f)", median(c->rate[M_TOOL], c->nr),
			       median(c->rate[M_TOOL], c->nr) / median(c->rate[M_AUTO], c->nr));
		printf("\n");
		if (c->res_min < c->res - 5 || c->res_max > c->res + 5)
			printf("# warning: residency measured %.1f..%.1f%%, wanted %d%%\n",
			       c->res_min, c->res_max, c->res);
	}
	set_mode(M_AUTO);

	printf("\n## spin router: buffered pread() into GPU memory, MB/s (median of %ld to %ld "
	       "rounds)\n\n", opt.rounds, opt.max_rounds);
	printf("| kind | size | resident | auto | p2p | pagecache | auto / best fixed | "
	       "auto: share by P2P |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
	for (int i = 0; i < nc; i++) {
		const struct cell *c = &cells[i];
		double r, lo, hi;
		char sz[32];

		auto_ratio(c, &r, &lo, &hi);
		human_size(c->size, sz, sizeof(sz));
		printf("| %s | %s | %d%% | %.1f | %.1f | %.1f | %.2f | %.0f%% |\n",
		       c->rnd ? "random" : "sequential", sz, c->res,
		       median(c->rate[M_AUTO], c->nr), median(c->rate[M_P2P], c->nr),
		       median(c->rate[M_PC], c->nr), r, 100 * p2p_share(&c->cnt[M_AUTO]));
	}
	if (nmodes == NMODES) {
		double lg = 0, lo = 1e9, hi = 0;
		int ge = 0;

		/* Per cell: the median over rounds of tool / auto in the same round. */
		for (int i = 0; i < nc; i++) {
			const struct cell *c = &cells[i];
			double t[MAX_ROUNDS], m;

			for (int j = 0; j < c->nr; j++)
				t[j] = c->rate[M_TOOL][j] / c->rate[M_AUTO][j];
			m = median(t, c->nr);
			lg += log(m);
			lo = m < lo ? m : lo;
			hi = m > hi ? m : hi;
			ge += m >= 1.0;
		}
		printf("rb-tool cells=%d geomean=%.4f min=%.4f max=%.4f ge1=%d\n", nc,
		       exp(lg / nc), lo, hi, ge);
		printf("\n## auto with spin calibrate's fit (tool) / auto with the bench's fit\n\n"
		       "Geometric mean over %d cells of the per-cell median (over rounds) of "
		       "tool / auto in the same round: %.3f (cells from %.2f to %.2f; tool >= "
		       "auto in %d).\n", nc, exp(lg / nc), lo, hi, ge);
	}
	printf("\nEmulator figures (QEMU TCG, throttled disks): compare ratios only.\n");
	printf("# [%4.0f s] router_bench done\n", elapsed());
	if (!bench_failures)
		printf("ok %d - router_bench: %d cells measured%s\n", ++bench_tapn, nc,
		       opt.norouter ? " (norouter self-test: no router measured)" : "");
	return bench_failures ? 1 : 0;
}
