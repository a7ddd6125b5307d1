// SPDX-License-Identifier: GPL-2.0
/*
 * gpumem_bench: what GPU memory as a dma-buf costs, measured in one guest run,
 * with the stand-in GPU's memory in single pages (folio order 0) and in the
 * compound pages p2pdma_bar registers by default (its folio_order), in turn:
 *
 * 1. struct page memory per GiB of registered BAR, from what the kernel
 *    populated: the vmemmap pages the memory added (nr_memmap_pages in
 *    /proc/vmstat) with p2pdma_bar bound to the stand-in GPU and after it
 *    unbinds (the p2pdma teardown frees the BAR's vmemmap), the least of
 *    three rounds. MemFree is no measure of it: the freed pages may wait on
 *    the per-CPU free lists, which MemFree does not count.
 * 2. Throughput into a 16 MiB GPU buffer, per folio order, the orders
 *    alternating over three rounds: O_DIRECT 1 MiB reads from the raw NVMe
 *    namespace (and into host memory, for the GPU / host ratio), and buffered
 *    1 MiB reads of an uncached file on xfs that spin routes by P2P.
 * 3. The memory type of the user mapping, from the page-table dump
 *    (/sys/kernel/debug/page_tables/current_user).
 *
 * Prints a Markdown report. Emulator figures: only ratios within one run mean
 * anything (QEMU TCG; the GPU BAR is host RAM behind an emulated device).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "spin_lib.h"

#define MiB (1UL << 20)
#define DRV "/sys/bus/pci/drivers/p2pdma_bar"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The value of @key in /proc/vmstat. */
static long long vmstat(const char *key)
{
	char line[256];
	long long v = -1;
	FILE *f = fopen("/proc/vmstat", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)) && line[strlen(key)] == ' ')
			v = strtoll(line + strlen(key) + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

static void settle(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	sync();
	if (fd >= 0) {
		if (write(fd, "3", 1) < 0)
			perror("drop_caches");
		close(fd);
	}
	usleep(200000);
}

static int sysfs_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	int ret = fd < 0 || write(fd, val, strlen(val)) < 0 ? -1 : 0;

	if (fd >= 0)
		close(fd);
	return ret;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* MiB/s of O_DIRECT reads of @bs bytes into @buf, @total bytes in all. */
static double read_rate(int fd, uint8_t *buf, size_t bs, size_t total)
{
	double t0 = now();

	for (size_t done = 0; done < total; done += bs)
		if (pread(fd, buf + done % (16 * MiB), bs, done % (512 * MiB)) != (ssize_t)bs)
			return -1;
	return total / MiB / (now() - t0);
}

/* The page-table dump line that covers @addr, or "?". */
static void mapping_flags(const void *addr, char *out, size_t len)
{
	FILE *f = fopen("/sys/kernel/debug/page_tables/current_user", "r");
	unsigned long a = (unsigned long)addr, lo, hi;
	char line[512];

	snprintf(out, len, "? (no page-table dump: CONFIG_PTDUMP_DEBUGFS)");
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "0x%lx-0x%lx", &lo, &hi) == 2 && lo <= a && a < hi) {
			char *flags = strchr(line, ' ');

			while (flags && *flags == ' ')
				flags++;
			line[strcspn(line, "\n")] = '\0';
			snprintf(out, len, "%.200s", flags ? flags : line);
			break;
		}
	}
	if (f)
		fclose(f);
}

#define ORDER_FILE "/sys/kernel/debug/p2pdma_bar/folio_order"
#define ROUNDS 3
#define BUF_LEN (16 * MiB)
#define FILE_LEN (64 * MiB)

/* One folio order's figures. */
struct cfg {
	unsigned int order;
	long long memmap[ROUNDS];			/* kB freed by the unbind */
	double gpu[ROUNDS], host[ROUNDS], routed[ROUNDS];	/* MiB/s */
	long long p2p;					/* routed bytes by P2P */
};

static const char *bdf, *dev;
static char gpu[PATH_MAX];
static struct spin_fs fs = SPIN_FS_XFS("/mnt/gpumem-xfs", 61);

/*
 * MiB/s of buffered reads of the uncached test file into @buf, 1 MiB each,
 * in an order in which none continues the one before it (a stream would be
 * read ahead through the page cache instead).
 */
static double routed_rate(int file, uint8_t *buf)
{
	size_t n = FILE_LEN / MiB;
	double t0;

	if (spin_uncache(file))
		return -1;
	t0 = now();
	for (size_t i = 0; i < n; i++) {
		size_t off = (i * 37 % n) * MiB;

		if (pread(file, buf + off % BUF_LEN, MiB, off) != (ssize_t)MiB)
			return -1;
	}
	return FILE_LEN / MiB / (now() - t0);
}

/*
 * One round of @c: p2pdma_bar binds with folio order @c->order, the
 * throughput runs, then the memory the unbind gives back. p2pdma_bar is
 * unbound when it returns 0.
 */
static int round_of(struct cfg *c, int r, int raw, int file, uint8_t *host, char *flags,
		    size_t flags_len)
{
	long long m_bound, m_unbound, p0;
	char order[16];
	uint8_t *p;
	int heap, buf;

	snprintf(order, sizeof(order), "%u", c->order);
	if (spin_write_file(ORDER_FILE, order) || sysfs_write(DRV "/bind", bdf)) {
		printf("not ok - bind p2pdma_bar with folio order %u\n", c->order);
		return -1;
	}
	heap = spin_heap_open(gpu);
	buf = heap < 0 ? -1 : spin_heap_alloc(heap, BUF_LEN, O_RDWR | O_CLOEXEC, 0);
	p = buf < 0 ? MAP_FAILED : mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	if (p == MAP_FAILED) {
		printf("not ok - GPU buffer, folio order %u: %s\n", c->order, strerror(errno));
		return -1;
	}
	read_rate(raw, p, MiB, 16 * MiB);	/* warm up */
	c->gpu[r] = read_rate(raw, p, MiB, 128 * MiB);
	c->host[r] = read_rate(raw, host, MiB, 128 * MiB);
	p0 = spin_stat_get(fs.stat, "bytes_p2p");
	c->routed[r] = routed_rate(file, p);
	c->p2p += spin_stat_get(fs.stat, "bytes_p2p") - p0;
	if (flags)
		mapping_flags(p, flags, flags_len);
	munmap(p, BUF_LEN);
	close(buf);
	close(heap);

	settle();
	m_bound = vmstat("nr_memmap_pages");
	if (sysfs_write(DRV "/unbind", bdf)) {
		printf("not ok - unbind p2pdma_bar\n");
		return -1;
	}
	settle();
	m_unbound = vmstat("nr_memmap_pages");
	c->memmap[r] = (m_bound - m_unbound) * 4;
	return 0;
}

static double mean(const double *v)
{
	double sum = 0;

	for (int i = 0; i < ROUNDS; i++)
		sum += v[i] / ROUNDS;
	return sum;
}

static long long least(long long *v)
{
	qsort(v, ROUNDS, sizeof(v[0]), cmp_ll);
	return v[0];
}

int main(void)
{
	char dev_buf[64], flags[256], path[PATH_MAX + 32], order[16] = "";
	struct cfg cfg[2] = { { .order = 0 } };
	long long bar_bytes;
	uint8_t *host;
	int raw, file, ok = 1;
	double gib;

	if (spin_gpu_find(gpu, sizeof(gpu)) ||
	    spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev_buf, sizeof(dev_buf))) {
		printf("not ok - rig devices not found\n");
		return 1;
	}
	dev = dev_buf;
	bdf = strrchr(gpu, '/') + 1;
	snprintf(path, sizeof(path), "%s/p2pmem/size", gpu);
	bar_bytes = spin_read_ll(path);
	gib = bar_bytes / (double)(1 << 30);
	if (spin_read_file(ORDER_FILE, order, sizeof(order)) < 0 || bar_bytes <= 0) {
		printf("not ok - %s or the p2pmem size not readable\n", ORDER_FILE);
		return 1;
	}
	cfg[1].order = strtoul(order, NULL, 10);

	/* The raw namespace for O_DIRECT, a file on xfs for routed reads. */
	host = spin_alloc_aligned(BUF_LEN);
	raw = open(dev, O_RDWR | O_DIRECT);
	if (!host || raw < 0 || spin_fs_setup(&fs, 0)) {
		printf("not ok - setup for the throughput runs: %s\n", strerror(errno));
		return 1;
	}
	memset(host, 0x3c, BUF_LEN);
	for (size_t off = 0; off < 512 * MiB; off += BUF_LEN)
		if (pwrite(raw, host, BUF_LEN, off) != (ssize_t)BUF_LEN)
			break;
	file = open(fs.path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (size_t off = 0; file >= 0 && off < FILE_LEN; off += BUF_LEN)
		if (pwrite(file, host, BUF_LEN, off) != (ssize_t)BUF_LEN)
			file = -1;
	if (file < 0 || fsync(file)) {
		printf("not ok - test file on %s: %s\n", fs.dir, strerror(errno));
		return 1;
	}

	if (sysfs_write(DRV "/unbind", bdf)) {
		printf("not ok - unbind p2pdma_bar\n");
		return 1;
	}
	for (int r = 0; r < ROUNDS && ok; r++)
		for (int i = 0; i < 2 && ok; i++)
			ok = !round_of(&cfg[i], r, raw, file, host, r ? NULL : flags,
				       sizeof(flags));
	/* Bound again as before, with the order it had. */
	if (spin_write_file(ORDER_FILE, order) || sysfs_write(DRV "/bind", bdf))
		ok = 0;
	close(file);
	close(raw);
	if (!ok)
		return 1;

	printf("## GPU memory as a dma-buf: measured in one guest run\n\n");
	printf("Registered BAR: %lld MiB (%s BAR%d). Figures per folio order of its memory; "
	       "struct page memory the least of %d rounds, throughput their mean.\n\n",
	       bar_bytes >> 20, bdf, SPIN_GPU_BAR, ROUNDS);
	printf("| what | order %u | order %u |\n| --- | --- | --- |\n", cfg[0].order, cfg[1].order);
	printf("| vmemmap populated (nr_memmap_pages), per GiB of BAR | %.2f MiB | %.2f MiB |\n",
	       least(cfg[0].memmap) / 1024.0 / gib, least(cfg[1].memmap) / 1024.0 / gib);
	printf("| ... for an 80 GB H100 at that rate | %.2f GB | %.3f GB |\n",
	       least(cfg[0].memmap) / 1024.0 / 1024.0 / gib * 80,
	       least(cfg[1].memmap) / 1024.0 / 1024.0 / gib * 80);
	printf("| O_DIRECT 1 MiB reads into GPU memory | %.0f MiB/s | %.0f MiB/s |\n",
	       mean(cfg[0].gpu), mean(cfg[1].gpu));
	printf("| O_DIRECT 1 MiB reads into host memory | %.0f MiB/s | %.0f MiB/s |\n",
	       mean(cfg[0].host), mean(cfg[1].host));
	printf("| ratio GPU / host | %.2f | %.2f |\n", mean(cfg[0].gpu) / mean(cfg[0].host),
	       mean(cfg[1].gpu) / mean(cfg[1].host));
	printf("| routed 1 MiB reads of an uncached file on xfs | %.0f MiB/s | %.0f MiB/s |\n",
	       mean(cfg[0].routed), mean(cfg[1].routed));
	printf("| ... of which by P2P | %lld MiB | %lld MiB |\n", cfg[0].p2p >> 20,
	       cfg[1].p2p >> 20);
	printf("\n| ratio order %u / order %u | measured |\n| --- | --- |\n", cfg[1].order,
	       cfg[0].order);
	printf("| struct page memory (vmemmap) | %.3f |\n",
	       (double)least(cfg[1].memmap) / least(cfg[0].memmap));
	printf("| O_DIRECT into GPU memory | %.2f |\n", mean(cfg[1].gpu) / mean(cfg[0].gpu));
	printf("| routed reads into GPU memory | %.2f |\n",
	       mean(cfg[1].routed) / mean(cfg[0].routed));
	printf("\nUser mapping, page-table dump: %s (x86: PWT alone = PAT entry 1 = "
	       "write-combining).\n", flags);
	printf("\nEmulator figures (QEMU TCG, the BAR is host RAM): compare ratios only.\n");
	ok = mean(cfg[0].gpu) > 0 && mean(cfg[1].gpu) > 0 && mean(cfg[0].routed) > 0 &&
	     mean(cfg[1].routed) > 0;
	printf("%s - gpumem_bench completed\n", ok ? "ok" : "not ok");
	return 0;
}
