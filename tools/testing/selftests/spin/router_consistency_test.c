// SPDX-License-Identifier: GPL-2.0
/*
 * The router's reads against writes: on ext4 (spin-nvme0) and xfs
 * (spin-nvme1), data written with write(2) or a shared mapping and not
 * synced; a concurrent writer and a concurrent truncate: a page not written
 * during a read holds exactly its last version; a page written during it a
 * complete version from then (zeros where truncated), on xfs always, as
 * without spin (the IOLOCK serialises reads and writes), on ext4 torn pages
 * are counted but allowed (upstream ext4 does not serialise a buffered read
 * against a write of the same page). On xfs, the same with atomic_reads 1
 * and 0.
 */
#define _GNU_SOURCE
#include <dirent.h>
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

#define RESULTS_PER_FS 7	/* consistency() 3, con_phase() 4 */
#define RESULTS_XFS 2		/* xfs_atomicity() */

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
static void read_expect(struct router_fs *ffs, int fd, size_t len, const uint8_t *expect,
			int all_p2p,
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

static void consistency(struct router_fs *fs)
{
	struct router_fs cf = *fs;
	const size_t pages = 512, len = pages * PG;
	uint8_t *expect = malloc(len), *map;
	struct res w = { 0 }, wp = { 0 }, m = { 0 };
	char label[128];
	int fd;

	snprintf(cf.base.path, sizeof(cf.base.path), "%s/cons", fs->base.dir);

	/* write(2), no fsync, auto: every 4th page and a 64-page run dirty. */
	snprintf(label, sizeof(label), "%s: write(2) then read, auto", fs->base.name);
	fd = make_file(cf.base.path, pages, 61);
	spin_pattern_fill(expect, 0, len, 61);
	if (fd < 0 || fstat(fd, &cf.st) || dirty_write(fd, expect, pages, 4, 1, 62))
		fail(&w, label, "setup: %s", strerror(errno));
	else
		read_expect(&cf, fd, len, expect, 0, &w, label);
	if (fd >= 0)
		close(fd);

	/* p2p mode: the dirty pages must be written back before the direct read. */
	snprintf(label, sizeof(label), "%s: write(2) then read, p2p", fs->base.name);
	fd = make_file(cf.base.path, pages, 63);
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
	snprintf(label, sizeof(label), "%s: mmap stores then read", fs->base.name);
	fd = make_file(cf.base.path, pages, 66);
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
		snprintf(label, sizeof(label), "%s: mmap stores then read, auto", fs->base.name);
		read_expect(&cf, fd, len, expect, 0, &m, label);
		for (size_t i = 0; i < pages; i++) {
			if (i % 8 == 5 || (i >= 300 && i < 310)) {
				spin_pattern_fill(expect + i * PG, i * PG, PG, 68);
				memcpy(map + i * PG, expect + i * PG, PG);
			}
		}
		snprintf(label, sizeof(label), "%s: mmap stores then read, p2p", fs->base.name);
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
	res_result(&w, "%s: write(2) without fsync, then read into GPU memory (auto): new data",
		   fs->base.name);
	res_result(&wp, "%s: write(2) without fsync, then read (p2p): written back, all by P2P",
		   fs->base.name);
	res_result(&m, "%s: shared-mapping stores without msync, then read (auto, p2p): new data",
		   fs->base.name);
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
static void con_run(struct router_fs *fs, const char *m, int truncating, int nreads, int sync_every,
		    int strict, const char *note)
{
	struct con *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char path[PATH_MAX + 8], what[160];
	int status = 0, fd;
	struct stats g0 = { 0 }, g1 = { 0 };
	pid_t writer, reader;
	double t0, t1;

	snprintf(what, sizeof(what), "%s: concurrent %s (%s%s)", fs->base.name,
		 truncating ? "truncate" : "writer", m, note);
	snprintf(path, sizeof(path), "%s/con", fs->base.dir);
	if (fs->hung) {
		ksft_test_result_fail("%s: not run, an earlier reader on %s hung\n", what,
				      fs->base.name);
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
		spin_write_file("/proc/sysrq-trigger", "w");
		spin_write_file("/proc/sysrq-trigger", "l");
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
		spin_write_file("/proc/sysrq-trigger", "w");
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
static void con_phase(struct router_fs *fs, const char *m, int truncating)
{
	con_run(fs, m, truncating, CON_READS, 16, !strcmp(fs->base.type, "xfs"), "");
}

/*
 * XFS read atomicity: P2P legs of a read on xfs are synchronous,
 * under the IOLOCK, so a page written during the read comes back whole.
 * Many reads against a writer that writes back after every write; then a
 * quarter as many with atomic_reads off (asynchronous legs), whose torn pages
 * are only counted: they show what the knob prevents (rarely: the race is
 * narrow).
 */
static void xfs_atomicity(struct router_fs *fs)
{
	char note[64];

	snprintf(note, sizeof(note), ", %d reads, atomic_reads 1", CON_ATOMIC_READS);
	con_run(fs, "p2p", 0, CON_ATOMIC_READS, 1, 1, note);
	if (sys_write(SPIN_SYS "/atomic_reads", "0")) {
		ksft_test_result_fail("%s: atomic_reads 0: %s\n", fs->base.name, strerror(errno));
		return;
	}
	snprintf(note, sizeof(note), ", %d reads, atomic_reads 0", CON_ATOMIC_READS / 4);
	con_run(fs, "p2p", 0, CON_ATOMIC_READS / 4, 1, 0, note);
	sys_write(SPIN_SYS "/atomic_reads", "1");
}

static void consistency_tests(struct router_fs *fs)
{
	STEP(consistency(fs));
	STEP(con_phase(fs, "auto", 0));
	STEP(con_phase(fs, "p2p", 0));
	STEP(con_phase(fs, "auto", 1));
	STEP(con_phase(fs, "p2p", 1));
	if (!strcmp(fs->base.type, "xfs"))
		STEP(xfs_atomicity(fs));
}

int main(void)
{
	ksft_print_header();
	ksft_set_plan(RT_NFS * RESULTS_PER_FS + RESULTS_XFS);
	router_init();
	/* The tests make their own files: the data file is small. */
	router_each_fs(SMALL_LEN, consistency_tests);
	router_took();
	ksft_finished();
}
