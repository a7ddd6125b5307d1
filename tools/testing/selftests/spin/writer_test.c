// SPDX-License-Identifier: GPL-2.0
/*
 * Writes from GPU memory (SPIN section 5.2): write(2), pwrite(2), writev(2),
 * pwritev(2) and pwritev2(2) whose source is a mapping of a spin dma-buf and
 * whose file range is block-aligned go as one direct write whose bios carry
 * the GPU pages, holding the filesystem's I/O lock as a buffered write does
 * (IOCB_DIO_EXCL); any other goes whole through the page cache.
 *
 * The data is put into GPU memory from the host side (as a GPU kernel would
 * produce it) and checked twice after every write: by CPU reads after
 * dropping the file's pages, and by reading the file back into GPU memory and
 * checking from the host side. On ext4 (spin-nvme0) and xfs (spin-nvme1):
 *  - aligned and unaligned writes, write(2) at the file offset, pwritev with
 *    host and GPU iovecs mixed, and a write shorter than a block: the
 *    counters show P2P bytes exactly for the aligned writes and fallback
 *    split for the others, spin_route_write fires;
 *  - concurrent writers: two appenders lose no record, two overwriters of one
 *    range leave one write whole, and on XFS a buffered reader beside them
 *    never sees a mix of two writes;
 *  - consistency: cached pages of the written range and a file mapping show
 *    the new bytes; a concurrent buffered reader sees old or new data per
 *    page, never anything else;
 *  - O_APPEND and RWF_APPEND, with an aligned end of file (one direct write
 *    at the end) and an unaligned one (fallback append);
 *  - O_SYNC, O_DSYNC and RWF_DSYNC: the bytes are on the disk on return, read
 *    from the block device at the file's extents, after direct and page-cache writes;
 *  - RLIMIT_FSIZE: a short count at the limit, EFBIG and SIGXFSZ past it;
 *  - an immutable file (EPERM, nothing written) and an append-only one;
 *  - holes, preallocated (unwritten) extents, dirty delayed-allocation
 *    pages under the write, and a write that extends the file;
 *  - ENOSPC mid-request: a short count or ENOSPC, and what was reported
 *    written is there after fsync;
 *  - mtime and ctime move on a routed write;
 *  - the fallbacks mode (pagecache) and misaligned, with the data right, and
 *    once for other disks: no_bdev (tmpfs), distance (spin-nvme2, outside
 *    the switch) and queue (spin-vblk, virtio-blk);
 *  - RWF_NOWAIT: EAGAIN, nothing written (the routed write would block);
 *  - O_DIRECT pwrite from GPU memory, upstream's path, beside it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define PG 4096UL
#define GPU_LEN (64 * MiB)
#define SRC 0			/* GPU offset of write sources */
#define BACK (32 * MiB)		/* GPU offset of read-backs */
#define HOST_LEN (32 * MiB)
#define EVENT "spin/spin_route_write"
#define TRACE "/sys/kernel/tracing/trace"

static char gpu[PATH_MAX];
static uint8_t *gmem;		/* GPU memory, GPU_LEN bytes */
static uint8_t *host;		/* host scratch, HOST_LEN bytes */

struct counts {
	long long req, pc, p2p, fb_mode, fb_mis, fb_append, fb_split, ioerr;
};

static void counts(const struct spin_fs *fs, struct counts *c)
{
	c->req = spin_stat_get(fs->stat, "write_requests");
	c->pc = spin_stat_get(fs->stat, "write_bytes_pagecache");
	c->p2p = spin_stat_get(fs->stat, "write_bytes_p2p");
	c->fb_mode = spin_stat_get(fs->stat, "write_fallback_mode");
	c->fb_mis = spin_stat_get(fs->stat, "write_fallback_misaligned");
	c->fb_append = spin_stat_get(fs->stat, "write_fallback_append");
	c->fb_split = spin_stat_get(fs->stat, "write_fallback_split");
	c->ioerr = spin_stat_get(fs->stat, "write_fallback_io_error");
}

/*
 * Where a write source for file offset @pos lies in GPU memory: congruent to
 * it modulo 16 MiB, so that the direct body's GPU address is as aligned as
 * its file offset.
 */
static size_t src(uint64_t pos)
{
	return SRC + pos % (16 * MiB);
}

/* Put pattern @seed for file offsets @pos.. into GPU memory at @goff, from the host side. */
static int gpu_fill(size_t goff, size_t len, uint64_t pos, uint64_t seed)
{
	return spin_gpu_fill(gpu, gmem + goff, len, seed, pos);
}

/*
 * Check the file's bytes @pos..+@len against pattern @seed: by CPU reads
 * after dropping its pages, then read back into GPU memory and checked from the host
 * side. Returns 0 or -1 with @why filled in.
 */
static int file_ok(int fd, uint64_t pos, size_t len, uint64_t seed, char *why, size_t wl)
{
	ssize_t bad;

	if (len > HOST_LEN || len > GPU_LEN - BACK) {
		snprintf(why, wl, "check of %zu bytes too large", len);
		return -1;
	}
	if (spin_uncache(fd)) {
		snprintf(why, wl, "dropping the file from the page cache: %s", strerror(errno));
		return -1;
	}
	if (pread(fd, host, len, pos) != (ssize_t)len) {
		snprintf(why, wl, "CPU pread %zu at %llu: %s", len, (unsigned long long)pos,
			 strerror(errno));
		return -1;
	}
	bad = spin_pattern_check(host, pos, len, seed);
	if (bad >= 0) {
		snprintf(why, wl, "CPU read: byte %llu wrong", (unsigned long long)(pos + bad));
		return -1;
	}
	if (pread(fd, gmem + BACK, len, pos) != (ssize_t)len) {
		snprintf(why, wl, "GPU pread: %s", strerror(errno));
		return -1;
	}
	if (spin_gpu_check(gpu, gmem + BACK, len, seed, pos, why, wl))
		return -1;
	return 0;
}

/* Are @len bytes at @pos of the host buffer all zero? */
static int zeros(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

static int open_new(const struct spin_fs *fs, const char *name, int flags, char *path)
{
	snprintf(path, PATH_MAX, "%s/%s", fs->dir, name);
	unlink(path);
	return open(path, O_RDWR | O_CREAT | O_TRUNC | flags, 0644);
}

/* A file of @len bytes of pattern @seed, written from host memory and synced. */
static int make_file(const struct spin_fs *fs, const char *name, size_t len, uint64_t seed,
		     char *path)
{
	int fd = open_new(fs, name, 0, path);

	if (fd < 0)
		return -1;
	spin_pattern_fill(host, 0, len, seed);
	if (pwrite(fd, host, len, 0) != (ssize_t)len || fsync(fd)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * The P2P bytes of a write of @len at @pos: all of it if its file range is
 * aligned to blocks of @lbs (one direct write), none otherwise (one page-cache
 * write: a write is never cut).
 */
static uint64_t direct_bytes(uint64_t pos, uint64_t len, unsigned int lbs)
{
	return pos % lbs || len % lbs ? 0 : len;
}

/* ---- aligned, unaligned, write(2), writev, small ------------------------ */

static void test_shapes(struct spin_fs *fs)
{
	static const struct { uint64_t pos, len; } w[] = {
		{ 0, 8 * MiB }, { 8 * MiB, 1 * MiB },		/* aligned */
		{ 9 * MiB + 1000, 3 * MiB + 777 },		/* unaligned both ends */
		{ 13 * MiB + 512, 64 * KiB - 512 },		/* block-aligned, not page */
		{ 14 * MiB + 100, 100 },			/* no whole block */
	};
	uint64_t seed = fs->seed, want_p2p = 0, want_pc = 0, total = 0;
	struct counts c0, c1;
	char path[PATH_MAX], why[256] = "ok", line[512], ino[32];
	int fd, ok = 1, traced = 0, direct = 0, split = 0, want_direct = 0;
	struct stat st;
	FILE *tr;

	fd = open_new(fs, "shapes", 0, path);
	if (fd < 0 || spin_trace_event(EVENT, 1) || spin_write_file(TRACE, "")) {
		ksft_test_result_fail("%s: shapes: setup: %s\n", fs->name, strerror(errno));
		return;
	}
	counts(fs, &c0);
	for (size_t i = 0; i < ARRAY_SIZE(w) && ok; i++) {
		size_t goff = src(w[i].pos);
		ssize_t n;

		if (gpu_fill(goff, w[i].len, w[i].pos, seed)) {
			snprintf(why, sizeof(why), "GPU fill failed");
			ok = 0;
			break;
		}
		if (i == 1) {
			/* write(2) at the file offset. */
			lseek(fd, w[i].pos, SEEK_SET);
			n = write(fd, gmem + goff, w[i].len);
			if (lseek(fd, 0, SEEK_CUR) != (off_t)(w[i].pos + w[i].len)) {
				snprintf(why, sizeof(why), "write(2) left the offset wrong");
				ok = 0;
			}
		} else {
			n = pwrite(fd, gmem + goff, w[i].len, w[i].pos);
		}
		if (n != (ssize_t)w[i].len) {
			snprintf(why, sizeof(why), "write %zu: %zd (%s)", i, n, strerror(errno));
			ok = 0;
		}
		want_p2p += direct_bytes(w[i].pos, w[i].len, fs->lbs);
		want_direct += !!direct_bytes(w[i].pos, w[i].len, fs->lbs);
		want_pc += w[i].len - direct_bytes(w[i].pos, w[i].len, fs->lbs);
		total += w[i].len;
	}
	counts(fs, &c1);
	spin_trace_event(EVENT, 0);
	/* This file's events only: the trace may hold those of other files. */
	snprintf(ino, sizeof(ino), " ino=%llu ", fstat(fd, &st) ? 0ULL :
		 (unsigned long long)st.st_ino);
	tr = fopen(TRACE, "r");
	while (tr && fgets(line, sizeof(line), tr)) {
		if (!strstr(line, "spin_route_write:") || !strstr(line, ino))
			continue;
		traced++;
		direct += !!strstr(line, "reason=none");
		split += !!strstr(line, "reason=split");
	}
	if (tr)
		fclose(tr);
	if (ok && (c1.p2p - c0.p2p != (long long)want_p2p || c1.pc - c0.pc != (long long)want_pc)) {
		snprintf(why, sizeof(why), "P2P %lld (want %llu), page cache %lld (want %llu)",
			 c1.p2p - c0.p2p, (unsigned long long)want_p2p, c1.pc - c0.pc,
			 (unsigned long long)want_pc);
		ok = 0;
	}
	if (ok && (traced != (int)ARRAY_SIZE(w) || direct != want_direct ||
		   split != (int)ARRAY_SIZE(w) - want_direct)) {
		snprintf(why, sizeof(why),
			 "%d spin_route_write events (want %zu), %d direct (want %d), %d split",
			 traced, ARRAY_SIZE(w), direct, want_direct, split);
		ok = 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(w) && ok; i++)
		ok = !file_ok(fd, w[i].pos, w[i].len, seed, why, sizeof(why));
	ksft_test_result(ok,
			 "%s: aligned, unaligned, write(2) and sub-block writes: %llu P2P bytes for the aligned ones, each whole, %llu through the page cache (split), bytes right (%s)\n",
			 fs->name, (unsigned long long)want_p2p, (unsigned long long)want_pc, why);

	/* pwritev: host, GPU, host iovecs; the GPU one unaligned in the file. */
	{
		uint64_t pos = 20 * MiB, h1 = 3000, g = 2 * MiB, h2 = 5000;
		struct iovec iov[3] = {
			{ host, h1 }, { gmem + src(pos + h1), g }, { host + h1, h2 },
		};

		spin_pattern_fill(host, pos, h1, seed);
		spin_pattern_fill(host + h1, pos + h1 + g, h2, seed);
		counts(fs, &c0);
		ok = !gpu_fill(src(pos + h1), g, pos + h1, seed) &&
		     pwritev(fd, iov, 3, pos) == (ssize_t)(h1 + g + h2);
		counts(fs, &c1);
		snprintf(why, sizeof(why), "%s", ok ? "ok" : strerror(errno));
		if (ok && (c1.p2p != c0.p2p || c1.fb_split - c0.fb_split != 1)) {
			snprintf(why, sizeof(why), "P2P %lld, split %lld", c1.p2p - c0.p2p,
				 c1.fb_split - c0.fb_split);
			ok = 0;
		}
		if (ok)
			ok = !file_ok(fd, pos, h1 + g + h2, seed, why, sizeof(why));
		ksft_test_result(ok,
				 "%s: pwritev of host, GPU and host iovecs goes whole through the page cache (split) (%s)\n",
				 fs->name, why);
	}
	close(fd);
	unlink(path);
}

/* ---- consistency with the page cache, mappings and concurrent readers ---- */

static void test_consistency(struct spin_fs *fs)
{
	size_t len = 4 * MiB;
	uint64_t s0 = fs->seed + 1, s1 = fs->seed + 2;
	char path[PATH_MAX], why[256] = "ok";
	int fd = make_file(fs, "cons", len, s0, path), ok = 1;
	uint8_t *map;
	ssize_t bad;

	if (fd < 0) {
		ksft_test_result_fail("%s: consistency: setup: %s\n", fs->name, strerror(errno));
		return;
	}
	/* Cache every page and fault a mapping of all of them in. */
	map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED || pread(fd, host, len, 0) != (ssize_t)len ||
	    spin_pattern_check(map, 0, len, s0) >= 0) {
		ksft_test_result_fail("%s: consistency: setup reads: %s\n", fs->name,
				      strerror(errno));
		close(fd);
		return;
	}
	if (gpu_fill(src(PG + 10), len - 2 * PG, PG + 10, s1) ||
	    pwrite(fd, gmem + src(PG + 10), len - 2 * PG, PG + 10) != (ssize_t)(len - 2 * PG)) {
		snprintf(why, sizeof(why), "GPU write: %s", strerror(errno));
		ok = 0;
	}
	/* Without dropping the cache: the page cache and the mapping. */
	if (ok && pread(fd, host, len, 0) != (ssize_t)len) {
		snprintf(why, sizeof(why), "pread: %s", strerror(errno));
		ok = 0;
	}
	if (ok) {
		bad = spin_pattern_check(host, 0, PG + 10, s0);
		if (bad < 0)
			bad = spin_pattern_check(host + PG + 10, PG + 10, len - 2 * PG, s1);
		if (bad < 0)
			bad = spin_pattern_check(host + len - PG + 10, len - PG + 10, PG - 10, s0);
		if (bad >= 0) {
			snprintf(why, sizeof(why), "cached read: stale byte near %zd", bad);
			ok = 0;
		}
	}
	if (ok && (spin_pattern_check(map + PG + 10, PG + 10, len - 2 * PG, s1) >= 0 ||
		   spin_pattern_check(map, 0, PG + 10, s0) >= 0)) {
		snprintf(why, sizeof(why), "the file mapping shows stale bytes");
		ok = 0;
	}
	munmap(map, len);
	ksft_test_result(ok, "%s: cached pages and a file mapping show the new bytes (%s)\n",
			 fs->name, why);

	/*
	 * A buffered reader (another process) rereads the file while the GPU
	 * overwrites all of it, alternately with s0 and s1 (from two GPU
	 * buffers): every page it sees is wholly s0 or s1.
	 */
	{
		int pipefd[2], status = 0, torn = 0;
		size_t b0 = SRC, b1 = SRC + 16 * MiB;
		pid_t child;

		ok = !gpu_fill(b0, len, 0, s0) && !gpu_fill(b1, len, 0, s1) &&
		     pwrite(fd, gmem + b1, len, 0) == (ssize_t)len;
		if (!ok || pipe(pipefd)) {
			ksft_test_result_fail("%s: concurrent reader: pipe\n", fs->name);
			goto out;
		}
		child = fork();
		if (child == 0) {
			uint8_t *buf = host + 8 * MiB;
			char c;

			close(pipefd[1]);
			fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
			while (read(pipefd[0], &c, 1) < 0 && errno == EAGAIN) {
				for (size_t p = 0; p < len; p += PG) {
					if (pread(fd, buf, PG, p) != (ssize_t)PG)
						_exit(2);
					if (spin_pattern_check(buf, p, PG, s0) >= 0 &&
					    spin_pattern_check(buf, p, PG, s1) >= 0)
						torn++;
				}
				posix_fadvise(fd, 0, len, POSIX_FADV_DONTNEED);
			}
			_exit(torn ? 1 : 0);
		}
		close(pipefd[0]);
		for (int i = 0; i < 7 && ok; i++)
			ok = pwrite(fd, gmem + (i % 2 ? b1 : b0), len, 0) == (ssize_t)len;
		close(pipefd[1]);
		waitpid(child, &status, 0);
		ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (ok)
			ok = !file_ok(fd, 0, len, s0, why, sizeof(why));
		ksft_test_result(ok,
				 "%s: a concurrent buffered reader sees each page old or new (reader exit %d; %s)\n",
				 fs->name, WIFEXITED(status) ? WEXITSTATUS(status) : -1, why);
	}
out:
	close(fd);
	unlink(path);
}

/* ---- O_APPEND and RWF_APPEND ---------------------------------------------- */

static void test_append(struct spin_fs *fs)
{
	uint64_t seed = fs->seed + 3, size = 1 * MiB, odd = 100;
	char path[PATH_MAX], why[256] = "ok";
	struct counts c0, c1, c2;
	int fd = make_file(fs, "append", size, seed, path), afd, ok;
	struct iovec iov = { gmem + SRC, 1 * MiB };

	afd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0 || afd < 0) {
		ksft_test_result_fail("%s: append: setup: %s\n", fs->name, strerror(errno));
		return;
	}
	counts(fs, &c0);
	/* Aligned end of file: one direct write there. */
	ok = !gpu_fill(SRC, MiB, size, seed) && write(afd, gmem + SRC, MiB) == (ssize_t)MiB;
	size += MiB;
	counts(fs, &c1);
	/* Unaligned end of file (host bytes appended), then RWF_APPEND on a plain fd. */
	spin_pattern_fill(host, size, odd, seed);
	ok = ok && write(afd, host, odd) == (ssize_t)odd;
	size += odd;
	ok = ok && !gpu_fill(SRC, MiB, size, seed) &&
	     pwritev2(fd, &iov, 1, 0, RWF_APPEND) == (ssize_t)MiB;
	size += MiB;
	counts(fs, &c2);
	if (!ok)
		snprintf(why, sizeof(why), "write: %s", strerror(errno));
	if (ok && (c1.p2p - c0.p2p != (long long)MiB || c2.fb_append - c1.fb_append != 1 ||
		   c2.p2p != c1.p2p)) {
		snprintf(why, sizeof(why), "P2P %lld then %lld, append fallbacks %lld",
			 c1.p2p - c0.p2p, c2.p2p - c1.p2p, c2.fb_append - c1.fb_append);
		ok = 0;
	}
	if (ok && lseek(fd, 0, SEEK_END) != (off_t)size) {
		snprintf(why, sizeof(why),
			 "size %lld, want %llu", (long long)lseek(fd, 0, SEEK_END),
			 (unsigned long long)size);
		ok = 0;
	}
	if (ok)
		ok = !file_ok(fd, 0, size, seed, why, sizeof(why));
	ksft_test_result(ok,
			 "%s: O_APPEND at an aligned end goes P2P, RWF_APPEND at an unaligned end falls back (append), bytes right (%s)\n",
			 fs->name, why);
	close(afd);
	close(fd);
	unlink(path);
}

/* ---- concurrent writers: nothing lost, each write whole ------------------- */

#define REC (64 * KiB)		/* one appended record */
#define RECS 32			/* records per appender */
#define RACE_LEN (16 * MiB)	/* the range two writers overwrite */
#define RACE_ROUNDS 12

struct racer {
	int fd;
	size_t goff;		/* GPU source */
	int id, err;
	int *done;		/* writers still running, for the reader (atomic) */
	long reads, mixed;	/* the reader's */
	uint64_t s0, s1;
};

/* Record @k is pattern @seed at file offset k * REC, wherever it lands. */
static void *appender(void *arg)
{
	struct racer *r = arg;

	for (int i = 0; i < RECS && !r->err; i++) {
		size_t k = r->id * RECS + i;

		if (write(r->fd, gmem + r->goff + k * REC, REC) != (ssize_t)REC)
			r->err = errno ? errno : EIO;
	}
	return NULL;
}

static void *overwriter(void *arg)
{
	struct racer *r = arg;

	for (int i = 0; i < RACE_ROUNDS && !r->err; i++)
		if (pwrite(r->fd, gmem + r->goff, RACE_LEN, 0) != (ssize_t)RACE_LEN)
			r->err = errno ? errno : EIO;
	__atomic_sub_fetch(r->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* A buffered reader into host memory: is each read wholly one write? */
static void *whole_reader(void *arg)
{
	struct racer *r = arg;
	uint8_t *buf = host;

	while (__atomic_load_n(r->done, __ATOMIC_SEQ_CST) && !r->err) {
		if (pread(r->fd, buf, RACE_LEN, 0) != (ssize_t)RACE_LEN) {
			r->err = errno ? errno : EIO;
			break;
		}
		r->reads++;
		r->mixed += spin_pattern_check(buf, 0, RACE_LEN, r->s0) >= 0 &&
			    spin_pattern_check(buf, 0, RACE_LEN, r->s1) >= 0;
	}
	return NULL;
}

static void test_races(struct spin_fs *fs)
{
	uint64_t seed = fs->seed + 7, s0 = fs->seed + 8, s1 = fs->seed + 9;
	char path[PATH_MAX], why[256] = "ok";
	struct racer w[3] = {};
	pthread_t t[3];
	uint8_t first[64];
	struct counts c0, c1;
	int running = 2;
	int fd, afd, ok = 1, seen[2 * RECS] = {};
	off_t size;

	/*
	 * Two threads append RECS records each from GPU memory to one file
	 * opened O_APPEND: every record must be there once, whole, as with
	 * buffered appends.
	 */
	fd = open_new(fs, "appenders", 0, path);
	afd = open(path, O_WRONLY | O_APPEND);
	w[0].fd = afd;
	w[1].fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0 || afd < 0 || w[1].fd < 0 || gpu_fill(SRC, 2 * RECS * REC, 0, seed)) {
		ksft_test_result_fail("%s: concurrent appenders: setup: %s\n", fs->name,
				      strerror(errno));
		goto overwriters;
	}
	counts(fs, &c0);
	for (int i = 0; i < 2; i++) {
		/* An open file each: a shared one would serialise write(2) on f_pos_lock. */
		w[i] = (struct racer){ .fd = w[i].fd, .goff = SRC, .id = i };
		pthread_create(&t[i], NULL, appender, &w[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	counts(fs, &c1);
	size = lseek(fd, 0, SEEK_END);
	if (w[0].err || w[1].err) {
		snprintf(why, sizeof(why), "write: %s", strerror(w[0].err ? w[0].err : w[1].err));
		ok = 0;
	} else if (size != (off_t)(2 * RECS * REC)) {
		snprintf(why, sizeof(why), "size %lld, want %lu: %lld bytes lost",
			 (long long)size, 2 * RECS * REC, (long long)(2 * RECS * REC - size));
		ok = 0;
	} else if (c1.p2p == c0.p2p) {
		snprintf(why, sizeof(why), "no byte went P2P: the routed path was not taken");
		ok = 0;
	}
	if (ok && (spin_uncache(fd) || pread(fd, host, size, 0) != size)) {
		snprintf(why, sizeof(why), "read back: %s", strerror(errno));
		ok = 0;
	}
	for (off_t at = 0; ok && at < size; at += REC) {
		int k;

		for (k = 0; k < 2 * RECS; k++) {
			spin_pattern_fill(first, k * REC, sizeof(first), seed);
			if (!memcmp(host + at, first, sizeof(first)))
				break;
		}
		if (k == 2 * RECS || seen[k]++ ||
		    spin_pattern_check(host + at, k * REC, REC, seed) >= 0) {
			snprintf(why, sizeof(why), "record at %lld is %s", (long long)at,
				 k == 2 * RECS ? "none of them" : seen[k] > 1 ? "a duplicate" :
				 "torn");
			ok = 0;
		}
	}
	ksft_test_result(ok,
			 "%s: two threads appending %d x %lu KiB from GPU memory lose nothing (%s)\n",
			 fs->name, RECS, REC / KiB, why);
overwriters:
	if (w[1].fd > 0)
		close(w[1].fd);
	if (afd >= 0)
		close(afd);
	if (fd >= 0)
		close(fd);
	unlink(path);

	/*
	 * Two threads overwrite the same range from GPU memory, each with its
	 * own bytes, while a third reads it into host memory through the page
	 * cache: the range ends wholly one writer's, and on XFS, whose buffered
	 * reads exclude writers, every read sees one write whole.
	 */
	memset(w, 0, sizeof(w));
	fd = make_file(fs, "overwriters", RACE_LEN, s0, path);
	if (fd < 0 || gpu_fill(SRC, RACE_LEN, 0, s0) ||
	    gpu_fill(SRC + RACE_LEN, RACE_LEN, 0, s1)) {
		ksft_test_result_fail("%s: concurrent overwriters: setup: %s\n", fs->name,
				      strerror(errno));
		return;
	}
	snprintf(why, sizeof(why), "ok");
	ok = 1;
	counts(fs, &c0);
	for (int i = 0; i < 3; i++) {
		w[i] = (struct racer){ .fd = fd, .goff = SRC + i * RACE_LEN, .done = &running,
				       .s0 = s0, .s1 = s1 };
		pthread_create(&t[i], NULL, i < 2 ? overwriter : whole_reader, &w[i]);
	}
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	counts(fs, &c1);
	if (w[0].err || w[1].err || w[2].err) {
		snprintf(why, sizeof(why), "I/O: %s",
			 strerror(w[0].err ? w[0].err : w[1].err ? w[1].err : w[2].err));
		ok = 0;
	} else if (c1.p2p == c0.p2p) {
		snprintf(why, sizeof(why), "no byte went P2P: the routed path was not taken");
		ok = 0;
	}
	if (ok && (spin_uncache(fd) || pread(fd, host, RACE_LEN, 0) != (ssize_t)RACE_LEN)) {
		snprintf(why, sizeof(why), "read back: %s", strerror(errno));
		ok = 0;
	}
	if (ok && spin_pattern_check(host, 0, RACE_LEN, s0) >= 0 &&
	    spin_pattern_check(host, 0, RACE_LEN, s1) >= 0) {
		snprintf(why, sizeof(why), "the range ends as a mix of both writes");
		ok = 0;
	}
	if (ok && !strcmp(fs->type, "xfs") && w[2].mixed) {
		snprintf(why, sizeof(why), "%ld of %ld reads saw a mix of two writes", w[2].mixed,
			 w[2].reads);
		ok = 0;
	}
	ksft_test_result(ok,
			 "%s: two threads overwriting %lu MiB from GPU memory %d times each leave one write whole; a buffered reader saw %ld mixed of %ld reads (%s)\n",
			 fs->name, RACE_LEN / MiB, RACE_ROUNDS, w[2].mixed, w[2].reads, why);
	close(fd);
	unlink(path);
}

/* ---- durability: O_SYNC, O_DSYNC, RWF_DSYNC, RWF_SYNC ---------------------- */

/* Read the file's bytes @pos..+@len from the block device, at its extents. */
static int on_disk(const struct spin_fs *fs, int fd, uint64_t pos, size_t len, uint8_t *out)
{
	struct {
		struct fiemap fm;
		struct fiemap_extent ext[32];
	} f;
	int dev = open(fs->dev, O_RDONLY | O_DIRECT), ret = -1;
	uint8_t *bounce = spin_alloc_aligned(len + 2 * PG);

	memset(&f, 0, sizeof(f));
	f.fm.fm_start = pos;
	f.fm.fm_length = len;
	f.fm.fm_extent_count = 32;
	if (dev < 0 || !bounce || ioctl(fd, FS_IOC_FIEMAP, &f.fm))
		goto out;
	for (uint64_t at = pos; at < pos + len;) {
		struct fiemap_extent *e = NULL;
		uint64_t phys, a0, n;

		for (unsigned int i = 0; i < f.fm.fm_mapped_extents; i++)
			if (f.ext[i].fe_logical <= at &&
			    at < f.ext[i].fe_logical + f.ext[i].fe_length)
				e = &f.ext[i];
		if (!e || (e->fe_flags & (FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_UNWRITTEN |
					  FIEMAP_EXTENT_UNKNOWN)))
			goto out;
		n = e->fe_logical + e->fe_length - at;
		if (n > pos + len - at)
			n = pos + len - at;
		phys = e->fe_physical + (at - e->fe_logical);
		a0 = phys / PG * PG;
		{
			size_t span = (phys + n - a0 + PG - 1) / PG * PG;

			if (pread(dev, bounce, span, a0) != (ssize_t)span)
				goto out;
		}
		memcpy(out + (at - pos), bounce + (phys - a0), n);
		at += n;
	}
	ret = 0;
out:
	free(bounce);
	if (dev >= 0)
		close(dev);
	return ret;
}

static void test_sync(struct spin_fs *fs)
{
	static const struct { const char *name; int oflag, rwf; } v[] = {
		{ "O_SYNC", O_SYNC, 0 }, { "O_DSYNC", O_DSYNC, 0 }, { "RWF_DSYNC", 0, RWF_DSYNC },
		{ "RWF_SYNC", 0, RWF_SYNC },
	};
	char why[256] = "ok";
	int ok = 1;

	for (size_t i = 0; i < ARRAY_SIZE(v) && ok; i++) {
		/* Even: aligned, one direct write (synced by spin); odd: the page cache. */
		uint64_t seed = fs->seed + 10 + i, pos = i % 2 ? 1000 : 4096;
		uint64_t len = i % 2 ? 2 * MiB + 300 : 2 * MiB;
		char path[PATH_MAX], name[32];
		struct iovec iov = { gmem + src(pos), len };
		struct counts c0, c1;
		int fd;
		ssize_t n;

		snprintf(name, sizeof(name), "sync%zu", i);
		fd = open_new(fs, name, v[i].oflag, path);
		if (fd < 0 || gpu_fill(src(pos), len, pos, seed)) {
			snprintf(why, sizeof(why), "%s: setup: %s", v[i].name, strerror(errno));
			ok = 0;
			break;
		}
		counts(fs, &c0);
		n = pwritev2(fd, &iov, 1, pos, v[i].rwf);
		counts(fs, &c1);
		memset(host, 0, len);
		if (n != (ssize_t)len) {
			snprintf(why, sizeof(why),
				 "%s: write %zd: %s", v[i].name, n, strerror(errno));
			ok = 0;
		} else if (on_disk(fs, fd, pos, len, host)) {
			snprintf(why, sizeof(why), "%s: not allocated on the disk on return",
				 v[i].name);
			ok = 0;
		} else if (spin_pattern_check(host, pos, len, seed) >= 0) {
			snprintf(why, sizeof(why), "%s: the disk holds other bytes at %lld",
				 v[i].name,
				 (long long)(pos + spin_pattern_check(host, pos, len, seed)));
			ok = 0;
		} else if (c1.p2p - c0.p2p != (long long)(i % 2 ? 0 : len)) {
			snprintf(why, sizeof(why), "%s: %lld bytes by P2P, want %llu", v[i].name,
				 c1.p2p - c0.p2p, (unsigned long long)(i % 2 ? 0 : len));
			ok = 0;
		}
		close(fd);
		unlink(path);
	}
	ksft_test_result(ok,
			 "%s: O_SYNC, O_DSYNC (direct writes), RWF_DSYNC, RWF_SYNC (page cache): the bytes are on the disk on return (%s)\n",
			 fs->name, why);
}

/* ---- RLIMIT_FSIZE --------------------------------------------------------- */

static sig_atomic_t xfsz;

static void on_xfsz(int sig)
{
	__atomic_store_n(&xfsz, 1, __ATOMIC_RELAXED);
}

static void test_rlimit(struct spin_fs *fs)
{
	uint64_t seed = fs->seed + 20, limit = MiB + 512 + 100;
	char path[PATH_MAX], why[256] = "ok";
	int fd = open_new(fs, "fsize", 0, path), status;
	pid_t child;

	if (fd < 0 || gpu_fill(SRC, 2 * MiB, 0, seed)) {
		ksft_test_result_fail("%s: RLIMIT_FSIZE: setup\n", fs->name);
		return;
	}
	child = fork();
	if (child == 0) {
		struct rlimit rl = { limit, limit };
		ssize_t a, b;
		int e;

		signal(SIGXFSZ, on_xfsz);
		if (setrlimit(RLIMIT_FSIZE, &rl))
			_exit(10);
		a = pwrite(fd, gmem + SRC, 2 * MiB, 0);
		if (a != (ssize_t)limit || __atomic_load_n(&xfsz, __ATOMIC_RELAXED))
			_exit(11);
		b = pwrite(fd, gmem + SRC, MiB, limit);
		e = errno;
		if (b != -1 || e != EFBIG || !__atomic_load_n(&xfsz, __ATOMIC_RELAXED))
			_exit(12);
		_exit(0);
	}
	waitpid(child, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		snprintf(why, sizeof(why),
			 "child exit %d (11: no short count at the limit, 12: no EFBIG and SIGXFSZ past it)",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	else if (lseek(fd, 0, SEEK_END) != (off_t)limit)
		snprintf(why, sizeof(why), "size %lld", (long long)lseek(fd, 0, SEEK_END));
	else
		file_ok(fd, 0, limit, seed, why, sizeof(why));
	ksft_test_result(!strcmp(why, "ok"),
			 "%s: RLIMIT_FSIZE: short count at the limit, EFBIG and SIGXFSZ past it (%s)\n",
			 fs->name, why);
	close(fd);
	unlink(path);
}

/* ---- immutable and append-only inodes ------------------------------------ */

/* Set (@on) or clear the inode flag @flag, keeping the others. */
static int set_flag(int fd, int flag, int on)
{
	int flags;

	if (ioctl(fd, FS_IOC_GETFLAGS, &flags))
		return -1;
	flags = on ? flags | flag : flags & ~flag;
	return ioctl(fd, FS_IOC_SETFLAGS, &flags);
}

static void test_inode_flags(struct spin_fs *fs)
{
	uint64_t seed = fs->seed + 30, s2 = fs->seed + 31;
	char path[PATH_MAX], why[256] = "ok";
	int fd = make_file(fs, "flags", MiB, seed, path), afd = -1, ok = 1, e1 = 0, e2 = 0;
	ssize_t n1 = 0, n2 = 0;

	if (fd < 0 || gpu_fill(SRC, MiB, 0, s2)) {
		ksft_test_result_fail("%s: inode flags: setup\n", fs->name);
		return;
	}
	/*
	 * A file made immutable after it was opened for writing: ext4 refuses
	 * the write (EPERM), xfs lets it through. The routed write must do what
	 * the filesystem's own buffered write does (pagecache mode).
	 */
	if (set_flag(fd, FS_IMMUTABLE_FL, 1) || spin_sysfs_set(SPIN_SYS "/mode", "pagecache")) {
		snprintf(why, sizeof(why), "FS_IMMUTABLE_FL: %s", strerror(errno));
		ok = 0;
	}
	if (ok) {
		n1 = pwrite(fd, gmem + SRC, MiB, 0);
		e1 = errno;
		spin_sysfs_set(SPIN_SYS "/mode", "auto");
		n2 = pwrite(fd, gmem + SRC, MiB, 0);
		e2 = errno;
	}
	spin_sysfs_set(SPIN_SYS "/mode", "auto");
	set_flag(fd, FS_IMMUTABLE_FL, 0);
	if (ok && (n1 != n2 || (n1 < 0 && e1 != e2))) {
		snprintf(why, sizeof(why), "immutable: page cache %zd (%s), routed %zd (%s)", n1,
			 strerror(e1), n2, strerror(e2));
		ok = 0;
	}
	if (ok)
		ok = !file_ok(fd, 0, MiB, n1 < 0 ? seed : s2, why, sizeof(why));
	/* Append-only: O_APPEND writes land at the end; others are refused at open. */
	if (ok && set_flag(fd, FS_APPEND_FL, 1)) {
		snprintf(why, sizeof(why), "FS_APPEND_FL: %s", strerror(errno));
		ok = 0;
	}
	if (ok && open(path, O_WRONLY) >= 0) {
		snprintf(why, sizeof(why), "append-only file opened for writing without O_APPEND");
		ok = 0;
	}
	if (ok) {
		afd = open(path, O_WRONLY | O_APPEND);
		ok = afd >= 0 && !gpu_fill(SRC, MiB, MiB, seed) &&
		     write(afd, gmem + SRC, MiB) == (ssize_t)MiB;
		if (!ok)
			snprintf(why, sizeof(why), "append-only: %s", strerror(errno));
	}
	set_flag(fd, FS_APPEND_FL, 0);
	if (ok)
		ok = !file_ok(fd, MiB, MiB, seed, why, sizeof(why));
	ksft_test_result(ok,
			 "%s: immutable file: the routed write does as the filesystem (%s); append-only file: O_APPEND lands at the end (%s)\n",
			 fs->name, n1 < 0 ? strerror(e1) : "written", why);
	if (afd >= 0)
		close(afd);
	close(fd);
	unlink(path);
}

/* ---- holes, unwritten extents, delayed allocation, extending -------------- */

static void test_allocation(struct spin_fs *fs)
{
	uint64_t seed = fs->seed + 40, s2 = fs->seed + 41;
	size_t len = 8 * MiB;
	char path[PATH_MAX], why[256] = "ok";
	int fd = open_new(fs, "alloc", 0, path), ok;
	struct counts c0, c1;

	if (fd < 0) {
		ksft_test_result_fail("%s: allocation: setup\n", fs->name);
		return;
	}
	/*
	 * [0, 1M) hole left; [1M, 3M) preallocated (unwritten) and written from
	 * the GPU; [3M, 4M) dirty buffered pages (delayed allocation on ext4),
	 * overwritten from the GPU at [3.5M, 5M) while still dirty, extending
	 * the file; then a write past the end leaves a hole [5M, 6M).
	 */
	counts(fs, &c0);
	ok = !ftruncate(fd, 0) && !fallocate(fd, FALLOC_FL_KEEP_SIZE, MiB, 2 * MiB);
	ok = ok && !gpu_fill(SRC, 2 * MiB, MiB, seed) &&
	     pwrite(fd, gmem + SRC, 2 * MiB, MiB) == (ssize_t)(2 * MiB);
	spin_pattern_fill(host, 3 * MiB, MiB, s2);
	ok = ok && pwrite(fd, host, MiB, 3 * MiB) == (ssize_t)MiB;
	ok = ok && !gpu_fill(SRC, MiB + MiB / 2, 3 * MiB + MiB / 2, seed) &&
	     pwrite(fd, gmem + SRC, MiB + MiB / 2, 3 * MiB + MiB / 2) == (ssize_t)(MiB + MiB / 2);
	ok = ok && !gpu_fill(SRC, 2 * MiB, 6 * MiB, seed) &&
	     pwrite(fd, gmem + SRC, 2 * MiB, 6 * MiB) == (ssize_t)(2 * MiB);
	counts(fs, &c1);
	if (!ok)
		snprintf(why, sizeof(why), "writes: %s", strerror(errno));
	if (ok && c1.p2p - c0.p2p != (long long)(5 * MiB + MiB / 2)) {
		snprintf(why, sizeof(why), "P2P %lld bytes, want %lu", c1.p2p - c0.p2p,
			 5 * MiB + MiB / 2);
		ok = 0;
	}
	if (ok && (spin_uncache(fd) || pread(fd, host, len, 0) != (ssize_t)len)) {
		snprintf(why, sizeof(why), "read back: %s", strerror(errno));
		ok = 0;
	}
	if (ok && (!zeros(host, MiB) || !zeros(host + 5 * MiB, MiB))) {
		snprintf(why, sizeof(why), "holes not zero");
		ok = 0;
	}
	if (ok && (spin_pattern_check(host + 3 * MiB, 3 * MiB, MiB / 2, s2) >= 0)) {
		snprintf(why, sizeof(why), "the dirty pages before the GPU write were lost");
		ok = 0;
	}
	if (ok)
		ok = !file_ok(fd, MiB, 2 * MiB, seed, why, sizeof(why)) &&
		     !file_ok(fd, 3 * MiB + MiB / 2, MiB + MiB / 2, seed, why, sizeof(why)) &&
		     !file_ok(fd, 6 * MiB, 2 * MiB, seed, why, sizeof(why));
	ksft_test_result(ok,
			 "%s: holes, preallocated extents, dirty delayed-allocation pages under a GPU write, extending writes (%s)\n",
			 fs->name, why);
	close(fd);
	unlink(path);
}

/* ---- ENOSPC --------------------------------------------------------------- */

static void test_enospc(struct spin_fs *fs)
{
	uint64_t seed = fs->seed + 50;
	size_t len = 24 * MiB;
	char path[PATH_MAX], fill[PATH_MAX], why[256] = "ok";
	int fd = open_new(fs, "nospace", 0, path), ffd = open_new(fs, "filler", 0, fill), ok = 1;
	struct statvfs sv;
	ssize_t n;
	off_t avail;

	if (fd < 0 || ffd < 0 || fstatvfs(fd, &sv)) {
		ksft_test_result_fail("%s: ENOSPC: setup: %s\n", fs->name, strerror(errno));
		return;
	}
	/*
	 * Fill the filesystem (most of it in one go, the rest in 1 MiB steps
	 * until ENOSPC, whatever it keeps back for metadata), then free 8 MiB
	 * by punching a hole: less than the write.
	 */
	avail = (off_t)(sv.f_bavail * sv.f_frsize) - 64 * (off_t)MiB;
	if (avail <= 0 || fallocate(ffd, 0, 0, avail)) {
		ksft_test_result_fail("%s: ENOSPC: fallocate %lld: %s\n", fs->name,
				      (long long)avail, strerror(errno));
		goto out;
	}
	while (!fallocate(ffd, 0, avail, MiB))
		avail += MiB;
	if (errno != ENOSPC ||
	    fallocate(ffd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 8 * MiB)) {
		ksft_test_result_fail("%s: ENOSPC: filling the filesystem: %s\n", fs->name,
				      strerror(errno));
		goto out;
	}
	ok = !gpu_fill(SRC, len, 0, seed);
	n = pwrite(fd, gmem + SRC, len, 0);
	if (ok && !(n == -1 && (errno == ENOSPC || errno == EDQUOT)) &&
	    !(n >= 0 && n < (ssize_t)len)) {
		snprintf(why, sizeof(why), "write returned %zd (%s), want a short count or ENOSPC",
			 n, strerror(errno));
		ok = 0;
	}
	if (ok && fsync(fd) && errno != ENOSPC) {
		snprintf(why, sizeof(why), "fsync: %s", strerror(errno));
		ok = 0;
	}
	if (ok && n > 0)
		ok = !file_ok(fd, 0, n, seed, why, sizeof(why));
	ksft_test_result(ok,
			 "%s: ENOSPC mid-request: %zd of %zu bytes reported, and they are there after fsync (%s)\n",
			 fs->name, n, len, why);
out:
	close(ffd);
	unlink(fill);
	close(fd);
	unlink(path);
}

/* ---- fallbacks and O_DIRECT ----------------------------------------------- */

static void test_fallbacks(struct spin_fs *fs)
{
	uint64_t seed = fs->seed + 60;
	char path[PATH_MAX], why[256] = "ok";
	int fd = open_new(fs, "fallback", 0, path), dfd, ok;
	struct counts c0, c1, c2;

	if (fd < 0) {
		ksft_test_result_fail("%s: fallbacks: setup\n", fs->name);
		return;
	}
	/* pagecache mode: all through the page cache. */
	counts(fs, &c0);
	ok = !spin_sysfs_set(SPIN_SYS "/mode", "pagecache") && !gpu_fill(SRC, 2 * MiB, 0, seed) &&
	     pwrite(fd, gmem + SRC, 2 * MiB, 0) == (ssize_t)(2 * MiB);
	spin_sysfs_set(SPIN_SYS "/mode", "auto");
	counts(fs, &c1);
	/* A GPU address one byte off the file offset's alignment. */
	ok = ok && !gpu_fill(SRC + 1, MiB, 2 * MiB, seed) &&
	     pwrite(fd, gmem + SRC + 1, MiB, 2 * MiB) == (ssize_t)MiB;
	counts(fs, &c2);
	if (!ok)
		snprintf(why, sizeof(why), "writes: %s", strerror(errno));
	if (ok && (c1.fb_mode - c0.fb_mode != 1 || c2.fb_mis - c1.fb_mis != 1 ||
		   c2.p2p != c0.p2p || c2.pc - c0.pc != (long long)(3 * MiB))) {
		snprintf(why, sizeof(why), "mode %lld, misaligned %lld, P2P %lld, page cache %lld",
			 c1.fb_mode - c0.fb_mode, c2.fb_mis - c1.fb_mis, c2.p2p - c0.p2p,
			 c2.pc - c0.pc);
		ok = 0;
	}
	if (ok)
		ok = !file_ok(fd, 0, 3 * MiB, seed, why, sizeof(why));
	ksft_test_result(ok,
			 "%s: fallbacks mode (pagecache) and misaligned: counted, no P2P, bytes right (%s)\n",
			 fs->name, why);

	/*
	 * RWF_NOWAIT: the routed write would block (io_uring's first attempt
	 * is such a write; it then retries from a worker): EAGAIN, nothing
	 * written.
	 */
	{
		struct iovec iov = { gmem + SRC, MiB };
		ssize_t n;
		int e;

		ok = !gpu_fill(SRC, MiB, 0, seed + 2);
		n = ok ? pwritev2(fd, &iov, 1, 0, RWF_NOWAIT) : 0;
		e = errno;
		snprintf(why, sizeof(why), "pwritev2: %zd (%s)", n, n < 0 ? strerror(e) : "-");
		ok = ok && n == -1 && e == EAGAIN && !file_ok(fd, 0, MiB, seed, why, sizeof(why));
		ksft_test_result(ok,
				 "%s: RWF_NOWAIT write from GPU memory: EAGAIN, the file unchanged (%s)\n",
				 fs->name, why);
	}

	/* O_DIRECT from GPU memory: upstream's path, not routed. */
	dfd = open(path, O_RDWR | O_DIRECT);
	counts(fs, &c0);
	ok = dfd >= 0 && !gpu_fill(SRC, 4 * MiB, 4 * MiB, seed + 1) &&
	     pwrite(dfd, gmem + SRC, 4 * MiB, 4 * MiB) == (ssize_t)(4 * MiB);
	counts(fs, &c1);
	snprintf(why, sizeof(why), "%s", ok ? "ok" : strerror(errno));
	if (ok && c1.req != c0.req) {
		snprintf(why, sizeof(why), "an O_DIRECT write was routed");
		ok = 0;
	}
	if (ok)
		ok = !file_ok(fd, 4 * MiB, 4 * MiB, seed + 1, why, sizeof(why));
	ksft_test_result(ok, "%s: O_DIRECT pwrite from GPU memory (upstream P2P path) (%s)\n",
			 fs->name, why);
	if (dfd >= 0)
		close(dfd);
	close(fd);
	unlink(path);
}

/* ---- timestamps ------------------------------------------------------------ */

static void test_times(struct spin_fs *fs)
{
	struct timespec old[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
	char path[PATH_MAX], why[256] = "ok";
	int fd = make_file(fs, "times", MiB, fs->seed + 70, path), ok;
	struct stat st;

	/* mtime and ctime far in the past, then a routed write: both move to now. */
	ok = fd >= 0 && !futimens(fd, old) && !gpu_fill(SRC, MiB, 0, fs->seed + 71) &&
	     pwrite(fd, gmem + SRC, MiB, 0) == (ssize_t)MiB && !fstat(fd, &st);
	if (!ok)
		snprintf(why, sizeof(why), "setup or write: %s", strerror(errno));
	if (ok && (st.st_mtime <= old[1].tv_sec + 1000 || st.st_ctime <= old[1].tv_sec + 1000)) {
		snprintf(why, sizeof(why), "mtime %lld, ctime %lld not updated",
			 (long long)st.st_mtime, (long long)st.st_ctime);
		ok = 0;
	}
	ksft_test_result(ok, "%s: a routed write updates mtime and ctime (%s)\n", fs->name, why);
	if (fd >= 0)
		close(fd);
	unlink(path);
}

/* ---- the fallbacks of other disks: no_bdev, distance, queue --------------- */

static void test_disk_fallbacks(void)
{
	struct {
		const char *name, *counter;
		struct spin_fs fs;	/* a disk's; tmpfs without a serial */
	} d[] = {
		{ "tmpfs (no block device)", "write_fallback_no_bdev", { .dir = "/mnt/wr-tmpfs" } },
		{ "ext4 on spin-nvme2 (no P2P path)", "write_fallback_distance",
		  { .name = "ext4", .serial = SPIN_NVME2_SERIAL, .type = "ext4",
		    .mkfs = SPIN_MKFS_EXT4, .dir = "/mnt/wr-far" } },
		{ "xfs on spin-vblk (no P2PDMA queue)", "write_fallback_queue",
		  { .name = "xfs", .serial = SPIN_VBLK_SERIAL, .virtio = 1, .type = "xfs",
		    .mkfs = SPIN_MKFS_XFS, .dir = "/mnt/wr-vblk" } },
	};

	for (size_t i = 0; i < ARRAY_SIZE(d); i++) {
		char path[PATH_MAX], why[256] = "ok";
		long long c0, c1, p0, p1;
		int fd, ok;

		if (!d[i].fs.serial)
			ok = !spin_mount("tmpfs", d[i].fs.dir, "tmpfs", 0, "size=64m");
		else
			ok = !spin_fs_setup(&d[i].fs, 0);
		if (!ok) {
			ksft_test_result_fail("%s: setup: %s\n", d[i].name, strerror(errno));
			continue;
		}
		snprintf(path, sizeof(path), "%s/f", d[i].fs.dir);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		c0 = spin_stat_get(SPIN_SYS "/stat", d[i].counter);
		p0 = spin_stat_get(SPIN_SYS "/stat", "write_bytes_p2p");
		ok = fd >= 0 && !gpu_fill(SRC, 2 * MiB, 0, 90 + i) &&
		     pwrite(fd, gmem + SRC, 2 * MiB, 0) == (ssize_t)(2 * MiB);
		c1 = spin_stat_get(SPIN_SYS "/stat", d[i].counter);
		p1 = spin_stat_get(SPIN_SYS "/stat", "write_bytes_p2p");
		if (!ok)
			snprintf(why, sizeof(why), "write: %s", strerror(errno));
		if (ok && (c1 - c0 != 1 || p1 != p0)) {
			snprintf(why, sizeof(why), "%s +%lld, P2P bytes +%lld", d[i].counter,
				 c1 - c0, p1 - p0);
			ok = 0;
		}
		if (ok)
			ok = !file_ok(fd, 0, 2 * MiB, 90 + i, why, sizeof(why));
		ksft_test_result(ok,
				 "%s: a write from GPU memory falls back (%s), bytes right (%s)\n",
				 d[i].name, d[i].counter, why);
		if (fd >= 0)
			close(fd);
		if (spin_umount(d[i].fs.dir))
			ksft_print_msg("umount %s: %s\n", d[i].fs.dir, strerror(errno));
	}
}

/* Each filesystem's tests; the number of results each reports. */
static void test_fs(struct spin_fs *fs, size_t i)
{
	test_shapes(fs);		/* 2 */
	test_consistency(fs);		/* 2 */
	test_append(fs);		/* 1 */
	test_races(fs);			/* 2 */
	test_sync(fs);			/* 1 */
	test_rlimit(fs);		/* 1 */
	test_inode_flags(fs);		/* 1 */
	test_allocation(fs);		/* 1 */
	test_fallbacks(fs);		/* 3 */
	test_times(fs);			/* 1 */
	test_enospc(fs);		/* 1 */
}

int main(void)
{
	struct spin_fs all[] = {
		SPIN_FS_EXT4("/mnt/wr-ext4", 101),
		SPIN_FS_XFS("/mnt/wr-xfs", 201),
	};
	int heap, buf;

	ksft_print_header();
	ksft_set_plan(ARRAY_SIZE(all) * 16 + 3);
	SPIN_GPU_SETUP_OR_EXIT(gpu, GPU_LEN, &gmem, &heap, &buf, HOST_LEN, &host);
	SPIN_FS_EACH_OR_EXIT(all, ARRAY_SIZE(all), 0, test_fs);
	test_disk_fallbacks();		/* 3 */
	munmap(gmem, GPU_LEN);
	close(buf);
	close(heap);
	ksft_finished();
}
