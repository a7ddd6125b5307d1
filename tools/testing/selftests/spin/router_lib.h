/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the router tests share (router_read_test, router_consistency_test,
 * router_fallback_test): the counters and trace events of one observed read,
 * the poisoned GPU destinations, residency set-up, the routing rules, and a
 * filesystem with a pattern file, its descriptors and mapping.
 */
#ifndef ROUTER_LIB_H
#define ROUTER_LIB_H

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define PG 4096UL
#define GPU_LEN (80 * MiB)
#define DATA_LEN (72 * MiB + 1234)	/* EOF inside a logical block */
#define SMALL_LEN (8 * MiB)		/* the files on the fallback disks */
#define GUARD 64			/* bytes around every destination */
#define POISON 0xa5
#define CON_PAGES 512			/* the file of the concurrency tests */
#define CON_LEN (CON_PAGES * PG)
#define CON_READS 32
#define CON_ATOMIC_READS 256		/* reads of the strict XFS atomicity phase */
#define CON_TIMEOUT 120			/* seconds without a finished read: hung */

static inline long long div_up(long long a, long long b)
{
	return (a + b - 1) / b;
}

static inline long long align_up(long long a, long long b)
{
	return div_up(a, b) * b;
}

static inline long long align_down(long long a, long long b)
{
	return a / b * b;
}

enum {
	ST_REQUESTS, ST_BYTES_PC, ST_BYTES_P2P, ST_SEGS_PC, ST_SEGS_P2P,
	ST_FB_MODE, ST_FB_NO_BDEV, ST_FB_NO_DIO, ST_FB_INODE, ST_FB_QUEUE,
	ST_FB_DISTANCE, ST_FB_MISALIGNED, ST_FB_IO_ERROR, NSTAT
};

extern const char *const stat_names[NSTAT];

/* spin_route's reason=; after "none" in the order of the fallback_* counters. */
enum { R_NONE, R_MODE, R_NO_BDEV, R_NO_DIO, R_INODE, R_QUEUE, R_DISTANCE, R_MISALIGNED,
	NREASON };

extern const char *const reason_names[NREASON];

/* The events' formats (tracefs, event group spin). */
#define SEG_FMT " spin_route_segment: dev=%u:%u ino=%llu pos=%lld len=%lld path=%15s"
#define ROUTE_FMT " spin_route: dev=%u:%u ino=%llu pos=%lld len=%lld mode=%15s " \
	"reason=%15s pagecache=%lld p2p=%lld segs=%d member=%u:%u"

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
	unsigned int member_maj, member_min;	/* the disk refused (queue, distance) */
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

/* A filesystem of spin_lib's fixture, with the router tests' data file. */
struct router_fs {
	struct spin_fs base;
	long long lbs;		/* direct-I/O block: logical block or dio_offset_align */
	long long dma_align;	/* direct-I/O memory alignment */
	int fd, fd_ra;		/* the data file; the same with POSIX_FADV_RANDOM */
	const uint8_t *map;	/* a PROT_READ mapping of it, for mincore() */
	struct stat st;
	long long size;
	int hung;
};

/* Aggregates over a read matrix, for the summary lines. */
struct agg {
	struct res data, route, cached, uncached, rules;
	int mixed, n_cached, n_uncached;
};

enum { RZ_ALT = 101, RZ_RANDOM = 102 };

extern char gpu[PATH_MAX];
/* the GPU buffer, GPU_LEN bytes; host scratch, 8 MiB */
extern uint8_t *gmem, *host;
extern char mode[16];		/* what this program last set */
extern char knob_disk[80];	/* the disk whose knobs the tests change: spin-nvme0's */

__printf(3, 4) void fail(struct res *r, const char *label, const char *fmt, ...);
/*
 * A test line that passes if @r found no problem: the text of @fmt, then ": "
 * and the first problem, or "ok". Inline: kselftest.h keeps its counters per
 * file, and the test program's count the results.
 */
static inline __printf(2, 3) void res_result(const struct res *r, const char *fmt, ...)
{
	char text[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	ksft_test_result(!r->bad, "%s: %s\n", text, r->bad ? r->why : "ok");
}

int sys_write(const char *path, const char *val);
int set_mode(const char *m);
void knob_path(char *path, size_t len, const char *disk, const char *knob);
int run(const char *cmd);
int stats_read(const char *path, struct stats *s, char *why, size_t len);
int trace_write(const char *file, const char *val);
int trace_setup(void);
void trace_free(struct trace *t);
int trace_collect(struct trace *t, unsigned long long ino, char *why, size_t len);
void obs_begin(struct router_fs *fs, struct obs *o, struct res *r, const char *label);
int obs_end(struct router_fs *fs, struct obs *o, const struct range *rg, int nr, struct res *r,
	    const char *label);
unsigned int route_reasons(const struct obs *o);
/*
 * One observed read into GPU memory: @len bytes at @pos into gmem + @goff,
 * @rz percent of its pages cached first (rz_fill()), the bytes and the guards
 * around them checked. 0 when @o holds the counters' deltas and the trace,
 * else -1; the problems are in @r, and @o's trace is trace_free()d either way.
 */
int read_observed(struct router_fs *fs, long long pos, size_t len, int rz, size_t goff,
		  struct obs *o, struct res *r, const char *label);
void poison(size_t goff, size_t len);
void check_guards(size_t goff, size_t n, struct res *r, const char *label);
const char *rz_name(int rz, char *buf, size_t len);
void rz_fill(int rz, uint8_t *want, size_t n, unsigned int seed);
int set_residency(struct router_fs *fs, long long first, size_t n, const uint8_t *want,
		  char *why, size_t whylen);
int misaligned(const struct router_fs *fs, size_t goff, long long pos);
void check_rules(struct router_fs *fs, struct obs *o, long long pos, long long n, size_t goff,
		 long long first, const uint8_t *want, size_t npages, struct agg *a,
		 const char *label);
void fs_find(struct router_fs *fs);
void fs_setup(struct router_fs *fs, long long size);
/*
 * fs_setup() on a filesystem mounted by the caller at @fs->base.dir, whose
 * dev, disk, stat, path and lbs the caller filled in.
 */
void fs_fill(struct router_fs *fs, long long size);
void fs_teardown(struct router_fs *fs);

/*
 * The set-up every router test program starts with: the GPU buffer with host
 * memory right before and after it, the trace events, GPU read-ahead off.
 * Skips the program when the rig has no stand-in GPU.
 */
void router_init(void);
/* The router's tests' own filesystems. */
#define RT_EXT4 SPIN_FS_EXT4("/mnt/rt-ext4", 51)
#define RT_XFS SPIN_FS_XFS("/mnt/rt-xfs", 52)
/*
 * The tests of a program that runs them on ext4 and xfs (RT_EXT4, RT_XFS, so
 * RT_NFS filesystems): for each, fs_setup() with a data file of @size bytes,
 * @tests, fs_teardown().
 */
#define RT_NFS 2
void router_each_fs(long long size, void (*tests)(struct router_fs *fs));
/* Says how long the program has taken. */
void router_took(void);

/* Run one step of the test and say how long it took. */
#define STEP(call)							\
	do {								\
		double step_t0 = spin_now();				\
									\
		call;							\
		ksft_print_msg("%s: %.1f s\n", #call, spin_now() - step_t0); \
	} while (0)

#endif /* ROUTER_LIB_H */
