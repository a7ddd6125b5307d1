// SPDX-License-Identifier: GPL-2.0
/*
 * uring_bench: io_uring reads into GPU memory, buffered (routed
 * by spin) against O_DIRECT (upstream's P2P path), in one guest run.
 *
 * fio with ioengine=io_uring, iodepth=32, its buffers in the stand-in GPU's
 * p2pmem/allocate (iomem=mmapshared), over a 256 MiB file on ext4 on
 * spin-nvme0 that is dropped from the page cache before every run: random
 * 4 KiB reads and sequential 1 MiB reads, each for uring_bench.runtime
 * seconds (default 10), buffered and O_DIRECT alternating, median of
 * uring_bench.rounds (default 3). The ratio buffered / O_DIRECT is the
 * goal (>= 0.9). The disk's spin counters show what the router did.
 *
 * Output: "ub-*" key=value lines, a Markdown table and a TAP line ("not ok"
 * if a run failed; the ratio is reported, not asserted).
 * Emulator figures (QEMU TCG, throttled drives, the BAR is host RAM).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_lib.h"
#include "spin_lib.h"

#define MNT "/mnt/uring_bench"
#define MAX_ROUNDS 9

static int run(const char *cmd)
{
	int status = system(cmd);

	return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The read bandwidth in KiB/s from fio's JSON output, or -1. */
static double json_bw(const char *path)
{
	static char buf[1 << 17];
	char *p;

	if (spin_read_file(path, buf, sizeof(buf)))
		return -1;
	p = strstr(buf, "\"read\"");
	p = p ? strstr(p, "\"bw\"") : NULL;
	p = p ? strchr(p, ':') : NULL;
	return p ? atof(p + 1) : -1;
}

int main(void)
{
	static const struct { const char *name, *rw, *bs; } kinds[] = {
		{ "random 4 KiB", "randread", "4k" },
		{ "sequential 1 MiB", "read", "1M" },
	};
	long rounds = bench_opt_ll("uring_bench", "rounds", 3);
	long runtime = bench_opt_ll("uring_bench", "runtime", 10);
	char gpu[PATH_MAX], dev[64], disk[32], stat[PATH_MAX], cmd[2 * PATH_MAX];
	int failures = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (rounds < 1 || rounds > MAX_ROUNDS || runtime < 1)
		rounds = 3, runtime = 10;
	if (spin_gpu_find(gpu, sizeof(gpu)) ||
	    spin_fs_make(SPIN_NVME0_SERIAL, "mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,"
			 "lazy_journal_init=0", "ext4", MNT, 0, dev, sizeof(dev), disk,
			 sizeof(disk))) {
		printf("not ok 1 - rig devices or the filesystem: %s\n", strerror(errno));
		return 1;
	}
	snprintf(stat, sizeof(stat), "/sys/block/%s/spin/stat", disk);
	spin_write_file("/sys/kernel/spin/mode", "auto");
	if (run("fio --name=fill --filename=" MNT "/data --size=256M --bs=1M --rw=write "
		"--direct=1 --end_fsync=1 >/dev/null 2>&1")) {
		printf("not ok 1 - writing the file with fio\n");
		return 1;
	}
	printf("ub-header rounds=%ld runtime=%ld iodepth=32 file_mib=256\n", rounds, runtime);
	printf("\n## io_uring reads into GPU memory, iodepth 32, uncached file, MB/s (median of %ld)\n\n",
	       rounds);
	printf("| reads | buffered (routed) | O_DIRECT | buffered / O_DIRECT | P2P share (buffered) |\n");
	printf("|---|---|---|---|---|\n");
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		double bw[2][MAX_ROUNDS];
		long long p2p = 0, pc = 0;

		for (int r = 0; r < rounds; r++)
			for (int i = 0; i < 2; i++) {
				int direct = (i + r) % 2;
				long long p0 = spin_stat_get(stat, "bytes_p2p");
				long long c0 = spin_stat_get(stat, "bytes_pagecache");

				spin_write_file("/proc/sys/vm/drop_caches", "3");
				snprintf(cmd, sizeof(cmd),
					 "fio --name=ub --filename=" MNT "/data --size=256M --rw=%s "
					 "--bs=%s --ioengine=io_uring --iodepth=32 --direct=%d "
					 "--iomem=mmapshared:%s/p2pmem/allocate --time_based "
					 "--runtime=%ld --norandommap --output-format=json "
					 "--output=/tmp/ub.json >/dev/null 2>&1", kinds[k].rw,
					 kinds[k].bs, direct, gpu, runtime);
				if (run(cmd) || json_bw("/tmp/ub.json") < 0) {
					printf("not ok - fio %s direct=%d failed\n", kinds[k].name,
					       direct);
					failures++;
					bw[direct][r] = 0;
					continue;
				}
				bw[direct][r] = json_bw("/tmp/ub.json") * 1024 / 1e6;
				if (!direct) {
					p2p += spin_stat_get(stat, "bytes_p2p") - p0;
					pc += spin_stat_get(stat, "bytes_pagecache") - c0;
				}
			}
		{
			double b = bench_median(bw[0], rounds), d = bench_median(bw[1], rounds);

			printf("| %s | %.1f | %.1f | %.2f | %.2f |\n", kinds[k].name, b, d,
			       d > 0 ? b / d : 0, p2p + pc ? (double)p2p / (p2p + pc) : 0);
			printf("ub-cell kind=%s buffered=%.2f direct=%.2f ratio=%.3f p2p=%lld pc=%lld\n",
			       kinds[k].rw, b, d, d > 0 ? b / d : 0, p2p, pc);
		}
	}
	printf("\n# Emulator figures: QEMU TCG, the BAR is host RAM; compare ratios only.\n");
	if (!failures)
		printf("ok 1 - every fio run completed\n");
	return failures ? 1 : 0;
}
