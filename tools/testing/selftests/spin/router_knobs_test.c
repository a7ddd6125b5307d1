// SPDX-License-Identifier: GPL-2.0
/*
 * The router's knobs: /sys/kernel/spin/mode, atomic_reads and pipeline, and
 * the per-disk cost model of spin-nvme0's disk (/sys/block/<disk>/spin/):
 * the documented defaults, good values taken and read back, bad ones
 * refused with EINVAL and the value left as it was. Every knob is restored
 * at exit.
 */
#define _GNU_SOURCE
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

#define RESULTS 11	/* test_knobs() 3, switch_knob() 2, knob_reject() 6 */

/* The per-disk knobs and their documented defaults. */
static const char *const knob_names[] = {
	"s_cutoff", "c_p2p_ns", "bw_p2p", "bw_pc", "p2p_overlap"
};

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
		char before[64] = "80000", now[64] = "?";
		int r1, r2;

		knob_get("c_p2p_ns", before, sizeof(before));
		r1 = sys_write(path, "90000\n");
		knob_get("c_p2p_ns", now, sizeof(now));
		r2 = sys_write(path, before);
		ksft_test_result(!r1 && !strcmp(now, "90000") && !r2,
				 "knobs: c_p2p_ns 90000 accepted and read back (%s), restored (%s)\n",
				 now, r2 ? strerror(-r2) : "ok");
	}
}

int main(void)
{
	struct router_fs ext4 = { .base = RT_EXT4 };

	ksft_print_header();
	ksft_set_plan(RESULTS);
	fs_find(&ext4);
	snprintf(knob_disk, sizeof(knob_disk), "%s", ext4.base.disk);
	test_knobs();
	router_took();
	ksft_finished();
}
