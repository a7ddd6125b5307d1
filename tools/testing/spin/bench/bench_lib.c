// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers shared by the spin benches; see bench_lib.h.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include "bench_lib.h"
#include "spin_lib.h"

#define MiB (1L << 20)
#define MEDIAN_MAX 64

int bench_tapn, bench_failures;

double bench_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

void bench_vfail(const char *fmt, va_list ap)
{
	printf("not ok %d - ", ++bench_tapn);
	vprintf(fmt, ap);
	printf("\n");
	bench_failures++;
}

/*
 * Ends a bench that cannot go on: "not ok N - ...", how long @name ran since
 * @t0, then @cleanup (if not NULL) puts back what the bench changed; exit 1.
 */
void bench_vdie(const char *name, double t0, void (*cleanup)(void), const char *fmt,
		va_list ap)
{
	bench_vfail(fmt, ap);
	printf("# %s stopped after %.0f s\n", name, bench_now() - t0);
	if (cleanup)
		cleanup();
	exit(1);
}

/* Prints "not ok N - ..." and counts a failure. */
void bench_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bench_vfail(fmt, ap);
	va_end(ap);
}

/*
 * The value of <bench>.<key>= on the kernel command line (a word of its own,
 * between any white space), or NULL. The value stays valid: the command line
 * is read once and split in place.
 */
const char *bench_opt(const char *bench, const char *key)
{
	static char line[4096];
	static size_t len;
	char want[96];
	size_t n;

	if (!len) {
		if (spin_read_file("/proc/cmdline", line, sizeof(line)))
			return NULL;
		len = strlen(line);
		for (size_t i = 0; i < len; i++)
			if (isspace((unsigned char)line[i]))
				line[i] = '\0';
	}
	n = snprintf(want, sizeof(want), "%s.%s=", bench, key);
	for (size_t i = 0; i < len; i += strlen(line + i) + 1)
		if (!strncmp(line + i, want, n))
			return line + i + n;
	return NULL;
}

long long bench_opt_ll(const char *bench, const char *key, long long def)
{
	const char *v = bench_opt(bench, key);

	return v ? atoll(v) : def;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of @n values (1 <= n <= 64); @v is left as it was. */
double bench_median(const double *v, int n)
{
	double s[MEDIAN_MAX];

	if (n < 1)
		return 0;
	n = n > MEDIAN_MAX ? MEDIAN_MAX : n;
	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/*
 * QEMU's throttle lets a burst through at full speed: about a tenth of a
 * second's worth of bytes and operations (bucket size = avg / 10 when no
 * burst is configured). Use that credit up with O_DIRECT reads of the last
 * 64 MiB of the raw disk @fd (@dev_size bytes; no page cache involved, and
 * reads do not disturb a filesystem on it): small reads for the operations
 * first, then 1 MiB ones for the bytes, which go fast, so that the byte
 * bucket is still full when the timed run starts. @buf holds 1 MiB, aligned.
 *
 * Return: 0, or -errno of a failed read.
 */
int bench_drain(int fd, long long dev_size, long long bps, long long iops, void *buf)
{
	long long bytes = bps / 10 * 11 / 10, ops = iops / 10 * 11 / 10;
	off_t base = dev_size - 64 * (off_t)MiB, off = 0;

	ops -= bytes / (512 * 1024);	/* QEMU's NVMe: 512 KiB per command (MDTS 7) */
	for (; ops > 0; ops--, off += 4096)
		if (pread(fd, buf, 4096, base + off % (64 * MiB)) != 4096)
			return -errno;
	for (; bytes > 0; bytes -= MiB, off += MiB)
		if (pread(fd, buf, MiB, base + off % (64 * MiB)) != (ssize_t)MiB)
			return -errno;
	return 0;
}

/* The next value of a splitmix64 generator whose state is *@state. */
unsigned long long bench_rng(unsigned long long *state)
{
	unsigned long long x = (*state += 0x9E3779B97F4A7C15ULL);

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

/*
 * Writes a file of @len bytes holding spin_pattern_fill()'s pattern of @seed
 * (through @buf of @buf_len bytes, which divides @len), syncs it and opens it
 * again read-only, advised POSIX_FADV_RANDOM (for setting residencies without
 * read-ahead). Returns that descriptor, or -1 with errno set.
 */
int bench_pattern_file(const char *path, size_t len, unsigned long long seed, void *buf,
		       size_t buf_len)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	int ret;

	if (fd < 0)
		return -1;
	for (size_t off = 0; off < len; off += buf_len) {
		spin_pattern_fill(buf, off, buf_len, seed);
		if (pwrite(fd, buf, buf_len, off) != (ssize_t)buf_len) {
			close(fd);
			return -1;
		}
	}
	ret = fsync(fd);
	close(fd);
	if (ret)
		return -1;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ret = posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	if (ret) {
		close(fd);
		errno = ret;
		return -1;
	}
	return fd;
}

#define TRACING "/sys/kernel/tracing"

static int trace_events(const char *const *events, int n, const char *on)
{
	char path[256];
	int ret = 0;

	for (int i = 0; i < n && !ret; i++) {
		snprintf(path, sizeof(path), TRACING "/events/%s/enable", events[i]);
		ret = spin_write_file(path, on);
	}
	return ret;
}

/*
 * Empties the trace buffer (@buffer_kb KiB per CPU), enables @events
 * ("system/event", @n of them) and turns tracing on; mounts tracefs first if
 * needed. Returns 0 or -errno.
 */
int bench_trace_on(const char *const *events, int n, int buffer_kb)
{
	char kb[32];
	int fd, ret;

	if (access(TRACING "/trace", F_OK) && mount("nodev", TRACING, "tracefs", 0, NULL))
		return -errno;
	snprintf(kb, sizeof(kb), "%d", buffer_kb);
	ret = spin_write_file(TRACING "/tracing_on", "0") ?:
	      spin_write_file(TRACING "/buffer_size_kb", kb);
	if (ret)
		return ret;
	/* Opening the buffer with O_TRUNC empties it. */
	fd = open(TRACING "/trace", O_WRONLY | O_TRUNC);
	if (fd < 0 || close(fd))
		return -errno;
	return trace_events(events, n, "1") ?: spin_write_file(TRACING "/tracing_on", "1");
}

/*
 * Turns tracing and @events off and returns the trace, open for reading, or
 * NULL with errno set.
 */
FILE *bench_trace_off(const char *const *events, int n)
{
	int ret;

	spin_write_file(TRACING "/tracing_on", "0");
	ret = trace_events(events, n, "0");
	if (ret) {
		errno = -ret;
		return NULL;
	}
	return fopen(TRACING "/trace", "r");
}

/* Whether a line of the trace is its header saying that events were lost. */
int bench_trace_lost(const char *line)
{
	unsigned long in, written;

	return sscanf(line, "# entries-in-buffer/entries-written: %lu/%lu", &in, &written) == 2 &&
	       in < written;
}
