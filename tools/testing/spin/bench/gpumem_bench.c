// SPDX-License-Identifier: GPL-2.0
/*
 * gpumem_bench: what GPU memory as a dma-buf costs, measured in one guest run.
 *
 * 1. struct page memory per GiB of registered BAR: MemFree with p2pdma_bar
 *    bound to the stand-in GPU and after it unbinds (the p2pdma teardown frees
 *    the BAR's vmemmap), three times. Unrelated frees in between can only add
 *    to the difference, so the smallest of the three is the estimate.
 * 2. O_DIRECT read throughput from the raw NVMe namespace into GPU memory and
 *    into host memory, alternating, same run: MiB/s and the ratio.
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

static long long meminfo(const char *key)
{
	char line[256];
	long long v = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)) && line[strlen(key)] == ':')
			v = strtoll(line + strlen(key) + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;	/* kB */
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

int main(void)
{
	char gpu[PATH_MAX], dev[64], flags[256], path[PATH_MAX + 32];
	long long bound, unbound, delta[3], bar_bytes;
	double gpu_rate[3], host_rate[3], g = 0, h = 0;
	const char *bdf;
	uint8_t *p, *host;
	int heap, buf, fd;

	if (spin_gpu_find(gpu, sizeof(gpu)) ||
	    spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev, sizeof(dev))) {
		printf("not ok - rig devices not found\n");
		return 1;
	}
	bdf = strrchr(gpu, '/') + 1;
	snprintf(path, sizeof(path), "%s/p2pmem/size", gpu);
	bar_bytes = spin_read_ll(path);

	/* 1. struct page memory. */
	for (int i = 0; i < 3; i++) {
		settle();
		bound = meminfo("MemFree");
		if (sysfs_write(DRV "/unbind", bdf)) {
			printf("not ok - unbind p2pdma_bar\n");
			return 1;
		}
		settle();
		unbound = meminfo("MemFree");
		if (sysfs_write(DRV "/bind", bdf)) {
			printf("not ok - bind p2pdma_bar\n");
			return 1;
		}
		delta[i] = unbound - bound;
	}
	qsort(delta, 3, sizeof(delta[0]), cmp_ll);

	/* 2. O_DIRECT throughput into GPU memory and into host memory, alternating. */
	heap = spin_heap_open(gpu);
	buf = heap < 0 ? -1 : spin_heap_alloc(heap, 16 * MiB, O_RDWR | O_CLOEXEC, 0);
	p = buf < 0 ? MAP_FAILED : mmap(NULL, 16 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	host = spin_alloc_aligned(16 * MiB);
	fd = open(dev, O_RDWR | O_DIRECT);
	if (p == MAP_FAILED || !host || fd < 0) {
		printf("not ok - setup for the throughput run: %s\n", strerror(errno));
		return 1;
	}
	memset(host, 0x3c, 16 * MiB);
	for (size_t off = 0; off < 512 * MiB; off += 16 * MiB)
		if (pwrite(fd, host, 16 * MiB, off) != (ssize_t)(16 * MiB))
			break;
	read_rate(fd, p, MiB, 32 * MiB);	/* warm up */
	for (int i = 0; i < 3; i++) {
		gpu_rate[i] = read_rate(fd, p, MiB, 128 * MiB);
		host_rate[i] = read_rate(fd, host, MiB, 128 * MiB);
		g += gpu_rate[i] / 3;
		h += host_rate[i] / 3;
	}

	/* 3. The memory type of the user mapping. */
	mapping_flags(p, flags, sizeof(flags));

	printf("## GPU memory as a dma-buf: measured in one guest run\n\n");
	printf("| what | measured |\n| --- | --- |\n");
	printf("| registered BAR | %lld MiB (%s BAR%d) |\n", bar_bytes >> 20, bdf, SPIN_GPU_BAR);
	printf("| MemFree gained when p2pdma_bar unbinds (least of 3) | %lld kB (runs: %lld, %lld, %lld kB) |\n",
	       delta[0], delta[0], delta[1], delta[2]);
	printf("| struct page memory per GiB of BAR | %.1f MiB (64 B per 4 KiB page: 16 MiB) |\n",
	       bar_bytes > 0 ? delta[0] / 1024.0 / (bar_bytes / (double)(1 << 30)) : -1.0);
	printf("| ... for an 80 GB H100 at that rate | %.2f GB |\n",
	       bar_bytes > 0 ? delta[0] * 1024.0 / bar_bytes * 80 : -1.0);
	printf("| O_DIRECT 1 MiB reads into GPU memory | %.0f MiB/s (%.0f, %.0f, %.0f) |\n", g,
	       gpu_rate[0], gpu_rate[1], gpu_rate[2]);
	printf("| O_DIRECT 1 MiB reads into host memory | %.0f MiB/s (%.0f, %.0f, %.0f) |\n", h,
	       host_rate[0], host_rate[1], host_rate[2]);
	printf("| ratio GPU / host | %.2f |\n", g / h);
	printf("| user mapping, page-table dump | %s (x86: PWT alone = PAT entry 1 = write-combining) |\n",
	       flags);
	printf("\nEmulator figures (QEMU TCG, the BAR is host RAM): compare ratios only.\n");
	printf("%s - gpumem_bench completed\n", g > 0 && h > 0 ? "ok" : "not ok");
	return 0;
}
