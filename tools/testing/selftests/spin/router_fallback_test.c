// SPDX-License-Identifier: GPL-2.0
/*
 * The router's fallbacks: reads that cannot go by P2P go through the page
 * cache, whole, and say why: spin-nvme2 (outside the switch, no P2P path),
 * spin-vblk (virtio-blk, no P2PDMA queue) and tmpfs (no block device), in
 * the modes auto and p2p, and as mode in pagecache; on tmpfs also a read
 * across the end of the file. Then the mode is auto again.
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

#define RESULTS 4

/* ---- fallbacks ---------------------------------------------------------- */

static void fallback(struct router_fs *fs, int reason, const char *what)
{
	struct res r = { 0 };
	char label[128];
	struct obs o;
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
		{ 3 * MiB + 100, 64 * KiB, 50, "pagecache" },	/* counted as mode */
	};

	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		size_t goff = 56 * MiB + c[i].pos % PG;

		snprintf(label, sizeof(label), "%s: %zu B at %lld, %d%% cached, mode %s",
			 fs->base.name,
			 c[i].len, c[i].pos, c[i].rz, c[i].mode);
		r.runs++;
		if (set_mode(c[i].mode)) {
			fail(&r, label, "mode %s: %s", c[i].mode, strerror(errno));
			continue;
		}
		if (!read_observed(fs, c[i].pos, c[i].len, c[i].rz, goff, &o, &r, label)) {
			int want = strcmp(c[i].mode, "pagecache") ? reason : R_MODE;

			if (o.d.v[ST_BYTES_P2P] || o.d.v[REASON_STAT(want)] != 1 ||
			    route_reasons(&o) != BIT(want) || o.d.v[ST_SEGS_PC] != 1)
				fail(&r, label,
				     "expected reason %s, one segment: bytes_p2p +%lld, %s +%lld, segments_pagecache +%lld, reasons seen %#x",
				     reason_names[want], o.d.v[ST_BYTES_P2P],
				     stat_names[REASON_STAT(want)], o.d.v[REASON_STAT(want)],
				     o.d.v[ST_SEGS_PC], route_reasons(&o));
		}
		trace_free(&o.tr);
	}
	set_mode("auto");
	res_result(&r, "%s: bytes right, every read falls back, reason %s (counters, trace)",
		   what, reason_names[reason]);
}

/* A file on tmpfs: no block device. */
static void fallback_tmpfs(void)
{
	struct router_fs t = { .base = { .name = "tmpfs", .seed = 71 } };
	struct res r = { 0 };
	struct range rg = { 3000, MiB };
	char label[64] = "tmpfs: 1 MiB at 3000";
	char why[256];
	struct obs o;
	ssize_t n;

	t.fd = open("/tmp/router_test.dat", O_RDWR | O_CREAT | O_TRUNC, 0644);
	spin_pattern_fill(host, 0, 2 * MiB, t.base.seed);
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
	else if (spin_gpu_check(gpu, gmem + 3000, MiB, t.base.seed, 3000, why, sizeof(why)))
		fail(&r, label, "GPU memory: %s", why);
	check_guards(3000, MiB, &r, label);
	if (!obs_end(&t, &o, &rg, 1, &r, label) &&
	    (o.g.v[ST_FB_NO_BDEV] != 1 || o.g.v[ST_BYTES_P2P] ||
	     route_reasons(&o) != BIT(R_NO_BDEV)))
		fail(&r, label, "fallback_no_bdev +%lld, bytes_p2p +%lld, reasons seen %#x",
		     o.g.v[ST_FB_NO_BDEV], o.g.v[ST_BYTES_P2P], route_reasons(&o));
	trace_free(&o.tr);

	/* A read across the end of the file: the bytes up to it, counted as such. */
	rg.pos = 2 * MiB - 1000;
	rg.len = 1000;
	snprintf(label, sizeof(label), "tmpfs: 64 KiB at EOF - 1000");
	poison(3000, 1000);
	obs_begin(&t, &o, &r, label);
	n = pread(t.fd, gmem + 3000, 64 * KiB, rg.pos);
	if (n != 1000)
		fail(&r, label, "returned %zd, want the 1000 bytes before EOF", n);
	else if (spin_gpu_check(gpu, gmem + 3000, n, t.base.seed, rg.pos, why, sizeof(why)))
		fail(&r, label, "GPU memory: %s", why);
	check_guards(3000, 1000, &r, label);
	if (!obs_end(&t, &o, &rg, 1, &r, label) &&
	    (o.g.v[ST_FB_NO_BDEV] != 1 || route_reasons(&o) != BIT(R_NO_BDEV)))
		fail(&r, label, "fallback_no_bdev +%lld, reasons seen %#x", o.g.v[ST_FB_NO_BDEV],
		     route_reasons(&o));
	trace_free(&o.tr);
	close(t.fd);
	unlink("/tmp/router_test.dat");
	res_result(&r, "tmpfs (no block device): bytes right, fallback_no_bdev counted, past EOF");
}

int main(void)
{
	struct router_fs far = {
		.base = { .name = "spin-nvme2", .serial = SPIN_NVME2_SERIAL, .type = "ext4",
			  .dir = "/mnt/rt-nvme2", .mkfs = SPIN_MKFS_EXT4, .seed = 53 },
	};
	struct router_fs vblk = {
		.base = { .name = "spin-vblk", .serial = SPIN_VBLK_SERIAL, .type = "xfs",
			  .virtio = 1, .dir = "/mnt/rt-vblk", .mkfs = SPIN_MKFS_XFS, .seed = 54 },
	};
	char val[64];
	int ret;

	ksft_print_header();
	ksft_set_plan(RESULTS);
	router_init();
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
	router_took();
	ksft_finished();
}
