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
 *  - consistency: data written with write(2) or a shared mapping and not
 *    synced; a concurrent writer and a concurrent truncate: a page not
 *    written during a read holds exactly its last version; a page written
 *    during it a complete version from then (zeros where truncated), on xfs
 *    always, as without spin (the IOLOCK serialises reads and writes), on
 *    ext4 torn pages are counted but allowed (upstream ext4 does not
 *    serialise a buffered read against a write of the same page);
 *  - the modes pagecache and p2p;
 *  - the disk's p2p_overlap in the schedule: nine uncached pages 20 apart
 *    go in one P2P leg with none, in more with 800 (not with synchronous
 *    legs, xfs with atomic_reads 1).
 * Then the fallbacks (spin-nvme2: no P2P path, spin-vblk: no P2PDMA queue,
 * tmpfs: no block device) and the knobs, with their bad values.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define PG 4096UL
#define GPU_LEN (80 * MiB)
#define DATA_LEN (72 * MiB + 1234)	/* EOF inside a logical block */
#define SMALL_LEN (8 * MiB)		/* the files on the fallback disks */
#define GUARD 64			/* bytes around every destination */
#define POISON 0xa5
#define SPIN_SYS "/sys/kernel/spin"
#define CON_PAGES 512			/* the file of the concurrency tests */
#define CON_LEN (CON_PAGES * PG)
#define CON_READS 32
#define CON_ATOMIC_READS 256		/* reads of the strict XFS atomicity phase */
#define CON_TIMEOUT 120			/* seconds without a finished read: hung */

static long long div_up(long long a, long long b)
{
	return (a + b - 1) / b;
}

static long long align_up(long long a, long long b)
{
	return div_up(a, b) * b;
}

static long long align_down(long long a, long long b)
{
	return a / b * b;
}

enum {
	ST_REQUESTS, ST_BYTES_PC, ST_BYTES_P2P, ST_SEGS_PC, ST_SEGS_P2P,
	ST_FB_MODE, ST_FB_NO_BDEV, ST_FB_NO_DIO, ST_FB_INODE, ST_FB_QUEUE,
	ST_FB_DISTANCE, ST_FB_MISALIGNED, ST_FB_IO_ERROR, NSTAT
};

static const char *const stat_names[NSTAT] = {
	"requests", "bytes_pagecache", "bytes_p2p", "segments_pagecache", "segments_p2p",
	"fallback_mode", "fallback_no_bdev", "fallback_no_direct_io", "fallback_inode",
	"fallback_queue", "fallback_distance", "fallback_misaligned", "fallback_io_error",
};

/* spin_route's reason=; after "none" in the order of the fallback_* counters. */
enum { R_NONE, R_MODE, R_NO_BDEV, R_NO_DIO, R_INODE, R_QUEUE, R_DISTANCE, R_MISALIGNED,
	NREASON };

static const char *const reason_names[NREASON] = {
	"none", "mode", "no_bdev", "no_direct_io", "inode", "queue", "distance", "misaligned",
};

/* The events' formats (tracefs, event group spin). */
#define SEG_FMT " spin_route_segment: dev=%u:%u ino=%llu pos=%lld len=%lld path=%15s"
#define ROUTE_FMT " spin_route: dev=%u:%u ino=%llu pos=%lld len=%lld mode=%15s " \
	"reason=%15s pagecache=%lld p2p=%lld segs=%d"

#define REASON_STAT(r) (ST_FB_MODE + (r) - R_MODE)
#define BIT(r) (1U << (r))

struct stats {
	long long v[NSTAT];
};

struct seg {
	unsigned int maj, min;
	unsigned long long ino;
	long long pos, len;
	int p2p;
};

struct route {
	unsigned int maj, min;
	unsigned long long ino;
	long long pos, len, pc, p2p;
	int segs, reason, used;
	char mode[16];
};

struct trace {
	struct seg *seg;
	struct route *route;
	int nseg, nroute;
};

/* One routed operation: counters before and their deltas, the trace. */
struct obs {
	struct stats d0, g0, d, g;
	struct trace tr;
	int ok;
};

/* A file range that a read put into GPU memory. */
struct range {
	long long pos, len;
};

/* The result of one test line: how many problems, the first one. */
struct res {
	int runs, bad;
	char why[512];
};

struct fs {
	const char *name, *serial, *mkfs, *type, *dir;
	int virtio;
	char dev[64], disk[64], stat[PATH_MAX], path[PATH_MAX];
	long long lbs;		/* direct-I/O block: logical block or dio_offset_align */
	long long dma_align;	/* direct-I/O memory alignment */
	int fd, fd_ra;		/* the data file; the same with POSIX_FADV_RANDOM */
	const uint8_t *map;	/* a PROT_READ mapping of it, for mincore() */
	struct stat st;
	uint64_t seed;
	long long size;
	int hung;
};

static char gpu[PATH_MAX];
static uint8_t *gmem;		/* the GPU buffer, GPU_LEN bytes */
static uint8_t *host;		/* host scratch, 8 MiB */
static char tracing[64] = "/sys/kernel/tracing";
static char mode[16] = "auto";	/* what this program last set */
static pid_t main_pid;

/* Knobs of the first disk, restored at exit. */
static const char *const knob_names[] = {
	"s_cutoff", "c_p2p_ns", "bw_p2p", "bw_pc", "p2p_overlap"
};
static char knob_saved[ARRAY_SIZE(knob_names)][64];
static char knob_disk[64];
static char ra_saved[64];	/* /sys/kernel/spin/ra_partition_pages at the start */

static __printf(3, 4) void fail(struct res *r, const char *label, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!r->bad++) {
		n = snprintf(r->why, sizeof(r->why), "%s: ", label);
		va_start(ap, fmt);
		vsnprintf(r->why + n, sizeof(r->why) - n, fmt, ap);
		va_end(ap);
	}
}

static int sys_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		ret = -errno;
	close(fd);
	return ret;
}

static int set_mode(const char *m)
{
	int ret = sys_write(SPIN_SYS "/mode", m);

	if (!ret)
		snprintf(mode, sizeof(mode), "%s", m);
	return ret;
}

static void knob_path(char *path, size_t len, const char *disk, const char *knob)
{
	snprintf(path, len, "/sys/block/%s/spin/%s", disk, knob);
}

static void restore(void)
{
	char path[PATH_MAX];

	if (getpid() != main_pid)
		return;
	sys_write(SPIN_SYS "/mode", "auto");
	sys_write(SPIN_SYS "/atomic_reads", "1");
	sys_write(SPIN_SYS "/pipeline", "1");
	if (ra_saved[0])
		sys_write(SPIN_SYS "/ra_partition_pages", ra_saved);
	for (size_t i = 0; knob_disk[0] && i < ARRAY_SIZE(knob_names); i++) {
		if (!knob_saved[i][0])
			continue;
		knob_path(path, sizeof(path), knob_disk, knob_names[i]);
		sys_write(path, knob_saved[i]);
	}
}

static int run(const char *cmd)
{
	int status = system(cmd);

	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- counters ---------------------------------------------------------- */

static int stats_read(const char *path, struct stats *s, char *why, size_t len)
{
	char buf[4096], *line, *save;
	unsigned int seen = 0;
	int ret = spin_read_file(path, buf, sizeof(buf));

	if (ret) {
		snprintf(why, len, "%s: %s", path, strerror(-ret));
		return ret;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[64];
		long long v;

		if (sscanf(line, "%63s %lld", name, &v) != 2)
			continue;
		for (int i = 0; i < NSTAT; i++) {
			if (!strcmp(name, stat_names[i])) {
				s->v[i] = v;
				seen |= BIT(i);
			}
		}
	}
	for (int i = 0; i < NSTAT; i++) {
		if (!(seen & BIT(i))) {
			snprintf(why, len, "%s: no \"%s\" line", path, stat_names[i]);
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- tracing ----------------------------------------------------------- */

static int trace_write(const char *file, const char *val)
{
	char path[PATH_MAX];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", tracing, file);
	fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		ret = -errno;
	close(fd);
	return ret;
}

static int trace_setup(void)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/events", tracing);
	if (stat(path, &st) && mount("tracefs", tracing, "tracefs", 0, NULL))
		return -errno;
	snprintf(path, sizeof(path), "%s/events/spin/spin_route", tracing);
	if (stat(path, &st))
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/events/spin/spin_route_segment", tracing);
	if (stat(path, &st))
		return -ENOENT;
	if (trace_write("buffer_size_kb", "8192") || trace_write("events/spin/enable", "1") ||
	    trace_write("tracing_on", "1"))
		return -EIO;
	return 0;
}

static char *slurp(const char *path)
{
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0 || !buf) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += n;
		if (cap - len < 4096) {
			char *more = realloc(buf, cap * 2);

			if (!more)
				break;
			buf = more;
			cap *= 2;
		}
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

static void trace_free(struct trace *t)
{
	free(t->seg);
	free(t->route);
	memset(t, 0, sizeof(*t));
}

static int reason_index(const char *word)
{
	for (int i = 0; i < NREASON; i++)
		if (!strcmp(word, reason_names[i]))
			return i;
	return -1;
}

/*
 * The spin events of inode @ino in the trace buffer. 0, or a problem in @why
 * (lost events, a line that does not parse).
 */
static int trace_collect(struct trace *t, unsigned long long ino, char *why, size_t len)
{
	char path[128], *buf, *line, *save, *p;
	int cap_s = 0, cap_r = 0, ret = 0;

	memset(t, 0, sizeof(*t));
	snprintf(path, sizeof(path), "%s/trace", tracing);
	buf = slurp(path);
	if (!buf) {
		snprintf(why, len, "cannot read %s", path);
		return -EIO;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long in_buf, written;
		char word[2][16];

		p = strstr(line, "entries-in-buffer/entries-written:");
		if (line[0] == '#') {
			if (p && sscanf(p, "entries-in-buffer/entries-written: %lu/%lu",
					&in_buf, &written) == 2 && in_buf != written && !ret) {
				snprintf(why, len, "trace lost events (%lu of %lu kept)",
					 in_buf, written);
				ret = -ENOSPC;
			}
			continue;
		}
		p = strstr(line, " spin_route_segment: ");
		if (p) {
			struct seg s;

			if (sscanf(p, SEG_FMT, &s.maj, &s.min, &s.ino, &s.pos, &s.len,
				   word[0]) != 6 ||
			    (strcmp(word[0], "p2p") && strcmp(word[0], "pagecache"))) {
				if (!ret)
					snprintf(why, len, "trace line not understood: %.200s", p);
				ret = -EINVAL;
				continue;
			}
			if (s.ino != ino)
				continue;
			s.p2p = !strcmp(word[0], "p2p");
			if (t->nseg == cap_s) {
				cap_s = cap_s ? 2 * cap_s : 256;
				t->seg = realloc(t->seg, cap_s * sizeof(*t->seg));
			}
			t->seg[t->nseg++] = s;
			continue;
		}
		p = strstr(line, " spin_route: ");
		if (p) {
			struct route r = { 0 };

			int got = sscanf(p, ROUTE_FMT, &r.maj, &r.min, &r.ino, &r.pos, &r.len,
					 r.mode, word[1], &r.pc, &r.p2p, &r.segs);

			r.reason = reason_index(word[1]);
			if (got != 10 || r.reason < 0) {
				if (!ret)
					snprintf(why, len, "trace line not understood: %.200s", p);
				ret = -EINVAL;
				continue;
			}
			if (r.ino != ino)
				continue;
			if (t->nroute == cap_r) {
				cap_r = cap_r ? 2 * cap_r : 64;
				t->route = realloc(t->route, cap_r * sizeof(*t->route));
			}
			t->route[t->nroute++] = r;
		}
	}
	free(buf);
	return ret;
}

static int cmp_seg(const void *a, const void *b)
{
	const struct seg *x = a, *y = b;

	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int cmp_route(const void *a, const void *b)
{
	const struct route *x = a, *y = b;

	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* ---- one observed read ------------------------------------------------- */

static void obs_begin(struct fs *fs, struct obs *o, struct res *r, const char *label)
{
	char why[256];

	memset(o, 0, sizeof(*o));
	o->ok = 1;
	if (fs->disk[0] && stats_read(fs->stat, &o->d0, why, sizeof(why))) {
		fail(r, label, "%s", why);
		o->ok = 0;
	}
	if (stats_read(SPIN_SYS "/stat", &o->g0, why, sizeof(why))) {
		fail(r, label, "%s", why);
		o->ok = 0;
	}
	if (trace_write("trace", "")) {
		fail(r, label, "cannot clear the trace");
		o->ok = 0;
	}
}

/* The segments of @t inside [@pos, @pos + @len), which must tile it exactly. */
static void route_segments(struct fs *fs, struct trace *t, struct route *rt, struct res *r,
			   const char *label, int *used)
{
	long long at = rt->pos, sum[2] = { 0, 0 };
	int n = 0;

	for (int i = 0; i < t->nseg; i++) {
		struct seg *s = &t->seg[i];

		if (s->pos < rt->pos || s->pos >= rt->pos + rt->len)
			continue;
		used[i] = 1;
		n++;
		if (s->pos != at || s->len <= 0)
			fail(r, label, "segment %lld+%lld in route %lld+%lld: expected one at %lld",
			     s->pos, s->len, rt->pos, rt->len, at);
		at = s->pos + s->len;
		sum[s->p2p] += s->len;
		if (s->p2p && (s->pos % fs->lbs || s->len % fs->lbs))
			fail(r, label, "P2P segment %lld+%lld not in whole %lld-byte blocks",
			     s->pos, s->len, fs->lbs);
		if (fs->disk[0] && (s->maj != major(fs->st.st_dev) ||
				    s->min != minor(fs->st.st_dev)))
			fail(r, label, "segment dev=%u:%u, the file is on %u:%u", s->maj, s->min,
			     major(fs->st.st_dev), minor(fs->st.st_dev));
	}
	if (!n && !rt->segs && rt->reason != R_NONE)
		return;	/* a fallback may be one untraced copy */
	if (n != rt->segs)
		fail(r, label, "route %lld+%lld says segs=%d, trace has %d", rt->pos, rt->len,
		     rt->segs, n);
	if (at != rt->pos + rt->len)
		fail(r, label, "segments of route %lld+%lld end at %lld", rt->pos, rt->len, at);
	if (sum[0] != rt->pc || sum[1] != rt->p2p)
		fail(r, label, "route %lld+%lld says pagecache=%lld p2p=%lld, segments %lld/%lld",
		     rt->pos, rt->len, rt->pc, rt->p2p, sum[0], sum[1]);
}

/*
 * After a read that put the file ranges @rg[0..@nr) into GPU memory: the
 * counters' deltas, the trace, and their agreement. Returns 0 if all holds.
 */
static int obs_end(struct fs *fs, struct obs *o, const struct range *rg, int nr, struct res *r,
		   const char *label)
{
	int bad0 = r->bad, nfb[NREASON] = { 0 }, segs[2] = { 0, 0 }, all_none = 1, *used;
	long long bytes = 0, rpc = 0, rp2p = 0;
	struct stats d1, g1;
	char why[256];

	if (!o->ok)
		return -1;
	if (fs->disk[0] && stats_read(fs->stat, &d1, why, sizeof(why))) {
		fail(r, label, "%s", why);
		return -1;
	}
	if (stats_read(SPIN_SYS "/stat", &g1, why, sizeof(why))) {
		fail(r, label, "%s", why);
		return -1;
	}
	for (int i = 0; i < NSTAT; i++) {
		o->g.v[i] = g1.v[i] - o->g0.v[i];
		o->d.v[i] = fs->disk[0] ? d1.v[i] - o->d0.v[i] : o->g.v[i];
		if (o->d.v[i] != o->g.v[i])
			fail(r, label, "%s: +%lld in %s, +%lld in " SPIN_SYS "/stat",
			     stat_names[i], o->d.v[i], fs->stat, o->g.v[i]);
		if (o->d.v[i] < 0)
			fail(r, label, "%s went down by %lld", stat_names[i], -o->d.v[i]);
	}
	if (trace_collect(&o->tr, fs->st.st_ino, why, sizeof(why)))
		fail(r, label, "%s", why);

	for (int i = 0; i < nr; i++)
		bytes += rg[i].len;
	if (o->d.v[ST_BYTES_PC] + o->d.v[ST_BYTES_P2P] != bytes)
		fail(r, label, "bytes_pagecache +%lld, bytes_p2p +%lld: not the %lld bytes read",
		     o->d.v[ST_BYTES_PC], o->d.v[ST_BYTES_P2P], bytes);
	if (o->d.v[ST_FB_IO_ERROR])
		fail(r, label, "fallback_io_error +%lld: P2P I/O failed",
		     o->d.v[ST_FB_IO_ERROR]);
	if (o->d.v[ST_REQUESTS] != o->tr.nroute)
		fail(r, label, "requests +%lld, %d spin_route events", o->d.v[ST_REQUESTS],
		     o->tr.nroute);

	/* spin_route events: their own sums, mode, device, reasons. */
	qsort(o->tr.route, o->tr.nroute, sizeof(*o->tr.route), cmp_route);
	qsort(o->tr.seg, o->tr.nseg, sizeof(*o->tr.seg), cmp_seg);
	used = calloc(o->tr.nseg + 1, sizeof(*used));
	for (int i = 0; i < o->tr.nroute; i++) {
		struct route *rt = &o->tr.route[i];

		nfb[rt->reason]++;
		if (rt->reason != R_NONE)
			all_none = 0;
		rpc += rt->pc;
		rp2p += rt->p2p;
		if (strcmp(rt->mode, mode))
			fail(r, label, "spin_route mode=%s, the mode is %s", rt->mode, mode);
		if (fs->disk[0] && (rt->maj != major(fs->st.st_dev) ||
				    rt->min != minor(fs->st.st_dev)))
			fail(r, label, "spin_route dev=%u:%u, the file is on %u:%u", rt->maj,
			     rt->min, major(fs->st.st_dev), minor(fs->st.st_dev));
		if (rt->pc < 0 || rt->p2p < 0 || rt->pc + rt->p2p != rt->len)
			fail(r, label, "spin_route len=%lld: pagecache=%lld + p2p=%lld", rt->len,
			     rt->pc, rt->p2p);
		if (rt->reason != R_NONE && rt->p2p)
			fail(r, label, "spin_route reason=%s with p2p=%lld",
			     reason_names[rt->reason], rt->p2p);
		route_segments(fs, &o->tr, rt, r, label, used);
	}
	for (int i = 0; i < o->tr.nseg; i++) {
		segs[o->tr.seg[i].p2p]++;
		if (!used[i])
			fail(r, label, "segment %lld+%lld outside every spin_route",
			     o->tr.seg[i].pos, o->tr.seg[i].len);
	}
	free(used);
	if (rpc != o->d.v[ST_BYTES_PC] || rp2p != o->d.v[ST_BYTES_P2P])
		fail(r, label, "spin_route events: pagecache=%lld p2p=%lld; counters +%lld/+%lld",
		     rpc, rp2p, o->d.v[ST_BYTES_PC], o->d.v[ST_BYTES_P2P]);
	for (int i = R_MODE; i < NREASON; i++)
		if (nfb[i] != o->d.v[REASON_STAT(i)])
			fail(r, label, "%d spin_route reason=%s, %s +%lld", nfb[i],
			     reason_names[i], stat_names[REASON_STAT(i)],
			     o->d.v[REASON_STAT(i)]);
	if (all_none && (segs[0] != o->d.v[ST_SEGS_PC] || segs[1] != o->d.v[ST_SEGS_P2P]))
		fail(r, label, "%d/%d segment events (pagecache/p2p), segments_* +%lld/+%lld",
		     segs[0], segs[1], o->d.v[ST_SEGS_PC], o->d.v[ST_SEGS_P2P]);

	/* The events tile exactly the file ranges that went to GPU memory. */
	for (int i = 0; i < nr; i++) {
		long long at = rg[i].pos, end = rg[i].pos + rg[i].len;

		while (at < end) {
			struct route *hit = NULL;

			for (int k = 0; k < o->tr.nroute && !hit; k++)
				if (o->tr.route[k].pos == at && o->tr.route[k].len > 0 &&
				    !o->tr.route[k].used)
					hit = &o->tr.route[k];
			if (!hit) {
				fail(r, label, "no spin_route at %lld (range %lld+%lld)", at,
				     rg[i].pos, rg[i].len);
				break;
			}
			hit->used = 1;
			at += hit->len;
		}
		if (at > end)
			fail(r, label, "spin_route events go to %lld, past the range %lld+%lld",
			     at, rg[i].pos, rg[i].len);
	}
	for (int k = 0; k < o->tr.nroute; k++)
		if (o->tr.route[k].len > 0 && !o->tr.route[k].used)
			fail(r, label, "spin_route %lld+%lld is not a range read into GPU memory",
			     o->tr.route[k].pos, o->tr.route[k].len);
	return r->bad != bad0;
}

static unsigned int route_reasons(const struct obs *o)
{
	unsigned int mask = 0;

	for (int i = 0; i < o->tr.nroute; i++)
		mask |= BIT(o->tr.route[i].reason);
	return mask;
}

/* ---- GPU destinations -------------------------------------------------- */

static uint8_t poison_buf[GUARD];

static void poison(size_t goff, size_t len)
{
	size_t lo = goff >= GUARD ? goff - GUARD : 0;
	size_t hi = goff + len + GUARD <= GPU_LEN ? goff + len + GUARD : GPU_LEN;

	memset(gmem + lo, POISON, hi - lo);
}

/* The GUARD bytes before @goff and those after @goff + @n still poisoned. */
static void check_guards(size_t goff, size_t n, struct res *r, const char *label)
{
	char why[256];

	if (goff >= GUARD &&
	    spin_gpu_compare(gpu, gmem + goff - GUARD, GUARD, poison_buf, why, sizeof(why)))
		fail(r, label, "the %d bytes before the destination changed (%s)", GUARD, why);
	if (goff + n + GUARD <= GPU_LEN &&
	    spin_gpu_compare(gpu, gmem + goff + n, GUARD, poison_buf, why, sizeof(why)))
		fail(r, label, "the %d bytes after the %zu bytes read changed (%s)", GUARD, n,
		     why);
}

/* ---- residency ---------------------------------------------------------- */

enum { RZ_ALT = 101, RZ_RANDOM = 102 };

static const char *rz_name(int rz, char *buf, size_t len)
{
	if (rz == RZ_ALT)
		return "alternate pages";
	if (rz == RZ_RANDOM)
		return "random runs";
	snprintf(buf, len, "%d%%", rz);
	return buf;
}

/* Which of @n pages to cache for residency @rz. */
static void rz_fill(int rz, uint8_t *want, size_t n, unsigned int seed)
{
	size_t period = n < 1024 ? n : 1024;

	if (rz == RZ_RANDOM) {
		size_t i = 0;
		int state = rand_r(&seed) & 1;

		while (i < n) {
			size_t run = 1 + rand_r(&seed) % 48;

			while (run-- && i < n)
				want[i++] = state;
			state = !state;
		}
		return;
	}
	for (size_t i = 0; i < n; i++)
		want[i] = rz == RZ_ALT ? !(i & 1) : (i % period) * 100 < rz * period;
}

/*
 * Drop the file's pages, then cache exactly pages @first + i with @want[i]
 * (i < @n): preads into host memory on a POSIX_FADV_RANDOM fd (no
 * read-ahead). Checked with mincore().
 */
static int set_residency(struct fs *fs, long long first, size_t n, const uint8_t *want,
			 char *why, size_t whylen)
{
	long long pages = div_up(fs->size, PG);
	unsigned char *vec;
	size_t i = 0;

	if (first + (long long)n > pages)
		n = first < pages ? pages - first : 0;
	if (fsync(fs->fd) || posix_fadvise(fs->fd, 0, 0, POSIX_FADV_DONTNEED)) {
		snprintf(why, whylen, "fsync/fadvise: %s", strerror(errno));
		return -1;
	}
	while (i < n) {
		size_t run = 0;

		if (!want[i]) {
			i++;
			continue;
		}
		while (i + run < n && want[i + run])
			run++;
		for (size_t done = 0; done < run;) {
			size_t chunk = run - done < SMALL_LEN / PG ? run - done : SMALL_LEN / PG;
			off_t off = (first + i + done) * PG;

			if (pread(fs->fd_ra, host, chunk * PG, off) <= 0) {
				snprintf(why, whylen, "caching page %lld: %s", first + i + done,
					 strerror(errno));
				return -1;
			}
			done += chunk;
		}
		i += run;
	}
	if (!n)
		return 0;
	vec = malloc(n);
	if (mincore((void *)(fs->map + first * PG), n * PG, vec)) {
		snprintf(why, whylen, "mincore: %s", strerror(errno));
		free(vec);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if ((vec[i] & 1) != want[i]) {
			snprintf(why, whylen, "residency setup: page %lld %s, wanted %s",
				 first + (long long)i, vec[i] & 1 ? "cached" : "not cached",
				 want[i] ? "cached" : "not cached");
			free(vec);
			return -1;
		}
	}
	free(vec);
	return 0;
}

/* ---- routing rules ------------------------------------------------------ */

static int misaligned(const struct fs *fs, size_t goff, long long pos)
{
	uint64_t addr = (uintptr_t)(gmem + goff);

	return ((addr - (uint64_t)pos) % fs->dma_align) != 0;
}

/* Bytes of [@pos, @end) outside whole logical blocks; -1 if no whole block. */
static long long head_tail(const struct fs *fs, long long pos, long long end)
{
	long long lo = align_up(pos, fs->lbs), hi = align_down(end, fs->lbs);

	return lo < hi ? (lo - pos) + (end - hi) : -1;
}

/* Aggregates over a read matrix, for the summary lines. */
struct agg {
	struct res data, route, cached, uncached, rules;
	int mixed, n_cached, n_uncached;
};

/*
 * The rules for one read of [@pos, @pos + @n) into GPU offset @goff, whose
 * pages from @first had the residency @want (NULL: unknown).
 */
static void check_rules(struct fs *fs, struct obs *o, long long pos, long long n, size_t goff,
			long long first, const uint8_t *want, size_t npages, struct agg *a,
			const char *label)
{
	long long end = pos + n, ht = head_tail(fs, pos, end);
	long long full_lo = align_up(pos, PG) / PG, full_hi = align_down(end, PG) / PG;
	int all = 1, none = 1, mis = misaligned(fs, goff, pos);
	unsigned int want_reasons, got = route_reasons(o);

	if (!n)
		return;
	for (size_t i = 0; want && i < npages; i++) {
		if (end <= (long long)(first + i) * (long long)PG)
			break;
		if (want[i])
			none = 0;
		else
			all = 0;
	}
	if (!strcmp(mode, "pagecache"))
		want_reasons = BIT(R_MODE);
	else if (mis && ht >= 0)
		want_reasons = BIT(R_MISALIGNED);
	else if (mis)
		want_reasons = BIT(R_MISALIGNED) | BIT(R_NONE);
	else
		want_reasons = BIT(R_NONE);
	if (got & ~want_reasons)
		fail(&a->rules, label,
		     "spin_route reasons %#x, expected %#x (bit 0 none, %d misaligned)",
		     got, want_reasons, R_MISALIGNED);
	if (ht < 0 && o->d.v[ST_BYTES_P2P])
		fail(&a->rules, label, "%lld bytes by P2P, but no whole %lld-byte block",
		     o->d.v[ST_BYTES_P2P], fs->lbs);
	if (got != BIT(R_NONE))
		return;

	if (o->d.v[ST_BYTES_PC] && o->d.v[ST_BYTES_P2P])
		a->mixed++;
	if (!strcmp(mode, "p2p")) {
		if (ht >= 0 && o->d.v[ST_BYTES_PC] != ht)
			fail(&a->rules, label,
			     "mode p2p: %lld bytes from the page cache, the unaligned head+tail is %lld",
			     o->d.v[ST_BYTES_PC], ht);
		return;
	}
	if (!want)
		return;
	/* auto: the page cache only for cached pages, besides the partial edge pages */
	for (int i = 0; i < o->tr.nseg; i++) {
		struct seg *s = &o->tr.seg[i];
		long long lo = div_up(s->pos, PG), hi = (s->pos + s->len) / PG;

		if (s->p2p)
			continue;
		lo = lo > full_lo ? lo : full_lo;
		hi = hi < full_hi ? hi : full_hi;
		for (long long p = lo; p < hi; p++) {
			if (p - first >= 0 && p - first < (long long)npages && !want[p - first]) {
				fail(&a->rules, label,
				     "page %lld was not cached but was copied from the page cache (segment %lld+%lld)",
				     p, s->pos, s->len);
				break;
			}
		}
	}
	if (all) {
		a->n_cached++;
		if (o->d.v[ST_BYTES_P2P])
			fail(&a->cached, label, "fully cached, but %lld bytes by P2P",
			     o->d.v[ST_BYTES_P2P]);
	}
	if (none && ht >= 0) {
		if (ht == 0 && goff % PG == 0)
			a->n_uncached++;
		if (o->d.v[ST_BYTES_PC] != ht)
			fail(ht == 0 && goff % PG == 0 ? &a->uncached : &a->rules, label,
			     "nothing cached: %lld bytes from the page cache, expected %lld (unaligned head+tail), %lld by P2P",
			     o->d.v[ST_BYTES_PC], ht, o->d.v[ST_BYTES_P2P]);
	}
}

/*
 * One pread of @len bytes at @pos into GPU offset @goff with residency @rz:
 * bytes, guards, counters, trace, rules.
 */
static void matrix_read(struct fs *fs, long long pos, size_t len, size_t goff, int rz,
			struct agg *a, struct res *data)
{
	long long first = pos / PG, want_n;
	size_t npages = div_up(pos + len, PG) - first;
	char label[160], rzb[16], why[256];
	uint8_t *want = malloc(npages);
	struct range rg;
	struct obs o;
	ssize_t n;

	snprintf(label, sizeof(label), "%s: %zu B at %lld into GPU+%zu, %s cached", fs->name,
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
	} else if (n > 0 && spin_gpu_check(gpu, gmem + goff, n, fs->seed, pos, why,
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

static void read_matrix(struct fs *fs)
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
			 fs->name, data_al.runs, data_al.bad, data_al.bad ? data_al.why : "ok");
	ksft_test_result(!data_un.bad,
			 "%s: unaligned file/GPU offsets, 1 B..64 MiB: bytes (%d reads, %d bad: %s)\n",
			 fs->name, data_un.runs, data_un.bad, data_un.bad ? data_un.why : "ok");
	if (!a.mixed)
		fail(&a.route, fs->name, "no read was split between the page cache and P2P");
	ksft_test_result(!a.route.bad,
			 "%s: counters and trace agree on every read (%d reads, %d split): %s\n",
			 fs->name, a.route.runs, a.mixed, a.route.bad ? a.route.why : "ok");
	if (!a.n_cached)
		fail(&a.cached, fs->name, "no fully cached read observed");
	ksft_test_result(!a.cached.bad, "%s: fully cached reads: no P2P bytes (%d reads): %s\n",
			 fs->name, a.n_cached, a.cached.bad ? a.cached.why : "ok");
	if (!a.n_uncached)
		fail(&a.uncached, fs->name, "no uncached aligned read observed");
	ksft_test_result(!a.uncached.bad,
			 "%s: uncached aligned reads: all bytes by P2P (%d reads): %s\n", fs->name,
			 a.n_uncached, a.uncached.bad ? a.uncached.why : "ok");
	ksft_test_result(!a.rules.bad,
			 "%s: page cache for cached pages and unaligned head/tail only; misaligned GPU offsets fall back: %s\n",
			 fs->name, a.rules.bad ? a.rules.why : "ok");
}

/* ---- EOF, preadv, read() ------------------------------------------------ */

/*
 * A read that returned @n bytes at @pos into @goff: bytes, guards, counters
 * and trace. 0 if all holds; the caller frees @o's trace.
 */
static int check_read(struct fs *fs, struct obs *o, ssize_t n, long long want, long long pos,
		      size_t goff, struct res *r, const char *label)
{
	struct range rg = { pos, n > 0 ? n : 0 };
	int bad0 = r->bad;
	char why[256];

	if (n != want)
		fail(r, label, "returned %zd (%s), expected %lld", n,
		     n < 0 ? strerror(errno) : "count", want);
	else if (n > 0 && spin_gpu_check(gpu, gmem + goff, n, fs->seed, pos, why, sizeof(why)))
		fail(r, label, "GPU memory: %s", why);
	check_guards(goff, n > 0 ? n : 0, r, label);
	obs_end(fs, o, &rg, n > 0, r, label);
	return r->bad != bad0;
}

static void eof_reads(struct fs *fs)
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
			 fs->name, c[i].len, c[i].pos - F, c[i].rz);
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
		fail(&r, fs->name, "%s", a.rules.bad ? a.rules.why :
		     a.cached.bad ? a.cached.why : a.uncached.why);

	/* read() at EOF: short, then 0; the position ends at EOF. */
	snprintf(label, sizeof(label), "%s: read() of 4 KiB at EOF-10", fs->name);
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
	ksft_test_result(!r.bad,
			 "%s: EOF: short reads, 0 at and after EOF, nothing written past the count (%d reads): %s\n",
			 fs->name, r.runs + 2, r.bad ? r.why : "ok");
}

static void preadv_mixed(struct fs *fs)
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
			 fs->name, pos);
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
		if (spin_pattern_check(hb, pos, h[0], fs->seed) >= 0 ||
		    spin_pattern_check(hb + h[0], p1 + g[0], h[1], fs->seed) >= 0 ||
		    spin_pattern_check(hb + h[0] + h[1], p3, h[2], fs->seed) >= 0)
			fail(&r, label, "host iovecs hold wrong bytes");
		if (spin_gpu_check(gpu, gmem + go1, g[0], fs->seed, p1, why, sizeof(why)) ||
		    spin_gpu_check(gpu, gmem + go2, g[1], fs->seed, p2, why, sizeof(why)))
			fail(&r, label, "GPU iovec: %s", why);
		check_guards(go1, g[0], &r, label);
		check_guards(go2, g[1], &r, label);
		obs_end(fs, &o, rg, 2, &r, label);
		trace_free(&o.tr);
	}
	ksft_test_result(!r.bad,
			 "%s: preadv mixing host and GPU iovecs: bytes, only the GPU ranges routed: %s\n",
			 fs->name, r.bad ? r.why : "ok");
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
static void chunk_pipeline_one(struct fs *fs, int serial, struct res *r)
{
	const long long pos = 4 * MiB;
	const size_t len = 24 * MiB, npages = len / PG, chunk = 8 * MiB / PG;
	long long p0, p1, want = serial ? 0 : 2;
	uint8_t *cached = malloc(npages);
	char label[128], why[256];
	struct obs o;
	ssize_t n;

	snprintf(label, sizeof(label), "%s: 24 MiB in three chunks, %s", fs->name,
		 serial ? "one after another" : "pipelined");
	for (size_t i = 0; i < npages; i++)
		cached[i] = i < chunk || i >= 2 * chunk + chunk / 2;
	if (set_residency(fs, pos / PG, npages, cached, why, sizeof(why))) {
		fail(r, label, "%s", why);
		free(cached);
		return;
	}
	poison(0, len);
	p0 = spin_stat_get(fs->stat, "pipelined_chunks");
	obs_begin(fs, &o, r, label);
	n = pread(fs->fd, gmem, len, pos);
	p1 = spin_stat_get(fs->stat, "pipelined_chunks");
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

static void chunk_pipeline(struct fs *fs)
{
	int sync = !strcmp(fs->type, "xfs");
	struct res r = { 0 };

	chunk_pipeline_one(fs, sync, &r);
	if (!sync) {
		/* The same with /sys/kernel/spin/pipeline 0: chunk after chunk. */
		if (sys_write(SPIN_SYS "/pipeline", "0"))
			fail(&r, fs->name, "pipeline 0: %s", strerror(errno));
		else
			chunk_pipeline_one(fs, 1, &r);
		sys_write(SPIN_SYS "/pipeline", "1");
	}
	if (sync) {
		if (sys_write(SPIN_SYS "/atomic_reads", "0"))
			fail(&r, fs->name, "atomic_reads 0: %s", strerror(errno));
		else
			chunk_pipeline_one(fs, 0, &r);
		sys_write(SPIN_SYS "/atomic_reads", "1");
	}
	ksft_test_result(!r.bad,
			 "%s: a read of three chunks: the P2P legs of a chunk in flight while the one before is copied%s: %s\n",
			 fs->name, sync ? " (atomic_reads 0; none with 1)" :
			 " (none with pipeline 0)", r.bad ? r.why : "ok");
}

/*
 * One page read from the device every 21 pages, 169 pages in all, with the
 * disk's p2p_overlap at @overlap: the number of P2P segments into *@segs.
 */
static void queue_overlap_one(struct fs *fs, const char *overlap, long long *segs,
			      struct res *r)
{
	const long long pos = 2 * MiB;
	const size_t npages = 8 * 21 + 1, len = npages * PG;
	uint8_t cached[8 * 21 + 1];
	char label[128], path[PATH_MAX], why[256];
	struct obs o;
	ssize_t n;
	int ret;

	snprintf(label, sizeof(label), "%s: 9 uncached pages 20 apart, p2p_overlap %s", fs->name,
		 overlap);
	*segs = -1;
	for (size_t i = 0; i < npages; i++)
		cached[i] = i % 21 != 0;
	knob_path(path, sizeof(path), fs->disk, "p2p_overlap");
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
static void queue_overlap(struct fs *fs)
{
	int sync = !strcmp(fs->type, "xfs");
	long long none = -1, eight = -1;
	struct res r = { 0 };

	queue_overlap_one(fs, "100", &none, &r);
	queue_overlap_one(fs, "800", &eight, &r);
	if (!r.bad && none != 1)
		fail(&r, fs->name, "p2p_overlap 100: %lld P2P segments, want 1", none);
	if (!r.bad && !sync && eight <= 1)
		fail(&r, fs->name, "p2p_overlap 800: %lld P2P segments, want more than 1", eight);
	if (!r.bad && sync && eight != 1)
		fail(&r, fs->name, "p2p_overlap 800, synchronous legs: %lld P2P segments, want 1",
		     eight);
	ksft_test_result(!r.bad, "%s: p2p_overlap 100 -> %lld P2P leg(s), 800 -> %lld%s: %s\n",
			 fs->name, none, eight, sync ? " (synchronous legs: serial model)" : "",
			 r.bad ? r.why : "ok");
}

static void boundaries(struct fs *fs)
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
		 fs->name, gpu_tail, host_tail);
	posix_fadvise(fs->fd, 0, 0, POSIX_FADV_DONTNEED);
	poison(GPU_LEN - gpu_tail, gpu_tail);
	memset(dst + gpu_tail, POISON, host_tail + GUARD);
	rg = (struct range){ pos, gpu_tail };
	obs_begin(fs, &o, &r, label);
	n = pread(fs->fd, dst, gpu_tail + host_tail, pos);
	if (n != (ssize_t)(gpu_tail + host_tail))
		fail(&r, label, "returned %zd", n);
	if (spin_gpu_check(gpu, dst, gpu_tail, fs->seed, pos, why, sizeof(why)))
		fail(&r, label, "GPU part: %s", why);
	if (spin_pattern_check(dst + gpu_tail, pos + gpu_tail, host_tail, fs->seed) >= 0 ||
	    dst[gpu_tail + host_tail] != POISON)
		fail(&r, label, "host part holds wrong bytes");
	check_guards(GPU_LEN - gpu_tail, gpu_tail, &r, label);
	obs_end(fs, &o, &rg, 1, &r, label);
	trace_free(&o.tr);

	/* host, then GPU: a read that starts in host memory may stay unrouted */
	pos = 11 * MiB + (PG - host_head % PG);
	dst = gmem - host_head;
	snprintf(label, sizeof(label), "%s: one iovec, %zu B host + 1 MiB of GPU memory",
		 fs->name, host_head);
	poison(0, MiB);
	memset(dst - GUARD, POISON, host_head + GUARD);
	obs_begin(fs, &o, &r, label);
	n = pread(fs->fd, dst, host_head + MiB, pos);
	if (n != (ssize_t)(host_head + MiB))
		fail(&r, label, "returned %zd", n);
	if (spin_gpu_check(gpu, gmem, MiB, fs->seed, pos + host_head, why, sizeof(why)))
		fail(&r, label, "GPU part: %s", why);
	if (spin_pattern_check(dst, pos, host_head, fs->seed) >= 0 || dst[-1] != POISON)
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
	snprintf(label, sizeof(label), "%s: O_DIRECT pread of 1 MiB", fs->name);
	fd = open(fs->path, O_RDONLY | O_DIRECT);
	poison(3 * MiB, MiB);
	obs_begin(fs, &o, &r, label);
	n = fd < 0 ? -1 : pread(fd, gmem + 3 * MiB, MiB, 5 * MiB);
	if (n != (ssize_t)MiB)
		fail(&r, label, "returned %zd (%s)", n, strerror(errno));
	else if (spin_gpu_check(gpu, gmem + 3 * MiB, MiB, fs->seed, 5 * MiB, why, sizeof(why)))
		fail(&r, label, "GPU memory: %s", why);
	obs_end(fs, &o, NULL, 0, &r, label);
	trace_free(&o.tr);
	if (fd >= 0)
		close(fd);
	ksft_test_result(!r.bad,
			 "%s: iovecs across the GPU mapping's ends: bytes, only GPU pieces routed; O_DIRECT not routed: %s\n",
			 fs->name, r.bad ? r.why : "ok");
}

static void read_position(struct fs *fs)
{
	long long start = 5000, pos = start;
	const size_t l1 = 100000, l2 = MiB;
	struct res r = { 0 };
	char label[128];
	struct obs o;
	ssize_t n;
	off_t at;

	snprintf(label, sizeof(label), "%s: read()", fs->name);
	if (posix_fadvise(fs->fd, 0, 0, POSIX_FADV_DONTNEED))
		fail(&r, label, "fadvise: %s", strerror(errno));
	lseek(fs->fd, start, SEEK_SET);
	poison(2 * MiB + start % PG, l1);
	obs_begin(fs, &o, &r, label);
	n = read(fs->fd, gmem + 2 * MiB + start % PG, l1);
	check_read(fs, &o, n, l1, pos, 2 * MiB + start % PG, &r, label);
	trace_free(&o.tr);
	pos += l1;
	at = lseek(fs->fd, 0, SEEK_CUR);
	if (at != pos)
		fail(&r, label, "position %lld after read() of %zu at %lld", (long long)at, l1,
		     start);
	poison(6 * MiB + pos % PG, l2);
	obs_begin(fs, &o, &r, label);
	n = read(fs->fd, gmem + 6 * MiB + pos % PG, l2);
	check_read(fs, &o, n, l2, pos, 6 * MiB + pos % PG, &r, label);
	trace_free(&o.tr);
	pos += l2;
	at = lseek(fs->fd, 0, SEEK_CUR);
	if (at != pos)
		fail(&r, label, "position %lld after the second read(), expected %lld",
		     (long long)at, pos);

	snprintf(label, sizeof(label), "%s: readv()", fs->name);
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
		if (spin_gpu_check(gpu, gmem + goff, 3 * PG, fs->seed, pos, why, sizeof(why)))
			fail(&r, label, "GPU iovec: %s", why);
		if (spin_pattern_check(host, pos + 3 * PG, 5000, fs->seed) >= 0)
			fail(&r, label, "host iovec holds wrong bytes");
		obs_end(fs, &o, &rg, 1, &r, label);
		trace_free(&o.tr);
		pos += 3 * PG + 5000;
	}
	at = lseek(fs->fd, 0, SEEK_CUR);
	if (at != pos)
		fail(&r, label, "position %lld after readv(), expected %lld", (long long)at, pos);
	ksft_test_result(!r.bad,
			 "%s: read() and readv() into GPU memory advance the file position: %s\n",
			 fs->name, r.bad ? r.why : "ok");
}

/* ---- consistency -------------------------------------------------------- */

/* A file of @pages pages of pattern @seed, synced and out of the page cache. */
static int make_file(const char *path, size_t pages, uint64_t seed)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return -1;
	spin_pattern_fill(host, 0, pages * PG, seed);
	if (spin_write_uncached(fd, host, pages * PG, 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Read the file @fd ([0, @len), as @ffs) into GPU memory and compare with
 * @expect; with @all_p2p every byte must have gone by P2P.
 */
static void read_expect(struct fs *ffs, int fd, size_t len, const uint8_t *expect, int all_p2p,
			struct res *r, const char *label)
{
	struct range rg = { 0, len };
	size_t goff = 32 * MiB;
	char why[256];
	struct obs o;
	ssize_t n;

	poison(goff, len);
	obs_begin(ffs, &o, r, label);
	n = pread(fd, gmem + goff, len, 0);
	if (n != (ssize_t)len)
		fail(r, label, "pread returned %zd", n);
	if (spin_gpu_compare(gpu, gmem + goff, len, expect, why, sizeof(why))) {
		size_t i = 0;

		while (i < len && !memcmp(gmem + goff + i, expect + i, PG))
			i += PG;
		fail(r, label, "stale or wrong data in GPU memory: %s; first bad page %zu", why,
		     i / PG);
	}
	if (!obs_end(ffs, &o, &rg, 1, r, label) && all_p2p && o.d.v[ST_BYTES_P2P] != (long long)len)
		fail(r, label, "%lld of %zu bytes by P2P (mode %s)", o.d.v[ST_BYTES_P2P], len,
		     mode);
	if (!all_p2p)
		ksft_print_msg("%s: %lld bytes from the page cache, %lld by P2P\n", label,
			       o.d.v[ST_BYTES_PC], o.d.v[ST_BYTES_P2P]);
	trace_free(&o.tr);
}

/* Pages @i with @pick(i) of @expect and of the file get pattern @seed, by write(2). */
static int dirty_write(int fd, uint8_t *expect, size_t pages, int step, int phase,
		       uint64_t seed)
{
	for (size_t i = 0; i < pages; i++) {
		if ((int)(i % step) != phase && !(i >= 100 && i < 164))
			continue;
		spin_pattern_fill(expect + i * PG, i * PG, PG, seed);
		if (pwrite(fd, expect + i * PG, PG, i * PG) != (ssize_t)PG)
			return -1;
	}
	return 0;
}

static void consistency(struct fs *fs)
{
	struct fs cf = *fs;
	const size_t pages = 512, len = pages * PG;
	uint8_t *expect = malloc(len), *map;
	struct res w = { 0 }, wp = { 0 }, m = { 0 };
	char label[128];
	int fd;

	snprintf(cf.path, sizeof(cf.path), "%s/cons", fs->dir);

	/* write(2), no fsync, auto: every 4th page and a 64-page run dirty. */
	snprintf(label, sizeof(label), "%s: write(2) then read, auto", fs->name);
	fd = make_file(cf.path, pages, 61);
	spin_pattern_fill(expect, 0, len, 61);
	if (fd < 0 || fstat(fd, &cf.st) || dirty_write(fd, expect, pages, 4, 1, 62))
		fail(&w, label, "setup: %s", strerror(errno));
	else
		read_expect(&cf, fd, len, expect, 0, &w, label);
	if (fd >= 0)
		close(fd);

	/* p2p mode: the dirty pages must be written back before the direct read. */
	snprintf(label, sizeof(label), "%s: write(2) then read, p2p", fs->name);
	fd = make_file(cf.path, pages, 63);
	spin_pattern_fill(expect, 0, len, 63);
	if (fd < 0 || fstat(fd, &cf.st) || dirty_write(fd, expect, pages, 4, 2, 64) ||
	    set_mode("p2p"))
		fail(&wp, label, "setup: %s", strerror(errno));
	else
		read_expect(&cf, fd, len, expect, 1, &wp, label);
	/* the whole file dirty, still p2p */
	if (fd >= 0 && !dirty_write(fd, expect, pages, 1, 0, 65))
		read_expect(&cf, fd, len, expect, 1, &wp, label);
	else
		fail(&wp, label, "rewrite: %s", strerror(errno));
	set_mode("auto");
	if (fd >= 0)
		close(fd);

	/* Stores through a shared mapping, no msync: auto, then p2p. */
	snprintf(label, sizeof(label), "%s: mmap stores then read", fs->name);
	fd = make_file(cf.path, pages, 66);
	spin_pattern_fill(expect, 0, len, 66);
	map = fd < 0 ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED || fstat(fd, &cf.st)) {
		fail(&m, label, "setup: %s", strerror(errno));
	} else {
		for (size_t i = 0; i < pages; i++) {
			if (i % 8 == 3 || (i >= 200 && i < 264)) {
				spin_pattern_fill(expect + i * PG, i * PG, PG, 67);
				memcpy(map + i * PG, expect + i * PG, PG);
			}
		}
		snprintf(label, sizeof(label), "%s: mmap stores then read, auto", fs->name);
		read_expect(&cf, fd, len, expect, 0, &m, label);
		for (size_t i = 0; i < pages; i++) {
			if (i % 8 == 5 || (i >= 300 && i < 310)) {
				spin_pattern_fill(expect + i * PG, i * PG, PG, 68);
				memcpy(map + i * PG, expect + i * PG, PG);
			}
		}
		snprintf(label, sizeof(label), "%s: mmap stores then read, p2p", fs->name);
		if (set_mode("p2p"))
			fail(&m, label, "mode p2p: %s", strerror(errno));
		else
			read_expect(&cf, fd, len, expect, 1, &m, label);
		set_mode("auto");
		munmap(map, len);
	}
	if (fd >= 0)
		close(fd);
	free(expect);
	ksft_test_result(!w.bad,
			 "%s: write(2) without fsync, then read into GPU memory (auto): new data: %s\n",
			 fs->name, w.bad ? w.why : "ok");
	ksft_test_result(!wp.bad,
			 "%s: write(2) without fsync, then read (p2p): written back, all by P2P: %s\n",
			 fs->name, wp.bad ? wp.why : "ok");
	ksft_test_result(!m.bad,
			 "%s: shared-mapping stores without msync, then read (auto, p2p): new data: %s\n",
			 fs->name, m.bad ? m.why : "ok");
}

/* ---- concurrency -------------------------------------------------------- */

#define PAGE_MAGIC 0x5350494eULL	/* "SPIN" */
#define VSEED(v) (0x1000 + (uint64_t)(v))

/* Version @v of page @i: a header (magic, version, index), then a pattern. */
static void make_page(uint8_t *buf, size_t i, uint32_t v)
{
	uint64_t h = PAGE_MAGIC << 32 | v, idx = i;

	memcpy(buf, &h, 8);
	memcpy(buf + 8, &idx, 8);
	spin_pattern_fill(buf + 16, (uint64_t)i * PG + 16, PG - 16, VSEED(v));
}

enum { PAGE_COMPLETE, PAGE_ZERO, PAGE_TORN };

static int page_kind(const uint8_t *p, size_t i, uint8_t *scratch, uint32_t *v)
{
	static const uint8_t zero[PG];
	uint64_t h, idx;

	if (!memcmp(p, zero, PG))
		return PAGE_ZERO;
	memcpy(&h, p, 8);
	memcpy(&idx, p + 8, 8);
	if (h >> 32 != PAGE_MAGIC || idx != i)
		return PAGE_TORN;
	*v = (uint32_t)h;
	make_page(scratch, i, *v);
	return memcmp(p, scratch, PG) ? PAGE_TORN : PAGE_COMPLETE;
}

struct con {
	int stop, writer_err;
	int nreads, sync_every;		/* reads to do; writeback after every Nth write */
	int problems, torn, zero, busy, shorts, reads;
	long long p2p;
	char why[256];
	uint32_t seq[CON_PAGES], ver[CON_PAGES];
};

static __printf(2, 3) void con_fail(struct con *c, const char *fmt, ...)
{
	va_list ap;

	if (c->problems++)
		return;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
}

static void seq_bump(struct con *c, size_t i)
{
	__atomic_add_fetch(&c->seq[i], 1, __ATOMIC_SEQ_CST);
}

static int con_write_page(struct con *c, int fd, uint8_t *buf, size_t i)
{
	uint32_t v = c->ver[i] + 1;

	make_page(buf, i, v);
	if (pwrite(fd, buf, PG, i * PG) != (ssize_t)PG)
		return -1;
	__atomic_store_n(&c->ver[i], v, __ATOMIC_SEQ_CST);
	return 0;
}

/*
 * What a torn page @p (page @i) is made of, 512-byte sector by sector:
 * versions @lo..@hi of the page, or "?", as runs like "0-2047 v4, 2048-4095 v5".
 */
static void torn_detail(const uint8_t *p, size_t i, uint32_t lo, uint32_t hi, char *buf,
			size_t len)
{
	uint8_t *want = spin_alloc_aligned(PG);
	long long cur = -2, start = 0;
	size_t n = 0;

	buf[0] = '\0';
	for (size_t sec = 0; sec <= PG / 512; sec++) {
		long long which = -1;

		for (uint32_t v = lo; sec < PG / 512 && v <= hi && which < 0; v++) {
			make_page(want, i, v);
			if (!memcmp(p + sec * 512, want + sec * 512, 512))
				which = v;
		}
		if (sec < PG / 512 && which == cur)
			continue;
		if (cur != -2 && n < len)
			n += snprintf(buf + n, len - n, "%s%lld-%zu %s%lld", n ? ", " : "",
				      start, sec * 512 - 1, cur < 0 ? "?" : "v",
				      cur < 0 ? 0 : cur);
		cur = which;
		start = sec * 512;
	}
	free(want);
}

/* The path of the traced segment of inode @ino that holds file offset @pos. */
static const char *seg_path(unsigned long long ino, long long pos)
{
	const char *path = "no segment event";
	struct trace t;
	char why[128];

	if (trace_collect(&t, ino, why, sizeof(why)))
		return "trace unreadable";
	for (int k = 0; k < t.nseg; k++)
		if (t.seg[k].pos <= pos && pos < t.seg[k].pos + t.seg[k].len)
			path = t.seg[k].p2p ? "p2p" : "pagecache";
	trace_free(&t);
	return path;
}

/* The writer: whole pages, each with its next version; or truncate and refill. */
static void __noreturn con_writer(struct con *c, const char *path, int truncating)
{
	uint8_t *buf = spin_alloc_aligned(PG);
	unsigned int seed = getpid();
	int fd = open(path, O_RDWR);
	unsigned long k = 0;

	while (fd >= 0 && !__atomic_load_n(&c->stop, __ATOMIC_SEQ_CST)) {
		if (truncating) {
			size_t t = CON_PAGES / 4 + rand_r(&seed) % (CON_PAGES * 3 / 4);

			for (size_t i = t; i < CON_PAGES; i++)
				seq_bump(c, i);
			if (ftruncate(fd, t * PG))
				c->writer_err = errno;
			usleep(rand_r(&seed) % 3000);
			if (ftruncate(fd, CON_LEN))
				c->writer_err = errno;
			for (size_t i = t; i < CON_PAGES; i++)
				if (con_write_page(c, fd, buf, i))
					c->writer_err = errno;
			for (size_t i = t; i < CON_PAGES; i++)
				seq_bump(c, i);
			usleep(rand_r(&seed) % 3000);
			continue;
		}
		{
			size_t i = rand_r(&seed) % CON_PAGES;

			seq_bump(c, i);
			if (con_write_page(c, fd, buf, i))
				c->writer_err = errno;
			seq_bump(c, i);
		}
		if (++k % c->sync_every == 0)
			sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
		if (k % 256 == 0)
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	}
	if (fd < 0)
		c->writer_err = errno;
	_exit(0);
}

/*
 * The reader: whole-file preads into GPU memory while the writer runs. A
 * page not written during the read must hold exactly its last version; one
 * written during it a complete version from then (or zeros where a truncate
 * ran). Torn pages are a failure where @strict, else counted (ext4 does not
 * serialise a buffered read against a write of the same page).
 */
static void __noreturn con_reader(struct con *c, const char *path, int strict, int truncating)
{
	uint32_t s0[CON_PAGES], v0[CON_PAGES], s1[CON_PAGES], v1[CON_PAGES];
	uint8_t *scratch = spin_alloc_aligned(PG);
	int fd = open(path, O_RDONLY);
	size_t goff = 40 * MiB;
	char why[256], detail[160];
	struct stat st;

	if (fd < 0 || fstat(fd, &st)) {
		con_fail(c, "open %s: %s", path, strerror(errno));
		_exit(1);
	}
	for (int it = 0; it < c->nreads && !c->problems; it++) {
		ssize_t n;

		for (size_t i = 0; i < CON_PAGES; i++) {
			s0[i] = __atomic_load_n(&c->seq[i], __ATOMIC_SEQ_CST);
			v0[i] = __atomic_load_n(&c->ver[i], __ATOMIC_SEQ_CST);
		}
		memset(gmem + goff, POISON, CON_LEN);
		if (it & 1)
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		trace_write("trace", "");
		n = pread(fd, gmem + goff, CON_LEN, 0);
		for (size_t i = 0; i < CON_PAGES; i++) {
			v1[i] = __atomic_load_n(&c->ver[i], __ATOMIC_SEQ_CST);
			s1[i] = __atomic_load_n(&c->seq[i], __ATOMIC_SEQ_CST);
		}
		c->reads++;
		if (n < 0 || n % PG || n > (ssize_t)CON_LEN ||
		    (n < (ssize_t)CON_LEN && (!truncating || n < (ssize_t)(CON_LEN / 4)))) {
			con_fail(c, "read %d returned %zd (%s)", it, n,
				 n < 0 ? strerror(errno) : "bad count");
			break;
		}
		if (n < (ssize_t)CON_LEN)
			c->shorts++;
		if (spin_gpu_compare(gpu, gmem + goff, n, gmem + goff, why, sizeof(why))) {
			con_fail(c, "read %d: the host does not see what the CPU sees: %s", it,
				 why);
			break;
		}
		for (size_t i = 0; i < (size_t)n / PG; i++) {
			int quiet = s0[i] == s1[i] && !(s0[i] & 1);
			uint32_t v = 0;
			int kind = page_kind(gmem + goff + i * PG, i, scratch, &v);

			if (quiet) {
				if (kind != PAGE_COMPLETE || v != v0[i])
					con_fail(c,
						 "read %d, page %zu (quiet): %s version %u, expected %u",
						 it, i, kind == PAGE_ZERO ? "zeros, not" :
						 kind == PAGE_TORN ? "torn, not" : "got", v, v0[i]);
				continue;
			}
			c->busy++;
			if (kind == PAGE_COMPLETE && v >= v0[i] && v <= v1[i] + 1)
				continue;
			if (kind == PAGE_ZERO && truncating) {
				c->zero++;
				continue;
			}
			if (kind == PAGE_TORN) {
				c->torn++;
				if (!strict)
					continue;
				torn_detail(gmem + goff + i * PG, i, v0[i], v1[i] + 1, detail,
					    sizeof(detail));
				con_fail(c,
					 "read %d, page %zu (being written, v%u..v%u) torn: %s; went by %s",
					 it, i, v0[i], v1[i] + 1, detail,
					 seg_path(st.st_ino, i * PG));
				continue;
			}
			con_fail(c, "read %d, page %zu (being written): %s%u, versions %u..%u",
				 it, i, kind == PAGE_ZERO ? "zeros " : "version ", v, v0[i],
				 v1[i] + 1);
		}
	}
	__atomic_store_n(&c->stop, 1, __ATOMIC_SEQ_CST);
	_exit(0);
}

/*
 * Wait for @pid to exit; 0 if it did. It counts as hung when @progress (a
 * counter it bumps, or NULL) has not moved for @secs seconds: a slow host
 * makes a phase slow, only a stuck task makes it stop.
 */
static int wait_for(pid_t pid, int secs, const int *progress, int *status)
{
	int last = progress ? __atomic_load_n(progress, __ATOMIC_SEQ_CST) : 0;
	double since = spin_now();

	for (;;) {
		int now;

		if (waitpid(pid, status, WNOHANG) == pid)
			return 0;
		now = progress ? __atomic_load_n(progress, __ATOMIC_SEQ_CST) : 0;
		if (now != last) {
			last = now;
			since = spin_now();
		} else if (spin_now() - since > secs) {
			return -ETIMEDOUT;
		}
		usleep(50000);
	}
}

/* Print a small /proc file to stderr, each line as a TAP comment. */
static void cat_proc(const char *what, const char *path)
{
	char buf[4096], *line, *save;
	ssize_t n;
	int fd = open(path, O_RDONLY);

	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n < 0) {
		fprintf(stderr, "# %s: %s\n", what, strerror(errno));
		return;
	}
	buf[n] = 0;
	fprintf(stderr, "# %s:%s\n", what, n ? "" : " (empty)");
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		fprintf(stderr, "#   %s\n", line);
}

/* What a hung task is doing: its state, wait channel and every thread's stack. */
static void dump_stack(pid_t pid)
{
	char path[64], what[96];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	snprintf(what, sizeof(what), "task %d stat", pid);
	cat_proc(what, path);
	snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
	snprintf(what, sizeof(what), "task %d wchan", pid);
	cat_proc(what, path);
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	while (d && (e = readdir(d))) {
		char stack[300];

		if (e->d_name[0] == '.')
			continue;
		snprintf(stack, sizeof(stack), "/proc/%d/task/%.16s/stack", pid, e->d_name);
		snprintf(what, sizeof(what), "thread %.16s stack", e->d_name);
		cat_proc(what, stack);
	}
	if (d)
		closedir(d);
}

/*
 * One concurrency phase: @nreads whole-file reads in mode @m against a
 * writer (that writes back after every @sync_every writes) or a truncate.
 * Torn pages fail it where @strict, else they are counted.
 */
static void con_run(struct fs *fs, const char *m, int truncating, int nreads, int sync_every,
		    int strict, const char *note)
{
	struct con *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char path[PATH_MAX + 8], what[160];
	int status = 0, fd;
	struct stats g0 = { 0 }, g1 = { 0 };
	pid_t writer, reader;
	double t0, t1;

	snprintf(what, sizeof(what), "%s: concurrent %s (%s%s)", fs->name,
		 truncating ? "truncate" : "writer", m, note);
	snprintf(path, sizeof(path), "%s/con", fs->dir);
	if (fs->hung) {
		ksft_test_result_fail("%s: not run, an earlier reader on %s hung\n", what,
				      fs->name);
		return;
	}
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (size_t i = 0; fd >= 0 && i < CON_PAGES; i++)
		make_page(host + i * PG, i, 0);
	if (c == MAP_FAILED || fd < 0 || pwrite(fd, host, CON_LEN, 0) != (ssize_t)CON_LEN ||
	    fsync(fd) || set_mode(m)) {
		ksft_test_result_fail("%s: setup: %s\n", what, strerror(errno));
		return;
	}
	close(fd);
	memset(c, 0, sizeof(*c));
	c->nreads = nreads;
	c->sync_every = sync_every;
	stats_read(SPIN_SYS "/stat", &g0, c->why, sizeof(c->why));
	fflush(stdout);
	writer = fork();
	if (!writer)
		con_writer(c, path, truncating);
	reader = fork();
	if (!reader)
		con_reader(c, path, strict, truncating);
	t0 = spin_now();
	if (wait_for(reader, CON_TIMEOUT, &c->reads, &status)) {
		ksft_print_msg("%s: no read finished in %d s; blocked and running tasks:\n",
			       what, CON_TIMEOUT);
		sys_write("/proc/sysrq-trigger", "w");
		sys_write("/proc/sysrq-trigger", "l");
		dump_stack(reader);
		dump_stack(writer);
		__atomic_store_n(&c->stop, 1, __ATOMIC_SEQ_CST);
		/* a task stuck in the kernel survives this and keeps the fs busy */
		kill(reader, SIGKILL);
		kill(writer, SIGKILL);
		if (wait_for(reader, 30, NULL, &status) || wait_for(writer, 30, NULL, &status))
			fs->hung = 1;
		ksft_test_result_fail("%s: reader hung after %d reads (deadlock?)%s\n", what,
				      c->reads, fs->hung ? ", not killable" : "");
		set_mode("auto");
		return;
	}
	t1 = spin_now();
	__atomic_store_n(&c->stop, 1, __ATOMIC_SEQ_CST);
	if (wait_for(writer, CON_TIMEOUT, NULL, &status)) {
		fs->hung = 1;
		sys_write("/proc/sysrq-trigger", "w");
		dump_stack(writer);
		ksft_test_result_fail("%s: writer hung\n", what);
		set_mode("auto");
		return;
	}
	stats_read(SPIN_SYS "/stat", &g1, c->why + 128, 128);
	set_mode("auto");
	if (c->writer_err)
		con_fail(c, "writer: %s", strerror(c->writer_err));
	if (c->reads != nreads && !c->problems)
		con_fail(c, "%d of %d reads", c->reads, nreads);
	/* p2p mode without a truncate: every byte of every read by P2P */
	c->p2p = g1.v[ST_BYTES_P2P] - g0.v[ST_BYTES_P2P];
	if (!strcmp(m, "p2p") && !truncating && c->p2p != (long long)(nreads * CON_LEN))
		con_fail(c, "mode p2p: %lld bytes by P2P in %d reads of %lu", c->p2p, nreads,
			 CON_LEN);
	ksft_test_result(!c->problems,
			 "%s: %d reads in %.0f s, %d pages written meanwhile, %d torn%s, %d zero, %d short, %lld B by P2P: %s\n",
			 what, c->reads, t1 - t0, c->busy, c->torn,
			 strict ? "" : " (allowed here)", c->zero, c->shorts, c->p2p,
			 c->problems ? c->why : "ok");
	munmap(c, sizeof(*c));
}

/* The phases of every filesystem: strict on xfs (its IOLOCK), counted on ext4. */
static void con_phase(struct fs *fs, const char *m, int truncating)
{
	con_run(fs, m, truncating, CON_READS, 16, !strcmp(fs->type, "xfs"), "");
}

/*
 * XFS read atomicity: P2P legs of a read on xfs are synchronous,
 * under the IOLOCK, so a page written during the read comes back whole.
 * Many reads against a writer that writes back after every write; then a
 * quarter as many with atomic_reads off (asynchronous legs), whose torn pages
 * are only counted: they show what the knob prevents (rarely: the race is
 * narrow).
 */
static void xfs_atomicity(struct fs *fs)
{
	char note[64];

	snprintf(note, sizeof(note), ", %d reads, atomic_reads 1", CON_ATOMIC_READS);
	con_run(fs, "p2p", 0, CON_ATOMIC_READS, 1, 1, note);
	if (sys_write(SPIN_SYS "/atomic_reads", "0")) {
		ksft_test_result_fail("%s: atomic_reads 0: %s\n", fs->name, strerror(errno));
		return;
	}
	snprintf(note, sizeof(note), ", %d reads, atomic_reads 0", CON_ATOMIC_READS / 4);
	con_run(fs, "p2p", 0, CON_ATOMIC_READS / 4, 1, 0, note);
	sys_write(SPIN_SYS "/atomic_reads", "1");
}

/* ---- modes -------------------------------------------------------------- */

static void modes(struct fs *fs)
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

		snprintf(label, sizeof(label), "%s: mode %s, 1 MiB at %lld, %d%% cached", fs->name,
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
		else if (spin_gpu_check(gpu, gmem + goff, MiB, fs->seed, c[i].pos, why,
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
	ksft_test_result(!pc.bad,
			 "%s: mode pagecache: no P2P bytes, fallback_mode counted, bytes right: %s\n",
			 fs->name, pc.bad ? pc.why : "ok");
	ksft_test_result(!p2p.bad,
			 "%s: mode p2p: a cached aligned read all by P2P, unaligned head/tail copied: %s\n",
			 fs->name, p2p.bad ? p2p.why : "ok");
}

/* ---- setup -------------------------------------------------------------- */

static void fs_find(struct fs *fs)
{
	char path[PATH_MAX], *slash;
	int ret = fs->virtio ? spin_virtio_blockdev(fs->serial, fs->dev, sizeof(fs->dev)) :
			       spin_nvme_blockdev(fs->serial, fs->dev, sizeof(fs->dev));

	if (ret)
		ksft_exit_fail_msg("no block device with serial %s\n", fs->serial);
	slash = strrchr(fs->dev, '/');
	snprintf(fs->disk, sizeof(fs->disk), "%s", slash + 1);
	snprintf(fs->stat, sizeof(fs->stat), "/sys/block/%s/spin/stat", fs->disk);
	snprintf(path, sizeof(path), "/sys/block/%s/queue/logical_block_size", fs->disk);
	fs->lbs = spin_read_ll(path);
	snprintf(path, sizeof(path), "/sys/block/%s/queue/dma_alignment", fs->disk);
	fs->dma_align = spin_read_ll(path);
	/* sysfs shows the mask (alignment - 1) */
	if (fs->dma_align >= 0 && !(fs->dma_align & (fs->dma_align + 1)))
		fs->dma_align++;
	if (fs->lbs <= 0 || fs->dma_align <= 0)
		ksft_exit_fail_msg("%s: no logical block size / DMA alignment\n", fs->dev);
}

/* mkfs, mount, a pattern file of @size bytes, its descriptors and mapping. */
static void fs_setup(struct fs *fs, long long size)
{
	struct statx stx;
	char cmd[256];

	fs_find(fs);
	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null 2>&1", fs->mkfs, fs->dev);
	mkdir(fs->dir, 0755);
	if (run(cmd) || mount(fs->dev, fs->dir, fs->type, 0, NULL))
		ksft_exit_fail_msg("%s on %s: %s\n", fs->type, fs->dev, strerror(errno));
	snprintf(fs->path, sizeof(fs->path), "%s/data", fs->dir);
	fs->fd = open(fs->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fs->fd < 0)
		ksft_exit_fail_msg("%s: %s\n", fs->path, strerror(errno));
	for (long long off = 0; off < size; off += SMALL_LEN) {
		size_t n = size - off < (long long)SMALL_LEN ? (size_t)(size - off) : SMALL_LEN;

		spin_pattern_fill(host, off, n, fs->seed);
		if (spin_write_uncached(fs->fd, host, n, off))
			ksft_exit_fail_msg("writing %s: %s\n", fs->path, strerror(errno));
	}
	if (fsync(fs->fd) || fstat(fs->fd, &fs->st))
		ksft_exit_fail_msg("fsync %s: %s\n", fs->path, strerror(errno));
	/* The router's direct-I/O geometry: the larger of the disk's and the file's. */
	if (!statx(AT_FDCWD, fs->path, 0, STATX_DIOALIGN, &stx) &&
	    (stx.stx_mask & STATX_DIOALIGN)) {
		if ((long long)stx.stx_dio_offset_align > fs->lbs)
			fs->lbs = stx.stx_dio_offset_align;
		if ((long long)stx.stx_dio_mem_align > fs->dma_align)
			fs->dma_align = stx.stx_dio_mem_align;
	}
	fs->size = size;
	fs->fd_ra = open(fs->path, O_RDONLY);
	if (fs->fd_ra < 0 || posix_fadvise(fs->fd_ra, 0, 0, POSIX_FADV_RANDOM))
		ksft_exit_fail_msg("%s: %s\n", fs->path, strerror(errno));
	fs->map = mmap(NULL, size, PROT_READ, MAP_SHARED, fs->fd, 0);
	if (fs->map == MAP_FAILED)
		ksft_exit_fail_msg("mmap %s: %s\n", fs->path, strerror(errno));
}

static void fs_teardown(struct fs *fs)
{
	munmap((void *)fs->map, fs->size);
	close(fs->fd);
	close(fs->fd_ra);
	if (!fs->hung && umount(fs->dir))
		ksft_print_msg("umount %s: %s\n", fs->dir, strerror(errno));
}

/* ---- fallbacks ---------------------------------------------------------- */

static void fallback(struct fs *fs, int reason, const char *what)
{
	struct res r = { 0 };
	char label[128], why[256];
	uint8_t want[1024];
	struct obs o;
	ssize_t n;
	const struct {
		long long pos;
		size_t len;
		int rz;
		const char *mode;
	} c[] = {
		{ 0, MiB, 0, "auto" },
		{ 12345, 3 * MiB + 7, 50, "auto" },
		{ MiB, MiB, 100, "p2p" },	/* p2p cannot make a path */
		{ 2 * MiB, 64 * KiB, 0, "p2p" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		size_t goff = 56 * MiB + c[i].pos % PG;
		struct range rg = { c[i].pos, c[i].len };
		long long first = c[i].pos / PG;
		size_t np = div_up(c[i].pos + (long long)c[i].len, PG) - first;

		snprintf(label, sizeof(label), "%s: %zu B at %lld, %d%% cached, mode %s", fs->name,
			 c[i].len, c[i].pos, c[i].rz, c[i].mode);
		rz_fill(c[i].rz, want, np, 0);
		r.runs++;
		if (set_residency(fs, first, np, want, why, sizeof(why))) {
			fail(&r, label, "%s", why);
			continue;
		}
		if (set_mode(c[i].mode)) {
			fail(&r, label, "mode %s: %s", c[i].mode, strerror(errno));
			continue;
		}
		poison(goff, c[i].len);
		obs_begin(fs, &o, &r, label);
		n = pread(fs->fd, gmem + goff, c[i].len, c[i].pos);
		if (n != (ssize_t)c[i].len)
			fail(&r, label, "returned %zd", n);
		else if (spin_gpu_check(gpu, gmem + goff, n, fs->seed, c[i].pos, why, sizeof(why)))
			fail(&r, label, "GPU memory: %s", why);
		check_guards(goff, c[i].len, &r, label);
		if (!obs_end(fs, &o, &rg, 1, &r, label)) {
			if (o.d.v[ST_BYTES_P2P] || o.d.v[REASON_STAT(reason)] != 1 ||
			    route_reasons(&o) != BIT(reason))
				fail(&r, label,
				     "expected reason %s: bytes_p2p +%lld, %s +%lld, reasons seen %#x",
				     reason_names[reason], o.d.v[ST_BYTES_P2P],
				     stat_names[REASON_STAT(reason)], o.d.v[REASON_STAT(reason)],
				     route_reasons(&o));
		}
		trace_free(&o.tr);
	}
	set_mode("auto");
	ksft_test_result(!r.bad,
			 "%s: bytes right, every read falls back, reason %s (counters, trace): %s\n",
			 what, reason_names[reason], r.bad ? r.why : "ok");
}

/* A file on tmpfs: no block device. */
static void fallback_tmpfs(void)
{
	struct fs t = { .name = "tmpfs", .seed = 71 };
	struct res r = { 0 };
	struct range rg = { 3000, MiB };
	char label[] = "tmpfs: 1 MiB at 3000";
	char why[256];
	struct obs o;
	ssize_t n;

	t.fd = open("/tmp/router_test.dat", O_RDWR | O_CREAT | O_TRUNC, 0644);
	spin_pattern_fill(host, 0, 2 * MiB, t.seed);
	if (t.fd < 0 || pwrite(t.fd, host, 2 * MiB, 0) != (ssize_t)(2 * MiB) ||
	    fstat(t.fd, &t.st)) {
		ksft_test_result_fail("tmpfs: setup: %s\n", strerror(errno));
		return;
	}
	t.lbs = 512;
	poison(3000, MiB);
	obs_begin(&t, &o, &r, label);
	n = pread(t.fd, gmem + 3000, MiB, 3000);
	if (n != (ssize_t)MiB)
		fail(&r, label, "returned %zd", n);
	else if (spin_gpu_check(gpu, gmem + 3000, MiB, t.seed, 3000, why, sizeof(why)))
		fail(&r, label, "GPU memory: %s", why);
	check_guards(3000, MiB, &r, label);
	if (!obs_end(&t, &o, &rg, 1, &r, label) &&
	    (o.g.v[ST_FB_NO_BDEV] != 1 || o.g.v[ST_BYTES_P2P] ||
	     route_reasons(&o) != BIT(R_NO_BDEV)))
		fail(&r, label, "fallback_no_bdev +%lld, bytes_p2p +%lld, reasons seen %#x",
		     o.g.v[ST_FB_NO_BDEV], o.g.v[ST_BYTES_P2P], route_reasons(&o));
	trace_free(&o.tr);
	close(t.fd);
	unlink("/tmp/router_test.dat");
	ksft_test_result(!r.bad,
			 "tmpfs (no block device): bytes right, fallback_no_bdev counted: %s\n",
			 r.bad ? r.why : "ok");
}

/* ---- knobs -------------------------------------------------------------- */

static int knob_get(const char *knob, char *buf, size_t len)
{
	char path[PATH_MAX];

	knob_path(path, sizeof(path), knob_disk, knob);
	return spin_read_file(path, buf, len);
}

/* Writing @val to @knob must fail with EINVAL and leave the value. */
static void knob_reject(const char *knob, const char *val, const char *why)
{
	char path[PATH_MAX], before[64] = "?", after[64] = "?";
	int ret;

	knob_path(path, sizeof(path), knob_disk, knob);
	knob_get(knob, before, sizeof(before));
	ret = sys_write(path, val);
	knob_get(knob, after, sizeof(after));
	ksft_test_result(ret == -EINVAL && !strcmp(before, after),
			 "knobs: %s \"%s\" (%s): %s, value %s -> %s\n", knob, val, why,
			 ret ? strerror(-ret) : "accepted", before, after);
}

/* A 0/1 switch of /sys/kernel/spin: 1 at boot, 0 and 1 taken, 2 refused. */
static void switch_knob(const char *name)
{
	char path[PATH_MAX], boot[16] = "?", off[16] = "?", after[16] = "?";
	int r0, r1, r2, r3;

	snprintf(path, sizeof(path), SPIN_SYS "/%s", name);
	r0 = spin_read_file(path, boot, sizeof(boot));
	r1 = sys_write(path, "0\n");
	spin_read_file(path, off, sizeof(off));
	r2 = sys_write(path, "2");
	r3 = sys_write(path, "1");
	spin_read_file(path, after, sizeof(after));
	ksft_test_result(!r0 && !strcmp(boot, "1") && !r1 && !strcmp(off, "0") &&
			 r2 == -EINVAL && !r3 && !strcmp(after, "1"),
			 "knobs: %s %s at boot; 0 -> %s; 2: %s; 1 -> %s\n", name, boot, off,
			 r2 ? strerror(-r2) : "accepted", after);
}

static void test_knobs(void)
{
	static const char *const defaults[] = {
		"131072", "80000", "6500000000", "10000000000", "100"
	};
	char buf[64] = "?", path[PATH_MAX], got[ARRAY_SIZE(knob_names)][64];
	int ret, ok = 1;

	/* mode */
	ret = spin_read_file(SPIN_SYS "/mode", buf, sizeof(buf));
	{
		int r1 = sys_write(SPIN_SYS "/mode", "bogus");
		char after[64] = "?", p2p[64] = "?", pc[64] = "?";
		int r2, r3;

		spin_read_file(SPIN_SYS "/mode", after, sizeof(after));
		r2 = sys_write(SPIN_SYS "/mode", "p2p\n");
		spin_read_file(SPIN_SYS "/mode", p2p, sizeof(p2p));
		r3 = sys_write(SPIN_SYS "/mode", "pagecache");
		spin_read_file(SPIN_SYS "/mode", pc, sizeof(pc));
		set_mode("auto");
		ksft_test_result(!ret && !strcmp(buf, "auto") && r1 == -EINVAL &&
				 !strcmp(after, "auto") && !r2 && !strcmp(p2p, "p2p") && !r3 &&
				 !strcmp(pc, "pagecache"),
				 "knobs: mode %s at boot; bogus: %s, stays %s; p2p\\n -> %s; pagecache -> %s\n",
				 buf, r1 ? strerror(-r1) : "accepted", after, p2p, pc);
	}

	/* atomic_reads and pipeline: 1 at boot, 0 and 1 taken, anything else refused */
	switch_knob("atomic_reads");
	switch_knob("pipeline");

	/* per-disk cost model: the documented defaults */
	for (size_t i = 0; i < ARRAY_SIZE(knob_names); i++) {
		snprintf(got[i], sizeof(got[i]), "?");
		if (knob_get(knob_names[i], got[i], sizeof(got[i])) ||
		    strcmp(got[i], defaults[i]))
			ok = 0;
	}
	ksft_test_result(ok,
			 "knobs: %s defaults s_cutoff %s c_p2p_ns %s bw_p2p %s bw_pc %s p2p_overlap %s\n",
			 knob_disk, got[0], got[1], got[2], got[3], got[4]);

	knob_reject("c_p2p_ns", "abc", "not a number");
	knob_reject("c_p2p_ns", "1", "inconsistent with s_cutoff 131072 at bw_p2p 6.5 GB/s");
	knob_reject("bw_p2p", "0", "out of range");
	knob_reject("bw_pc", "1000000000001", "above 1 TB/s");
	knob_reject("p2p_overlap", "99", "below 100 (none)");
	knob_reject("p2p_overlap", "6401", "above 64 legs in the time of one");

	/* a good value is taken, then the default again */
	knob_path(path, sizeof(path), knob_disk, "c_p2p_ns");
	{
		int r1 = sys_write(path, "90000\n");
		char now[64] = "?";
		int r2;

		knob_get("c_p2p_ns", now, sizeof(now));
		r2 = sys_write(path, knob_saved[1][0] ? knob_saved[1] : "80000");
		ksft_test_result(!r1 && !strcmp(now, "90000") && !r2,
				 "knobs: c_p2p_ns 90000 accepted and read back (%s), restored (%s)\n",
				 now, r2 ? strerror(-r2) : "ok");
	}
}

/* Run one step of the test and say how long it took. */
#define STEP(call)							\
	do {								\
		double step_t0 = spin_now();				\
									\
		call;							\
		ksft_print_msg("%s: %.1f s\n", #call, spin_now() - step_t0); \
	} while (0)

int main(void)
{
	struct fs ext4 = {
		.name = "ext4", .serial = SPIN_NVME0_SERIAL, .type = "ext4", .dir = "/mnt/rt-ext4",
		.mkfs = SPIN_MKFS_EXT4, .seed = 51,
	};
	struct fs xfs = {
		.name = "xfs", .serial = SPIN_NVME1_SERIAL, .type = "xfs", .dir = "/mnt/rt-xfs",
		.mkfs = "mkfs.xfs -q -f", .seed = 52,
	};
	struct fs far = {
		.name = "spin-nvme2", .serial = SPIN_NVME2_SERIAL, .type = "ext4",
		.dir = "/mnt/rt-nvme2", .mkfs = SPIN_MKFS_EXT4, .seed = 53,
	};
	struct fs vblk = {
		.name = "spin-vblk", .serial = SPIN_VBLK_SERIAL, .type = "xfs", .virtio = 1,
		.dir = "/mnt/rt-vblk", .mkfs = "mkfs.xfs -q -f", .seed = 54,
	};
	struct fs *both[] = { &ext4, &xfs };
	struct timespec t0, t1;
	uint8_t *around;
	int heap, buf, ret;
	char val[64];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	main_pid = getpid();
	ksft_print_header();
	ksft_set_plan(2 * 21 + 2 + 11 + 4);

	if (sysconf(_SC_PAGESIZE) != (long)PG)
		ksft_exit_fail_msg("page size %ld, this test assumes %lu\n",
				   sysconf(_SC_PAGESIZE), PG);
	if (spin_gpu_find(gpu, sizeof(gpu)))
		ksft_exit_fail_msg("stand-in GPU not found\n");
	heap = spin_heap_open(gpu);
	buf = heap < 0 ? -1 : spin_heap_alloc(heap, GPU_LEN, O_RDWR | O_CLOEXEC, 0);
	/* GPU memory with host memory right before and right after it */
	around = mmap(NULL, GPU_LEN + 2 * MiB, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	gmem = buf < 0 || around == MAP_FAILED ? MAP_FAILED :
		mmap(around + MiB, GPU_LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, buf, 0);
	host = spin_alloc_aligned(SMALL_LEN);
	if (gmem == MAP_FAILED || !host)
		ksft_exit_fail_msg("no GPU memory from the heap: %s\n", strerror(errno));
	memset(poison_buf, POISON, sizeof(poison_buf));
	ret = trace_setup();
	if (ret)
		ksft_print_msg("tracefs: the spin events are missing (%s)\n", strerror(-ret));

	/* Knobs first, on spin-nvme0's disk; restored at exit whatever happens. */
	fs_find(&ext4);
	snprintf(knob_disk, sizeof(knob_disk), "%s", ext4.disk);
	for (size_t i = 0; i < ARRAY_SIZE(knob_names); i++)
		if (knob_get(knob_names[i], val, sizeof(val)) == 0)
			snprintf(knob_saved[i], sizeof(knob_saved[i]), "%s", val);
	atexit(restore);
	test_knobs();
	/*
	 * The rules checked here are the scheduler's: GPU read-ahead, which
	 * takes small sequential reads through the page cache, is off while
	 * this test runs (readahead_test covers it).
	 */
	if (spin_read_file(SPIN_SYS "/ra_partition_pages", ra_saved, sizeof(ra_saved)) ||
	    sys_write(SPIN_SYS "/ra_partition_pages", "0"))
		ksft_exit_fail_msg("cannot turn GPU read-ahead off: %s\n", strerror(errno));

	for (size_t i = 0; i < ARRAY_SIZE(both); i++) {
		struct fs *fs = both[i];

		fs_setup(fs, DATA_LEN);
		ksft_print_msg("%s on %s (%s, direct-I/O block %lld, memory alignment %lld)\n",
			       fs->type, fs->dev, fs->serial, fs->lbs, fs->dma_align);
		STEP(read_matrix(fs));
		STEP(eof_reads(fs));
		STEP(preadv_mixed(fs));
		STEP(read_position(fs));
		STEP(boundaries(fs));
		STEP(chunk_pipeline(fs));
		STEP(queue_overlap(fs));
		STEP(consistency(fs));
		STEP(con_phase(fs, "auto", 0));
		STEP(con_phase(fs, "p2p", 0));
		STEP(con_phase(fs, "auto", 1));
		STEP(con_phase(fs, "p2p", 1));
		if (!strcmp(fs->type, "xfs"))
			STEP(xfs_atomicity(fs));
		STEP(modes(fs));
		fs_teardown(fs);
	}

	fs_setup(&far, SMALL_LEN);
	fallback(&far, R_DISTANCE, "spin-nvme2 (outside the switch, no P2P path)");
	fs_teardown(&far);
	fs_setup(&vblk, SMALL_LEN);
	fallback(&vblk, R_QUEUE, "spin-vblk (virtio-blk, no BLK_FEAT_PCI_P2PDMA)");
	fs_teardown(&vblk);
	fallback_tmpfs();

	ret = sys_write(SPIN_SYS "/mode", "auto");
	val[0] = '\0';
	spin_read_file(SPIN_SYS "/mode", val, sizeof(val));
	ksft_test_result(!ret && !strcmp(val, "auto"), "mode auto restored at the end (%s)\n",
			 val);

	munmap(gmem, GPU_LEN);
	close(buf);
	close(heap);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ksft_print_msg("router_test took %ld s\n", (long)(t1.tv_sec - t0.tv_sec));
	ksft_finished();
}
