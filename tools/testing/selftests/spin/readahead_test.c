// SPDX-License-Identifier: GPL-2.0
/*
 * GPU read-ahead (SPIN section 4.3.2): small sequential reads into
 * GPU memory go through the page cache with read-ahead, and what that
 * read-ahead brings in stays inside a bounded partition of the page cache.
 *
 * On ext4 (spin-nvme0) and xfs (spin-nvme1), in auto mode, every byte checked
 * from the host side of the GPU memory:
 *  - one GPU stream of 4 KiB reads over a file ten times the partition: the
 *    file's resident pages (the page cache's add and delete events, replayed
 *    in order) never exceed the partition; every read is a read-ahead
 *    request, none goes by P2P; the spin_readahead event fires; the
 *    background evictor drops the consumed pages and leaves at most 11/16 of
 *    the partition;
 *  - four concurrent streams on four files: the bound holds for their sum;
 *  - a stream whose pages RWF_NOWAIT and io_uring reads also copy from the
 *    cache: those copies leave the pages to the partition, which evicts them;
 *  - folios a pipe holds (spliced, not mapped) are found busy by the
 *    partition's eviction and kept, then evicted once the pipe lets them go;
 *  - an RWF_DONTCACHE read into host memory drops the folio it ends in, as
 *    without spin;
 *  - a page the CPU reads (pread into host memory) and a page a fault of a
 *    file mapping touches leave the partition and survive its eviction; the
 *    untouched pages of the same window are evicted;
 *  - fadvise: RANDOM turns read-ahead off (every read P2P), SEQUENTIAL widens
 *    the window (a read of the plain window size becomes a read-ahead
 *    request), DONTNEED drops the partition's pages, WILLNEED's pages serve
 *    the stream without P2P;
 *  - pages written (not synced) while in the partition are never lost;
 *  - a stream across chunks cached and not in turn: GPU read-ahead reads the
 *    next uncached chunk ahead before the stream reaches it (a window
 *    "bridged" across the cached pages), so no read-ahead request misses;
 *  - a hole punched and a truncate while a stream runs: the GPU gets the
 *    data, zeros in the hole, and nothing past the new end;
 *  - on xfs, folios that eviction finds busy (fault injection,
 *    fail_spin_evict) stay counted until the evictor tries them again: the
 *    bound holds and, after the stream, nothing is held or resident outside
 *    the partition; while held pages stay busy and leave the evictor no
 *    room, it waits for the retrier instead of running again and again;
 *    a reservation they leave no room tries them once more itself;
 *  - a stream of reads of one and a half windows and two pages, with the
 *    disk's cost model of a PCIe 4 drive (copying faster than the device):
 *    every read after the first goes through the page cache with read-ahead
 *    (ahead_chunks), and the file's resident pages stay within the partition
 *    although the reads end inside read-ahead windows; with a copy ten times
 *    slower, every read goes by P2P;
 *  - a fully cached 8 MiB read with a cost model whose device is faster than
 *    the copy: part of it goes by P2P (all of it on xfs, whose P2P legs are
 *    synchronous); with a page of it dirty, none, and the GPU gets the page
 *    as written; after fsync, P2P again.
 * Then the knob /sys/kernel/spin/ra_partition_pages: its default, bad values,
 * and 0, which turns GPU read-ahead off.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define PG 4096UL
#define GPU_LEN (64 * MiB)
#define LIMIT 512			/* the partition's default, in pages */
#define STREAMS 4

static char gpu[PATH_MAX];
static uint8_t *gmem;		/* GPU memory, GPU_LEN bytes */
static uint8_t *host;		/* host scratch, 16 MiB */

/* The read-ahead partition's limit, given back at exit (spin_sysfs_set()). */
static int set_limit(long long pages)
{
	char v[32];

	snprintf(v, sizeof(v), "%lld", pages);
	return spin_sysfs_set(SPIN_SYS "/ra_partition_pages", v);
}

#define EVENT "spin/spin_readahead"

/*
 * The read-ahead partition's counters (SPIN_SYS "/stat"): part_stats() reads
 * them, part_since() how much each grew since part_stats() read @p0.
 */
enum { P_EVICTED, P_BACKGROUND, P_GONE, P_BUSY, P_HELD, P_UNRESERVED, P_CONSUMED_FIRST,
	P_NO_ROOM, P_RETRIES, P_NR };

static void part_stats(long long *v)
{
	static const char *const names[P_NR] = {
		"ra_pages_evicted", "ra_pages_evicted_background", "ra_pages_gone",
		"ra_pages_busy", "ra_pages_held", "ra_pages_unreserved",
		"ra_pages_consumed_first", "ra_legs_no_room", "ra_reserve_retries",
	};

	for (int i = 0; i < P_NR; i++)
		v[i] = spin_stat_get(SPIN_SYS "/stat", names[i]);
}

static void part_since(const long long *p0, long long *d)
{
	part_stats(d);
	for (int i = 0; i < P_NR; i++)
		d[i] -= p0[i];
}

/* Resident pages of @fd's first @pages pages, as mincore() sees them. */
static long resident(int fd, size_t pages, unsigned char *vec)
{
	unsigned char local[8192];
	unsigned char *v = vec ? vec : local;
	void *map;
	long n = 0;

	if (!vec && pages > sizeof(local))
		return -1;
	map = mmap(NULL, pages * PG, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -1;
	if (mincore(map, pages * PG, v))
		n = -1;
	for (size_t i = 0; n >= 0 && i < pages; i++)
		n += v[i] & 1;
	munmap(map, pages * PG);
	return n;
}

/* A pattern file of @pages pages at @path, on the disk and not in the page cache. */
static int make_file(const char *path, size_t pages, uint64_t seed)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return -1;
	for (size_t off = 0; off < pages * PG; off += 16 * MiB) {
		size_t n = pages * PG - off < 16 * MiB ? pages * PG - off : 16 * MiB;

		spin_pattern_fill(host, off, n, seed);
		if (spin_write_uncached(fd, host, n, off))
			goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

static int make_named(const struct spin_fs *fs, const char *name, size_t pages, uint64_t seed,
		      char *path)
{
	snprintf(path, PATH_MAX, "%s/%s", fs->dir, name);
	return make_file(path, pages, seed);
}

/*
 * Read @len bytes of @fd from 0 in @chunk-byte preads into GPU memory at @goff;
 * returns the bytes read.
 */
static long long stream(int fd, size_t goff, size_t len, size_t chunk)
{
	long long done = 0;

	while ((size_t)done < len) {
		size_t n = len - done < chunk ? len - done : chunk;
		ssize_t got = pread(fd, gmem + goff + done, n, done);

		if (got <= 0)
			break;
		done += got;
	}
	return done;
}

static int gpu_ok(size_t goff, size_t len, uint64_t seed, uint64_t poff, char *why,
		  size_t whylen)
{
	return spin_gpu_check(gpu, gmem + goff, len, seed, poff, why, whylen);
}

/* ---- one stream, and the bound ----------------------------------------- */

/* Prints the runs of resident pages in @vec (from mincore()) of @pages pages. */
static void print_runs(const struct spin_fs *fs, const unsigned char *vec, size_t pages)
{
	for (size_t i = 0; i < pages; i++) {
		size_t j = i;

		if (!(vec[i] & 1))
			continue;
		while (j + 1 < pages && (vec[j + 1] & 1))
			j++;
		ksft_print_msg("%s: resident pages %zu-%zu\n", fs->name, i, j);
		i = j;
	}
}

/*
 * The bound, as the page cache itself accounts for it. mincore() looks at one
 * page at a time, so a count over files (or over one file's pages) taken while
 * folios come and go adds up pages that were never resident at the same time:
 * such a sum has counted 640 pages of four files against a bound of 512.
 * Instead the page cache's own events for adding and deleting a folio, in a
 * trace instance of this test with the global clock, are replayed in order, so
 * that the largest count they reach is what was resident at some moment.
 */
#define BOUND_TRACE "/sys/kernel/tracing/instances/spin_readahead_test"

struct bound {
	int fd[STREAMS];
	int nr;
	size_t pages;
	long start;		/* resident when the trace began */
	long max;		/* the most resident at once */
	long events;		/* folios added and deleted */
	int bad;
};

static const char *const bound_events[] = {
	"mm_filemap_add_to_page_cache", "mm_filemap_delete_from_page_cache",
};

static int bound_event(const char *ev, const char *file, const char *val)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), BOUND_TRACE "/events/filemap/%s/%s", ev, file);
	return spin_write_file(path, val);
}

/* Starts counting the folios of @b's files in the page cache. */
static void bound_start(struct bound *b)
{
	char filter[1024];
	size_t len = 0;
	struct stat st = { 0 };

	b->events = 0;
	b->bad = 0;
	b->start = 0;
	for (int i = 0; i < b->nr; i++) {
		long r = resident(b->fd[i], b->pages, NULL);

		if (r < 0 || fstat(b->fd[i], &st))
			b->bad = 1;
		b->start += r;
		/* The event's s_dev is the kernel's dev_t: MKDEV() is major << 20 | minor. */
		len += snprintf(filter + len, sizeof(filter) - len,
				"%s(s_dev == %u && i_ino == %llu)", i ? " || " : "",
				major(st.st_dev) << 20 | minor(st.st_dev),
				(unsigned long long)st.st_ino);
	}
	b->max = b->start;
	if (access("/sys/kernel/tracing/instances", F_OK))
		mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL);
	rmdir(BOUND_TRACE);
	if (mkdir(BOUND_TRACE, 0755) ||
	    spin_write_file(BOUND_TRACE "/buffer_size_kb", "8192") ||
	    spin_write_file(BOUND_TRACE "/trace_clock", "global")) {
		ksft_print_msg("trace instance %s: %s\n", BOUND_TRACE, strerror(errno));
		b->bad = 1;
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(bound_events); i++) {
		if (bound_event(bound_events[i], "filter", filter) ||
		    bound_event(bound_events[i], "enable", "1")) {
			ksft_print_msg("%s: %s\n", bound_events[i], strerror(errno));
			b->bad = 1;
		}
	}
}

/*
 * Stops the count of bound_start() and replays it: sets @b->max, or @b->bad if
 * the trace is missing or lost events.
 */
static void bound_end(struct bound *b)
{
	unsigned long long in_buf = 0, written = 0;
	long cur = b->start;
	char line[512];
	FILE *f;

	for (size_t i = 0; i < ARRAY_SIZE(bound_events); i++)
		bound_event(bound_events[i], "enable", "0");
	f = fopen(BOUND_TRACE "/trace", "r");
	if (!f) {
		b->bad = 1;
		rmdir(BOUND_TRACE);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		const char *o = strstr(line, " order=");
		int sign = strstr(line, "mm_filemap_add_to_page_cache:") ? 1 :
			   strstr(line, "mm_filemap_delete_from_page_cache:") ? -1 : 0;

		if (sscanf(line, "# entries-in-buffer/entries-written: %llu/%llu",
			   &in_buf, &written) == 2)
			continue;
		if (strstr(line, "LOST"))
			b->bad = 1;
		if (!sign || !o)
			continue;
		cur += sign * (1L << atoi(o + 7));
		if (cur > b->max)
			b->max = cur;
		b->events++;
	}
	fclose(f);
	if (in_buf != written || !b->events) {
		ksft_print_msg("page cache trace: %llu of %llu events kept, %ld replayed\n",
			       in_buf, written, b->events);
		b->bad = 1;
	}
	rmdir(BOUND_TRACE);
}

static void one_stream(struct spin_fs *fs)
{
	size_t pages = 10 * LIMIT, len = pages * PG;
	struct bound b = { .nr = 1, .pages = pages };
	long long req0, hit0, p2p0, pf0, req1, hit1, p2p1, pf1, done;
	long long p0[P_NR], d[P_NR], unres1, part = -1;
	static unsigned char vec[10 * LIMIT];
	char path[PATH_MAX], why[256], trace[8192];
	long res = -1;
	long reads = len / PG;
	int ok;

	b.fd[0] = make_named(fs, "stream", pages, fs->seed, path);
	if (b.fd[0] < 0)
		ksft_exit_fail_msg("%s: stream file: %s\n", fs->name, strerror(errno));
	if (spin_trace_event(EVENT, 1) || spin_write_file("/sys/kernel/tracing/trace", ""))
		ksft_print_msg("%s: tracefs: %s\n", fs->name, strerror(errno));
	req0 = spin_stat_get(fs->stat, "ra_requests");
	hit0 = spin_stat_get(fs->stat, "ra_hits");
	p2p0 = spin_stat_get(fs->stat, "bytes_p2p");
	pf0 = spin_stat_get(fs->stat, "ra_pages_prefetched");
	part_stats(p0);
	bound_start(&b);
	done = stream(b.fd[0], 0, len, PG);
	bound_end(&b);
	unres1 = spin_stat_get(SPIN_SYS "/stat", "ra_pages_unreserved");
	req1 = spin_stat_get(fs->stat, "ra_requests");
	hit1 = spin_stat_get(fs->stat, "ra_hits");
	p2p1 = spin_stat_get(fs->stat, "bytes_p2p");
	pf1 = spin_stat_get(fs->stat, "ra_pages_prefetched");
	spin_trace_event(EVENT, 0);

	ksft_test_result(!b.bad && b.max <= LIMIT && b.max > 0 && unres1 == p0[P_UNRESERVED],
			 "%s: one GPU stream over %zu pages: at most %ld resident (partition %d), %lld pages admitted unreserved\n",
			 fs->name, pages, b.max, LIMIT, unres1 - p0[P_UNRESERVED]);
	ok = done == (long long)len && !gpu_ok(0, len, fs->seed, 0, why, sizeof(why));
	ksft_test_result(ok, "%s: one GPU stream: %lld of %zu bytes right in GPU memory%s%s\n",
			 fs->name, done, len, ok ? "" : ": ", ok ? "" : why);
	ksft_test_result(req1 - req0 == reads && p2p1 == p2p0 && pf1 > pf0 &&
			 hit1 - hit0 > reads / 2,
			 "%s: one GPU stream: %lld read-ahead requests of %ld, %lld hits, %lld P2P bytes, %lld pages prefetched\n",
			 fs->name, req1 - req0, reads, hit1 - hit0, p2p1 - p2p0, pf1 - pf0);
	trace[0] = '\0';
	spin_read_file("/sys/kernel/tracing/trace", trace, sizeof(trace));
	ksft_test_result(strstr(trace, "spin_readahead:") && strstr(trace, "admitted="),
			 "%s: the spin_readahead event fires during the stream\n", fs->name);
	/*
	 * The reads left the pages they consumed to the partition; its
	 * background evictor dropped them, down to half the limit once it is
	 * done (the kick is at 11/16 of it), and below that the pages the
	 * stream had read past (consumed first). Every resident page of the
	 * file is then one the partition still books.
	 */
	for (int i = 0; i < 300; i++) {
		part = spin_stat_get(SPIN_SYS "/stat", "ra_partition_resident");
		res = resident(b.fd[0], pages, vec);
		if (part >= 0 && part <= LIMIT * 11 / 16 && res >= 0 && res <= part)
			break;
		usleep(10000);
	}
	part_since(p0, d);
	ok = d[P_BACKGROUND] > 0 && d[P_EVICTED] - d[P_BACKGROUND] <= LIMIT / 4 && part >= 0 &&
	     part <= LIMIT * 11 / 16 && res >= 0 && res <= part && d[P_CONSUMED_FIRST] > 0;
	ksft_test_result(ok,
			 "%s: the background evictor dropped %lld consumed pages (readers %lld, at most %d; %lld past its target, consumed first); %lld pages left in the partition, %ld of the file resident; %lld gone, %lld busy\n",
			 fs->name, d[P_BACKGROUND], d[P_EVICTED] - d[P_BACKGROUND], LIMIT / 4,
			 d[P_CONSUMED_FIRST], part, res, d[P_GONE], d[P_BUSY]);
	if (!ok && res > 0)
		print_runs(fs, vec, pages);
	close(b.fd[0]);
	unlink(path);
}

/* ---- readers that copy only what is cached ------------------------------ */

/*
 * A GPU stream of 4 KiB reads, each page read into GPU memory a second time by
 * a reader that copies only what is cached: RWF_NOWAIT and io_uring's first,
 * non-blocking attempt. Those copies leave the partition's folios to it
 * (IOCB_DONTCACHE_DEFER): once the stream is done and the evictor has run,
 * every resident page of the file is one the partition still books, as for
 * the stream alone. Before, such a copy took the folio into the page cache
 * for good, outside the bound.
 */
static void test_cached_readers(struct spin_fs *fs)
{
	size_t pages = 10 * LIMIT;
	static unsigned char vec[10 * LIMIT];
	long long copies = 0, part = -1, again = 0;
	char path[PATH_MAX], why[256] = "ok";
	struct spin_ring r;
	long res = -1;
	int fd, ok = 1;

	fd = make_named(fs, "cached-readers", pages, fs->seed + 5, path);
	if (fd < 0 || spin_ring_init(&r, 4, 0)) {
		ksft_test_result_fail("%s: readers of cached pages: setup: %s\n", fs->name,
				      strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	for (size_t p = 0; ok && p < pages; p++) {
		struct iovec iov = { gmem + MiB + p * PG % (16 * MiB), PG };
		struct io_uring_sqe *sqe;
		ssize_t n = pread(fd, gmem + p * PG % (16 * MiB), PG, p * PG);
		int rres = -EIO;

		if (n != (ssize_t)PG) {
			snprintf(why, sizeof(why), "stream read of page %zu: %zd (%s)", p, n,
				 strerror(errno));
			ok = 0;
			break;
		}
		if (p % 2 == 0) {
			n = preadv2(fd, &iov, 1, p * PG, RWF_NOWAIT);
			copies += n == (ssize_t)PG;
			again += n < 0 && errno == EAGAIN;
			if (n < 0 && errno != EAGAIN) {
				snprintf(why, sizeof(why), "RWF_NOWAIT read of page %zu: %s", p,
					 strerror(errno));
				ok = 0;
			}
			continue;
		}
		sqe = spin_ring_sqe(&r, 0);
		sqe->opcode = IORING_OP_READ;
		sqe->fd = fd;
		sqe->off = p * PG;
		sqe->addr = (uintptr_t)iov.iov_base;
		sqe->len = PG;
		if (spin_ring_run(&r, 1, &rres) || rres != (int)PG) {
			snprintf(why, sizeof(why), "io_uring read of page %zu: %d", p, rres);
			ok = 0;
		}
		copies++;
	}
	spin_ring_exit(&r);
	for (int i = 0; ok && i < 300; i++) {
		part = spin_stat_get(SPIN_SYS "/stat", "ra_partition_resident");
		res = resident(fd, pages, vec);
		if (part >= 0 && part <= LIMIT * 11 / 16 && res >= 0 && res <= part)
			break;
		usleep(10000);
	}
	if (ok && copies < (long long)pages * 3 / 4) {
		snprintf(why, sizeof(why), "%lld second reads of %zu copied the page", copies,
			 pages);
		ok = 0;
	}
	if (ok && (part < 0 || part > LIMIT * 11 / 16 || res < 0 || res > part)) {
		snprintf(why, sizeof(why),
			 "%ld of the file's pages resident, %lld in the partition", res, part);
		ok = 0;
		if (res > 0)
			print_runs(fs, vec, pages);
	}
	ksft_test_result(ok,
			 "%s: a stream whose pages RWF_NOWAIT and io_uring also copy from the cache stays in the partition: %lld copies (%lld EAGAIN), %ld resident, %lld in the partition (%s)\n",
			 fs->name, copies, again, res, part, why);
	close(fd);
	unlink(path);
}

/* ---- folios someone else holds ------------------------------------------ */

/*
 * The first 16 pages a GPU stream read ahead are spliced into a pipe, which
 * holds references on their folios without mapping them; the stream then
 * goes on over the file, so that the partition evicts those folios first.
 * It must find them busy and keep them held (counted, tried again), not drop
 * them from the page cache under the pipe, as it must not drop a folio
 * pinned for DMA. Once the pipe has been read and closed, they go.
 */
static void test_spliced(struct spin_fs *fs)
{
	size_t pages = 10 * LIMIT, first = 64, spliced = 16;
	char path[PATH_MAX], why[256] = "ok";
	long long held = -1, part = -1;
	static unsigned char vec[10 * LIMIT];
	long in_pipe = -1, res = -1;
	loff_t off = 0;
	int fd, p[2] = { -1, -1 }, ok = 1;

	fd = make_named(fs, "spliced", pages, fs->seed + 7, path);
	if (fd < 0 || pipe(p) || fcntl(p[1], F_SETPIPE_SZ, (int)MiB) < 0) {
		ksft_test_result_fail("%s: spliced folios: setup: %s\n", fs->name,
				      strerror(errno));
		goto out;
	}
	if (stream(fd, 0, first * PG, PG) != (long long)(first * PG) ||
	    splice(fd, &off, p[1], NULL, spliced * PG, 0) != (ssize_t)(spliced * PG)) {
		snprintf(why, sizeof(why), "stream or splice: %s", strerror(errno));
		ok = 0;
	}
	for (size_t pg = first; ok && pg < pages; pg++) {
		if (pread(fd, gmem + pg * PG % (16 * MiB), PG, pg * PG) != (ssize_t)PG) {
			snprintf(why, sizeof(why), "stream read of page %zu: %s", pg,
				 strerror(errno));
			ok = 0;
		}
	}
	if (ok) {
		held = spin_stat_get(SPIN_SYS "/stat", "ra_partition_held");
		if (resident(fd, pages, vec) < 0) {
			snprintf(why, sizeof(why), "mincore: %s", strerror(errno));
			ok = 0;
		}
		in_pipe = 0;
		for (size_t i = 0; i < spliced; i++)
			in_pipe += vec[i] & 1;
	}
	if (ok && (in_pipe != (long)spliced || held <= 0)) {
		snprintf(why, sizeof(why),
			 "%ld of the %zu spliced pages still cached, %lld pages held busy",
			 in_pipe, spliced, held);
		ok = 0;
	}
	if (ok && (read(p[0], host, spliced * PG) != (ssize_t)(spliced * PG) ||
		   spin_pattern_check(host, 0, spliced * PG, fs->seed + 7) >= 0)) {
		snprintf(why, sizeof(why), "the pipe's bytes are wrong");
		ok = 0;
	}
	close(p[0]);
	close(p[1]);
	p[0] = -1;
	p[1] = -1;
	/* Released, the held folios go when the retrier or the evictor tries them again. */
	for (int i = 0; ok && i < 300; i++) {
		held = spin_stat_get(SPIN_SYS "/stat", "ra_partition_held");
		part = spin_stat_get(SPIN_SYS "/stat", "ra_partition_resident");
		res = resident(fd, pages, vec);
		if (held == 0 && part >= 0 && res >= 0 && res <= part)
			break;
		usleep(10000);
	}
	if (ok && (held != 0 || res < 0 || res > part)) {
		snprintf(why, sizeof(why),
			 "after the pipe closed: %lld held, %ld resident, %lld in the partition",
			 held, res, part);
		ok = 0;
	}
	ksft_test_result(ok,
			 "%s: folios a pipe holds are kept busy by the partition's eviction, then evicted once released (%s)\n",
			 fs->name, why);
out:
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	if (fd >= 0)
		close(fd);
	unlink(path);
}

/* ---- RWF_DONTCACHE for everyone else ------------------------------------ */

/*
 * A program that never touches GPU memory and reads with RWF_DONTCACHE sees
 * what it sees without spin: the folio its read ends in is dropped with the
 * others it read, even when the read ends inside it.
 */
static void test_dontcache(struct spin_fs *fs)
{
	char path[PATH_MAX], why[256] = "ok";
	unsigned char vec[16];
	struct iovec iov = { host, 1000 };
	int fd = make_named(fs, "dontcache", 16, fs->seed + 6, path), ok = 1;
	ssize_t n = -1;

	if (fd >= 0)
		n = preadv2(fd, &iov, 1, 0, RWF_DONTCACHE);
	if (n != 1000) {
		snprintf(why, sizeof(why), "RWF_DONTCACHE read: %zd (%s)", n, strerror(errno));
		ok = 0;
	} else if (spin_pattern_check(host, 0, 1000, fs->seed + 6) >= 0) {
		snprintf(why, sizeof(why), "wrong bytes");
		ok = 0;
	} else if (resident(fd, 16, vec) < 0 || (vec[0] & 1)) {
		snprintf(why, sizeof(why), "page 0, where the read ended, is still cached");
		ok = 0;
	}
	ksft_test_result(ok,
			 "%s: an RWF_DONTCACHE read of 1000 bytes into host memory drops the folio it ends in, as upstream (%s)\n",
			 fs->name, why);
	if (fd >= 0)
		close(fd);
	unlink(path);
}

/* ---- four streams ------------------------------------------------------- */

static void four_streams(struct spin_fs *fs)
{
	size_t pages = 4 * LIMIT, len = pages * PG;
	struct bound b = { .nr = STREAMS, .pages = pages };
	char path[STREAMS][PATH_MAX], name[16], why[256];
	long long req0 = spin_stat_get(fs->stat, "ra_requests"), req1;
	long long p0[P_NR], d[P_NR];
	pid_t pid[STREAMS];
	int fails = 0, live;

	part_stats(p0);
	for (int i = 0; i < STREAMS; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		b.fd[i] = make_named(fs, name, pages, fs->seed + 10 + i, path[i]);
		if (b.fd[i] < 0)
			ksft_exit_fail_msg("%s: %s: %s\n", fs->name, name, strerror(errno));
	}
	bound_start(&b);
	for (int i = 0; i < STREAMS; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			int fd = open(path[i], O_RDONLY);

			_exit(fd < 0 || stream(fd, i * len, len, PG) !=
				 (long long)len);
		}
	}
	do {
		int status;

		live = 0;
		for (int i = 0; i < STREAMS; i++) {
			if (pid[i] <= 0)
				continue;
			if (waitpid(pid[i], &status, WNOHANG) == pid[i]) {
				fails += !WIFEXITED(status) || WEXITSTATUS(status);
				pid[i] = 0;
			} else {
				live++;
			}
		}
		usleep(2000);
	} while (live);
	bound_end(&b);
	req1 = spin_stat_get(fs->stat, "ra_requests");
	part_since(p0, d);
	/* What the partition did meanwhile: the first thing to look at past the bound. */
	ksft_print_msg("%s: four streams: %lld pages evicted (%lld by readers)\n",
		       fs->name, d[P_EVICTED], d[P_EVICTED] - d[P_BACKGROUND]);
	ksft_print_msg("%s: four streams: %lld pages found busy and held, %lld forgotten; "
		       "%lld reservations tried them again\n",
		       fs->name, d[P_HELD], d[P_BUSY], d[P_RETRIES]);
	/*
	 * Every leg reserved room for what it read ahead before it read
	 * (ra_pages_unreserved: admitted beyond a reservation) and none had to
	 * read through the plain page cache for want of room.
	 */
	ksft_test_result(!fails && !b.bad && b.max <= LIMIT &&
			 req1 - req0 == (long long)(STREAMS * pages) &&
			 !d[P_UNRESERVED] && !d[P_NO_ROOM],
			 "%s: four concurrent GPU streams: at most %ld pages of the four files resident (partition %d), %lld read-ahead requests, %lld pages admitted unreserved, %lld legs without room\n",
			 fs->name, b.max, LIMIT, req1 - req0, d[P_UNRESERVED], d[P_NO_ROOM]);
	for (int i = 0; i < STREAMS; i++) {
		if (gpu_ok(i * len, len, fs->seed + 10 + i, 0, why, sizeof(why))) {
			fails++;
			ksft_print_msg("%s: stream %d: %s\n", fs->name, i, why);
		}
		close(b.fd[i]);
		unlink(path[i]);
	}
	ksft_test_result(!fails, "%s: four concurrent GPU streams: every byte right\n", fs->name);
}

/* ---- promotion and eviction ------------------------------------------- */

/* A GPU stream over a fresh file of 4 * the limit: evicts all older entries. */
static int pressure(struct spin_fs *fs, long long limit)
{
	char path[PATH_MAX];
	int fd = make_named(fs, "pressure", 4 * limit, fs->seed + 40, path);
	long long n;

	if (fd < 0)
		return -1;
	n = stream(fd, 32 * MiB, 4 * limit * PG, PG);
	close(fd);
	unlink(path);
	return n == 4 * limit * (long long)PG ? 0 : -1;
}

static void test_promotion(struct spin_fs *fs)
{
	const size_t pages = 256;
	long long prom0 = spin_stat_get(SPIN_SYS "/stat", "ra_pages_promoted");
	long long ev0 = spin_stat_get(SPIN_SYS "/stat", "ra_pages_evicted"), prom1, ev1;
	unsigned char vec[256];
	size_t win[64], nwin = 0;
	char path[PATH_MAX];
	int fd = make_named(fs, "promote", pages, fs->seed + 20, path);
	int ok_cpu, ok_fault, ok_evict = 1;
	uint8_t *map, touched;

	if (fd < 0 || set_limit(64))
		ksft_exit_fail_msg("%s: promotion setup: %s\n", fs->name, strerror(errno));
	/* One GPU read: its read-ahead window lands in the partition. */
	if (pread(fd, gmem, PG, 0) != (ssize_t)PG || resident(fd, pages, vec) < 0)
		ksft_exit_fail_msg("%s: promotion read: %s\n", fs->name, strerror(errno));
	for (size_t i = 1; i < pages && nwin < 64; i++)
		if (vec[i] & 1)
			win[nwin++] = i;
	if (nwin < 3) {
		ksft_test_result_fail("%s: a 4 KiB GPU read at 0 read ahead only %zu pages\n",
				      fs->name, nwin);
		ksft_test_result_fail("%s: promotion by fault (no window)\n", fs->name);
		ksft_test_result_fail("%s: eviction (no window)\n", fs->name);
		goto out;
	}
	/* The CPU reads the first page of the window; a fault touches the second. */
	if (pread(fd, host, PG, win[0] * PG) != (ssize_t)PG)
		ksft_exit_fail_msg("%s: CPU read: %s\n", fs->name, strerror(errno));
	map = mmap(NULL, pages * PG, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		ksft_exit_fail_msg("%s: mmap: %s\n", fs->name, strerror(errno));
	touched = __atomic_load_n(map + win[1] * PG, __ATOMIC_RELAXED);
	munmap(map, pages * PG);

	if (pressure(fs, 64) || resident(fd, pages, vec) < 0)
		ksft_exit_fail_msg("%s: pressure: %s\n", fs->name, strerror(errno));
	prom1 = spin_stat_get(SPIN_SYS "/stat", "ra_pages_promoted");
	ev1 = spin_stat_get(SPIN_SYS "/stat", "ra_pages_evicted");
	ok_cpu = vec[win[0]] & 1;
	ok_fault = vec[win[1]] & 1;
	for (size_t i = 2; i < nwin; i++)
		if (vec[win[i]] & 1)
			ok_evict = 0;
	ksft_test_result(ok_cpu && prom1 - prom0 >= 2,
			 "%s: a window page read by the CPU survives the partition's eviction (promoted +%lld)\n",
			 fs->name, prom1 - prom0);
	ksft_test_result(ok_fault,
			 "%s: a window page touched by a fault (byte 0x%02x) survives it\n",
			 fs->name, touched);
	ksft_test_result(ok_evict && ev1 - ev0 >= (long long)nwin - 2,
			 "%s: the %zu untouched window pages are evicted (evicted +%lld)\n",
			 fs->name, nwin - 2, ev1 - ev0);
out:
	set_limit(LIMIT);
	close(fd);
	unlink(path);
}

/* ---- fadvise ------------------------------------------------------------ */

static void test_advice(struct spin_fs *fs)
{
	char path[PATH_MAX], why[256], v[PATH_MAX];
	const size_t pages = 1024;
	long long req0, req1, req2, p2p0, p2p1, win;
	int fd = make_named(fs, "advice", pages, fs->seed + 30, path), fd2, ok;

	snprintf(v, sizeof(v), "/sys/block/%s/queue/read_ahead_kb", fs->disk);
	win = spin_read_ll(v) * KiB;
	if (fd < 0 || win < (long long)(2 * PG))
		ksft_exit_fail_msg("%s: advice setup (read_ahead_kb %lld)\n", fs->name, win);

	/* RANDOM: no read-ahead; every small read goes by P2P. */
	fd2 = open(path, O_RDONLY);
	posix_fadvise(fd2, 0, 0, POSIX_FADV_RANDOM);
	req0 = spin_stat_get(fs->stat, "ra_requests");
	p2p0 = spin_stat_get(fs->stat, "bytes_p2p");
	ok = stream(fd2, 0, 64 * PG, PG) == (long long)(64 * PG) &&
	     !gpu_ok(0, 64 * PG, fs->seed + 30, 0, why, sizeof(why));
	req1 = spin_stat_get(fs->stat, "ra_requests");
	p2p1 = spin_stat_get(fs->stat, "bytes_p2p");
	ksft_test_result(ok && req1 == req0 && p2p1 - p2p0 == (long long)(64 * PG),
			 "%s: POSIX_FADV_RANDOM: no read-ahead request, %lld P2P bytes of %lu\n",
			 fs->name, p2p1 - p2p0, 64 * PG);
	close(fd2);

	/* SEQUENTIAL doubles the window: reads of the plain window size qualify. */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	fd2 = open(path, O_RDONLY);
	req0 = spin_stat_get(fs->stat, "ra_requests");
	ok = stream(fd2, 0, 16 * win, win) == 16 * win;
	req1 = spin_stat_get(fs->stat, "ra_requests");
	close(fd2);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	fd2 = open(path, O_RDONLY);
	posix_fadvise(fd2, 0, 0, POSIX_FADV_SEQUENTIAL);
	ok = ok && stream(fd2, 0, 16 * win, win) == 16 * win &&
	     !gpu_ok(0, 16 * win, fs->seed + 30, 0, why, sizeof(why));
	req2 = spin_stat_get(fs->stat, "ra_requests");
	close(fd2);
	ksft_test_result(ok && req1 == req0 && req2 - req1 == 16,
			 "%s: POSIX_FADV_SEQUENTIAL: %lld-byte reads are read-ahead requests (%lld of 16; %lld without the advice)\n",
			 fs->name, win, req2 - req1, req1 - req0);

	/* DONTNEED drops what the partition holds. */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	fd2 = open(path, O_RDONLY);
	ok = pread(fd2, gmem, PG, 0) == (ssize_t)PG && resident(fd, 256, NULL) > 1;
	posix_fadvise(fd2, 0, 0, POSIX_FADV_DONTNEED);
	ksft_test_result(ok && resident(fd, 256, NULL) == 0,
			 "%s: POSIX_FADV_DONTNEED drops the partition's pages\n", fs->name);
	close(fd2);

	/*
	 * WILLNEED's pages are ordinary page cache: on a random fd, whose
	 * reads would otherwise go by P2P, they serve the reads by copy and
	 * stay cached. The range is one window: WILLNEED reads at most
	 * max(io_pages, ra_pages) pages (force_page_cache_ra()).
	 */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	fd2 = open(path, O_RDONLY);
	posix_fadvise(fd2, 0, 0, POSIX_FADV_RANDOM);
	posix_fadvise(fd2, 0, win, POSIX_FADV_WILLNEED);
	for (int i = 0; i < 1000 && resident(fd, win / PG, NULL) < win / (long)PG; i++)
		usleep(1000);
	p2p0 = spin_stat_get(fs->stat, "bytes_p2p");
	ok = stream(fd2, 0, win, 16 * KiB) == win &&
	     !gpu_ok(0, win, fs->seed + 30, 0, why, sizeof(why));
	p2p1 = spin_stat_get(fs->stat, "bytes_p2p");
	ksft_test_result(ok && p2p1 == p2p0 && resident(fd, win / PG, NULL) == win / (long)PG,
			 "%s: POSIX_FADV_WILLNEED: its pages serve GPU reads by copy (%lld P2P bytes) and stay cached\n",
			 fs->name, p2p1 - p2p0);
	close(fd2);
	close(fd);
	unlink(path);
}

/* ---- a stream across cached runs --------------------------------------- */

/*
 * A GPU stream of 64 KiB reads over a file whose 256 KiB chunks are cached
 * and uncached in turn (the cached ones read by the CPU on a random fd, so
 * that no read-ahead of its own spills into the others). The page cache's
 * own read-ahead leaves its window behind in a cached chunk and misses the
 * first page of the next one (8 misses); GPU read-ahead looks a few windows
 * ahead of every read and reads that much from the next uncached page before
 * the stream gets there ("bridged"), its marker then moves the file's window
 * on: no read-ahead request misses, at least one window is bridged and at
 * most one per uncached chunk.
 */
static void test_bridge(struct spin_fs *fs)
{
	const size_t chunk = 64, nchunks = 16, pages = chunk * nchunks, len = pages * PG;
	long long req0, hit0, p2p0, br0, req1, hit1, p2p1, br1, done;
	static unsigned char vec[64 * 16];
	char path[PATH_MAX], why[256];
	int fd = make_named(fs, "bridge", pages, fs->seed + 80, path), fd2, tfd, ok, cached = 1;

	fd2 = open(path, O_RDONLY);
	if (fd < 0 || fd2 < 0 || posix_fadvise(fd2, 0, 0, POSIX_FADV_RANDOM))
		ksft_exit_fail_msg("%s: bridge setup: %s\n", fs->name, strerror(errno));
	for (size_t c = 0; c < nchunks; c += 2)
		if (pread(fd2, host, chunk * PG, c * chunk * PG) != (ssize_t)(chunk * PG))
			ksft_exit_fail_msg("%s: CPU read: %s\n", fs->name, strerror(errno));
	if (resident(fd, pages, vec) < 0)
		ksft_exit_fail_msg("%s: mincore: %s\n", fs->name, strerror(errno));
	for (size_t i = 0; i < pages; i++)
		if ((vec[i] & 1) != ((i / chunk) % 2 == 0))
			cached = 0;
	if (!cached)
		print_runs(fs, vec, pages);
	req0 = spin_stat_get(fs->stat, "ra_requests");
	hit0 = spin_stat_get(fs->stat, "ra_hits");
	p2p0 = spin_stat_get(fs->stat, "bytes_p2p");
	br0 = spin_stat_get(SPIN_SYS "/stat", "ra_windows_bridged");
	/* the windows read ahead, printed if the stream misses */
	spin_trace_event("readahead", 1);
	tfd = spin_trace_event(EVENT, 1) ? -1 :
	      open("/sys/kernel/tracing/trace", O_WRONLY | O_TRUNC);
	if (tfd < 0)
		ksft_print_msg("%s: tracefs: %s\n", fs->name, strerror(errno));
	else
		close(tfd);
	done = stream(fd, 0, len, 64 * KiB);
	spin_trace_event(EVENT, 0);
	spin_trace_event("readahead", 0);
	req1 = spin_stat_get(fs->stat, "ra_requests");
	hit1 = spin_stat_get(fs->stat, "ra_hits");
	p2p1 = spin_stat_get(fs->stat, "bytes_p2p");
	br1 = spin_stat_get(SPIN_SYS "/stat", "ra_windows_bridged");
	ok = done == (long long)len && !gpu_ok(0, len, fs->seed + 80, 0, why, sizeof(why));
	ksft_test_result(ok,
			 "%s: a GPU stream across cached chunks: %lld of %zu bytes right in GPU memory%s%s\n",
			 fs->name, done, len, ok ? "" : ": ", ok ? "" : why);
	ksft_test_result(cached && req1 - req0 == (long long)(len / (64 * KiB)) &&
			 hit1 - hit0 == req1 - req0 &&
			 p2p1 == p2p0 && br1 - br0 >= 1 && br1 - br0 <= (long long)nchunks / 2,
			 "%s: a GPU stream across cached chunks: %lld read-ahead requests, %lld missed, %lld windows bridged (%zu uncached chunks), %lld P2P bytes%s\n",
			 fs->name, req1 - req0, (req1 - req0) - (hit1 - hit0), br1 - br0,
			 nchunks / 2, p2p1 - p2p0,
			 cached ? "" : "; the chunks were not cached as set up");
	if (hit1 - hit0 != req1 - req0 || br1 - br0 < 1) {
		static char trace[65536];
		char *line, *save;

		spin_read_file("/sys/kernel/tracing/trace", trace, sizeof(trace));
		for (line = strtok_r(trace, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (strstr(line, "spin_readahead:") || strstr(line, "page_cache_"))
				ksft_print_msg("%s\n", strstr(line, ": ") + 2);
	}
	close(fd2);
	close(fd);
	unlink(path);
}

/* ---- dirty pages -------------------------------------------------------- */

static void test_dirty(struct spin_fs *fs)
{
	const size_t pages = 64;
	char path[PATH_MAX], why[256];
	uint8_t *want = malloc(pages * PG);
	int fd = make_named(fs, "dirty", pages, fs->seed + 50, path), ok;

	if (fd < 0 || !want || set_limit(64))
		ksft_exit_fail_msg("%s: dirty setup\n", fs->name);
	spin_pattern_fill(want, 0, pages * PG, fs->seed + 50);
	/* A GPU read brings the window in; then pages 1 and 2 are written, not synced. */
	ok = pread(fd, gmem, PG, 0) == (ssize_t)PG;
	memset(want + PG, 0x5a, 2 * PG);
	ok = ok && pwrite(fd, want + PG, 2 * PG, PG) == (ssize_t)(2 * PG);
	ok = ok && !pressure(fs, 64);
	/* Read back by the GPU and, after a sync and a drop, again. */
	ok = ok && pread(fd, gmem, pages * PG, 0) == (ssize_t)(pages * PG) &&
	     !spin_gpu_compare(gpu, gmem, pages * PG, want, why, sizeof(why));
	ok = ok && !fsync(fd) && !posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) &&
	     pread(fd, gmem + 4 * MiB, pages * PG, 0) == (ssize_t)(pages * PG) &&
	     !spin_gpu_compare(gpu, gmem + 4 * MiB, pages * PG, want, why, sizeof(why));
	ksft_test_result(ok, "%s: pages written while in the partition are not lost%s%s\n",
			 fs->name, ok ? "" : ": ", ok ? "" : why);
	set_limit(LIMIT);
	free(want);
	close(fd);
	unlink(path);
}

/* ---- busy folios are held --------------------------------------------- */

#define FAIL_EVICT "/sys/kernel/debug/fail_spin_evict"

/*
 * Folios that eviction finds busy (here by fault injection: the first two
 * eviction batches of a stream, at most 32 folios, as many as the partition
 * holds busy) stay counted in the partition until they are tried again: the
 * bound holds during the stream, and after it, with no further read, nothing
 * is held and every resident page of the file is one the partition books.
 * Before, busy folios left the books and stayed resident past the bound; and
 * later, entries held after a stream's last read stayed held until the next
 * stream woke the evictor.
 */
static void test_held(struct spin_fs *fs)
{
	size_t pages = 4 * LIMIT, len = pages * PG;
	struct bound b = { .nr = 1, .pages = pages };
	long long held0, held1, busy0, busy1, hp = -1, part = -1, done;
	char path[PATH_MAX], why[256] = "";
	long res = -1;
	int ok, bytes_ok;

	if (access(FAIL_EVICT, F_OK)) {
		ksft_test_result_fail("%s: %s is absent: this test needs the debug kernel\n",
				      fs->name, FAIL_EVICT);
		return;
	}
	b.fd[0] = make_named(fs, "held", pages, fs->seed + 30, path);
	if (b.fd[0] < 0)
		ksft_exit_fail_msg("%s: held file: %s\n", fs->name, strerror(errno));
	held0 = spin_stat_get(SPIN_SYS "/stat", "ra_pages_held");
	busy0 = spin_stat_get(SPIN_SYS "/stat", "ra_pages_busy");
	if (spin_fault_times(FAIL_EVICT, 2))
		ksft_exit_fail_msg("%s: %s\n", FAIL_EVICT, strerror(errno));
	bound_start(&b);
	done = stream(b.fd[0], 0, len, PG);
	spin_fault_times(FAIL_EVICT, 0);
	for (int i = 0; i < 300; i++) {
		hp = spin_stat_get(SPIN_SYS "/stat", "ra_partition_held");
		part = spin_stat_get(SPIN_SYS "/stat", "ra_partition_resident");
		res = resident(b.fd[0], pages, NULL);
		if (hp == 0 && part >= 0 && res >= 0 && res <= part)
			break;
		/* The retrier's back-off reaches 1 s at most. */
		usleep(10000);
	}
	bound_end(&b);
	held1 = spin_stat_get(SPIN_SYS "/stat", "ra_pages_held");
	busy1 = spin_stat_get(SPIN_SYS "/stat", "ra_pages_busy");
	bytes_ok = done == (long long)len && !gpu_ok(0, len, fs->seed + 30, 0, why, sizeof(why));
	ok = bytes_ok && !b.bad && b.max <= LIMIT && held1 > held0 && busy1 == busy0 &&
	     hp == 0 && res >= 0 && res <= part;
	ksft_test_result(ok,
			 "%s: folios found busy are held: %lld pages held, %lld forgotten; at most %ld resident (partition %d); after the stream %lld held, %lld in the partition, %ld of the file resident; %lld of %zu bytes right%s%s\n",
			 fs->name, held1 - held0, busy1 - busy0, b.max, LIMIT, hp, part, res,
			 bytes_ok ? done : 0, len, bytes_ok ? "" : ": ", bytes_ok ? "" : why);
	close(b.fd[0]);
	unlink(path);
}

/* What a GPU read did to the partition's counters (see gpu_read_counted()). */
struct read_counts {
	long long admitted, no_room, retries;
};

/* Reads the first page of @fd into GPU memory; @c gets what the read counted. */
static int gpu_read_counted(int fd, struct read_counts *c)
{
	long long adm = spin_stat_get(SPIN_SYS "/stat", "ra_pages_admitted");
	long long room = spin_stat_get(SPIN_SYS "/stat", "ra_legs_no_room");
	long long retry = spin_stat_get(SPIN_SYS "/stat", "ra_reserve_retries");
	int ok = pread(fd, gmem, PG, 0) == (ssize_t)PG;

	c->admitted = spin_stat_get(SPIN_SYS "/stat", "ra_pages_admitted") - adm;
	c->no_room = spin_stat_get(SPIN_SYS "/stat", "ra_legs_no_room") - room;
	c->retries = spin_stat_get(SPIN_SYS "/stat", "ra_reserve_retries") - retry;
	return ok && adm >= 0 && room >= 0 && retry >= 0;
}

/* How long a stalled evictor is watched, and how often it may run meanwhile. */
#define STALL_US 300000
#define STALL_RUNS 10

/*
 * Entries held busy count against the limit. Writing a smaller limit tries
 * them again at once, so that they do not leave the partition without room
 * for any leg: readahead_test once failed its promotion tests on xfs because
 * the four streams before had left more pages held than the test's limit of
 * 64, and every leg read through the plain page cache (ra_legs_no_room).
 */
static void test_held_limit(struct spin_fs *fs)
{
	const size_t pages = 4 * LIMIT, small = 64;
	char path[PATH_MAX], path2[PATH_MAX], path3[PATH_MAX], path4[PATH_MAX];
	long long held0, held1 = -1, room0, room1, adm0, adm1, runs0, runs1, st0, st1;
	long long retry0, retry1, hp;
	struct read_counts c;
	int fd = make_named(fs, "heldlim", pages, fs->seed + 36, path);
	int fd2 = make_named(fs, "heldlim2", small, fs->seed + 37, path2);
	int fd3 = make_named(fs, "heldlim3", small, fs->seed + 38, path3);
	int fd4 = make_named(fs, "heldlim4", small, fs->seed + 39, path4), ok;

	if (fd < 0 || fd2 < 0 || fd3 < 0 || fd4 < 0)
		ksft_exit_fail_msg("%s: held-limit files: %s\n", fs->name, strerror(errno));
	/* Every eviction batch busy: the stream leaves entries held. */
	if (spin_fault_times(FAIL_EVICT, -1))
		ksft_exit_fail_msg("%s: %s: %s\n", fs->name, FAIL_EVICT, strerror(errno));
	retry0 = spin_stat_get(SPIN_SYS "/stat", "ra_reserve_retries");
	ok = stream(fd, 0, pages * PG, PG) == (long long)(pages * PG);
	held0 = spin_stat_get(SPIN_SYS "/stat", "ra_partition_held");
	retry1 = spin_stat_get(SPIN_SYS "/stat", "ra_reserve_retries");
	/* Refused reservations try the held pages once, until the evictor stalls on them. */
	ksft_print_msg("%s: held-limit stream: %lld reservations tried the held pages again\n",
		       fs->name, retry1 - retry0);
	/*
	 * With a limit that leaves the evictor no room to take an entry past
	 * the held pages, which stay busy, but room for a window, a read of
	 * another file admits one and puts the partition above the evictor's
	 * kick mark. The evictor must then wait for the retrier, not queue
	 * itself again at once and drain every CPU's LRU batches in a loop.
	 */
	room0 = spin_stat_get(SPIN_SYS "/stat", "ra_legs_no_room");
	adm0 = spin_stat_get(SPIN_SYS "/stat", "ra_pages_admitted");
	runs0 = spin_stat_get(SPIN_SYS "/stat", "ra_evictor_runs");
	st0 = spin_stat_get(SPIN_SYS "/stat", "ra_evictor_stalls");
	ok = ok && !set_limit(held0 * 4 / 3) && pread(fd3, gmem, PG, 0) == (ssize_t)PG;
	usleep(STALL_US);
	runs1 = spin_stat_get(SPIN_SYS "/stat", "ra_evictor_runs");
	st1 = spin_stat_get(SPIN_SYS "/stat", "ra_evictor_stalls");
	adm1 = spin_stat_get(SPIN_SYS "/stat", "ra_pages_admitted");
	room1 = spin_stat_get(SPIN_SYS "/stat", "ra_legs_no_room");
	ksft_test_result(ok && held0 > 0 && adm1 > adm0 && runs1 >= runs0 &&
			 runs1 - runs0 <= STALL_RUNS && st0 >= 0 && st1 > st0,
			 "%s: %lld pages held busy past a stream, limit %lld, %lld admitted, %lld legs without room: the evictor ran %lld times in %d ms (at most %d), %lld stalled\n",
			 fs->name, held0, held0 * 4 / 3, adm1 - adm0, room1 - room0, runs1 - runs0,
			 STALL_US / 1000, STALL_RUNS, st1 - st0);
	/*
	 * A limit one page above the held pages, written while they are busy
	 * (it tries them, in vain), leaves a reader's reservation no room.
	 * Once they could go, the reader tries them itself (a drain frees
	 * folios still in a CPU's LRU batch), and reserves, instead of reading
	 * through the plain page cache.
	 */
	hp = spin_stat_get(SPIN_SYS "/stat", "ra_partition_held");
	ok = ok && hp > 0 && !set_limit(hp + 1);
	spin_fault_times(FAIL_EVICT, 0);
	ok = ok && gpu_read_counted(fd4, &c);
	ksft_test_result(ok && !c.no_room && c.admitted > 0,
			 "%s: %lld pages held busy, limit %lld: a GPU read tries them again (%lld times) and admits %lld pages, %lld legs without room\n",
			 fs->name, hp, hp + 1, c.retries, c.admitted, c.no_room);
	ok = ok && !set_limit(small);
	if (ok)
		held1 = spin_stat_get(SPIN_SYS "/stat", "ra_partition_held");
	ok = ok && gpu_read_counted(fd2, &c);
	ksft_test_result(ok && held0 > 0 && held1 == 0 && !c.no_room && c.admitted > 0,
			 "%s: %lld pages held past a stream, %lld once the limit is set to %zu; then a GPU read admits %lld pages, %lld legs without room\n",
			 fs->name, held0, held1, small, c.admitted, c.no_room);
	set_limit(LIMIT);
	close(fd4);
	unlink(path4);
	close(fd3);
	unlink(path3);
	close(fd2);
	unlink(path2);
	close(fd);
	unlink(path);
}

/* ---- truncate and hole punch under a stream --------------------------- */

static void test_punch(struct spin_fs *fs)
{
	const size_t pages = 4096, len = pages * PG, cut = 12 * MiB;
	char path[PATH_MAX], why[256];
	int fd = make_named(fs, "punch", pages, fs->seed + 60, path);
	int go[2], back[2], status, ok;
	uint8_t *want = malloc(len);
	long long done = 0;
	pid_t pid;

	if (fd < 0 || !want || pipe(go) || pipe(back))
		ksft_exit_fail_msg("%s: punch setup\n", fs->name);
	spin_pattern_fill(want, 0, len, fs->seed + 60);
	memset(want + 4 * MiB, 0, 2 * MiB);
	memset(gmem, 0xa5, len);
	pid = fork();
	if (pid == 0) {
		int rfd = open(path, O_RDONLY);
		char c = 0;

		/* 2 MiB of the stream, then the parent punches and truncates. */
		done = stream(rfd, 0, 2 * MiB, PG);
		if (write(back[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(2);
		while (done < (long long)len) {
			ssize_t n = pread(rfd, gmem + done, PG, done);

			if (n <= 0)
				break;
			done += n;
		}
		_exit(done == (long long)cut ? 0 : 1);
	}
	{
		char c;

		ok = read(back[0], &c, 1) == 1 &&
		     !fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4 * MiB, 2 * MiB) &&
		     !ftruncate(fd, cut) && write(go[1], &c, 1) == 1;
	}
	ok = waitpid(pid, &status, 0) == pid && ok && WIFEXITED(status) &&
	     !WEXITSTATUS(status) && !spin_gpu_compare(gpu, gmem, cut, want, why, sizeof(why));
	ksft_test_result(ok,
			 "%s: hole punch and truncate under a GPU stream: data, zeros in the hole, nothing past the end%s%s\n",
			 fs->name, ok ? "" : ": ", ok ? "" : why);
	close(go[0]);
	close(go[1]);
	close(back[0]);
	close(back[1]);
	free(want);
	close(fd);
	unlink(path);
}

/* ---- the knob ---------------------------------------------------------- */

static void test_knob(struct spin_fs *fs)
{
	static const char *const bad[] = { "\n", "abc", "-1", "262145", "1 2",
					   "18446744073709551616" };
	char path[PATH_MAX], v[64];
	long long req0, req1, p2p0, p2p1;
	int fd, rejected = 0;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		rejected += spin_write_file(SPIN_SYS "/ra_partition_pages", bad[i]) == -EINVAL;
	v[0] = '\0';
	spin_read_file(SPIN_SYS "/ra_partition_pages", v, sizeof(v));
	ksft_test_result(rejected == (int)ARRAY_SIZE(bad) && atoll(v) == LIMIT,
			 "ra_partition_pages: %d of %zu bad values refused with EINVAL, value kept (%s)\n",
			 rejected, ARRAY_SIZE(bad), v);

	fd = make_named(fs, "knob", 64, fs->seed + 70, path);
	if (fd < 0 || set_limit(0))
		ksft_exit_fail_msg("knob setup: %s\n", strerror(errno));
	req0 = spin_stat_get(fs->stat, "ra_requests");
	p2p0 = spin_stat_get(fs->stat, "bytes_p2p");
	stream(fd, 0, 64 * PG, PG);
	req1 = spin_stat_get(fs->stat, "ra_requests");
	p2p1 = spin_stat_get(fs->stat, "bytes_p2p");
	set_limit(LIMIT);
	ksft_test_result(req1 == req0 && p2p1 - p2p0 == (long long)(64 * PG) &&
			 spin_read_ll(SPIN_SYS "/ra_partition_pages") == LIMIT,
			 "ra_partition_pages 0 turns GPU read-ahead off: %lld P2P bytes of %lu, limit back to %d\n",
			 p2p1 - p2p0, 64 * PG, LIMIT);
	close(fd);
	unlink(path);
}

/* Each filesystem's tests: the knob's on the first, the held pages' on the others. */
/* ---- the cost model's decisions --------------------------------------- */

/* The disk's cost model: c_p2p_ns, s_cutoff, bw_p2p, bw_pc. */
enum { M_C, M_S, M_BW_P2P, M_BW_PC, M_NR };
static const char *const model_knobs[M_NR] = { "c_p2p_ns", "s_cutoff", "bw_p2p", "bw_pc" };

static void model_get(const struct spin_fs *fs, long long v[M_NR])
{
	char path[PATH_MAX];

	for (int i = 0; i < M_NR; i++) {
		snprintf(path, sizeof(path), "/sys/block/%s/spin/%s", fs->disk, model_knobs[i]);
		v[i] = spin_read_ll(path);
	}
}

/*
 * Writes the cost model @v of @fs's disk (given back at exit); c_p2p_ns goes
 * first to one second, so that every step is consistent.
 */
static int model_set(const struct spin_fs *fs, const long long v[M_NR])
{
	char path[PATH_MAX], val[32];
	int ret = 0;

	for (int i = 0; i <= M_NR; i++) {
		snprintf(path, sizeof(path), "/sys/block/%s/spin/%s", fs->disk,
			 model_knobs[i % M_NR]);
		snprintf(val, sizeof(val), "%lld", i == 0 ? 1000000000LL : v[i % M_NR]);
		ret |= spin_sysfs_set(path, val);
	}
	return ret;
}

/*
 * A stream of reads larger than the read-ahead window: after its first read,
 * every read goes through the page cache with read-ahead while that beats P2P
 * by the cost model, within the partition's bound; with a slow copy, by P2P.
 * The reads are not a multiple of the window, so that they end inside windows.
 */
static void test_large_stream(struct spin_fs *fs)
{
	static const long long gen4[M_NR] = { 80000, 131072, 6500000000LL, 10000000000LL };
	static const long long slow_copy[M_NR] = { 80000, 131072, 6500000000LL, 1000000000LL };
	const size_t pages = 10 * LIMIT;
	struct bound b = { .nr = 1, .pages = pages };
	long long m0[M_NR], p0[P_NR], d[P_NR], ah0, ah1, p2p0, p2p1, done;
	char path[PATH_MAX], why[256];
	size_t chunk, len;
	long reads;
	int ok;

	snprintf(path, sizeof(path), "/sys/block/%s/queue/read_ahead_kb", fs->disk);
	chunk = spin_read_ll(path) * KiB;
	chunk += chunk / 2 + 2 * PG;
	/* Whole reads only: a shorter last one would be a small read (P-readahead). */
	reads = pages * PG / chunk;
	len = reads * chunk;
	if (chunk < 4 * PG || chunk > 2 * MiB)
		ksft_exit_fail_msg("%s: read_ahead_kb %lld\n", fs->name, spin_read_ll(path));
	model_get(fs, m0);
	b.fd[0] = make_named(fs, "large", pages, fs->seed + 80, path);
	if (b.fd[0] < 0 || model_set(fs, gen4))
		ksft_exit_fail_msg("%s: large stream setup: %s\n", fs->name, strerror(errno));
	ah0 = spin_stat_get(fs->stat, "ahead_chunks");
	p2p0 = spin_stat_get(fs->stat, "bytes_p2p");
	part_stats(p0);
	bound_start(&b);
	done = stream(b.fd[0], 0, len, chunk);
	bound_end(&b);
	part_since(p0, d);
	ah1 = spin_stat_get(fs->stat, "ahead_chunks");
	p2p1 = spin_stat_get(fs->stat, "bytes_p2p");
	ok = done == (long long)len && !gpu_ok(0, len, fs->seed + 80, 0, why, sizeof(why));
	ksft_test_result(ok,
			 "%s: a stream of %zu KiB reads: %lld of %zu bytes right in GPU memory%s%s\n",
			 fs->name, chunk / KiB, done, len, ok ? "" : ": ", ok ? "" : why);
	ksft_test_result(p2p1 - p2p0 == (long long)chunk && ah1 > ah0 && ah1 - ah0 <= reads - 1,
			 "%s: a stream of %zu KiB reads, copy faster than the device: %lld P2P bytes (the first read's %zu), %lld of %ld reads read ahead\n",
			 fs->name, chunk / KiB, p2p1 - p2p0, chunk, ah1 - ah0, reads - 1);
	ksft_test_result(!b.bad && b.max <= LIMIT && b.max > 0 && !d[P_UNRESERVED] && !d[P_NO_ROOM],
			 "%s: a stream of %zu KiB reads: at most %ld resident (partition %d), %lld pages admitted unreserved, %lld legs without room\n",
			 fs->name, chunk / KiB, b.max, LIMIT, d[P_UNRESERVED], d[P_NO_ROOM]);

	spin_uncache(b.fd[0]);
	if (model_set(fs, slow_copy))
		ksft_exit_fail_msg("%s: slow-copy model: %s\n", fs->name, strerror(errno));
	memset(gmem, 0, len);
	ah0 = spin_stat_get(fs->stat, "ahead_chunks");
	p2p0 = spin_stat_get(fs->stat, "bytes_p2p");
	done = stream(b.fd[0], 0, len, chunk);
	ah1 = spin_stat_get(fs->stat, "ahead_chunks");
	p2p1 = spin_stat_get(fs->stat, "bytes_p2p");
	ok = done == (long long)len && !gpu_ok(0, len, fs->seed + 80, 0, why, sizeof(why));
	ksft_test_result(ok && ah1 == ah0 && p2p1 - p2p0 == (long long)len,
			 "%s: a stream of %zu KiB reads, copy ten times slower: %lld of %zu bytes by P2P, %lld read ahead%s%s\n",
			 fs->name, chunk / KiB, p2p1 - p2p0, len, ah1 - ah0, ok ? "" : ": ",
			 ok ? "" : why);
	if (model_set(fs, m0))
		ksft_exit_fail_msg("%s: cost model not restored: %s\n", fs->name, strerror(errno));
	close(b.fd[0]);
	unlink(path);
}

/*
 * Reads @len bytes of @fd into GPU memory and checks them: the pattern of
 * @seed, but for the page at @at, written with the pattern of @seed + 1.
 * Returns whether all is right; *@p2p gets the bytes read by P2P.
 */
static int read_written(const struct spin_fs *fs, int fd, size_t len, size_t at, uint64_t seed,
			long long *p2p, char *why, size_t whylen)
{
	long long p2p0 = spin_stat_get(fs->stat, "bytes_p2p");
	ssize_t n;

	memset(gmem, 0, len);
	n = pread(fd, gmem, len, 0);
	*p2p = spin_stat_get(fs->stat, "bytes_p2p") - p2p0;
	return n == (ssize_t)len && !gpu_ok(0, at, seed, 0, why, whylen) &&
	       !gpu_ok(at, PG, seed + 1, 0, why, whylen) &&
	       !gpu_ok(at + PG, len - at - PG, seed, at + PG, why, whylen);
}

/*
 * A fully cached read where the device is faster than the copy: the device
 * reads part of it, unless a page of it is dirty.
 */
static void test_cached_p2p(struct spin_fs *fs)
{
	static const long long fast_disk[M_NR] = { 52000, 0, 13000000000LL, 1000000000LL };
	const size_t pages = 2048, len = pages * PG, at = MiB;
	long long m0[M_NR], p2p0, p2p1, pc0, pc1, p2p;
	char path[PATH_MAX], why[256] = "";
	ssize_t n;
	int fd, ok;

	model_get(fs, m0);
	fd = make_named(fs, "cached", pages, fs->seed + 90, path);
	if (fd < 0 || pread(fd, host, len, 0) != (ssize_t)len || model_set(fs, fast_disk))
		ksft_exit_fail_msg("%s: cached file setup: %s\n", fs->name, strerror(errno));
	p2p0 = spin_stat_get(fs->stat, "bytes_p2p");
	pc0 = spin_stat_get(fs->stat, "bytes_pagecache");
	memset(gmem, 0, len);
	n = pread(fd, gmem, len, 0);
	p2p1 = spin_stat_get(fs->stat, "bytes_p2p");
	pc1 = spin_stat_get(fs->stat, "bytes_pagecache");
	ok = n == (ssize_t)len && !gpu_ok(0, len, fs->seed + 90, 0, why, sizeof(why));
	/* Split with the copy, or on xfs (synchronous P2P legs, overlapping nothing) whole. */
	ksft_test_result(ok && p2p1 > p2p0 && p2p1 - p2p0 + pc1 - pc0 == (long long)len &&
			 resident(fd, pages, NULL) == (long)pages,
			 "%s: a cached 8 MiB read, device faster than the copy: %lld bytes by P2P, %lld copied, still cached%s%s\n",
			 fs->name, p2p1 - p2p0, pc1 - pc0, ok ? "" : ": ", ok ? "" : why);

	/* A page written and not synced: copied whole, the page as written. */
	spin_pattern_fill(host, 0, PG, fs->seed + 91);
	if (pwrite(fd, host, PG, at) != (ssize_t)PG)
		ksft_exit_fail_msg("%s: pwrite: %s\n", fs->name, strerror(errno));
	ok = read_written(fs, fd, len, at, fs->seed + 90, &p2p, why, sizeof(why));
	ksft_test_result(ok && !p2p,
			 "%s: the same read with a page dirty: %lld bytes by P2P, the page as written%s%s\n",
			 fs->name, p2p, ok ? "" : ": ", ok ? "" : why);

	/* Written back: P2P again, and the device has the page as written. */
	fsync(fd);
	ok = read_written(fs, fd, len, at, fs->seed + 90, &p2p, why, sizeof(why));
	ksft_test_result(ok && p2p > 0,
			 "%s: the same read after fsync: %lld bytes by P2P, every byte right%s%s\n",
			 fs->name, p2p, ok ? "" : ": ", ok ? "" : why);
	if (model_set(fs, m0))
		ksft_exit_fail_msg("%s: cost model not restored: %s\n", fs->name, strerror(errno));
	close(fd);
	unlink(path);
}

static void test_fs(struct spin_fs *fs, size_t i)
{
	one_stream(fs);
	four_streams(fs);
	test_cached_readers(fs);
	test_spliced(fs);
	test_dontcache(fs);
	test_promotion(fs);
	test_advice(fs);
	test_dirty(fs);
	test_bridge(fs);
	test_punch(fs);
	test_large_stream(fs);
	test_cached_p2p(fs);
	if (i == 0) {
		test_knob(fs);
	} else {
		test_held(fs);
		test_held_limit(fs);
	}
}

int main(void)
{
	struct spin_fs all[] = {
		SPIN_FS_EXT4("/mnt/ra-ext4", 91),
		SPIN_FS_XFS("/mnt/ra-xfs", 92),
	};
	int heap, buf;

	ksft_print_header();
	ksft_set_plan(ARRAY_SIZE(all) * 28 + 6);
	SPIN_GPU_SETUP_OR_EXIT(gpu, GPU_LEN, &gmem, &heap, &buf, 16 * MiB, &host);
	if (set_limit(LIMIT))
		ksft_exit_fail_msg("ra_partition_pages: %s\n", strerror(errno));
	SPIN_FS_EACH_OR_EXIT(all, ARRAY_SIZE(all), 0, test_fs);
	munmap(gmem, GPU_LEN);
	close(buf);
	close(heap);
	ksft_finished();
}
