// SPDX-License-Identifier: GPL-2.0
/*
 * writer_bench: writes from GPU memory measured in one guest run.
 *
 * 1. The matrix: sequential and random writes of 4 KiB .. 8 MiB per call from
 *    GPU memory (the stand-in GPU's DMA-BUF heap, mmapped, filled from the host
 *    side) into a file on ext4 on spin-nvme0, then fsync(), each under
 *    /sys/kernel/spin/mode auto (the routed write: the aligned body by P2P)
 *    and pagecache (the CPU copies out of GPU memory, as without spin). The
 *    two modes of a cell are measured interleaved in every round; the rate is
 *    bytes / (writes + fsync): durable throughput. Sequential writes go to a
 *    new file; random ones to aligned offsets of a preallocated, written
 *    file. Each measurement drains QEMU's throttling burst first and records
 *    the deltas of /sys/block/<disk>/spin/stat.
 * 2. A checkpoint: 256 MiB from GPU memory in 8 MiB pwrite() calls into a new
 *    file, then fsync(), under auto and pagecache, beside the same from host
 *    memory with O_DIRECT (what a checkpoint that stages through host memory
 *    pays at best).
 * 3. What the exclusion of a routed write costs: one and two threads writing
 *    disjoint halves of the random writes' file from GPU memory, in 64 KiB and
 *    1 MiB calls, routed (auto: one direct write each, holding the
 *    filesystem's I/O lock exclusively until it completes, as a buffered
 *    write holds it) and with O_DIRECT (upstream's P2P path, which takes the
 *    lock shared for an overwrite, so two writers overlap). And an unaligned
 *    write (1 MiB at an offset 1000 bytes past a block): routed writes go
 *    whole, so it goes through the page cache in auto as in pagecache mode.
 * Every measurement's file is checked afterwards by CPU reads after
 * drop_caches ("not ok" on a wrong byte).
 *
 * Output (stdout is the results channel in bench mode): "wb-*" key=value
 * lines, "# ..." progress lines, Markdown tables with the ratio auto /
 * pagecache per cell, and numbered TAP lines.
 *
 * Options on the kernel command line (vm.py --append): writer_bench.rounds
 * (3), .tmax_ms (1500: a timed run stops after this, at a call boundary),
 * .bps and .iops (the QEMU throttling, to drain its burst; the Makefile
 * passes them).
 *
 * Emulator figures (QEMU TCG): the stand-in GPU's BAR is host RAM, so the
 * CPU copy out of it runs at memcpy speed; on a real GPU it runs at tens of
 * MB/s (SPIN section 5.2). Compare ratios only, and read them as what the P2P
 * path costs here, not what it gains on a GPU.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_lib.h"
#include "spin_lib.h"

#define KiB (1UL << 10)
#define MiB (1UL << 20)
#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif
#define GPU_LEN (64 * MiB)
#define HOST_LEN (64 * MiB)
#define FILE_LEN (64 * MiB)	/* random writes' file; sequential runs' cap */
#define CKPT_LEN (256 * MiB)
#define SEED 0x77e1ULL
#define MNT "/mnt/writer_bench"
#define MODE_PATH "/sys/kernel/spin/mode"
#define MAX_ROUNDS 9

enum { M_AUTO, M_PC, NMODES };
static const char *const mode_name[NMODES] = { "auto", "pagecache" };

static struct {
	long rounds, tmax_ms;
	long long bps, iops;
} opt = { 3, 1500, 0, 0 };

static char gpu_dir[PATH_MAX], dev[64], disk[64], stat_path[PATH_MAX];
static int raw_fd = -1;
static uint8_t *host, *chk, *drain_buf, *gmem;
static long long dev_size;
static double t_start;

__printf(1, 2) static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bench_vdie("writer_bench", t_start, NULL, fmt, ap);
	va_end(ap);
}

static void set_mode(int m)
{
	if (spin_write_file(MODE_PATH, mode_name[m]))
		die("%s <- %s: %s", MODE_PATH, mode_name[m], strerror(errno));
}

/* QEMU's throttling burst, spent before a timed run (see bench_drain()). */
static void drain(void)
{
	int ret = bench_drain(raw_fd, dev_size, opt.bps, opt.iops, drain_buf);

	if (ret)
		die("draining the throttle: %s", strerror(-ret));
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int drop_caches(void)
{
	sync();
	return spin_write_file("/proc/sys/vm/drop_caches", "3");
}

/*
 * Check the file's first @len bytes by CPU reads after drop_caches: every
 * 64 MiB holds the pattern of offsets 0 .. 64 MiB (the sources repeat).
 */
static int file_check(int fd, size_t len, const char *what)
{
	if (fd < 0 || drop_caches()) {
		bench_fail("%s: cannot check: %s", what, strerror(errno));
		return -1;
	}
	for (size_t off = 0; off < len; off += GPU_LEN) {
		size_t n = len - off < GPU_LEN ? len - off : GPU_LEN;
		ssize_t bad;

		if (pread(fd, chk, n, off) != (ssize_t)n) {
			bench_fail("%s: read back: %s", what, strerror(errno));
			return -1;
		}
		bad = spin_pattern_check(chk, 0, n, SEED);
		if (bad >= 0) {
			bench_fail("%s: byte %zu of the file is wrong", what, off + bad);
			return -1;
		}
	}
	return 0;
}

struct cell {
	size_t size;
	int rnd;
	double rate[NMODES][MAX_ROUNDS];	/* MB/s */
	long long p2p[NMODES], pc[NMODES];	/* bytes by path, all rounds */
};

/*
 * One measurement: writes of c->size from GPU memory (source congruent to the
 * file offset modulo GPU_LEN), sequential from 0 or at random aligned offsets
 * of the preallocated file, for at most tmax_ms, then fsync. Returns MB/s.
 */
static double measure(struct cell *c, int mode, const char *path)
{
	int fd, flags = O_RDWR | (c->rnd ? 0 : O_CREAT | O_TRUNC);
	long long p2p0, pc0;
	size_t done = 0, slots = FILE_LEN / c->size;
	double t0, t;

	set_mode(mode);
	fd = open(path, flags, 0644);
	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	drain();
	p2p0 = spin_stat_get(stat_path, "write_bytes_p2p");
	pc0 = spin_stat_get(stat_path, "write_bytes_pagecache");
	t0 = bench_now();
	do {
		off_t off = c->rnd ? (off_t)((rng() % slots) * c->size) : (off_t)done;

		if (pwrite(fd, gmem + off % GPU_LEN, c->size, off) != (ssize_t)c->size)
			die("pwrite %zu at %lld: %s", c->size, (long long)off, strerror(errno));
		done += c->size;
	} while (done < FILE_LEN && (bench_now() - t0) * 1000 < opt.tmax_ms);
	if (fsync(fd))
		die("fsync: %s", strerror(errno));
	t = bench_now() - t0;
	c->p2p[mode] += spin_stat_get(stat_path, "write_bytes_p2p") - p2p0;
	c->pc[mode] += spin_stat_get(stat_path, "write_bytes_pagecache") - pc0;
	if (!c->rnd)
		file_check(fd, done, path);
	close(fd);
	return done / t / 1e6;
}

static void human(size_t s, char *out, size_t len)
{
	if (s >= MiB)
		snprintf(out, len, "%zu MiB", s / MiB);
	else
		snprintf(out, len, "%zu KiB", s / KiB);
}

static double checkpoint(int kind, const char *path)
{
	static const char *const names[] = { "auto", "pagecache", "O_DIRECT from host" };
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | (kind == 2 ? O_DIRECT : 0), 0644);
	double t0, t;

	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	if (kind < 2)
		set_mode(kind);
	drain();
	t0 = bench_now();
	for (size_t off = 0; off < CKPT_LEN; off += 8 * MiB) {
		uint8_t *src = kind == 2 ? host + off % HOST_LEN : gmem + off % GPU_LEN;

		if (pwrite(fd, src, 8 * MiB, off) != (ssize_t)(8 * MiB))
			die("checkpoint (%s): pwrite at %zu: %s", names[kind], off,
			    strerror(errno));
	}
	if (fsync(fd))
		die("checkpoint: fsync: %s", strerror(errno));
	t = bench_now() - t0;
	close(fd);
	fd = open(path, O_RDONLY);
	file_check(fd, CKPT_LEN, names[kind]);
	close(fd);
	return CKPT_LEN / t / 1e6;
}

/* One writer of parallel(): sequential writes over its own part of the file. */
struct par {
	int fd;
	size_t size;
	off_t base, span;
	double t0;
	size_t done;
	int err;
};

static void *par_writer(void *arg)
{
	struct par *w = arg;
	off_t at = 0;

	do {
		off_t off = w->base + at;

		if (pwrite(w->fd, gmem + off % GPU_LEN, w->size, off) != (ssize_t)w->size) {
			w->err = errno ? errno : EIO;
			break;
		}
		w->done += w->size;
		at = (at + w->size) % w->span;
	} while ((bench_now() - w->t0) * 1000 < opt.tmax_ms);
	return NULL;
}

/*
 * @nw threads write @size-byte calls from GPU memory into disjoint parts of
 * the random writes' file for tmax_ms, then fsync: routed (@direct 0, auto
 * mode) or O_DIRECT (@direct 1, not routed). Returns MB/s.
 */
static double parallel(int nw, int direct, size_t size, const char *path)
{
	struct par w[2];
	pthread_t t[2];
	size_t done = 0;
	double t0;
	int fd;

	set_mode(M_AUTO);
	fd = open(path, O_RDWR | (direct ? O_DIRECT : 0));
	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	drain();
	t0 = bench_now();
	for (int i = 0; i < nw; i++) {
		w[i] = (struct par){ .fd = fd, .size = size, .base = i * (FILE_LEN / nw),
				     .span = FILE_LEN / nw, .t0 = t0 };
		if (pthread_create(&t[i], NULL, par_writer, &w[i]))
			die("pthread_create: %s", strerror(errno));
	}
	for (int i = 0; i < nw; i++) {
		pthread_join(t[i], NULL);
		if (w[i].err)
			die("writer %d of %d: %s", i, nw, strerror(w[i].err));
		done += w[i].done;
	}
	if (fsync(fd))
		die("fsync: %s", strerror(errno));
	close(fd);
	return done / (bench_now() - t0) / 1e6;
}

/* Writes of 1 MiB from GPU memory at 1000 bytes past each MiB: MB/s in @mode. */
static double unaligned(int mode, const char *path, long long *p2p)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	long long p0;
	size_t done = 0;
	double t0;

	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	set_mode(mode);
	drain();
	p0 = spin_stat_get(stat_path, "write_bytes_p2p");
	t0 = bench_now();
	do {
		off_t off = done + 1000;

		if (pwrite(fd, gmem + off % GPU_LEN, MiB, off) != (ssize_t)MiB)
			die("pwrite of 1 MiB at %lld: %s", (long long)off, strerror(errno));
		done += MiB;
	} while (done < FILE_LEN - MiB && (bench_now() - t0) * 1000 < opt.tmax_ms);
	if (fsync(fd))
		die("fsync: %s", strerror(errno));
	*p2p += spin_stat_get(stat_path, "write_bytes_p2p") - p0;
	close(fd);
	return done / (bench_now() - t0) / 1e6;
}

int main(void)
{
	static const size_t sizes[] = { 4 * KiB, 64 * KiB, MiB, 8 * MiB };
	static struct cell cells[2 * ARRAY_SIZE(sizes)];
	double ck[3][MAX_ROUNDS], par[2][2][2][MAX_ROUNDS], un[NMODES][MAX_ROUNDS];
	static const size_t par_sizes[] = { 64 * KiB, MiB };
	long long un_p2p[NMODES] = { 0 };
	char cmd[512], release[128] = "?", seqp[] = MNT "/seq", rndp[] = MNT "/rnd",
	     ckp[] = MNT "/ckpt";
	int heap, buf, fd, nc = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	t_start = bench_now();
	opt.rounds = bench_opt_ll("writer_bench", "rounds", opt.rounds);
	opt.tmax_ms = bench_opt_ll("writer_bench", "tmax_ms", opt.tmax_ms);
	opt.bps = bench_opt_ll("writer_bench", "bps", opt.bps);
	opt.iops = bench_opt_ll("writer_bench", "iops", opt.iops);
	if (opt.rounds < 1 || opt.rounds > MAX_ROUNDS || opt.tmax_ms < 50)
		die("writer_bench.rounds=%ld (1..%d) / tmax_ms=%ld (>= 50) out of range",
		    opt.rounds, MAX_ROUNDS, opt.tmax_ms);
	if (access(MODE_PATH, F_OK))
		die("%s is absent: this kernel has no spin router", MODE_PATH);
	if (spin_gpu_find(gpu_dir, sizeof(gpu_dir)) ||
	    spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev, sizeof(dev)))
		die("rig devices not found (stand-in GPU, %s)", SPIN_NVME0_SERIAL);
	snprintf(disk, sizeof(disk), "%s", strrchr(dev, '/') + 1);
	snprintf(stat_path, sizeof(stat_path), "/sys/block/%s/spin/stat", disk);
	spin_read_file("/proc/sys/kernel/osrelease", release, sizeof(release));
	snprintf(cmd, sizeof(cmd), "mkdir -p " MNT " && mkfs.ext4 -q -F -E nodiscard,"
		 "lazy_itable_init=0,lazy_journal_init=0 %s && mount -t ext4 %s " MNT, dev, dev);
	if (system(cmd))
		die("no ext4 on %s (%s)", dev, SPIN_NVME0_SERIAL);
	gmem = spin_gpu_buffer(gpu_dir, GPU_LEN, &heap, &buf);
	host = spin_alloc_aligned(HOST_LEN);
	chk = malloc(GPU_LEN);
	drain_buf = spin_alloc_aligned(MiB);
	raw_fd = open(dev, O_RDONLY | O_DIRECT);
	if (gmem == MAP_FAILED || !host || !chk || !drain_buf || raw_fd < 0 ||
	    ioctl(raw_fd, BLKGETSIZE64, &dev_size))
		die("setting up GPU memory and the disk: %s", strerror(errno));
	/* GPU memory holds the pattern of file offsets 0 .. GPU_LEN, put there by the host. */
	if (spin_gpu_fill(gpu_dir, gmem, GPU_LEN, SEED, 0))
		die("filling GPU memory from the host side failed");
	spin_pattern_fill(host, 0, HOST_LEN, SEED);
	/* The random writes' file: written and synced once. */
	fd = open(rndp, O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (size_t off = 0; fd >= 0 && off < FILE_LEN; off += HOST_LEN)
		if (pwrite(fd, host, HOST_LEN, off) != (ssize_t)HOST_LEN)
			die("writing %s: %s", rndp, strerror(errno));
	if (fd < 0 || fsync(fd))
		die("%s: %s", rndp, strerror(errno));
	close(fd);

	printf("wb-header kernel=%s disk=%s rounds=%ld tmax_ms=%ld bps=%lld iops=%lld\n",
	       release, disk, opt.rounds, opt.tmax_ms, opt.bps, opt.iops);
	if (!opt.bps && !opt.iops)
		printf("# warning: the disks are not throttled (writer_bench.bps/iops unset)\n");

	for (int rnd = 0; rnd < 2; rnd++)
		for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
			struct cell *c = &cells[nc++];

			c->size = sizes[i];
			c->rnd = rnd;
			for (int r = 0; r < opt.rounds; r++)
				for (int k = 0; k < NMODES; k++) {
					/* Alternate which mode goes first. */
					int m = (k + r) % NMODES;

					c->rate[m][r] = measure(c, m, rnd ? rndp : seqp);
				}
			printf("# %s %zu done at %.0f s\n", rnd ? "random" : "sequential", c->size,
			       bench_now() - t_start);
		}
	for (int r = 0; r < opt.rounds; r++)
		for (int k = 0; k < 3; k++) {
			int kind = (k + r) % 3;

			ck[kind][r] = checkpoint(kind, ckp);
		}
	for (int r = 0; r < opt.rounds; r++) {
		for (int s = 0; s < 2; s++)
			for (int nw = 1; nw <= 2; nw++)
				for (int k = 0; k < 2; k++) {
					int direct = (k + r) % 2;

					par[s][nw - 1][direct][r] =
						parallel(nw, direct, par_sizes[s], rndp);
				}
		for (int k = 0; k < NMODES; k++) {
			int m = (k + r) % NMODES;

			un[m][r] = unaligned(m, seqp, &un_p2p[m]);
		}
	}
	printf("# exclusion and unaligned cells done at %.0f s\n", bench_now() - t_start);
	set_mode(M_AUTO);
	fd = open(rndp, O_RDONLY);
	file_check(fd, FILE_LEN, rndp);
	close(fd);

	printf("\n## Writes from GPU memory: write + fsync, MB/s (median of %ld rounds)\n\n",
	       opt.rounds);
	printf("| pattern | size | auto | pagecache | auto / pagecache | P2P share (auto) |\n");
	printf("|---|---|---|---|---|---|\n");
	for (int i = 0; i < nc; i++) {
		struct cell *c = &cells[i];
		double a = bench_median(c->rate[M_AUTO], opt.rounds);
		double p = bench_median(c->rate[M_PC], opt.rounds);
		long long tot = c->p2p[M_AUTO] + c->pc[M_AUTO];
		char sz[32];

		human(c->size, sz, sizeof(sz));
		printf("| %s | %s | %.1f | %.1f | %.2f | %.2f |\n", c->rnd ? "random" : "sequential",
		       sz, a, p, a / p, tot ? (double)c->p2p[M_AUTO] / tot : 0);
		printf("wb-cell pattern=%s size=%zu auto=%.2f pagecache=%.2f ratio=%.3f "
		       "p2p_auto=%lld pc_auto=%lld p2p_pagecache=%lld\n",
		       c->rnd ? "random" : "sequential", c->size, a, p, a / p, c->p2p[M_AUTO],
		       c->pc[M_AUTO], c->p2p[M_PC]);
		if (c->p2p[M_PC])
			bench_fail("%s %zu: pagecache mode wrote %lld bytes by P2P",
			     c->rnd ? "random" : "sequential", c->size, c->p2p[M_PC]);
		if (c->pc[M_AUTO])
			bench_fail("%s %zu: auto mode copied %lld aligned bytes through the page cache",
			     c->rnd ? "random" : "sequential", c->size, c->pc[M_AUTO]);
	}
	{
		double a = bench_median(ck[0], opt.rounds), p = bench_median(ck[1], opt.rounds),
		       d = bench_median(ck[2], opt.rounds);

		printf("\n## Checkpoint: 256 MiB in 8 MiB writes, then fsync, MB/s\n\n");
		printf("| from GPU, auto | from GPU, pagecache | from host, O_DIRECT | auto / pagecache | auto / O_DIRECT host |\n");
		printf("|---|---|---|---|---|\n");
		printf("| %.1f | %.1f | %.1f | %.2f | %.2f |\n", a, p, d, a / p, a / d);
		printf("wb-checkpoint auto=%.2f pagecache=%.2f odirect_host=%.2f\n", a, p, d);
	}
	printf("%s",
	       "\n## The exclusion: writers of disjoint halves of one file, write + fsync, MB/s\n\n");
	printf("| size | writers | routed (auto) | O_DIRECT | routed / O_DIRECT |\n");
	printf("|---|---|---|---|---|\n");
	for (int s = 0; s < 2; s++)
		for (int nw = 1; nw <= 2; nw++) {
			double a = bench_median(par[s][nw - 1][0], opt.rounds);
			double d = bench_median(par[s][nw - 1][1], opt.rounds);
			char sz[32];

			human(par_sizes[s], sz, sizeof(sz));
			printf("| %s | %d | %.1f | %.1f | %.2f |\n", sz, nw, a, d, a / d);
			printf("wb-exclusion size=%zu writers=%d routed=%.2f odirect=%.2f",
			       par_sizes[s], nw, a, d);
			printf(" ratio=%.3f\n", a / d);
		}
	{
		double a = bench_median(un[M_AUTO], opt.rounds);
		double p = bench_median(un[M_PC], opt.rounds);

		printf("%s",
		       "\n## Unaligned: 1 MiB writes 1000 bytes past each MiB, write + fsync, MB/s\n\n");
		printf("| auto | pagecache | auto / pagecache | P2P bytes (auto) |\n");
		printf("|---|---|---|---|\n");
		printf("| %.1f | %.1f | %.2f | %lld |\n", a, p, a / p, un_p2p[M_AUTO]);
		printf("wb-unaligned auto=%.2f pagecache=%.2f p2p_auto=%lld\n", a, p,
		       un_p2p[M_AUTO]);
		if (un_p2p[M_AUTO] || un_p2p[M_PC])
			bench_fail("%lld bytes of unaligned writes went by P2P: a write goes whole",
				   un_p2p[M_AUTO] + un_p2p[M_PC]);
	}
	printf("\n# The stand-in GPU's BAR is host RAM: the page-cache path copies at memcpy "
	       "speed here, at tens of MB/s from a real GPU BAR.\n");
	printf("# writer_bench done in %.0f s, %d failure(s)\n", bench_now() - t_start, bench_failures);
	if (!bench_failures)
		printf("ok %d - every file read back right; every aligned byte of auto went P2P\n",
		       ++bench_tapn);
	munmap(gmem, GPU_LEN);
	close(buf);
	close(heap);
	return bench_failures ? 1 : 0;
}
