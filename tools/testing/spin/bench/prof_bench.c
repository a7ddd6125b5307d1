// SPDX-License-Identifier: GPL-2.0
/*
 * prof_bench: where the CPU time of one router_bench cell goes, per mode.
 *
 * Runs one read pattern into GPU memory (DMA-BUF heap of the stand-in GPU,
 * buffered pread() of a file on ext4 on spin-nvme0, disks throttled as in
 * make bench-router) under /sys/kernel/spin/mode auto and pagecache, in
 * alternating rounds, and samples the kernel instruction pointer of this
 * process with perf_event_open() (cpu-clock, kernel only). Prints each mode's
 * rate and its hottest kernel functions (from /proc/kallsyms), with their
 * share of the samples and the time per request they stand for, so that the
 * difference between the two modes can be read off; the same for the kernel
 * time of every other task meanwhile (the evictor's kworker among them).
 *
 * Options on the kernel command line (make bench-prof PROF_ARGS=...):
 * prof_bench.size (bytes per read, 4096), .res (0, 50 or 100: percent of the
 * file resident, 50 = alternating 1 MiB chunks; 50), .rnd (1: random
 * offsets; 0), .secs (timed seconds per mode and round, in whole passes over
 * the file; 2), .rounds (3), .top (30), .ra_limit (pages: writes
 * /sys/kernel/spin/ra_partition_pages first; a limit above the file's pages
 * measures auto without eviction), .trace (bytes: before the timed rounds,
 * two untimed passes per mode, alternating, over the first .trace bytes of
 * the file with the page cache's, the block layer's, spin's and the
 * workqueue's events and kprobes on the read-ahead entry points and the
 * partition's admission, printed as "# T " lines; 0), .ra_kb (KiB: the disk's
 * read_ahead_kb for both modes; the default leaves it), .annotate (a part of
 * a kernel function's name: the first function whose name contains it also
 * gets its samples by offset, the hottest offsets of either mode printed with
 * both modes' time per request, to be read against objdump -d of the object
 * that holds the function: which inlined code costs what), .sample (2: the
 * reader and every CPU's other and idle tasks, the default; 1: the reader
 * only; 0: nothing, rates only: under instruction counting the sampling
 * delays the reader, by more in one mode than in the other), .dst (gpu, the
 * default; host: the reads go into host memory, an 8 MiB anonymous mapping,
 * while the GPU buffer stays mapped, so that both modes measure what the
 * router costs a CPU-only read of a process with GPU memory mapped (the
 * CPU-only check's "on" case); the modes should then agree; host2: the same,
 * every other read into a second such buffer, a VMA of its own, as a process
 * that reads into its stack and its heap in turn). Also counts the folios the
 * page cache takes in, by order (tracefs), and for sequential reads
 * each mode's wall time per request by its offset in a pair of 1 MiB chunks
 * (with .res=50 the first one cached), to show where in the chunks they differ.
 *
 * Emulator figures (QEMU TCG): compare the modes only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/fs.h>
#include <linux/perf_event.h>

#include "bench_lib.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define FILE_LEN (64 * MiB)
#define MNT "/mnt/prof"
#define PATH MNT "/data"
#define MODE_PATH "/sys/kernel/spin/mode"
#define MAX_SYMS 200000
#define RING_PAGES 256
#define MAX_ORDER_SEEN 10
#define POS_BUCKETS 32		/* 64 KiB each over a 2 MiB pair of chunks */
#define ANNOT_MAX 65536		/* bytes of the annotated function looked at */
#define ANNOT_TOP 40
#define US_PER_SAMPLE 100.0	/* the sample period: 100 us of CPU */
#define TRACING "/sys/kernel/tracing"
#define ADD_EVENT TRACING "/events/filemap/mm_filemap_add_to_page_cache/enable"
#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

struct sym {
	unsigned long long addr;
	char name[128];
};

static struct sym *syms;
static int nsyms;
static long size = 4096, res = 50, rnd, secs = 2, rounds = 3, top = 30, ra_limit = -1, trace;
static long ra_kb = -1;
/* What is sampled: 2 the reader and every CPU's other tasks, 1 the reader, 0 nothing. */
static long sample = 2;
static const char *annotate, *dst_name;
static int annot_sym = -1;
static long long bps, iops;

/* The GPU read-ahead partition's counters, summed over the whole run. */
static void print_partition(void)
{
	static char stat[8192];
	char *line, *save;

	if (spin_read_file("/sys/kernel/spin/stat", stat, sizeof(stat)))
		return;
	printf("\nGPU read-ahead partition (whole run):");
	for (line = strtok_r(stat, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!strncmp(line, "ra_", 3))
			printf(" %s;", line);
	printf("\n");
}

__printf(1, 2) static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bench_vfail(fmt, ap);
	va_end(ap);
	exit(1);
}

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void load_syms(void)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[256], type, name[120];
	unsigned long long a;

	syms = calloc(MAX_SYMS, sizeof(*syms));
	if (!f || !syms)
		die("/proc/kallsyms: %s", strerror(errno));
	while (nsyms < MAX_SYMS && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %119s", &a, &type, name) == 3 && a &&
		    (type == 't' || type == 'T')) {
			syms[nsyms].addr = a;
			snprintf(syms[nsyms].name, sizeof(syms[nsyms].name), "%s", name);
			nsyms++;
		}
	fclose(f);
	qsort(syms, nsyms, sizeof(*syms), cmp_sym);
	if (!nsyms)
		die("/proc/kallsyms shows no address (kptr_restrict?)");
}

static int sym_of(unsigned long long ip)
{
	int lo = 0, hi = nsyms - 1;

	if (!nsyms || ip < syms[0].addr)
		return -1;
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;

		if (syms[mid].addr <= ip)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

#define MAX_RINGS 64

/* One perf ring buffer of a cpu-clock sampling event. */
struct ring {
	int fd;
	struct perf_event_mmap_page *meta;
	uint8_t *data;
};

/*
 * Kernel samples at ~10 kHz, of this process (one event) or, for @others, of
 * every other task but the idle tasks (one event per CPU): the GPU read-ahead
 * partition's evictor (a kworker), threaded interrupts, ...
 */
struct prof {
	struct ring ring[MAX_RINGS];
	int nring, others;
	size_t data_len;
	unsigned int *hits;
	/*
	 * With @others, the idle tasks' samples: under instruction counting the
	 * vCPUs take turns on one host thread, so whatever another vCPU executes,
	 * the sampling interrupts of an idle one included, delays the reader.
	 */
	unsigned int *idle_hits;
	long idle_samples;
	/* Samples in the annotated function by offset (ANNOT_MAX counters), or NULL. */
	unsigned int *annot;
	long samples;
	/* Folios the page cache took in during the runs, by order (tracefs). */
	long folios[MAX_ORDER_SEEN + 1];
	int lost;
	/* Wall time of the requests, in chunks cached at the start of a pass and in the others. */
	double t_chunk[2];
	long n_chunk[2];
	/* The same by position in a pair of 1 MiB chunks (sequential reads), POS_BUCKETS of it. */
	double t_pos[POS_BUCKETS];
	long n_pos[POS_BUCKETS];
	/* The reader's wall, user and system time and context switches in the timed loops. */
	double wall, user, sys;
	long nvcsw, nivcsw;
};

static void prof_open(struct prof *p, int others)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE, .size = sizeof(a), .config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = 100000, .sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID,
		.disabled = 1, .exclude_user = 1, .exclude_hv = 1, .wakeup_events = 1000000,
	};
	long cpus = others ? sysconf(_SC_NPROCESSORS_ONLN) : 1;

	memset(p, 0, sizeof(*p));
	p->others = others;
	p->data_len = RING_PAGES * 4096;
	for (long c = 0; c < cpus && c < MAX_RINGS; c++) {
		struct ring *r = &p->ring[p->nring++];

		r->fd = syscall(__NR_perf_event_open, &a, others ? -1 : 0, others ? c : -1, -1, 0);
		if (r->fd < 0)
			die("perf_event_open: %s", strerror(errno));
		r->meta = mmap(NULL, p->data_len + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd,
			       0);
		if (r->meta == MAP_FAILED)
			die("mmap of the perf ring: %s", strerror(errno));
		r->data = (uint8_t *)r->meta + 4096;
	}
	p->hits = calloc(nsyms + 1, sizeof(*p->hits));
	p->idle_hits = others ? calloc(nsyms + 1, sizeof(*p->idle_hits)) : NULL;
	if (!p->hits || (others && !p->idle_hits))
		die("no memory");
	if (annot_sym >= 0 && !others) {
		p->annot = calloc(ANNOT_MAX, sizeof(*p->annot));
		if (!p->annot)
			die("no memory");
	}
}

static void prof_enable(struct prof *p, int on)
{
	for (int i = 0; i < p->nring; i++)
		ioctl(p->ring[i].fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

/* Copies @len bytes at @off of a ring's data out, wrapping around. */
static void ring_copy(const struct prof *p, const struct ring *r, size_t off, void *to,
		      size_t len)
{
	for (size_t i = 0; i < len; i++)
		((uint8_t *)to)[i] = r->data[(off + i) % p->data_len];
}

/* Takes the samples out of the rings. */
static void prof_drain(struct prof *p)
{
	pid_t self = getpid();

	for (int i = 0; i < p->nring; i++) {
		struct ring *r = &p->ring[i];
		uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
		uint64_t tail = r->meta->data_tail;

		while (tail < head) {
			struct perf_event_header h;
			size_t off = tail % p->data_len;
			uint32_t tid[2];
			uint64_t ip;

			ring_copy(p, r, off, &h, sizeof(h));
			if (h.type == PERF_RECORD_SAMPLE) {
				ring_copy(p, r, off + sizeof(h), &ip, sizeof(ip));
				ring_copy(p, r, off + sizeof(h) + sizeof(ip), tid, sizeof(tid));
				if (p->others && tid[0] == 0) {
					int s = sym_of(ip);

					p->idle_hits[s < 0 ? nsyms : s]++;
					p->idle_samples++;
				} else if (!p->others || tid[0] != (uint32_t)self) {
					int s = sym_of(ip);

					p->hits[s < 0 ? nsyms : s]++;
					p->samples++;
					if (p->annot && s == annot_sym &&
					    ip - syms[s].addr < ANNOT_MAX)
						p->annot[ip - syms[s].addr]++;
				}
			}
			tail += h.size ? h.size : sizeof(h);
		}
		__atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
	}
}

/*
 * The orders of the folios added to the page cache meanwhile, from the
 * mm_filemap_add_to_page_cache event: how large read-ahead's folios are in
 * each mode. Marks the profile as incomplete if the trace buffer overflowed.
 */
static const char *const add_event[] = { "filemap/mm_filemap_add_to_page_cache" };

static void orders_begin(void)
{
	int ret = bench_trace_on(add_event, 1, 32768);

	if (ret)
		die("tracefs: %s", strerror(-ret));
}

static void orders_end(struct prof *p)
{
	char line[512], *o;
	FILE *f = bench_trace_off(add_event, 1);

	if (!f)
		die("tracefs: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		p->lost |= bench_trace_lost(line);
		if (line[0] == '#')
			continue;
		o = strstr(line, " order=");
		if (o) {
			int k = atoi(o + 7);

			p->folios[k < 0 ? 0 : k > MAX_ORDER_SEEN ? MAX_ORDER_SEEN : k]++;
		}
	}
	fclose(f);
}

static int setup_fd = -1, raw_fd = -1;
static long long dev_size;
static uint8_t *host, *drain_buf, *gpu, *dst, *dst2;

static void set_residency(void)
{
	int ret = posix_fadvise(setup_fd, 0, 0, POSIX_FADV_DONTNEED);

	if (ret)
		die("POSIX_FADV_DONTNEED: %s", strerror(ret));
	for (off_t off = 0; res && off < (off_t)FILE_LEN; off += MiB)
		if ((res == 100 || (off / MiB) % 2 == 0) &&
		    pread(setup_fd, host, MiB, off) != (ssize_t)MiB)
			die("populating the page cache: %s", strerror(errno));
}

static unsigned long long rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rng(void)
{
	return bench_rng(&rng_state);
}

/* Seconds from @a to @b. */
static double tv_diff(const struct timeval *a, const struct timeval *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_usec - a->tv_usec) / 1e6;
}

/*
 * Timed passes in the current mode, sampled into @p, until @secs of them;
 * returns MB/s and adds the requests to *@reqs. A pass reads the file once
 * (sequential) or as many random slots as it has, after its residency is set
 * again (untimed): a pass over pages an earlier pass left cached would
 * measure the page cache's reuse, not the cell.
 */
static double run(struct prof *p, struct prof *o, long *reqs)
{
	long n = 0, slots = FILE_LEN / size;
	double busy = 0, t0;
	struct rusage u0, u1;
	int fd;

	do {
		set_residency();
		if (bench_drain(raw_fd, dev_size, bps, iops, drain_buf))
			die("draining the throttle: %s", strerror(errno));
		fd = open(PATH, O_RDONLY);
		if (fd < 0)
			die("open %s: %s", PATH, strerror(errno));
		orders_begin();
		prof_enable(p, sample >= 1);
		prof_enable(o, sample >= 2);
		getrusage(RUSAGE_SELF, &u0);
		t0 = bench_now();
		for (long i = 0; i < slots; i++) {
			off_t at = (off_t)(rnd ? (long)(rng() % slots) : i) * size;
			int cached = res == 100 || (res == 50 && (at / MiB) % 2 == 0);
			double t1 = bench_now();

			if (pread(fd, (dst2 && i % 2 ? dst2 : dst) + at % (8 * MiB), size, at) !=
			    size)
				die("pread into %s memory: %s", dst == gpu ? "GPU" : "host",
				    strerror(errno));
			t1 = bench_now() - t1;
			p->t_chunk[cached] += t1;
			p->n_chunk[cached]++;
			p->t_pos[(at % (2 * MiB)) / (2 * MiB / POS_BUCKETS)] += t1;
			p->n_pos[(at % (2 * MiB)) / (2 * MiB / POS_BUCKETS)]++;
			n++;
			if (i % 64 == 63) {
				prof_drain(p);
				prof_drain(o);
			}
		}
		busy += bench_now() - t0;
		getrusage(RUSAGE_SELF, &u1);
		p->user += tv_diff(&u0.ru_utime, &u1.ru_utime);
		p->sys += tv_diff(&u0.ru_stime, &u1.ru_stime);
		p->nvcsw += u1.ru_nvcsw - u0.ru_nvcsw;
		p->nivcsw += u1.ru_nivcsw - u0.ru_nivcsw;
		prof_enable(p, 0);
		prof_enable(o, 0);
		orders_end(p);
		prof_drain(p);
		prof_drain(o);
		close(fd);
	} while (busy < secs);
	p->wall += busy;
	*reqs += n;
	return n * (double)size / busy / 1e6;
}

static const char *const trace_events[] = {
	"filemap/mm_filemap_add_to_page_cache", "block/block_rq_issue",
	"block/block_rq_complete", "spin/spin_readahead", "spin/spin_route",
	"kprobes/spin_sync_ra", "kprobes/spin_async_ra", "kprobes/spin_leg_end",
	"kprobes/spin_collect", "kprobes/spin_drain_all", "workqueue/workqueue_execute_start",
	"workqueue/workqueue_execute_end",
};

static void trace_events_enable(const char *on)
{
	char path[256];

	for (size_t i = 0; i < ARRAY_SIZE(trace_events); i++) {
		snprintf(path, sizeof(path), TRACING "/events/%s/enable", trace_events[i]);
		if (spin_write_file(path, on))
			die("%s: %s", path, strerror(errno));
	}
}

/*
 * One untimed pass over the first @trace bytes of the file in mode @mode,
 * every request marked in the trace, the events above enabled; prints the
 * trace. It shows where each mode reads ahead and waits at the edges of the
 * 1 MiB chunks of res=50.
 */
static void trace_pass(const char *mode)
{
	char line[512];
	FILE *f;
	int fd, mk;

	if (spin_write_file(MODE_PATH, mode))
		die("%s: %s", MODE_PATH, strerror(errno));
	orders_begin();
	spin_write_file(TRACING "/tracing_on", "0");
	/* The read-ahead entry points have no events: probe them. */
	if (access(TRACING "/events/kprobes/spin_sync_ra", F_OK) &&
	    spin_write_file(TRACING "/kprobe_events",
			    "p:spin_sync_ra page_cache_sync_ra req=%si\n"
			    "p:spin_async_ra page_cache_async_ra folio=%si req=%dx\n"
			    "r:spin_leg_end spin_sub_read_ra ret=$retval\n"
			    "p:spin_collect spin_ra_collect\n"
			    "p:spin_drain_all lru_add_drain_all\n"))
		die("kprobe_events: %s", strerror(errno));
	set_residency();
	if (bench_drain(raw_fd, dev_size, bps, iops, drain_buf))
		die("draining the throttle: %s", strerror(errno));
	mk = open(TRACING "/trace_marker", O_WRONLY);
	fd = open(TRACING "/trace", O_WRONLY | O_TRUNC);
	if (mk < 0 || fd < 0 || close(fd))
		die("tracefs: %s", strerror(errno));
	fd = open(PATH, O_RDONLY);
	if (fd < 0)
		die("open %s: %s", PATH, strerror(errno));
	trace_events_enable("1");
	spin_write_file(TRACING "/tracing_on", "1");
	for (off_t at = 0; at < trace && at < (off_t)FILE_LEN; at += size) {
		dprintf(mk, "pread %lld +%ld\n", (long long)at, size);
		if (pread(fd, gpu + at % (8 * MiB), size, at) != size)
			die("pread into GPU memory: %s", strerror(errno));
	}
	dprintf(mk, "end\n");
	spin_write_file(TRACING "/tracing_on", "0");
	trace_events_enable("0");
	spin_write_file(ADD_EVENT, "0");
	close(mk);
	close(fd);
	f = fopen(TRACING "/trace", "r");
	if (!f)
		die("tracefs: %s", strerror(errno));
	printf("# T mode %s\n", mode);
	/* One line per event, but for the page cache's insertions (one per folio). */
	while (fgets(line, sizeof(line), f))
		if (line[0] != '#' && !strstr(line, "mm_filemap_add_to_page_cache"))
			printf("# T %s", line);
	fclose(f);
}

struct row {
	int sym;
	unsigned int hits;
};

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return x->hits < y->hits ? 1 : x->hits > y->hits ? -1 : 0;
}

/* The hottest kernel functions of @hits (@samples in all), in time per request of @reqs. */
static void print_top(const unsigned int *hits, long samples, struct row *rows, long reqs)
{
	double us = US_PER_SAMPLE;

	printf("| function | share | us per request |\n| --- | --- | --- |\n");
	for (int i = 0; i <= nsyms; i++)
		rows[i] = (struct row){ i, hits[i] };
	qsort(rows, nsyms + 1, sizeof(*rows), cmp_row);
	for (int i = 0; i < top && rows[i].hits; i++)
		printf("| %s | %.1f%% | %.2f |\n",
		       rows[i].sym == nsyms ? "(unknown)" : syms[rows[i].sym].name,
		       100.0 * rows[i].hits / samples, rows[i].hits * us / reqs);
	printf("| all kernel samples | 100%% | %.2f |\n", samples * us / reqs);
}

/* The annotated function's hottest offsets in the two modes together, both modes' time. */
static void print_annot(const struct prof *p, const long *reqs)
{
	struct row *rows = calloc(ANNOT_MAX, sizeof(*rows));

	if (!rows)
		die("no memory");
	for (int o = 0; o < ANNOT_MAX; o++)
		rows[o] = (struct row){ o, p[0].annot[o] + p[1].annot[o] };
	qsort(rows, ANNOT_MAX, sizeof(*rows), cmp_row);
	printf("\n## %s by offset (us per request)\n\n| offset | auto | pagecache |\n"
	       "| --- | --- | --- |\n", syms[annot_sym].name);
	for (int i = 0; i < ANNOT_TOP && rows[i].hits; i++) {
		int o = rows[i].sym;

		printf("| +0x%x | %.2f | %.2f |\n", o,
		       reqs[0] ? p[0].annot[o] * US_PER_SAMPLE / reqs[0] : 0.0,
		       reqs[1] ? p[1].annot[o] * US_PER_SAMPLE / reqs[1] : 0.0);
	}
	free(rows);
}

int main(void)
{
	static const char *const modes[2] = { "auto", "pagecache" };
	static struct prof prof[2], oth[2];
	double rate[2][16];
	long reqs[2] = { 0, 0 };
	char cmd[512], dev[64], gpu_dir[PATH_MAX];
	struct row *rows;
	int heap, buf;

	setvbuf(stdout, NULL, _IOLBF, 0);
	size = bench_opt_ll("prof_bench", "size", size);
	res = bench_opt_ll("prof_bench", "res", res);
	rnd = bench_opt_ll("prof_bench", "rnd", rnd);
	secs = bench_opt_ll("prof_bench", "secs", secs);
	rounds = bench_opt_ll("prof_bench", "rounds", rounds);
	top = bench_opt_ll("prof_bench", "top", top);
	ra_limit = bench_opt_ll("prof_bench", "ra_limit", ra_limit);
	ra_kb = bench_opt_ll("prof_bench", "ra_kb", ra_kb);
	trace = bench_opt_ll("prof_bench", "trace", trace);
	sample = bench_opt_ll("prof_bench", "sample", sample);
	annotate = bench_opt("prof_bench", "annotate");
	dst_name = bench_opt("prof_bench", "dst");
	if (dst_name && strcmp(dst_name, "gpu") && strcmp(dst_name, "host") &&
	    strcmp(dst_name, "host2"))
		die("prof_bench.dst=%s: gpu, host or host2", dst_name);
	bps = bench_opt_ll("prof_bench", "bps", 0);
	iops = bench_opt_ll("prof_bench", "iops", 0);
	if (size < 512 || size > (long)(8 * MiB) || FILE_LEN % size || rounds < 1 || rounds > 16 ||
	    (res != 0 && res != 50 && res != 100) || secs < 1)
		die("prof_bench.size=%ld .res=%ld .rounds=%ld .secs=%ld out of range", size, res,
		    rounds, secs);
	load_syms();
	for (int i = 0; annotate && i < nsyms && annot_sym < 0; i++)
		if (strstr(syms[i].name, annotate) && strncmp(syms[i].name, "__pfx_", 6))
			annot_sym = i;
	if (annotate && annot_sym < 0)
		die("prof_bench.annotate=%s: no such kernel function", annotate);
	if (ra_limit >= 0) {
		char v[32];

		snprintf(v, sizeof(v), "%ld", ra_limit);
		if (spin_write_file("/sys/kernel/spin/ra_partition_pages", v))
			die("ra_partition_pages=%s: %s", v, strerror(errno));
		printf("# GPU read-ahead partition: %ld pages\n", ra_limit);
	}
	if (spin_gpu_find(gpu_dir, sizeof(gpu_dir)) ||
	    spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev, sizeof(dev)))
		die("rig devices not found");
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && mkfs.ext4 -q -F %s %s && mount -t ext4 %s %s",
		 MNT, "-E nodiscard,lazy_itable_init=0,lazy_journal_init=0", dev, dev, MNT);
	if (system(cmd))
		die("no ext4 on %s", dev);
	if (ra_kb >= 0) {
		const char *base = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
		char path[PATH_MAX], v[32];

		snprintf(path, sizeof(path), "/sys/block/%s/queue/read_ahead_kb", base);
		snprintf(v, sizeof(v), "%ld", ra_kb);
		if (spin_write_file(path, v))
			die("%s: %s", path, strerror(errno));
		printf("# read_ahead_kb of %s: %ld\n", dev, ra_kb);
	}
	host = malloc(MiB);
	drain_buf = spin_alloc_aligned(MiB);
	raw_fd = open(dev, O_RDONLY | O_DIRECT);
	if (!host || !drain_buf || raw_fd < 0 || ioctl(raw_fd, BLKGETSIZE64, &dev_size))
		die("setting up: %s", strerror(errno));
	setup_fd = bench_pattern_file(PATH, FILE_LEN, 7, host, MiB);
	if (setup_fd < 0)
		die("writing %s: %s", PATH, strerror(errno));
	gpu = spin_gpu_buffer(gpu_dir, 8 * MiB, &heap, &buf);
	if (gpu == MAP_FAILED)
		die("no GPU memory: %s", strerror(errno));
	memset(gpu, 0, 8 * MiB);
	dst = gpu;
	if (dst_name && strcmp(dst_name, "gpu")) {
		/* Two VMAs, kept apart by an inaccessible page. */
		dst = mmap(NULL, 16 * MiB + 4 * KiB, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (dst == MAP_FAILED || mprotect(dst + 8 * MiB, 4 * KiB, PROT_NONE))
			die("no host buffer: %s", strerror(errno));
		memset(dst, 0, 8 * MiB);
		if (!strcmp(dst_name, "host2")) {
			dst2 = dst + 8 * MiB + 4 * KiB;
			memset(dst2, 0, 8 * MiB);
		}
	}
	for (int m = 0; m < 2; m++) {
		prof_open(&prof[m], 0);
		prof_open(&oth[m], 1);
	}
	printf("# prof_bench: %s %ld B reads into %s memory, ", rnd ? "random" : "sequential", size,
	       dst == gpu ? "GPU" : dst2 ? "two buffers of host" : "host");
	printf("%ld%% resident, %ld rounds of %ld s per mode\n", res, rounds, secs);
	/* Twice each, alternating: the first pass may still share the CPU with writeback. */
	for (int m = 0; trace > 0 && m < 4; m++)
		trace_pass(modes[(m + 1) % 2]);
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < 2; k++) {
			int m = (r + k) % 2;

			if (spin_write_file(MODE_PATH, modes[m]))
				die("%s: %s", MODE_PATH, strerror(errno));
			rate[m][r] = run(&prof[m], &oth[m], &reqs[m]);
			printf("# round %d %s: %.1f MB/s\n", r + 1, modes[m], rate[m][r]);
		}
	spin_write_file(MODE_PATH, "auto");
	print_partition();
	rows = calloc(nsyms + 1, sizeof(*rows));
	for (int m = 0; m < 2; m++) {
		struct prof *p = &prof[m];

		printf("\n## %s: %.1f MB/s (median), %ld samples, %ld requests\n\n", modes[m],
		       bench_median(rate[m], rounds), p->samples, reqs[m]);
		print_top(p->hits, p->samples, rows, reqs[m]);
		printf("\nOther tasks' kernel time (not the idle tasks), %ld samples:\n\n",
		       oth[m].samples);
		print_top(oth[m].hits, oth[m].samples, rows, reqs[m]);
		printf("\nThe idle tasks' kernel time (every CPU), %ld samples:\n\n",
		       oth[m].idle_samples);
		print_top(oth[m].idle_hits, oth[m].idle_samples, rows, reqs[m]);
		printf("\nWall time per request: %ld in chunks cached before the pass, %.1f us; "
		       "%ld in the others, %.1f us\n", p->n_chunk[1],
		       p->n_chunk[1] ? 1e6 * p->t_chunk[1] / p->n_chunk[1] : 0.0, p->n_chunk[0],
		       p->n_chunk[0] ? 1e6 * p->t_chunk[0] / p->n_chunk[0] : 0.0);
		printf("\nThe reader per request (getrusage):\n");
		printf("wall %.2f us, user %.2f us, system %.2f us, off the CPU %.2f us;\n",
		       1e6 * p->wall / reqs[m], 1e6 * p->user / reqs[m], 1e6 * p->sys / reqs[m],
		       1e6 * (p->wall - p->user - p->sys) / reqs[m]);
		printf("per 1000 requests %.2f voluntary and %.2f involuntary context switches\n",
		       1e3 * p->nvcsw / reqs[m], 1e3 * p->nivcsw / reqs[m]);
		printf("\nFolios added to the page cache by order (%s%s):",
		       "mm_filemap_add_to_page_cache", p->lost ? ", **events lost**" : "");
		for (int k = 0; k <= MAX_ORDER_SEEN; k++)
			if (p->folios[k])
				printf(" order %d: %ld folios (%ld pages);", k, p->folios[k],
				       p->folios[k] << k);
		printf("\n");
	}
	if (annot_sym >= 0)
		print_annot(prof, reqs);
	/*
	 * Where in a chunk pair the modes differ: a request's wall time by where
	 * it starts (sequential reads; with res=50 the first 1 MiB is the chunk
	 * cached before the pass).
	 */
	if (!rnd) {
		printf("\nWall time per request by its offset in a 2 MiB pair of chunks (us):\n\n"
		       "| offset (KiB) | %s | %s | difference |\n| --- | --- | --- | --- |\n",
		       modes[0], modes[1]);
		for (int b = 0; b < POS_BUCKETS; b++) {
			double us[2];

			for (int m = 0; m < 2; m++)
				us[m] = prof[m].n_pos[b] ?
					1e6 * prof[m].t_pos[b] / prof[m].n_pos[b] : 0.0;
			if (prof[0].n_pos[b] || prof[1].n_pos[b])
				printf("| %lu | %.1f | %.1f | %+.1f |\n",
				       b * (2 * MiB / POS_BUCKETS) / KiB, us[0], us[1],
				       us[0] - us[1]);
		}
	}
	printf("ok 1 - prof_bench\n");
	return 0;
}
