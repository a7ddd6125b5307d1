// SPDX-License-Identifier: GPL-2.0
/*
 * The router's fast paths, on ext4 (spin-nvme0) and xfs
 * (spin-nvme1), every byte checked from the host side of the GPU memory:
 *  - a read into GPU memory below S_cutoff whose pages are all cached is one
 *    page-cache copy without a plan (cached_requests, no P2P byte); one whose
 *    first half is cached copies that half and schedules the rest (no
 *    cached_requests; how the uncached half goes is the scheduler's choice);
 *    in mode p2p a wholly cached one goes by P2P all the same; with S_cutoff 0
 *    the bound is what is copied in C_p2p / 8 (sched::Params::copy_first_max);
 *  - per-inode verdicts: a second read of a file is answered from the table
 *    (file_verdict_hits), and a chmod (ctime), a write of a disk knob (the
 *    epoch) and, on ext4 mounted nodelalloc, per-file data journaling
 *    (chattr +j, which takes direct I/O away: fallback no_direct_io until it
 *    is cleared) are seen by the next read (file_verdict_misses);
 *  - a process with GPU memory mapped: reads into host memory are not routed
 *    (requests unchanged), a readv whose second segment starts in GPU memory
 *    is; the per-CPU host hint that answers the first (spin_ubuf_host_hint())
 *    is stale the moment the mapping changes: GPU memory mapped over host
 *    memory at the same address is routed on the very next read and write,
 *    and host memory mapped back is not, whether the mappings are changed on
 *    the reader's CPU or by a thread on another one (whose hint the reader
 *    never sees: only the mm's mmap sequence count tells).
 */
#define _GNU_SOURCE
#include <linux/fs.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define PG 4096UL
#define FILE_LEN (4 * MiB)
#define GPU_LEN (8 * MiB)
#define GSTAT "/sys/kernel/spin/stat"

/* A filesystem of spin_lib's fixture with the test's data file open. */
struct fp_fs {
	struct spin_fs base;
	char knob[PATH_MAX];	/* the disk's s_cutoff */
	char cutoff[32];	/* its value before the test */
	int fd, fd_ra;		/* the file; the same with POSIX_FADV_RANDOM */
};

static char gpu[PATH_MAX];
static uint8_t *gmem, *host;
static int gbuf;

static long long st(const struct fp_fs *fs, const char *name)
{
	return spin_stat_get(fs->base.stat, name);
}

/*
 * Drops the file's pages, then reads pages [first, first + n) into host
 * memory without read-ahead; checked with mincore().
 */
static int residency(struct fp_fs *fs, size_t first, size_t n)
{
	unsigned char vec[FILE_LEN / PG];
	void *map;
	int bad = 0;

	if (fsync(fs->fd) || posix_fadvise(fs->fd, 0, 0, POSIX_FADV_DONTNEED))
		return -1;
	if (n && pread(fs->fd_ra, host, n * PG, first * PG) != (ssize_t)(n * PG))
		return -1;
	map = mmap(NULL, FILE_LEN, PROT_READ, MAP_SHARED, fs->fd, 0);
	if (map == MAP_FAILED || mincore(map, FILE_LEN, vec))
		return -1;
	for (size_t i = 0; i < FILE_LEN / PG; i++)
		bad |= !!(vec[i] & 1) != (i >= first && i < first + n);
	munmap(map, FILE_LEN);
	if (bad)
		ksft_print_msg("%s: pages %zu+%zu: cached pages not as set\n", fs->base.name,
			       first, n);
	return bad ? -1 : 0;
}

/* pread into GPU memory at offset @goff, bytes checked from the host side. */
static int gpu_read(struct fp_fs *fs, size_t goff, size_t len, off_t pos, char *why, size_t wl)
{
	ssize_t n = pread(fs->fd, gmem + goff, len, pos);

	if (n != (ssize_t)len) {
		snprintf(why, wl, "pread %zu at %lld: %zd (%s)", len, (long long)pos, n,
			 strerror(errno));
		return -1;
	}
	return spin_gpu_check(gpu, gmem + goff, len, fs->base.seed, pos, why, wl) ? -1 : 0;
}

static void test_cached(struct fp_fs *fs)
{
	long long c0, p0, b0, c1, p1, b1;
	char why[256] = "ok";
	int ok;

	/* Wholly cached: 16 KiB at 64 KiB, S_cutoff 128 KiB. */
	ok = !residency(fs, 16, 4);
	c0 = st(fs, "cached_requests");
	p0 = st(fs, "bytes_p2p");
	b0 = st(fs, "bytes_pagecache");
	ok = ok && !gpu_read(fs, 0, 16 * KiB, 64 * KiB, why, sizeof(why));
	c1 = st(fs, "cached_requests");
	p1 = st(fs, "bytes_p2p");
	b1 = st(fs, "bytes_pagecache");
	if (ok && (c1 - c0 != 1 || p1 != p0 || b1 - b0 != (long long)(16 * KiB))) {
		snprintf(why, sizeof(why),
			 "cached_requests +%lld, bytes_p2p +%lld, bytes_pagecache +%lld (want 1, 0, 16384)",
			 c1 - c0, p1 - p0, b1 - b0);
		ok = 0;
	}
	ksft_test_result(ok, "%s: 16 KiB wholly cached: one copy, no plan: %s\n", fs->base.name,
			 why);

	/* The same in mode p2p: every aligned byte by P2P, cached or not. */
	snprintf(why, sizeof(why), "ok");
	ok = !residency(fs, 16, 4) && !spin_sysfs_set(SPIN_SYS "/mode", "p2p");
	c0 = st(fs, "cached_requests");
	p0 = st(fs, "bytes_p2p");
	ok = ok && !gpu_read(fs, 0, 16 * KiB, 64 * KiB, why, sizeof(why));
	c1 = st(fs, "cached_requests");
	p1 = st(fs, "bytes_p2p");
	if (spin_sysfs_set(SPIN_SYS "/mode", "auto"))
		ok = 0;
	if (ok && (c1 != c0 || p1 - p0 != (long long)(16 * KiB))) {
		snprintf(why, sizeof(why), "cached_requests +%lld, bytes_p2p +%lld (want 0, 16384)",
			 c1 - c0, p1 - p0);
		ok = 0;
	}
	ksft_test_result(ok, "%s: the same in mode p2p: all by P2P: %s\n", fs->base.name, why);

	/* The first half cached: 64 KiB at 1 MiB, pages 256..263 cached. */
	snprintf(why, sizeof(why), "ok");
	ok = !residency(fs, 256, 8);
	c0 = st(fs, "cached_requests");
	p0 = st(fs, "bytes_p2p");
	b0 = st(fs, "bytes_pagecache");
	ok = ok && !gpu_read(fs, MiB, 64 * KiB, MiB, why, sizeof(why));
	c1 = st(fs, "cached_requests");
	p1 = st(fs, "bytes_p2p");
	b1 = st(fs, "bytes_pagecache");
	if (ok && (c1 != c0 || b1 - b0 < (long long)(32 * KiB) ||
		   (p1 - p0) + (b1 - b0) != (long long)(64 * KiB))) {
		snprintf(why, sizeof(why),
			 "cached_requests +%lld, bytes_p2p +%lld, bytes_pagecache +%lld (want 0, the rest, >= 32768)",
			 c1 - c0, p1 - p0, b1 - b0);
		ok = 0;
	}
	ksft_test_result(ok,
			 "%s: 64 KiB, first half cached: the half copied, the rest scheduled (%lld B by P2P): %s\n",
			 fs->base.name, p1 - p0, why);
}

/*
 * A fit with no flat region (S_cutoff 0, as router_bench fits the throttled
 * rig): a wholly cached read shorter than what is copied in C_p2p / 8 is still
 * one copy without a plan; one at that bound is planned (no cached_requests),
 * and a plan copies a wholly cached chunk too (no P2P byte).
 */
static void test_no_cutoff(struct fp_fs *fs)
{
	char path[PATH_MAX], why[256] = "ok";
	long long c_ns, bw, pc, bound, c[3], p[3];
	size_t len[2];
	int ok;

	snprintf(path, sizeof(path), "/sys/block/%s/spin/c_p2p_ns", fs->base.disk);
	c_ns = spin_read_ll(path);
	snprintf(path, sizeof(path), "/sys/block/%s/spin/bw_pc", fs->base.disk);
	bw = spin_read_ll(path);
	/* As sched::cost derives it: picoseconds per page, rounded; whole pages. */
	pc = bw > 0 ? (long long)((4096ULL * 1000000000000ULL + bw / 2) / bw) : 0;
	bound = pc > 0 && c_ns > 0 ? c_ns * 1000 / (8 * pc) * (long long)PG : 0;
	ok = bound >= (long long)(2 * PG) && bound <= (long long)(256 * KiB);
	if (!ok)
		snprintf(why, sizeof(why), "c_p2p_ns %lld, bw_pc %lld: bound %lld B (8-256 KiB)",
			 c_ns, bw, bound);
	ok = ok && !spin_sysfs_set(fs->knob, "0");
	len[0] = bound - PG;
	len[1] = bound;
	c[0] = st(fs, "cached_requests");
	p[0] = st(fs, "bytes_p2p");
	for (int i = 0; i < 2 && ok; i++) {
		/* 256 KiB at 2 MiB cached. */
		ok = !residency(fs, 512, 64) &&
		     !gpu_read(fs, 2 * MiB, len[i], 2 * MiB, why, sizeof(why));
		c[i + 1] = st(fs, "cached_requests");
		p[i + 1] = st(fs, "bytes_p2p");
	}
	if (spin_sysfs_set(fs->knob, fs->cutoff))
		ok = 0;
	if (ok && (c[1] - c[0] != 1 || c[2] != c[1] || p[2] != p[0])) {
		snprintf(why, sizeof(why),
			 "cached_requests +%lld then +%lld, bytes_p2p +%lld (want 1, 0, 0)",
			 c[1] - c[0], c[2] - c[1], p[2] - p[0]);
		ok = 0;
	}
	ksft_test_result(ok,
			 "%s: S_cutoff 0: wholly cached %lld B is one copy without a plan, %lld B is planned and copied: %s\n",
			 fs->base.name, bound - (long long)PG, bound, why);
}

/* One read of 16 KiB at 0 (uncached); returns the verdict table's hits and misses. */
static int probe(struct fp_fs *fs, long long *hits, long long *misses, char *why, size_t wl)
{
	long long h0 = spin_stat_get(GSTAT, "file_verdict_hits");
	long long m0 = spin_stat_get(GSTAT, "file_verdict_misses");

	if (residency(fs, 0, 0) || gpu_read(fs, 2 * MiB, 16 * KiB, 0, why, wl))
		return -1;
	*hits = spin_stat_get(GSTAT, "file_verdict_hits") - h0;
	*misses = spin_stat_get(GSTAT, "file_verdict_misses") - m0;
	return 0;
}

static void test_verdicts(struct fp_fs *fs)
{
	long long h[4], m[4];
	char why[256] = "ok";
	int ok;

	ok = !probe(fs, &h[0], &m[0], why, sizeof(why));
	ok = ok && !probe(fs, &h[1], &m[1], why, sizeof(why));
	ok = ok && !fchmod(fs->fd, 0600) && !probe(fs, &h[2], &m[2], why, sizeof(why));
	ok = ok && !spin_sysfs_set(fs->knob, fs->cutoff) &&
	     !probe(fs, &h[3], &m[3], why, sizeof(why));
	if (ok && (h[1] != 1 || m[1] != 0 || m[2] != 1 || h[2] != 0 || m[3] != 1 || h[3] != 0)) {
		snprintf(why, sizeof(why),
			 "hits/misses: again %lld/%lld, after chmod %lld/%lld, after a knob write %lld/%lld (want 1/0, 0/1, 0/1)",
			 h[1], m[1], h[2], m[2], h[3], m[3]);
		ok = 0;
	}
	ksft_test_result(ok,
			 "%s: per-inode verdicts: used again, renewed by chmod and by a knob write: %s\n",
			 fs->base.name, why);
}

/* ext4: per-file data journaling takes direct I/O away; the verdict follows. */
static int set_journal(struct fp_fs *fs, int on)
{
	int flags;

	if (ioctl(fs->fd, FS_IOC_GETFLAGS, &flags))
		return -1;
	flags = on ? flags | FS_JOURNAL_DATA_FL : flags & ~FS_JOURNAL_DATA_FL;
	return ioctl(fs->fd, FS_IOC_SETFLAGS, &flags);
}

static void test_journal(struct fp_fs *fs)
{
	long long d0, d1, p0, p1, p2;
	char why[256] = "ok";
	int ok;

	p0 = st(fs, "bytes_p2p");
	ok = !residency(fs, 0, 0) && !gpu_read(fs, 0, 256 * KiB, 0, why, sizeof(why));
	p1 = st(fs, "bytes_p2p");
	if (ok && set_journal(fs, 1)) {
		snprintf(why, sizeof(why), "chattr +j: %s", strerror(errno));
		ok = 0;
	}
	d0 = st(fs, "fallback_no_direct_io");
	ok = ok && !residency(fs, 0, 0) && !gpu_read(fs, 0, 256 * KiB, 0, why, sizeof(why));
	d1 = st(fs, "fallback_no_direct_io");
	p2 = st(fs, "bytes_p2p");
	if (ok && (p1 == p0 || d1 - d0 != 1 || p2 != p1)) {
		snprintf(why, sizeof(why),
			 "P2P bytes before +%lld; with +j fallback_no_direct_io +%lld, P2P bytes +%lld (want > 0, 1, 0)",
			 p1 - p0, d1 - d0, p2 - p1);
		ok = 0;
	}
	if (set_journal(fs, 0) && ok) {
		snprintf(why, sizeof(why), "chattr -j: %s", strerror(errno));
		ok = 0;
	}
	p0 = st(fs, "bytes_p2p");
	ok = ok && !residency(fs, 0, 0) && !gpu_read(fs, 0, 256 * KiB, 0, why, sizeof(why));
	p1 = st(fs, "bytes_p2p");
	if (ok && p1 == p0) {
		snprintf(why, sizeof(why), "no P2P byte after chattr -j");
		ok = 0;
	}
	ksft_test_result(ok,
			 "%s: chattr +j takes P2P away at once (no_direct_io), -j gives it back: %s\n",
			 fs->base.name, why);
}

static void test_host(struct fp_fs *fs)
{
	long long r0, r1, r2;
	char why[256] = "ok";
	struct iovec iov[2];
	ssize_t n;
	int ok = !residency(fs, 0, 0);

	r0 = st(fs, "requests");
	n = pread(fs->fd, host, 64 * KiB, 0);
	if (n != (ssize_t)(64 * KiB) || spin_pattern_check(host, 0, n, fs->base.seed) >= 0) {
		snprintf(why, sizeof(why), "pread into host memory: %zd", n);
		ok = 0;
	}
	r1 = st(fs, "requests");
	iov[0] = (struct iovec){ host, 4 * KiB };
	iov[1] = (struct iovec){ gmem + 3 * MiB, 60 * KiB };
	n = preadv(fs->fd, iov, 2, 128 * KiB);
	r2 = st(fs, "requests");
	if (ok && n != (ssize_t)(64 * KiB)) {
		snprintf(why, sizeof(why), "preadv: %zd (%s)", n, strerror(errno));
		ok = 0;
	}
	if (ok && (spin_pattern_check(host, 128 * KiB, 4 * KiB, fs->base.seed) >= 0 ||
		   spin_gpu_check(gpu, gmem + 3 * MiB, 60 * KiB, fs->base.seed, 132 * KiB, why,
				  sizeof(why))))
		ok = 0;
	if (ok && (r1 != r0 || r2 - r1 != 1)) {
		snprintf(why, sizeof(why),
			 "requests +%lld for the host read, +%lld for the readv (want 0, 1)",
			 r1 - r0, r2 - r1);
		ok = 0;
	}
	ksft_test_result(ok,
			 "%s: a process with GPU memory mapped: a read into host memory is not routed, a readv with a GPU segment is: %s\n",
			 fs->base.name, why);
}

struct remap {
	void *addr, *ret;
	size_t len;
	int flags, fd, cpu, err;
};

static void *remap_fn(void *arg)
{
	struct remap *m = arg;
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(m->cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one)) {
		m->err = errno;
		return NULL;
	}
	m->ret = mmap(m->addr, m->len, PROT_READ | PROT_WRITE, m->flags | MAP_FIXED, m->fd, 0);
	m->err = m->ret == MAP_FAILED ? errno : 0;
	return NULL;
}

/*
 * Maps @len bytes at @addr (MAP_FIXED): @fd's GPU memory, or host memory if
 * @fd is -1. On this CPU if @cpu is -1, else by a thread pinned to @cpu.
 */
static void *remap(void *addr, size_t len, int fd, int cpu)
{
	struct remap m = { .addr = addr, .len = len, .fd = fd, .cpu = cpu,
			   .flags = fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED };
	pthread_t t;

	if (cpu < 0)
		return mmap(addr, len, PROT_READ | PROT_WRITE, m.flags | MAP_FIXED, fd, 0);
	errno = pthread_create(&t, NULL, remap_fn, &m);
	if (errno)
		return MAP_FAILED;
	errno = pthread_join(t, NULL);
	if (errno)
		return MAP_FAILED;
	errno = m.err;
	return m.err ? MAP_FAILED : m.ret;
}

/*
 * Host memory read into twice (the second read finds this CPU's hint), GPU
 * memory mapped over it at the same address, read into at once and written
 * from, host memory mapped back, read into and written from: only the read
 * and the write of GPU memory are routed. The reader is pinned to one CPU,
 * with no other read in between (the counters are read before and after), so
 * that a hint that outlived its mapping would be found. With @cross the
 * mappings are changed by a thread on another CPU, whose hint the reader
 * never sees: only the mm's mmap sequence count can tell it.
 */
static void test_host_remap(struct fp_fs *fs, int cross)
{
	size_t len = 256 * KiB;
	char why[256] = "ok";
	long long r[3], w[3];
	cpu_set_t one, all;
	int ok = !residency(fs, 0, 0), gpu_ok = 1, host_ok, cpu, other = -1;
	uint8_t *a, *g = MAP_FAILED;

	a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED || sched_getaffinity(0, sizeof(all), &all))
		ksft_exit_fail_msg("host memory: %s\n", strerror(errno));
	cpu = sched_getcpu();
	for (int i = 0; cross && i < CPU_SETSIZE && other < 0; i++)
		if (i != cpu && CPU_ISSET(i, &all))
			other = i;
	if (cross && other < 0) {
		munmap(a, len);
		ksft_test_result_skip("%s: a stale hint across CPUs: one CPU only\n",
				      fs->base.name);
		return;
	}
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		ksft_exit_fail_msg("sched_setaffinity: %s\n", strerror(errno));
	memset(a, 0, len);
	r[0] = st(fs, "requests");
	w[0] = st(fs, "write_requests");
	host_ok = pread(fs->fd, a, 64 * KiB, 0) == (ssize_t)(64 * KiB) &&
		  pread(fs->fd, a, 64 * KiB, 64 * KiB) == (ssize_t)(64 * KiB);
	if (host_ok)
		g = remap(a, len, gbuf, other);
	/* The bytes read are written back where they came from. */
	if (g != MAP_FAILED)
		gpu_ok = pread(fs->fd, g, 64 * KiB, 256 * KiB) == (ssize_t)(64 * KiB) &&
			 pwrite(fs->fd, g, 64 * KiB, 256 * KiB) == (ssize_t)(64 * KiB);
	r[1] = st(fs, "requests");
	w[1] = st(fs, "write_requests");
	if (!host_ok || g == MAP_FAILED || !gpu_ok) {
		snprintf(why, sizeof(why), "%s: %s",
			 !host_ok ? "pread into host memory" :
			 g == MAP_FAILED ? "GPU memory over host memory" :
			 "pread into and pwrite from GPU memory",
			 strerror(errno));
		ok = 0;
	}
	ok = ok && !spin_gpu_check(gpu, g, 64 * KiB, fs->base.seed, 256 * KiB, why, sizeof(why));
	if (ok && remap(a, len, -1, other) == MAP_FAILED) {
		snprintf(why, sizeof(why), "host memory over GPU memory: %s", strerror(errno));
		ok = 0;
	}
	if (ok && (pread(fs->fd, a, 64 * KiB, 512 * KiB) != (ssize_t)(64 * KiB) ||
		   pwrite(fs->fd, a, 64 * KiB, 512 * KiB) != (ssize_t)(64 * KiB))) {
		snprintf(why, sizeof(why), "pread into and pwrite from host memory again: %s",
			 strerror(errno));
		ok = 0;
	}
	r[2] = st(fs, "requests");
	w[2] = st(fs, "write_requests");
	if (ok && spin_pattern_check(a, 512 * KiB, 64 * KiB, fs->base.seed) >= 0) {
		snprintf(why, sizeof(why), "wrong bytes in host memory");
		ok = 0;
	}
	if (ok && (r[1] - r[0] != 1 || r[2] != r[1] || w[1] - w[0] != 1 || w[2] != w[1])) {
		snprintf(why, sizeof(why),
			 "requests +%lld, write_requests +%lld (two host reads, then a read and a write of GPU memory over them), +%lld, +%lld (host again); want 1, 1, 0, 0",
			 r[1] - r[0], w[1] - w[0], r[2] - r[1], w[2] - w[1]);
		ok = 0;
	}
	sched_setaffinity(0, sizeof(all), &all);
	munmap(a, len);
	if (cross)
		ksft_test_result(ok,
				 "%s: host memory, then GPU memory mapped at the same address by a thread on CPU %d: only the GPU read and write on CPU %d routed, at once: %s\n",
				 fs->base.name, other, cpu, why);
	else
		ksft_test_result(ok,
				 "%s: host memory, then GPU memory mapped at the same address: only the GPU read and write routed, at once: %s\n",
				 fs->base.name, why);
}

static void run(struct fp_fs *fs)
{
	size_t off;

	SPIN_FS_SETUP_OR_EXIT(&fs->base, 0);
	snprintf(fs->knob, sizeof(fs->knob), "/sys/block/%s/spin/s_cutoff", fs->base.disk);
	if (spin_read_file(fs->knob, fs->cutoff, sizeof(fs->cutoff)) ||
	    spin_sysfs_set(fs->knob, "131072"))
		ksft_exit_fail_msg("%s: %s\n", fs->knob, strerror(errno));
	fs->fd = open(fs->base.path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	fs->fd_ra = open(fs->base.path, O_RDONLY);
	if (fs->fd < 0 || fs->fd_ra < 0 || posix_fadvise(fs->fd_ra, 0, 0, POSIX_FADV_RANDOM))
		ksft_exit_fail_msg("%s: %s\n", fs->base.path, strerror(errno));
	for (off = 0; off < FILE_LEN; off += MiB) {
		spin_pattern_fill(host, off, MiB, fs->base.seed);
		if (pwrite(fs->fd, host, MiB, off) != (ssize_t)MiB)
			ksft_exit_fail_msg("writing %s: %s\n", fs->base.path, strerror(errno));
	}
	test_cached(fs);
	test_no_cutoff(fs);
	test_verdicts(fs);
	if (!strcmp(fs->base.type, "ext4"))
		test_journal(fs);
	test_host(fs);
	test_host_remap(fs, 0);
	test_host_remap(fs, 1);
	close(fs->fd);
	close(fs->fd_ra);
	if (spin_fs_unmount(&fs->base))
		ksft_print_msg("umount %s: %s\n", fs->base.dir, strerror(errno));
}

int main(void)
{
	/* ext4 honours a file's data journaling flag only without delayed allocation. */
	struct fp_fs ext4 = { .base = SPIN_FS_EXT4("/mnt/fp-ext4", 501) };
	struct fp_fs xfs = { .base = SPIN_FS_XFS("/mnt/fp-xfs", 502) };
	char ra[32];
	int heap;

	ext4.base.opts = "nodelalloc";
	ksft_print_header();
	ksft_set_plan(17);
	SPIN_GPU_SETUP_OR_EXIT(gpu, GPU_LEN, &gmem, &heap, &gbuf, MiB, &host);
	if (spin_read_file(SPIN_SYS "/ra_partition_pages", ra, sizeof(ra)) || !atoi(ra))
		ksft_print_msg("GPU read-ahead is off (%s)\n", ra);
	run(&ext4);
	run(&xfs);
	ksft_finished();
}
