// SPDX-License-Identifier: GPL-2.0
/*
 * The router: an ordinary (not O_DIRECT) read of a regular file
 * whose destination is a user mapping of a spin dma-buf is split between
 * copies out of the page cache and P2P DMA straight into the GPU pages.
 *
 * On ext4 (spin-nvme0) and xfs (spin-nvme1), both behind the PCIe switch
 * with the stand-in GPU:
 *  - residency 0/25/50/75/100 %, alternating pages and random runs, set up
 *    with fsync + POSIX_FADV_DONTNEED + preads on a POSIX_FADV_RANDOM fd and
 *    verified with mincore() before every read; 1 B .. 64 MiB; unaligned
 *    file and GPU offsets; EOF; preadv mixing host and GPU iovecs; read()
 *    and readv() moving the file position; iovecs across the ends of the
 *    GPU mapping; O_DIRECT reads, which are not routed;
 *  - every read: the bytes, checked from the host side of the GPU memory,
 *    the bytes around them untouched, the per-disk and global counters and
 *    the spin_route/spin_route_segment trace events consistent with each
 *    other and with the rules (no P2P for a fully cached read, all P2P for an
 *    uncached aligned one, the page cache only for cached pages and for the
 *    unaligned head and tail, P2P only in whole logical blocks);
 *  - the modes pagecache and p2p;
 *  - the disk's p2p_overlap in the schedule: nine uncached pages 20 apart
 *    go in one P2P leg with none, in more with 800 (not with synchronous
 *    legs, xfs with atomic_reads 1).
 * router_consistency_test checks reads against concurrent writes,
 * router_fallback_test the fallbacks, router_knobs_test the knobs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "router_lib.h"

#define RESULTS_PER_FS 15

/*
 * One pread of @len bytes at @pos into GPU offset @goff with residency @rz:
 * bytes, guards, counters, trace, rules.
 */
static void matrix_read(struct router_fs *fs, long long pos, size_t len, size_t goff, int rz,
			struct agg *a, struct res *data)
{
	long long first = pos / PG, want_n;
	size_t npages = div_up(pos + len, PG) - first;
	char label[160], rzb[16], why[256];
	uint8_t *want = malloc(npages);
	struct range rg;
	struct obs o;
	ssize_t n;

	snprintf(label, sizeof(label), "%s: %zu B at %lld into GPU+%zu, %s cached", fs->base.name,
		 len, pos, goff, rz_name(rz, rzb, sizeof(rzb)));
	want_n = pos >= fs->size ? 0 : fs->size - pos;
	if (want_n > (long long)len)
		want_n = len;
	rz_fill(rz, want, npages, pos ^ len);
	data->runs++;
	a->route.runs++;
	if (set_residency(fs, first, npages, want, why, sizeof(why))) {
		fail(data, label, "%s", why);
		free(want);
		return;
	}
	poison(goff, len);
	obs_begin(fs, &o, &a->route, label);
	n = pread(fs->fd, gmem + goff, len, pos);
	rg.pos = pos;
	rg.len = n > 0 ? n : 0;
	if (n != want_n) {
		fail(data, label, "pread returned %zd (%s), expected %lld", n,
		     n < 0 ? strerror(errno) : "short", want_n);
	} else if (n > 0 && spin_gpu_check(gpu, gmem + goff, n, fs->base.seed, pos, why,
					   sizeof(why))) {
		fail(data, label, "GPU memory: %s", why);
	}
	check_guards(goff, n > 0 ? n : 0, data, label);
	if (!obs_end(fs, &o, &rg, 1, &a->route, label))
		check_rules(fs, &o, pos, rg.len, goff, first, want, npages, a, label);
	trace_free(&o.tr);
	free(want);
}

static const int residencies[] = { 0, 25, 50, 75, 100, RZ_ALT, RZ_RANDOM };
static const size_t aligned_sizes[] = { PG, 64 * KiB, MiB, 8 * MiB };

static const struct {
	long long pos;
	size_t len, goff;
} unaligned[] = {
	{ 1, 1, 0 },
	{ 511, 1, PG + 511 },
	{ 100, 100, 100 },
	{ 4095, 2, 5 },				/* misaligned, but no whole block */
	{ 12345, MiB + 3, 2 * MiB + 12345 % PG },
	{ 5 * PG + 512, 64 * KiB, 2 * PG + 512 },	/* whole blocks, not pages */
	{ 7, 8 * MiB - 7, 16 * MiB + 7 },
	{ 3 * MiB + 1, MiB, 1 },
	{ 8192, 64 * KiB, 4 },			/* GPU address 4 bytes into a page */
	{ 2 * MiB, MiB, 1 },			/* GPU and file differ by 1: misaligned */
	{ 5000, 300000, 2 },			/* differ by 2 modulo 4: misaligned */
	{ 513, 3 * PG, 10 * PG + 1 },
};

static const int unaligned_rz[] = { 0, RZ_ALT, 100 };

static void read_matrix(struct router_fs *fs)
{
	struct res data_al = { 0 }, data_un = { 0 };
	struct agg a = { 0 };
	int k = 0;

	for (size_t r = 0; r < ARRAY_SIZE(residencies); r++) {
		for (size_t s = 0; s < ARRAY_SIZE(aligned_sizes); s++, k++) {
			long long pos = (long long)((k * 37) % 64) * PG;
			size_t goff = (size_t)((k * 5) % 16) * PG;

			matrix_read(fs, pos, aligned_sizes[s], goff, residencies[r], &a, &data_al);
		}
	}
	/* 64 MiB: uncached and aligned; random runs at unaligned offsets. */
	matrix_read(fs, 0, 64 * MiB, 0, 0, &a, &data_al);
	matrix_read(fs, 4 * MiB + 777, 64 * MiB, 8 * MiB + 777, RZ_RANDOM, &a, &data_un);
	for (size_t u = 0; u < ARRAY_SIZE(unaligned); u++)
		for (size_t r = 0; r < ARRAY_SIZE(unaligned_rz); r++)
			matrix_read(fs, unaligned[u].pos, unaligned[u].len, unaligned[u].goff,
				    unaligned_rz[r], &a, &data_un);

	ksft_test_result(!data_al.bad,
			 "%s: aligned, 7 residencies x 4 KiB..8 MiB, 64 MiB: bytes (%d reads, %d bad: %s)\n",
			 fs->base.name, data_al.runs, data_al.bad,
			 data_al.bad ? data_al.why : "ok");
	ksft_test_result(!data_un.bad,
			 "%s: unaligned file/GPU offsets, 1 B..64 MiB: bytes (%d reads, %d bad: %s)\n",
			 fs->base.name, data_un.runs, data_un.bad,
			 data_un.bad ? data_un.why : "ok");
	if (!a.mixed)
		fail(&a.route, fs->base.name, "no read was split between the page cache and P2P");
	res_result(&a.route, "%s: counters and trace agree on every read (%d reads, %d split)",
		   fs->base.name, a.route.runs, a.mixed);
	if (!a.n_cached)
		fail(&a.cached, fs->base.name, "no fully cached read observed");
	res_result(&a.cached, "%s: fully cached reads: no P2P bytes (%d reads)",
		   fs->base.name, a.n_cached);
	if (!a.n_uncached)
		fail(&a.uncached, fs->base.name, "no uncached aligned read observed");
	res_result(&a.uncached, "%s: uncached aligned reads: all bytes by P2P (%d reads)",
		   fs->base.name, a.n_uncached);
	res_result(&a.rules,
		   "%s: page cache for cached pages and unaligned head/tail only; misaligned GPU offsets fall back",
		   fs->base.name);
}

/* ---- EOF, preadv, read() ------------------------------------------------ */

/*
 * A read that returned @n bytes at @pos into @goff: bytes, guards, counters
 * and trace. 0 if all holds; the caller frees @o's trace.
 */
static int check_read(struct router_fs *fs, struct obs *o, ssize_t n, long long want, long long pos,
		      size_t goff, struct res *r, const char *label)
{
	struct range rg = { pos, n > 0 ? n : 0 };
	int bad0 = r->bad;
	char why[256];

	if (n != want)
		fail(r, label, "returned %zd (%s), expected %lld", n,
		     n < 0 ? strerror(errno) : "count", want);
	else if (n > 0 && spin_gpu_check(gpu, gmem + goff, n, fs->base.seed, pos, why, sizeof(why)))
		fail(r, label, "GPU memory: %s", why);
	check_guards(goff, n > 0 ? n : 0, r, label);
	obs_end(fs, o, &rg, n > 0, r, label);
	return r->bad != bad0;
}

static void eof_reads(struct router_fs *fs)
{
	long long F = fs->size, tail_pos = align_down(F, PG) - 8 * PG;
	char label[128], why[256];
	struct res r = { 0 };
	struct agg a = { 0 };
	uint8_t want[300];
	struct obs o;
	ssize_t n;
	off_t at;
	const struct {
		long long pos;
		size_t len;
		int rz;
	} c[] = {
		{ F - 5000, MiB, 0 },
		{ F - 3 * (long long)PG - 100, 64 * KiB, 100 },
		{ tail_pos, MiB, 0 },		/* P2P up to the last whole block */
		{ F, PG, 0 },
		{ F, PG, 100 },
		{ F + 10000, PG, 0 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		long long first = c[i].pos / PG;
		size_t np = div_up(c[i].pos + (long long)c[i].len, PG) - first;
		size_t goff = 4 * MiB + c[i].pos % PG;
		long long expect = c[i].pos >= F ? 0 : F - c[i].pos;

		if (expect > (long long)c[i].len)
			expect = c[i].len;
		snprintf(label, sizeof(label), "%s: pread %zu B at EOF%+lld, %d%% cached",
			 fs->base.name, c[i].len, c[i].pos - F, c[i].rz);
		np = np > ARRAY_SIZE(want) ? ARRAY_SIZE(want) : np;
		rz_fill(c[i].rz, want, np, 0);
		r.runs++;
		if (set_residency(fs, first, np, want, why, sizeof(why))) {
			fail(&r, label, "%s", why);
			continue;
		}
		poison(goff, c[i].len);
		obs_begin(fs, &o, &r, label);
		n = pread(fs->fd, gmem + goff, c[i].len, c[i].pos);
		if (!check_read(fs, &o, n, expect, c[i].pos, goff, &r, label))
			check_rules(fs, &o, c[i].pos, n, goff, first, want, np, &a, label);
		trace_free(&o.tr);
	}
	if (a.rules.bad || a.cached.bad || a.uncached.bad)
		fail(&r, fs->base.name, "%s", a.rules.bad ? a.rules.why :
		     a.cached.bad ? a.cached.why : a.uncached.why);

	/* read() at EOF: short, then 0; the position ends at EOF. */
	snprintf(label, sizeof(label), "%s: read() of 4 KiB at EOF-10", fs->base.name);
	lseek(fs->fd, F - 10, SEEK_SET);
	poison(PG + (F - 10) % PG, PG);
	obs_begin(fs, &o, &r, label);
	n = read(fs->fd, gmem + PG + (F - 10) % PG, PG);
	check_read(fs, &o, n, 10, F - 10, PG + (F - 10) % PG, &r, label);
	trace_free(&o.tr);
	poison(PG + (F - 10) % PG, PG);
	obs_begin(fs, &o, &r, label);
	n = read(fs->fd, gmem + PG + (F - 10) % PG, PG);
	check_read(fs, &o, n, 0, F, PG + (F - 10) % PG, &r, label);
	trace_free(&o.tr);
	at = lseek(fs->fd, 0, SEEK_CUR);
	if (at != F)
		fail(&r, label, "file position %lld after reading to EOF, expected %lld",
		     (long long)at, F);
	res_result(&r,
		   "%s: EOF: short reads, 0 at and after EOF, nothing written past the count (%d reads)",
		   fs->base.name, r.runs + 2);
}

static void preadv_mixed(struct router_fs *fs)
{
	struct res r = { 0 };
	char label[128], why[256];
	struct obs o;

	for (int pass = 0; pass < 2; pass++) {
		long long pos = pass ? 0 : 777;
		size_t h[3] = { pass ? PG : 3000, pass ? 2 * PG : 4096, pass ? PG : 100 };
		size_t g[2] = { pass ? 2 * MiB : MiB + 5, pass ? MiB : 2 * MiB };
		long long p1 = pos + h[0], p2 = p1 + g[0] + h[1], p3 = p2 + g[1];
		size_t go1 = 16 * MiB + p1 % PG, go2 = 24 * MiB + p2 % PG;
		uint8_t *hb = host;
		/* An empty iovec in the middle must not end the read. */
		struct iovec iov[6] = {
			{ hb, h[0] }, { gmem + go1, g[0] }, { hb, 0 }, { hb + h[0], h[1] },
			{ gmem + go2, g[1] }, { hb + h[0] + h[1], h[2] },
		};
		struct range rg[2] = { { p1, g[0] }, { p2, g[1] } };
		size_t total = h[0] + h[1] + h[2] + g[0] + g[1], np;
		uint8_t want[1024];
		ssize_t n;

		snprintf(label, sizeof(label), "%s: preadv host+GPU+empty+host+GPU+host at %lld",
			 fs->base.name, pos);
		np = div_up(pos + total, PG) - pos / PG;
		rz_fill(pass ? 0 : 50, want, np, 0);
		r.runs++;
		if (set_residency(fs, pos / PG, np, want, why, sizeof(why))) {
			fail(&r, label, "%s", why);
			continue;
		}
		poison(go1, g[0]);
		poison(go2, g[1]);
		memset(hb, POISON, h[0] + h[1] + h[2]);
		obs_begin(fs, &o, &r, label);
		n = preadv(fs->fd, iov, 6, pos);
		if (n != (ssize_t)total)
			fail(&r, label, "returned %zd, expected %zu", n, total);
		if (spin_pattern_check(hb, pos, h[0], fs->base.seed) >= 0 ||
		    spin_pattern_check(hb + h[0], p1 + g[0], h[1], fs->base.seed) >= 0 ||
		    spin_pattern_check(hb + h[0] + h[1], p3, h[2], fs->base.seed) >= 0)
			fail(&r, label, "host iovecs hold wrong bytes");
		if (spin_gpu_check(gpu, gmem + go1, g[0], fs->base.seed, p1, why, sizeof(why)) ||
		    spin_gpu_check(gpu, gmem + go2, g[1], fs->base.seed, p2, why, sizeof(why)))
			fail(&r, label, "GPU iovec: %s", why);
		check_guards(go1, g[0], &r, label);
		check_guards(go2, g[1], &r, label);
		obs_end(fs, &o, rg, 2, &r, label);
		trace_free(&o.tr);
	}
	res_result(&r, "%s: preadv mixing host and GPU iovecs: bytes, only the GPU ranges routed",
		   fs->base.name);
}

/*
 * One iovec across the end of the GPU mapping into host memory, one across
 * host memory into the GPU mapping, and an O_DIRECT read (never routed).
 */
/*
 * Chunks in flight together: a 24 MiB read, three 8 MiB chunks,
 * the first cached, the second not, the third uncached then cached. With
 * asynchronous P2P legs the router starts the P2P legs of the second and of
 * the third chunk before it copies the chunk before them
 * (pipelined_chunks +2); with /sys/kernel/spin/pipeline 0 (ext4) or
 * synchronous legs (xfs, atomic_reads 1) it does not (+0), so on xfs the
 * read runs again with atomic_reads 0 (+2).
 * Every read: bytes, guards, counters and trace; at least the 12 MiB not
 * cached by P2P and the 8 MiB of the cached chunk by copy.
 */
/* @serial: the chunks are read one after another (synchronous legs or pipeline 0). */
static void chunk_pipeline_one(struct router_fs *fs, int serial, struct res *r)
{
	const long long pos = 4 * MiB;
	const size_t len = 24 * MiB, npages = len / PG, chunk = 8 * MiB / PG;
	long long p0, p1, want = serial ? 0 : 2;
	uint8_t *cached = malloc(npages);
	char label[128], why[256];
	struct obs o;
	ssize_t n;

	snprintf(label, sizeof(label), "%s: 24 MiB in three chunks, %s", fs->base.name,
		 serial ? "one after another" : "pipelined");
	for (size_t i = 0; i < npages; i++)
		cached[i] = i < chunk || i >= 2 * chunk + chunk / 2;
	if (set_residency(fs, pos / PG, npages, cached, why, sizeof(why))) {
		fail(r, label, "%s", why);
		free(cached);
		return;
	}
	poison(0, len);
	p0 = spin_stat_get(fs->base.stat, "pipelined_chunks");
	obs_begin(fs, &o, r, label);
	n = pread(fs->fd, gmem, len, pos);
	p1 = spin_stat_get(fs->base.stat, "pipelined_chunks");
	if (!check_read(fs, &o, n, len, pos, 0, r, label)) {
		if (p0 < 0 || p1 - p0 != want)
			fail(r, label, "pipelined_chunks +%lld, want +%lld", p1 - p0, want);
		else if (o.d.v[ST_BYTES_P2P] < (long long)(12 * MiB) ||
			 o.d.v[ST_BYTES_PC] < (long long)(8 * MiB))
			fail(r, label, "%lld B by P2P, %lld B copied (want >= 12 MiB, >= 8 MiB)",
			     o.d.v[ST_BYTES_P2P], o.d.v[ST_BYTES_PC]);
	}
	trace_free(&o.tr);
	free(cached);
}

static void chunk_pipeline(struct router_fs *fs)
{
	int sync = !strcmp(fs->base.type, "xfs");
	struct res r = { 0 };

	chunk_pipeline_one(fs, sync, &r);
	if (!sync) {
		/* The same with /sys/kernel/spin/pipeline 0: chunk after chunk. */
		if (sys_write(SPIN_SYS "/pipeline", "0"))
			fail(&r, fs->base.name, "pipeline 0: %s", strerror(errno));
		else
			chunk_pipeline_one(fs, 1, &r);
		sys_write(SPIN_SYS "/pipeline", "1");
	}
	if (sync) {
		if (sys_write(SPIN_SYS "/atomic_reads", "0"))
			fail(&r, fs->base.name, "atomic_reads 0: %s", strerror(errno));
		else
			chunk_pipeline_one(fs, 0, &r);
		sys_write(SPIN_SYS "/atomic_reads", "1");
	}
	res_result(&r,
		   "%s: a read of three chunks: the P2P legs of a chunk in flight while the one before is copied%s",
		   fs->base.name,
		   sync ? " (atomic_reads 0; none with 1)" : " (none with pipeline 0)");
}

/*
 * One page read from the device every 21 pages, 169 pages in all, with the
 * disk's p2p_overlap at @overlap: the number of P2P segments into *@segs.
 */
static void queue_overlap_one(struct router_fs *fs, const char *overlap, long long *segs,
			      struct res *r)
{
	const long long pos = 2 * MiB;
	const size_t npages = 8 * 21 + 1, len = npages * PG;
	uint8_t cached[8 * 21 + 1];
	char label[128], path[PATH_MAX], why[256];
	struct obs o;
	ssize_t n;
	int ret;

	snprintf(label, sizeof(label), "%s: 9 uncached pages 20 apart, p2p_overlap %s",
		 fs->base.name,
		 overlap);
	*segs = -1;
	for (size_t i = 0; i < npages; i++)
		cached[i] = i % 21 != 0;
	knob_path(path, sizeof(path), fs->base.disk, "p2p_overlap");
	ret = sys_write(path, overlap);
	if (ret) {
		fail(r, label, "writing %s: %s", path, strerror(-ret));
		return;
	}
	if (set_residency(fs, pos / PG, npages, cached, why, sizeof(why))) {
		fail(r, label, "%s", why);
	} else {
		poison(0, len);
		obs_begin(fs, &o, r, label);
		n = pread(fs->fd, gmem, len, pos);
		if (!check_read(fs, &o, n, len, pos, 0, r, label))
			*segs = o.d.v[ST_SEGS_P2P];
		trace_free(&o.tr);
	}
	ret = sys_write(path, "100");
	if (ret)
		fail(r, label, "restoring p2p_overlap 100: %s", strerror(-ret));
}

/*
 * The disk's queue overlap reaches the schedule: with none, the nine uncached
 * pages go in one P2P leg over the cached ones between them; with 800 (eight
 * legs in the time of one) more, shorter legs pay. Synchronous legs (xfs with
 * atomic_reads 1) overlap nothing, so the schedule stays one leg.
 */
static void queue_overlap(struct router_fs *fs)
{
	int sync = !strcmp(fs->base.type, "xfs");
	long long none = -1, eight = -1;
	struct res r = { 0 };

	queue_overlap_one(fs, "100", &none, &r);
	queue_overlap_one(fs, "800", &eight, &r);
	if (!r.bad && none != 1)
		fail(&r, fs->base.name, "p2p_overlap 100: %lld P2P segments, want 1", none);
	if (!r.bad && !sync && eight <= 1)
		fail(&r, fs->base.name, "p2p_overlap 800: %lld P2P segments, want more than 1",
		     eight);
	if (!r.bad && sync && eight != 1)
		fail(&r, fs->base.name,
		     "p2p_overlap 800, synchronous legs: %lld P2P segments, want 1",
		     eight);
	res_result(&r, "%s: p2p_overlap 100 -> %lld P2P leg(s), 800 -> %lld%s",
		   fs->base.name, none, eight, sync ? " (synchronous legs: serial model)" : "");
}

static void boundaries(struct router_fs *fs)
{
	const size_t gpu_tail = 64 * KiB + 100, host_tail = 20000, host_head = 5000;
	struct res r = { 0 };
	char label[128], why[256];
	struct range rg;
	struct obs o;
	long long pos;
	uint8_t *dst;
	ssize_t n;
	int fd;

	/* GPU, then host: the GPU piece routed, the host piece read as usual */
	pos = 9 * MiB + (GPU_LEN - gpu_tail) % PG;
	dst = gmem + GPU_LEN - gpu_tail;
	snprintf(label, sizeof(label), "%s: one iovec, last %zu B of GPU memory + %zu B host",
		 fs->base.name, gpu_tail, host_tail);
	posix_fadvise(fs->fd, 0, 0, POSIX_FADV_DONTNEED);
	poison(GPU_LEN - gpu_tail, gpu_tail);
	memset(dst + gpu_tail, POISON, host_tail + GUARD);
	rg = (struct range){ pos, gpu_tail };
	obs_begin(fs, &o, &r, label);
	n = pread(fs->fd, dst, gpu_tail + host_tail, pos);
	if (n != (ssize_t)(gpu_tail + host_tail))
		fail(&r, label, "returned %zd", n);
	if (spin_gpu_check(gpu, dst, gpu_tail, fs->base.seed, pos, why, sizeof(why)))
		fail(&r, label, "GPU part: %s", why);
	if (spin_pattern_check(dst + gpu_tail, pos + gpu_tail, host_tail, fs->base.seed) >= 0 ||
	    dst[gpu_tail + host_tail] != POISON)
		fail(&r, label, "host part holds wrong bytes");
	check_guards(GPU_LEN - gpu_tail, gpu_tail, &r, label);
	obs_end(fs, &o, &rg, 1, &r, label);
	trace_free(&o.tr);

	/* host, then GPU: a read that starts in host memory may stay unrouted */
	pos = 11 * MiB + (PG - host_head % PG);
	dst = gmem - host_head;
	snprintf(label, sizeof(label), "%s: one iovec, %zu B host + 1 MiB of GPU memory",
		 fs->base.name, host_head);
	poison(0, MiB);
	memset(dst - GUARD, POISON, host_head + GUARD);
	obs_begin(fs, &o, &r, label);
	n = pread(fs->fd, dst, host_head + MiB, pos);
	if (n != (ssize_t)(host_head + MiB))
		fail(&r, label, "returned %zd", n);
	if (spin_gpu_check(gpu, gmem, MiB, fs->base.seed, pos + host_head, why, sizeof(why)))
		fail(&r, label, "GPU part: %s", why);
	if (spin_pattern_check(dst, pos, host_head, fs->base.seed) >= 0 || dst[-1] != POISON)
		fail(&r, label, "host part holds wrong bytes");
	check_guards(0, MiB, &r, label);
	rg = (struct range){ pos + host_head, MiB };
	{
		struct res routed = { 0 };

		if (!obs_end(fs, &o, &rg, 1, &routed, label))
			ksft_print_msg("%s: routed\n", label);
		else if (o.d.v[ST_REQUESTS] || o.tr.nroute || o.tr.nseg ||
			 o.d.v[ST_BYTES_PC] || o.d.v[ST_BYTES_P2P])
			fail(&r, label, "%s", routed.why);
		else
			ksft_print_msg("%s: not routed\n", label);
	}
	trace_free(&o.tr);

	/* O_DIRECT: the filesystem's own direct read, not routed */
	snprintf(label, sizeof(label), "%s: O_DIRECT pread of 1 MiB", fs->base.name);
	fd = open(fs->base.path, O_RDONLY | O_DIRECT);
	poison(3 * MiB, MiB);
	obs_begin(fs, &o, &r, label);
	n = fd < 0 ? -1 : pread(fd, gmem + 3 * MiB, MiB, 5 * MiB);
	if (n != (ssize_t)MiB)
		fail(&r, label, "returned %zd (%s)", n, strerror(errno));
	else if (spin_gpu_check(gpu, gmem + 3 * MiB, MiB, fs->base.seed, 5 * MiB, why, sizeof(why)))
		fail(&r, label, "GPU memory: %s", why);
	obs_end(fs, &o, NULL, 0, &r, label);
	trace_free(&o.tr);
	if (fd >= 0)
		close(fd);
	res_result(&r,
		   "%s: iovecs across the GPU mapping's ends: bytes, only GPU pieces routed; O_DIRECT not routed",
		   fs->base.name);
}

/* One observed read() of @len bytes at the file position, @pos, into GPU offset @goff. */
static void read_at_position(struct router_fs *fs, size_t goff, size_t len, long long pos,
			     struct res *r, const char *label)
{
	struct obs o;
	ssize_t n;

	poison(goff, len);
	obs_begin(fs, &o, r, label);
	n = read(fs->fd, gmem + goff, len);
	check_read(fs, &o, n, len, pos, goff, r, label);
	trace_free(&o.tr);
}

static void read_position(struct router_fs *fs)
{
	long long start = 5000, pos = start;
	const size_t l1 = 100000, l2 = MiB;
	struct res r = { 0 };
	char label[128];
	struct obs o;
	ssize_t n;
	off_t at;

	snprintf(label, sizeof(label), "%s: read()", fs->base.name);
	if (posix_fadvise(fs->fd, 0, 0, POSIX_FADV_DONTNEED))
		fail(&r, label, "fadvise: %s", strerror(errno));
	lseek(fs->fd, start, SEEK_SET);
	read_at_position(fs, 2 * MiB + start % PG, l1, pos, &r, label);
	pos += l1;
	at = lseek(fs->fd, 0, SEEK_CUR);
	if (at != pos)
		fail(&r, label, "position %lld after read() of %zu at %lld", (long long)at, l1,
		     start);
	read_at_position(fs, 6 * MiB + pos % PG, l2, pos, &r, label);
	pos += l2;
	at = lseek(fs->fd, 0, SEEK_CUR);
	if (at != pos)
		fail(&r, label, "position %lld after the second read(), expected %lld",
		     (long long)at, pos);

	snprintf(label, sizeof(label), "%s: readv()", fs->base.name);
	{
		size_t goff = 10 * MiB + pos % PG;
		struct iovec iov[2] = { { gmem + goff, 3 * PG }, { host, 5000 } };
		struct range rg = { pos, 3 * PG };
		char why[256];

		poison(goff, 3 * PG);
		obs_begin(fs, &o, &r, label);
		n = readv(fs->fd, iov, 2);
		if (n != 3 * PG + 5000)
			fail(&r, label, "returned %zd", n);
		if (spin_gpu_check(gpu, gmem + goff, 3 * PG, fs->base.seed, pos, why, sizeof(why)))
			fail(&r, label, "GPU iovec: %s", why);
		if (spin_pattern_check(host, pos + 3 * PG, 5000, fs->base.seed) >= 0)
			fail(&r, label, "host iovec holds wrong bytes");
		obs_end(fs, &o, &rg, 1, &r, label);
		trace_free(&o.tr);
		pos += 3 * PG + 5000;
	}
	at = lseek(fs->fd, 0, SEEK_CUR);
	if (at != pos)
		fail(&r, label, "position %lld after readv(), expected %lld", (long long)at, pos);
	res_result(&r, "%s: read() and readv() into GPU memory advance the file position",
		   fs->base.name);
}

/* ---- modes -------------------------------------------------------------- */

static void modes(struct router_fs *fs)
{
	struct res pc = { 0 }, p2p = { 0 };
	struct agg a = { 0 };
	uint8_t want[300];
	char label[128], why[256];
	struct obs o;
	ssize_t n;
	const struct {
		const char *mode;
		long long pos;
		int rz;
		struct res *r;
	} c[] = {
		{ "pagecache", 4 * MiB, 0, &pc },
		{ "pagecache", 4 * MiB + 1000, 50, &pc },
		{ "p2p", 8 * MiB, 100, &p2p },
		{ "p2p", 8 * MiB + 1000, 100, &p2p },
	};

	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		size_t goff = 48 * MiB + c[i].pos % PG;
		struct range rg = { c[i].pos, MiB };
		long long first = c[i].pos / PG;
		size_t np = div_up(c[i].pos + (long long)MiB, PG) - first;

		snprintf(label, sizeof(label), "%s: mode %s, 1 MiB at %lld, %d%% cached",
			 fs->base.name,
			 c[i].mode, c[i].pos, c[i].rz);
		rz_fill(c[i].rz, want, np, 0);
		if (set_residency(fs, first, np, want, why, sizeof(why))) {
			fail(c[i].r, label, "%s", why);
			continue;
		}
		if (set_mode(c[i].mode)) {
			fail(c[i].r, label, "cannot set the mode: %s", strerror(errno));
			continue;
		}
		poison(goff, MiB);
		obs_begin(fs, &o, c[i].r, label);
		n = pread(fs->fd, gmem + goff, MiB, c[i].pos);
		if (n != (ssize_t)MiB)
			fail(c[i].r, label, "returned %zd", n);
		else if (spin_gpu_check(gpu, gmem + goff, MiB, fs->base.seed, c[i].pos, why,
					sizeof(why)))
			fail(c[i].r, label, "GPU memory: %s", why);
		check_guards(goff, MiB, c[i].r, label);
		if (!obs_end(fs, &o, &rg, 1, c[i].r, label)) {
			check_rules(fs, &o, c[i].pos, MiB, goff, first, want, np, &a, label);
			if (!strcmp(c[i].mode, "pagecache") &&
			    (o.d.v[ST_BYTES_P2P] || o.d.v[ST_FB_MODE] != 1))
				fail(c[i].r, label, "bytes_p2p +%lld, fallback_mode +%lld",
				     o.d.v[ST_BYTES_P2P], o.d.v[ST_FB_MODE]);
			if (!strcmp(c[i].mode, "p2p") && !(c[i].pos % PG) &&
			    o.d.v[ST_BYTES_P2P] != (long long)MiB)
				fail(c[i].r, label, "cached, aligned: %lld of %lu bytes by P2P",
				     o.d.v[ST_BYTES_P2P], MiB);
		}
		if (a.rules.bad)
			fail(c[i].r, label, "%s", a.rules.why);
		a.rules.bad = 0;
		trace_free(&o.tr);
	}
	set_mode("auto");
	res_result(&pc, "%s: mode pagecache: no P2P bytes, fallback_mode counted, bytes right",
		   fs->base.name);
	res_result(&p2p,
		   "%s: mode p2p: a cached aligned read all by P2P, unaligned head/tail copied",
		   fs->base.name);
}

/*
 * Mode off: reads into GPU memory (cold and cached) and a write from it go
 * on to the filesystem untouched: every byte right, nothing counted in the
 * stat files, no spin_route event.
 */
static void mode_off(struct router_fs *fs)
{
	char label[128], why[256], path[PATH_MAX + 16];
	long long wr0, wr1;
	struct res r = { 0 };
	struct range rg = { 0, 0 };
	uint8_t want[256];
	struct obs o;
	ssize_t n;
	int fd;

	if (set_mode("off")) {
		ksft_test_result_fail("%s: mode off: %s\n", fs->base.name, strerror(errno));
		return;
	}
	for (int rz = 0; rz <= 100; rz += 100) {
		long long pos = 6 * MiB + 1000;
		size_t goff = 48 * MiB + pos % PG, np = div_up(pos + (long long)MiB, PG) - pos / PG;

		snprintf(label, sizeof(label), "%s: mode off, 1 MiB at %lld, %d%% cached",
			 fs->base.name, pos, rz);
		rz_fill(rz, want, np, 0);
		if (set_residency(fs, pos / PG, np, want, why, sizeof(why))) {
			fail(&r, label, "%s", why);
			continue;
		}
		poison(goff, MiB);
		obs_begin(fs, &o, &r, label);
		n = pread(fs->fd, gmem + goff, MiB, pos);
		if (n != (ssize_t)MiB)
			fail(&r, label, "returned %zd", n);
		else if (spin_gpu_check(gpu, gmem + goff, MiB, fs->base.seed, pos, why,
					sizeof(why)))
			fail(&r, label, "GPU memory: %s", why);
		check_guards(goff, MiB, &r, label);
		if (!obs_end(fs, &o, &rg, 0, &r, label) && (o.d.v[ST_REQUESTS] || o.tr.nroute))
			fail(&r, label, "requests +%lld, %d spin_route events: routed",
			     o.d.v[ST_REQUESTS], o.tr.nroute);
		trace_free(&o.tr);
	}
	snprintf(path, sizeof(path), "%s/off.dat", fs->base.dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	wr0 = spin_stat_get(fs->base.stat, "write_requests");
	if (fd < 0 || spin_gpu_fill(gpu, gmem + 52 * MiB, MiB, fs->base.seed + 7, 0))
		fail(&r, "mode off", "write set-up: %s", strerror(errno));
	else if (pwrite(fd, gmem + 52 * MiB, MiB, 0) != (ssize_t)MiB || fsync(fd) ||
		 posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) ||
		 pread(fd, host, MiB, 0) != (ssize_t)MiB)
		fail(&r, "mode off", "write from GPU memory: %s", strerror(errno));
	else if (spin_pattern_check(host, 0, MiB, fs->base.seed + 7) >= 0)
		fail(&r, "mode off", "byte %zd of the write differs on the disk",
		     spin_pattern_check(host, 0, MiB, fs->base.seed + 7));
	wr1 = spin_stat_get(fs->base.stat, "write_requests");
	if (wr1 != wr0)
		fail(&r, "mode off", "write_requests +%lld: the write was routed", wr1 - wr0);
	if (fd >= 0)
		close(fd);
	unlink(path);
	set_mode("auto");
	res_result(&r, "%s: mode off: reads and a write go on unrouted, uncounted, bytes right",
		   fs->base.name);
}

static void read_tests(struct router_fs *fs)
{
	STEP(read_matrix(fs));
	STEP(eof_reads(fs));
	STEP(preadv_mixed(fs));
	STEP(read_position(fs));
	STEP(boundaries(fs));
	STEP(chunk_pipeline(fs));
	STEP(queue_overlap(fs));
	STEP(modes(fs));
	STEP(mode_off(fs));
}

int main(void)
{
	ksft_print_header();
	ksft_set_plan(RT_NFS * RESULTS_PER_FS);
	router_init();
	router_each_fs(DATA_LEN, read_tests);
	router_took();
	ksft_finished();
}
