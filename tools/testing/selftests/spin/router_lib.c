// SPDX-License-Identifier: GPL-2.0
/*
 * What the router tests share. See router_lib.h.
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
#include "router_lib.h"
char gpu[PATH_MAX];
uint8_t *gmem;
uint8_t *host;
char mode[16] = "auto";
char knob_disk[80];
static char tracing[64] = "/sys/kernel/tracing";

const char *const stat_names[NSTAT] = {
	"requests", "bytes_pagecache", "bytes_p2p", "segments_pagecache", "segments_p2p",
	"fallback_mode", "fallback_no_bdev", "fallback_no_direct_io", "fallback_inode",
	"fallback_queue", "fallback_distance", "fallback_misaligned", "fallback_io_error",
};

const char *const reason_names[NREASON] = {
	"none", "mode", "no_bdev", "no_direct_io", "inode", "queue", "distance", "misaligned",
};

__printf(3, 4) void fail(struct res *r, const char *label, const char *fmt, ...)
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

/* Knobs: the value before the program's first change is restored at exit. */
int sys_write(const char *path, const char *val)
{
	return spin_sysfs_set(path, val);
}

int set_mode(const char *m)
{
	int ret = sys_write(SPIN_SYS "/mode", m);

	if (!ret)
		snprintf(mode, sizeof(mode), "%s", m);
	return ret;
}

void knob_path(char *path, size_t len, const char *disk, const char *knob)
{
	snprintf(path, len, "/sys/block/%s/spin/%s", disk, knob);
}

int run(const char *cmd)
{
	int status = system(cmd);

	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- counters ---------------------------------------------------------- */

int stats_read(const char *path, struct stats *s, char *why, size_t len)
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

int trace_write(const char *file, const char *val)
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

int trace_setup(void)
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

void trace_free(struct trace *t)
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
int trace_collect(struct trace *t, unsigned long long ino, char *why, size_t len)
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
					 r.mode, word[1], &r.pc, &r.p2p, &r.segs, &r.member_maj,
					 &r.member_min);

			r.reason = reason_index(word[1]);
			if (got != 12 || r.reason < 0) {
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

void obs_begin(struct router_fs *fs, struct obs *o, struct res *r, const char *label)
{
	char why[256];

	memset(o, 0, sizeof(*o));
	o->ok = 1;
	if (fs->base.disk[0] && stats_read(fs->base.stat, &o->d0, why, sizeof(why))) {
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
static void route_segments(struct router_fs *fs, struct trace *t, struct route *rt, struct res *r,
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
		if (fs->base.disk[0] && (s->maj != major(fs->st.st_dev) ||
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
int obs_end(struct router_fs *fs, struct obs *o, const struct range *rg, int nr, struct res *r,
	    const char *label)
{
	int bad0 = r->bad, nfb[NREASON] = { 0 }, segs[2] = { 0, 0 }, all_none = 1, *used;
	long long bytes = 0, rpc = 0, rp2p = 0;
	struct stats d1, g1;
	char why[256];

	if (!o->ok)
		return -1;
	if (fs->base.disk[0] && stats_read(fs->base.stat, &d1, why, sizeof(why))) {
		fail(r, label, "%s", why);
		return -1;
	}
	if (stats_read(SPIN_SYS "/stat", &g1, why, sizeof(why))) {
		fail(r, label, "%s", why);
		return -1;
	}
	for (int i = 0; i < NSTAT; i++) {
		o->g.v[i] = g1.v[i] - o->g0.v[i];
		o->d.v[i] = fs->base.disk[0] ? d1.v[i] - o->d0.v[i] : o->g.v[i];
		if (o->d.v[i] != o->g.v[i])
			fail(r, label, "%s: +%lld in %s, +%lld in " SPIN_SYS "/stat",
			     stat_names[i], o->d.v[i], fs->base.stat, o->g.v[i]);
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
		if (fs->base.disk[0] && (rt->maj != major(fs->st.st_dev) ||
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

unsigned int route_reasons(const struct obs *o)
{
	unsigned int mask = 0;

	for (int i = 0; i < o->tr.nroute; i++)
		mask |= BIT(o->tr.route[i].reason);
	return mask;
}

/* ---- GPU destinations -------------------------------------------------- */

static uint8_t poison_buf[GUARD];

void poison(size_t goff, size_t len)
{
	size_t lo = goff >= GUARD ? goff - GUARD : 0;
	size_t hi = goff + len + GUARD <= GPU_LEN ? goff + len + GUARD : GPU_LEN;

	memset(gmem + lo, POISON, hi - lo);
}

/* The GUARD bytes before @goff and those after @goff + @n still poisoned. */
void check_guards(size_t goff, size_t n, struct res *r, const char *label)
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

int read_observed(struct router_fs *fs, long long pos, size_t len, int rz, size_t goff,
		  struct obs *o, struct res *r, const char *label)
{
	struct range rg = { pos, len };
	long long first = pos / PG;
	size_t np = div_up(pos + (long long)len, PG) - first;
	uint8_t want[1024];
	char why[256];
	ssize_t n;

	memset(o, 0, sizeof(*o));
	np = np > sizeof(want) ? sizeof(want) : np;
	rz_fill(rz, want, np, 0);
	if (set_residency(fs, first, np, want, why, sizeof(why))) {
		fail(r, label, "%s", why);
		return -1;
	}
	poison(goff, len);
	obs_begin(fs, o, r, label);
	n = pread(fs->fd, gmem + goff, len, pos);
	if (n != (ssize_t)len)
		fail(r, label, "returned %zd (%s)", n, n < 0 ? strerror(errno) : "short");
	else if (spin_gpu_check(gpu, gmem + goff, n, fs->base.seed, pos, why, sizeof(why)))
		fail(r, label, "GPU memory: %s", why);
	check_guards(goff, len, r, label);
	return obs_end(fs, o, &rg, 1, r, label);
}

/* ---- residency ---------------------------------------------------------- */

const char *rz_name(int rz, char *buf, size_t len)
{
	if (rz == RZ_ALT)
		return "alternate pages";
	if (rz == RZ_RANDOM)
		return "random runs";
	snprintf(buf, len, "%d%%", rz);
	return buf;
}

/* Which of @n pages to cache for residency @rz. */
void rz_fill(int rz, uint8_t *want, size_t n, unsigned int seed)
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
int set_residency(struct router_fs *fs, long long first, size_t n, const uint8_t *want,
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

int misaligned(const struct router_fs *fs, size_t goff, long long pos)
{
	uint64_t addr = (uintptr_t)(gmem + goff);

	return ((addr - (uint64_t)pos) % fs->dma_align) != 0;
}

/* Bytes of [@pos, @end) outside whole logical blocks; -1 if no whole block. */
static long long head_tail(const struct router_fs *fs, long long pos, long long end)
{
	long long lo = align_up(pos, fs->lbs), hi = align_down(end, fs->lbs);

	return lo < hi ? (lo - pos) + (end - hi) : -1;
}

/*
 * The rules for one read of [@pos, @pos + @n) into GPU offset @goff, whose
 * pages from @first had the residency @want (NULL: unknown).
 */
void check_rules(struct router_fs *fs, struct obs *o, long long pos, long long n, size_t goff,
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

/* ---- setup -------------------------------------------------------------- */

static void fs_missing(struct router_fs *fs)
{
	if (errno == ENODEV)
		SPIN_SKIP_MISSING("no block device with serial %s", fs->base.serial);
	ksft_exit_fail_msg("%s on %s (%s): %s\n", fs->base.type, fs->base.dev, fs->base.serial,
			   strerror(errno));
}

/* The disk's direct-I/O geometry. */
static void fs_geometry(struct router_fs *fs)
{
	char path[PATH_MAX];

	fs->lbs = fs->base.lbs;
	snprintf(path, sizeof(path), "/sys/block/%s/queue/dma_alignment", fs->base.disk);
	fs->dma_align = spin_read_ll(path);
	/* sysfs shows the mask (alignment - 1) */
	if (fs->dma_align >= 0 && !(fs->dma_align & (fs->dma_align + 1)))
		fs->dma_align++;
	if (fs->lbs <= 0 || fs->dma_align <= 0)
		ksft_exit_fail_msg("%s: no logical block size / DMA alignment\n", fs->base.dev);
}

void fs_find(struct router_fs *fs)
{
	if (spin_fs_find(&fs->base))
		fs_missing(fs);
	fs_geometry(fs);
}

/* mkfs, mount, a pattern file of @size bytes, its descriptors and mapping. */
void fs_setup(struct router_fs *fs, long long size)
{
	if (spin_fs_setup(&fs->base, 0))
		fs_missing(fs);
	fs_fill(fs, size);
}

void fs_fill(struct router_fs *fs, long long size)
{
	struct statx stx;

	fs_geometry(fs);
	fs->fd = open(fs->base.path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fs->fd < 0)
		ksft_exit_fail_msg("%s: %s\n", fs->base.path, strerror(errno));
	for (long long off = 0; off < size; off += SMALL_LEN) {
		size_t n = size - off < (long long)SMALL_LEN ? (size_t)(size - off) : SMALL_LEN;

		spin_pattern_fill(host, off, n, fs->base.seed);
		if (spin_write_uncached(fs->fd, host, n, off))
			ksft_exit_fail_msg("writing %s: %s\n", fs->base.path, strerror(errno));
	}
	if (fsync(fs->fd) || fstat(fs->fd, &fs->st))
		ksft_exit_fail_msg("fsync %s: %s\n", fs->base.path, strerror(errno));
	/* The router's direct-I/O geometry: the larger of the disk's and the file's. */
	if (!statx(AT_FDCWD, fs->base.path, 0, STATX_DIOALIGN, &stx) &&
	    (stx.stx_mask & STATX_DIOALIGN)) {
		if ((long long)stx.stx_dio_offset_align > fs->lbs)
			fs->lbs = stx.stx_dio_offset_align;
		if ((long long)stx.stx_dio_mem_align > fs->dma_align)
			fs->dma_align = stx.stx_dio_mem_align;
	}
	fs->size = size;
	fs->fd_ra = open(fs->base.path, O_RDONLY);
	if (fs->fd_ra < 0 || posix_fadvise(fs->fd_ra, 0, 0, POSIX_FADV_RANDOM))
		ksft_exit_fail_msg("%s: %s\n", fs->base.path, strerror(errno));
	fs->map = mmap(NULL, size, PROT_READ, MAP_SHARED, fs->fd, 0);
	if (fs->map == MAP_FAILED)
		ksft_exit_fail_msg("mmap %s: %s\n", fs->base.path, strerror(errno));
}

void fs_teardown(struct router_fs *fs)
{
	munmap((void *)fs->map, fs->size);
	close(fs->fd);
	close(fs->fd_ra);
	/* A hung reader keeps it busy: spin_restore() detaches it at exit. */
	if (!fs->hung && spin_fs_unmount(&fs->base))
		ksft_print_msg("umount %s: %s\n", fs->base.dir, strerror(errno));
}

/* ---- the programs' set-up ------------------------------------------------ */

void router_init(void)
{
	uint8_t *around;
	int heap, buf, ret;

	if (sysconf(_SC_PAGESIZE) != (long)PG)
		ksft_exit_fail_msg("page size %ld, this test assumes %lu\n",
				   sysconf(_SC_PAGESIZE), PG);
	if (spin_gpu_find(gpu, sizeof(gpu)))
		SPIN_SKIP_MISSING("stand-in GPU not found");
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
	/*
	 * The rules checked here are the scheduler's: GPU read-ahead, which
	 * takes small sequential reads through the page cache, is off while
	 * these tests run (readahead_test covers it); restored at exit.
	 */
	if (sys_write(SPIN_SYS "/ra_partition_pages", "0"))
		ksft_exit_fail_msg("cannot turn GPU read-ahead off: %s\n", strerror(errno));
}

static double router_t0;

__attribute__((constructor)) static void router_start(void)
{
	router_t0 = spin_now();
}

void router_each_fs(long long size, void (*tests)(struct router_fs *fs))
{
	struct router_fs ext4 = { .base = RT_EXT4 }, xfs = { .base = RT_XFS };
	struct router_fs *both[] = { &ext4, &xfs };

	for (size_t i = 0; i < ARRAY_SIZE(both); i++) {
		struct router_fs *fs = both[i];

		fs_setup(fs, size);
		ksft_print_msg("%s on %s (%s, direct-I/O block %lld, memory alignment %lld)\n",
			       fs->base.type, fs->base.dev, fs->base.serial, fs->lbs,
			       fs->dma_align);
		tests(fs);
		fs_teardown(fs);
	}
}

void router_took(void)
{
	ksft_print_msg("%s took %.0f s\n", program_invocation_short_name,
		       spin_now() - router_t0);
}
