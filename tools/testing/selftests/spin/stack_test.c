// SPDX-License-Identifier: GPL-2.0
/*
 * Stacked disks (SPIN's "virtual block devices"): routed reads into and
 * writes from GPU memory through md and dm.
 *
 * Each stack is built with mdadm or dmsetup, then ext4 and xfs are made on
 * it in turn. On each filesystem a file is written by the CPU, read back
 * uncached into GPU memory with pread() and checked from the host side of
 * the GPU memory; then GPU memory filled from the host side is written with
 * pwrite() of an aligned range and checked by CPU reads of the uncached file
 * and by a read back into GPU memory. The stacked disk's counters
 * (/sys/block/<md|dm>/spin/stat) must show the expected path:
 *  - P2P for md RAID-0, RAID-1 and RAID-10 and a dm-stripe over spin-nvme0 +
 *    spin-nvme1 (both behind the GPU's switch), and for a dm table of linear
 *    targets alternating between them; for RAID-0 and the stripe both
 *    members must have served reads;
 *  - fallback "queue" for dm-crypt over spin-nvme0 (the CPU decrypts);
 *  - fallback "distance" for md RAID-0 over spin-nvme0 + spin-nvme2 (no P2P
 *    path from the GPU to spin-nvme2), with spin-nvme2 named as the member
 *    in the spin_route tracepoint. This array reuses the device number of
 *    the first RAID-0, whose verdict was P2P: the remembered verdict must
 *    be dropped when the stack changes.
 * Before the filesystems, /sys/block/<disk>/spin/p2p must list the stack's
 * members and give the stand-in GPU the same verdict.
 * spin's per-disk state goes with the disk: a new md0 does not inherit the
 * cost parameter set on the first one, and the table of disks is back to its
 * size once every stack is gone.
 * Then a RAID-1 leg is failed with mdadm --fail while a reader keeps reading
 * the file into GPU memory: every read returns the right bytes.
 *
 * A dm table is swapped under reads into GPU memory that wait for it. ext4
 * on a dm-linear table over spin-nvme0 (P2P) holds a file; the device is
 * suspended (the filesystem frozen), its sectors are copied to spin-vblk,
 * and two children read into GPU memory: an O_DIRECT read of the dm device
 * and a routed read of the file. Both build their bios with GPU pages while
 * the table accepts them, and dm defers the bios. Then a table over the same
 * sectors of spin-vblk (a queue without P2P) is loaded and the device
 * resumed: dm must end the deferred bios with an I/O error instead of
 * passing GPU pages to virtio-blk. The O_DIRECT read fails with EIO, the
 * routed read is redone through the page cache (fallback_io_error) and
 * returns the right bytes, the device's queue no longer accepts P2P pages
 * and the kernel log gains no BUG or WARNING.
 *
 * NVMe multipath heads are stacks too: the rig has two subsystems of two
 * controllers sharing a namespace. spin-mpnear has both controllers behind
 * the GPU's switch: P2P, and with the round-robin I/O policy both paths must
 * serve reads. spin-mpfar has one on the root bus: fallback "distance" with
 * that path named. Then that path's controller is removed from the PCI bus
 * (reads must go P2P over the path left) and found again by a rescan (the
 * fallback is back): the head's verdict follows its paths.
 *
 * Last, the walk down a stack must not follow what is torn down under it. A
 * dm table of linear targets over the three rig disks and both multipath
 * heads is read through /sys/block/<dm>/spin/p2p by two processes in a loop
 * while the table flips between it and one that lets go of the heads; then
 * every path of both heads is removed from the PCI bus (the heads' disks go,
 * the table still holds them open), the table lets go of them, so that each
 * head is freed while the readers walk, and a rescan brings them back. A few
 * rounds of that, bounded in number and time: every read must give a report
 * ("queue 0" or "queue 1" first) or a clean errno, the kernel log must gain
 * no BUG or WARNING (the debug kernel's KASAN reports start with "BUG:"),
 * and both heads must be back with two paths.
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define GPU_LEN (32 * MiB)
#define BACK (16 * MiB)			/* GPU offset of read-backs */
#define FILE_LEN (8 * MiB + 5000)	/* the file read into GPU memory */
#define WR_POS (2 * 4096)		/* the write from GPU memory: one direct write */
#define WR_LEN (4 * MiB)
/*
 * ext4 over a stack is made with lazy inode tables (mkfs stays quick on the
 * larger arrays) and mounted without the thread that would zero them in the
 * background, under the test's I/O (SPIN_MKFS_EXT4 in spin_lib.h).
 */
#define EXT4_OPTS "noinit_itable"
#define TRACE "/sys/kernel/tracing/trace"
#define MNT "/mnt/stack"
#define DM_NAME "spinstack"
#define TABLE "/tmp/spin-dm-table"
/* The race over the multipath heads (mpath_race()): tables and bounds. */
#define RACE_TABLE_HEADS "/tmp/spin-dm-race-heads"
#define RACE_TABLE_NONE "/tmp/spin-dm-race-none"
#define RACE_ROUNDS 3		/* paths removed and rescanned */
#define RACE_FLIPS 5		/* table flips per round, heads there */
#define RACE_READERS 2
#define RACE_SECS 150		/* no round starts after this long */
/* The table swap under deferred reads (table_swap()): tables and sizes. */
#define SWAP_TABLE_NVME "/tmp/spin-dm-swap-nvme"
#define SWAP_TABLE_VBLK "/tmp/spin-dm-swap-vblk"
#define SWAP_DISK (32 * MiB)	/* the dm device: ext4 */
#define SWAP_LEN MiB		/* what each reader reads into GPU memory */
#define MD_DEV "/dev/md0"
/* The shell command that zeroes the first 2 MiB of the disk %s. */
#define ZERO_HEAD "dd if=/dev/zero of=%s bs=1M count=2 2>/dev/null"
/* 64 hex digits: the dm-crypt key (aes-xts-plain64 takes two 128-bit keys). */
#define KEY "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

enum expect { P2P, QUEUE, DISTANCE };

struct stack {
	const char *name;
	const char *mpath;	/* an NVMe multipath head: the subsystem's serial */
	const char *level;	/* md: the RAID level; NULL for dm */
	int far;		/* members: spin-nvme0 + spin-nvme2 instead of spin-nvme1 */
	int spread;		/* both members must serve reads of the file */
	int (*table)(FILE *f);	/* dm: writes the table */
	enum expect expect;
};

static char gpu[PATH_MAX];
static uint8_t *gmem;
static uint8_t *host;
static char dev0[64], dev1[64], dev2[64];	/* /dev/nvmeXn1 of spin-nvme0, 1, 2 */
/*
 * The disks at the bottom of the stack being tested (names in /sys/block):
 * two members, and the one the GPU cannot reach for a "distance" stack.
 */
static char mem0[64], mem1[64], far[64];
static pid_t main_pid;
static char stack_disk[64];	/* the stack being tested (md0, dm-N, nvmeXnY) */
static int mounted, md_made, dm_made;

/* Runs a shell command, output discarded; 0 if it exited with 0. */
__printf(1, 2) static int sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		ksft_print_msg("failed: %s\n", cmd);
		return -1;
	}
	return 0;
}

static void teardown(void)
{
	if (mounted && umount(MNT))
		ksft_print_msg("umount %s: %s\n", MNT, strerror(errno));
	mounted = 0;
	if (md_made)
		sh("mdadm --stop " MD_DEV " >/dev/null 2>&1");
	if (dm_made)
		sh("dmsetup remove --noudevsync " DM_NAME " >/dev/null 2>&1");
	md_made = 0;
	dm_made = 0;
}

/*
 * At exit, before spin_lib gives back the mode and the trace event: the stack
 * of a test that did not finish goes.
 */
static void cleanup(void)
{
	if (getpid() != main_pid)
		return;
	teardown();
	/* Leave the disks without md superblocks for the tests that follow. */
	sh("mdadm --zero-superblock %s %s %s >/dev/null 2>&1", dev0, dev1, dev2);
}

/* The name in /sys/block of @dev, a name or a /dev path. */
static const char *base(const char *dev)
{
	return strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
}

static long long sectors(const char *dev)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/block/%s/size", base(dev));
	return spin_read_ll(path);
}

/* Sectors read from disk @dev so far (the third field of /sys/block/<dev>/stat). */
static long long sectors_read(const char *dev)
{
	char path[PATH_MAX], buf[256];
	long long v[3];

	snprintf(path, sizeof(path), "/sys/block/%s/stat", base(dev));
	if (spin_read_file(path, buf, sizeof(buf)) < 0 ||
	    sscanf(buf, "%lld %lld %lld", &v[0], &v[1], &v[2]) != 3)
		return -1;
	return v[2];
}

/*
 * "MAJ:MIN" of a disk, from /sys/block/<name>/dev. A hidden disk (an NVMe
 * path under a multipath head) has no device number in sysfs: its number is
 * taken from the member line of the stack being tested
 * (/sys/block/<stack>/spin/p2p) that names the disk's PCI function.
 */
static int devt_of(const char *name, char *out, size_t len)
{
	char path[PATH_MAX], real[PATH_MAX], buf[4096], want[80];
	char *p;

	snprintf(path, sizeof(path), "/sys/block/%s/dev", name);
	if (!spin_read_file(path, out, len))
		return 0;
	snprintf(path, sizeof(path), "/sys/block/%s/device/device", name);
	if (!stack_disk[0] || !realpath(path, real))
		return -1;
	snprintf(path, sizeof(path), "/sys/block/%s/spin/p2p", stack_disk);
	if (spin_read_file(path, buf, sizeof(buf)))
		return -1;
	snprintf(want, sizeof(want), " %.64s ", strrchr(real, '/') + 1);
	p = strstr(buf, want);
	if (!p)
		return -1;
	*p = 0;
	p = strrchr(buf, '\n') ? strrchr(buf, '\n') + 1 : buf;
	if (strncmp(p, "member ", 7))
		return -1;
	snprintf(out, len, "%s", p + 7);
	return 0;
}

/* The dm-N name of the dm device DM_NAME. */
static int dm_disk(char *out, size_t len)
{
	char path[PATH_MAX], name[64];

	for (int i = 0; i < 64; i++) {
		snprintf(path, sizeof(path), "/sys/block/dm-%d/dm/name", i);
		if (spin_read_file(path, name, sizeof(name)))
			continue;
		if (!strcmp(name, DM_NAME)) {
			snprintf(out, len, "dm-%d", i);
			return 0;
		}
	}
	return -1;
}

/* Linear targets of 8 MiB alternating between the two disks: 512 MiB. */
static int table_linear(FILE *f)
{
	const long long seg = 8 * MiB / 512;

	for (long long i = 0; i < 64; i++)
		fprintf(f, "%lld %lld linear %s %lld\n", i * seg, seg, i % 2 ? dev1 : dev0,
			i / 2 * seg);
	return 0;
}

/* Two stripes of 64 KiB chunks over both disks. */
static int table_stripe(FILE *f)
{
	long long s = sectors(dev0) < sectors(dev1) ? sectors(dev0) : sectors(dev1);

	s = s / 128 * 128;
	if (s <= 0)
		return -1;
	fprintf(f, "0 %lld striped 2 128 %s 0 %s 0\n", 2 * s, dev0, dev1);
	return 0;
}

/* dm-crypt over 512 MiB of spin-nvme0 (mkfs.xfs wants 300 MiB). */
static int table_crypt(FILE *f)
{
	fprintf(f, "0 %lu crypt aes-xts-plain64 %s 0 %s 0\n", 512 * MiB / 512, KEY, dev0);
	return 0;
}

/* Is the PCI function of the disk @name on the root bus (outside the switch)? */
static int on_root_bus(const char *name)
{
	char path[PATH_MAX], real[PATH_MAX];
	int n = 0;

	/* /sys/block/<path disk>/device is the controller, its device the PCI function. */
	snprintf(path, sizeof(path), "/sys/block/%s/device/device", name);
	if (!realpath(path, real))
		return -1;
	/* /sys/devices/pci0000:00/0000:00:NN.F: one PCI function in the path. */
	for (char *save, *c = strtok_r(real, "/", &save); c; c = strtok_r(NULL, "/", &save))
		n += !strncmp(c, "0000:", 5);
	return n == 1;
}

/*
 * The path disks of the multipath head @head (the links in
 * /sys/block/<head>/multipath): the first two in @p0 and @p1, the one on the
 * root bus in @rb (each 64 bytes or NULL; "" if there is none). Returns the
 * number of paths, -1 if @head is not a multipath head.
 */
static int mpath_paths(const char *head, char *p0, char *p1, char *rb)
{
	char path[PATH_MAX];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/sys/block/%s/multipath", head);
	d = opendir(path);
	if (!d)
		return -1;
	p0[0] = 0;
	if (p1)
		p1[0] = 0;
	if (rb)
		rb[0] = 0;
	while ((e = readdir(d))) {
		char *slot = n == 0 ? p0 : n == 1 ? p1 : NULL;

		if (strncmp(e->d_name, "nvme", 4))
			continue;
		if (slot)
			snprintf(slot, 64, "%.63s", e->d_name);
		if (rb && on_root_bus(e->d_name) == 1)
			snprintf(rb, 64, "%.63s", e->d_name);
		n++;
	}
	closedir(d);
	return n;
}

/*
 * @out (64 bytes) gets the disk at the bottom of the rig's NVMe disk @dev:
 * QEMU's controllers report a multi-controller subsystem, so with
 * CONFIG_NVME_MULTIPATH each namespace is a head over one hidden path disk,
 * which is what a stack over it bottoms out in.
 */
static void bottom(const char *dev, char *out)
{
	char p0[64];

	snprintf(out, 64, "%s", mpath_paths(base(dev), p0, NULL, NULL) == 1 ? p0 : base(dev));
}

/* Waits up to 30 s until the head @head has @want paths; returns how many it has. */
static int mpath_wait(const char *head, int want)
{
	int n = -1;

	for (int t = 0; t < 300; t++) {
		n = mpath_paths(head, mem0, mem1, far);
		if (n == want)
			break;
		usleep(100 * 1000);
	}
	return n;
}

/* Builds the stack; fills @disk with its name (md0, dm-N, nvmeXnY). */
static int build(const struct stack *s, char *disk, size_t len)
{
	const char *second = s->far ? dev2 : dev1;
	char dev[64];
	FILE *f;

	if (s->mpath) {
		/* Made by the kernel at boot: the head with the subsystem's serial. */
		if (spin_nvme_blockdev(s->mpath, dev, sizeof(dev))) {
			ksft_print_msg("%s: no head disk with serial %s\n", s->name, s->mpath);
			return -1;
		}
		snprintf(disk, len, "%.31s", base(dev));
		snprintf(stack_disk, sizeof(stack_disk), "%s", disk);
		if (mpath_paths(disk, mem0, mem1, far) != 2) {
			ksft_print_msg("%s: %s does not have two paths\n", s->name, disk);
			return -1;
		}
		if (s->spread) {
			char pol[PATH_MAX];

			/* Alternate the paths, so that both carry P2P reads. */
			snprintf(pol, sizeof(pol), "/sys/block/%s/device/iopolicy", disk);
			if (spin_write_file(pol, "round-robin")) {
				ksft_print_msg("%s: %s: %s\n", s->name, pol, strerror(errno));
				return -1;
			}
		}
		return 0;
	}
	bottom(dev0, mem0);
	bottom(second, mem1);
	far[0] = 0;
	if (s->far)
		bottom(dev2, far);

	/* Old superblocks and filesystems must not be taken for anything. */
	if (sh("mdadm --zero-superblock %s %s %s >/dev/null 2>&1; true", dev0, dev1, dev2) ||
	    sh(ZERO_HEAD " && " ZERO_HEAD, dev0, second))
		return -1;
	if (s->level) {
		if (sh("%s --level=%s --raid-devices=2 %s%s %s %s </dev/null >/dev/null 2>&1",
		       "mdadm --create " MD_DEV " --run --assume-clean --metadata=1.2", s->level,
		       !strcmp(s->level, "10") ? "--layout=n2 " : "",
		       !strcmp(s->level, "0") ? "--chunk=512" : "", dev0, second))
			return -1;
		md_made = 1;
		snprintf(disk, len, "md0");
		snprintf(stack_disk, sizeof(stack_disk), "md0");
		return 0;
	}
	f = fopen(TABLE, "w");
	if (!f || s->table(f)) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	if (sh("DM_DISABLE_UDEV=1 dmsetup create --noudevsync " DM_NAME " " TABLE))
		return -1;
	dm_made = 1;
	if (dm_disk(disk, len))
		return -1;
	snprintf(stack_disk, sizeof(stack_disk), "%s", disk);
	return 0;
}

struct counters {
	long long p2p, pc, fb_queue, fb_distance, w_p2p, w_fb_queue, w_fb_distance, ioerr;
};

static void counters(const char *stat, struct counters *c)
{
	c->p2p = spin_stat_get(stat, "bytes_p2p");
	c->pc = spin_stat_get(stat, "bytes_pagecache");
	c->fb_queue = spin_stat_get(stat, "fallback_queue");
	c->fb_distance = spin_stat_get(stat, "fallback_distance");
	c->ioerr = spin_stat_get(stat, "fallback_io_error");
	c->w_p2p = spin_stat_get(stat, "write_bytes_p2p");
	c->w_fb_queue = spin_stat_get(stat, "write_fallback_queue");
	c->w_fb_distance = spin_stat_get(stat, "write_fallback_distance");
}

static void trace_clear(void)
{
	int fd = open(TRACE, O_WRONLY | O_TRUNC);

	if (fd >= 0)
		close(fd);
}

/*
 * Does the trace hold a spin_route line of disk @disk with reason=@reason and
 * member=@member?
 */
static int traced(const char *disk, const char *reason, const char *member)
{
	char line[512], d[64], r[64], m[64];
	FILE *f = fopen(TRACE, "r");
	int found = 0;

	if (!f)
		return 0;
	if (devt_of(disk, d + 4, sizeof(d) - 4))
		return 0;
	memcpy(d, "dev=", 4);
	strcat(d, " ");
	snprintf(r, sizeof(r), "reason=%s ", reason);
	snprintf(m, sizeof(m), "member=%s\n", member);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "spin_route:") && strstr(line, d) && strstr(line, r) &&
		    strstr(line, m))
			found = 1;
	fclose(f);
	return found;
}

/* Reads the file into GPU memory and checks it from the host side. */
static int read_check(int fd, char *why, size_t wl)
{
	ssize_t n = pread(fd, gmem, FILE_LEN, 0);

	if (n != (ssize_t)FILE_LEN) {
		snprintf(why, wl, "pread into GPU memory: %zd (%s)", n, strerror(errno));
		return -1;
	}
	return spin_gpu_check(gpu, gmem, FILE_LEN, 7, 0, why, wl);
}

/*
 * The kernel's verdict for the stack (/sys/block/<disk>/spin/p2p, what spin
 * check reports): the members under it, and for the stand-in GPU "ok",
 * "queue", or "distance" naming spin-nvme2.
 */
static void verdict(const struct stack *s, const char *disk)
{
	char path[PATH_MAX], buf[4096], want[128], far_devt[32] = "", m0[32] = "", m1[32] = "";
	const char *bdf = strrchr(gpu, '/') ? strrchr(gpu, '/') + 1 : gpu;
	int ok, members = 0;

	snprintf(path, sizeof(path), "/sys/block/%s/spin/p2p", disk);
	ok = !spin_read_file(path, buf, sizeof(buf));
	for (const char *p = buf; ok && (p = strstr(p, "member ")); p++)
		members++;
	devt_of(mem0, m0, sizeof(m0));
	devt_of(mem1, m1, sizeof(m1));
	if (s->expect == DISTANCE) {
		devt_of(far, far_devt, sizeof(far_devt));
		snprintf(want, sizeof(want), "provider %.32s distance %s", bdf, far_devt);
	} else {
		snprintf(want, sizeof(want), "provider %.32s %s", bdf,
			 s->expect == P2P ? "ok" : "queue");
	}
	/* Every device number found: strstr() of "" would match anything. */
	ok = ok && m0[0] && strstr(buf, want) && strstr(buf, m0) &&
	     (s->expect != DISTANCE || far_devt[0]);
	/* Two members, except dm-crypt over one disk. */
	ok = ok && (s->table == table_crypt ? members == 1 :
		    members == 2 && m1[0] && strstr(buf, m1));
	ksft_test_result(ok, "%s: /sys/block/%s/spin/p2p: \"%s\", %d members\n", s->name, disk,
			 want, members);
	if (!ok)
		ksft_print_msg("members wanted %s and %s; got:\n%s\n", m0, m1, buf);
}

/* Reads and writes on the filesystem at MNT on @disk; one result each. */
static void exercise(const struct stack *s, const char *fs, const char *disk)
{
	char stat[PATH_MAX], path[PATH_MAX], why[256] = "ok", far_devt[32] = "";
	struct counters a, b;
	long long m0a, m1a, m0b, m1b;
	int fd, ok;
	ssize_t bad;

	snprintf(stat, sizeof(stat), "/sys/block/%s/spin/stat", disk);
	snprintf(path, sizeof(path), MNT "/f");
	if (s->expect == DISTANCE)
		devt_of(far, far_devt, sizeof(far_devt));

	/* The file, written by the CPU, then read uncached into GPU memory. */
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	spin_pattern_fill(host, 0, FILE_LEN, 7);
	ok = fd >= 0 && !spin_write_uncached(fd, host, FILE_LEN, 0);
	if (!ok)
		snprintf(why, sizeof(why), "writing the file: %s", strerror(errno));
	trace_clear();
	counters(stat, &a);
	m0a = sectors_read(mem0);
	m1a = sectors_read(mem1);
	ok = ok && !read_check(fd, why, sizeof(why));
	counters(stat, &b);
	m0b = sectors_read(mem0);
	m1b = sectors_read(mem1);
	if (ok && b.ioerr != a.ioerr) {
		snprintf(why, sizeof(why), "fallback_io_error +%lld", b.ioerr - a.ioerr);
		ok = 0;
	}
	if (ok && s->expect == P2P && b.p2p - a.p2p < (long long)(FILE_LEN / 2)) {
		snprintf(why, sizeof(why), "bytes_p2p +%lld of %lu", b.p2p - a.p2p, FILE_LEN);
		ok = 0;
	}
	if (ok && s->expect != P2P && b.p2p != a.p2p) {
		snprintf(why, sizeof(why), "bytes_p2p +%lld, a fallback expected", b.p2p - a.p2p);
		ok = 0;
	}
	if (ok && s->expect == QUEUE && b.fb_queue <= a.fb_queue) {
		snprintf(why, sizeof(why), "fallback_queue not counted");
		ok = 0;
	}
	if (ok && s->expect == DISTANCE &&
	    (b.fb_distance <= a.fb_distance || !traced(disk, "distance", far_devt))) {
		snprintf(why, sizeof(why), "fallback_distance +%lld, trace %s member=%s",
			 b.fb_distance - a.fb_distance,
			 traced(disk, "distance", far_devt) ? "names" : "does not name", far_devt);
		ok = 0;
	}
	if (ok && s->spread && (m0b - m0a < 1024 || m1b - m1a < 1024)) {
		snprintf(why, sizeof(why), "members read %lld and %lld sectors", m0b - m0a,
			 m1b - m1a);
		ok = 0;
	}
	ksft_test_result(ok, "%s, %s: read into GPU memory (%s; %s)\n", s->name, fs,
			 s->expect == P2P ? "P2P" : s->expect == QUEUE ? "fallback queue" :
			 "fallback distance, member named", why);

	/* A write from GPU memory of an aligned range. */
	snprintf(why, sizeof(why), "ok");
	counters(stat, &a);
	ok = fd >= 0 && !spin_gpu_fill(gpu, gmem + WR_POS % 4096, WR_LEN, 8, WR_POS) &&
	     pwrite(fd, gmem + WR_POS % 4096, WR_LEN, WR_POS) == (ssize_t)WR_LEN && !fsync(fd);
	counters(stat, &b);
	if (!ok)
		snprintf(why, sizeof(why), "pwrite from GPU memory: %s", strerror(errno));
	if (ok && s->expect == P2P && b.w_p2p - a.w_p2p < (long long)(WR_LEN - 8192)) {
		snprintf(why, sizeof(why), "write_bytes_p2p +%lld", b.w_p2p - a.w_p2p);
		ok = 0;
	}
	if (ok && s->expect != P2P &&
	    (b.w_p2p != a.w_p2p || (s->expect == QUEUE ? b.w_fb_queue <= a.w_fb_queue :
			       b.w_fb_distance <= a.w_fb_distance))) {
		snprintf(why, sizeof(why), "write_bytes_p2p +%lld, fallback not counted",
			 b.w_p2p - a.w_p2p);
		ok = 0;
	}
	if (ok && spin_read_uncached(fd, host, FILE_LEN, 0) != (ssize_t)FILE_LEN) {
		snprintf(why, sizeof(why), "CPU read of the uncached file: %s", strerror(errno));
		ok = 0;
	}
	if (ok) {
		/* Pattern 7 around the write, pattern 8 inside it. */
		bad = spin_pattern_check(host, 0, WR_POS, 7);
		if (bad < 0)
			bad = spin_pattern_check(host + WR_POS, WR_POS, WR_LEN, 8);
		if (bad < 0)
			bad = spin_pattern_check(host + WR_POS + WR_LEN, WR_POS + WR_LEN,
						 FILE_LEN - WR_POS - WR_LEN, 7);
		if (bad >= 0) {
			snprintf(why, sizeof(why), "CPU read of the uncached file: a byte wrong");
			ok = 0;
		}
	}
	if (ok && (spin_uncache(fd) || pread(fd, gmem + BACK, WR_LEN, WR_POS) != (ssize_t)WR_LEN ||
		   spin_gpu_check(gpu, gmem + BACK, WR_LEN, 8, WR_POS, why, sizeof(why))))
		ok = 0;
	ksft_test_result(ok, "%s, %s: write from GPU memory, aligned (%s; %s)\n", s->name,
			 fs, s->expect == P2P ? "P2P, one direct write" : "fallback", why);
	if (fd >= 0)
		close(fd);
}

/* Fails a RAID-1 leg while a reader keeps reading the file into GPU memory. */
static void raid1_fail(void)
{
	char disk[32], why[256] = "ok";
	int fd, ok = 1, reads = 0, status;
	pid_t child;

	teardown();
	{
		const struct stack r1 = { "md RAID-1", NULL, "1", 0, 0, NULL, P2P };

		if (build(&r1, disk, sizeof(disk)) ||
		    sh("mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=1 " MD_DEV) ||
		    mount(MD_DEV, MNT, "ext4", 0, EXT4_OPTS)) {
			ksft_test_result_fail("md RAID-1: a leg fails during reads: setup\n");
			return;
		}
	}
	mounted = 1;
	fd = open(MNT "/f", O_RDWR | O_CREAT | O_TRUNC, 0644);
	spin_pattern_fill(host, 0, FILE_LEN, 7);
	if (fd < 0 || pwrite(fd, host, FILE_LEN, 0) != (ssize_t)FILE_LEN || fsync(fd)) {
		ksft_test_result_fail("md RAID-1: a leg fails during reads: writing the file\n");
		return;
	}
	child = fork();
	if (child == 0) {
		usleep(300 * 1000);
		_exit(sh("mdadm " MD_DEV " --fail %s >/dev/null 2>&1", dev1) ? 1 : 0);
	}
	/* Read while the child fails the leg, then three more times after. */
	for (int after = 0; ok && after < 3; reads++) {
		if (spin_uncache(fd) || read_check(fd, why, sizeof(why)))
			ok = 0;
		if (child > 0 && waitpid(child, &status, WNOHANG) == child) {
			child = 0;
			if (!WIFEXITED(status) || WEXITSTATUS(status)) {
				snprintf(why, sizeof(why), "mdadm --fail failed");
				ok = 0;
			}
		}
		if (child <= 0)
			after++;
	}
	if (child > 0)
		waitpid(child, &status, 0);
	ksft_test_result(ok, "md RAID-1: leg failed during %d reads: bytes right (%s)\n", reads,
			 why);
	close(fd);
	teardown();
}

static const struct {
	const char *type, *mkfs, *opts;
} fss[] = {
	{ "ext4", "mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=1", EXT4_OPTS },
	{ "xfs", "mkfs.xfs -q -f -K", NULL },
};

/* Results of run_stack() for one stack. */
#define STACK_RESULTS (ARRAY_SIZE(fss) * 2 + 1)

/*
 * Builds stack @s (index @i of the md and dm stacks, -1 for a multipath
 * head), checks its verdict and exercises ext4 and xfs on it.
 */
static void run_stack(int i, const struct stack *s)
{
	char disk[32], dev[64];

	if (build(s, disk, sizeof(disk))) {
		for (size_t j = 0; j < STACK_RESULTS + (i == 1); j++)
			ksft_test_result_fail("%s: building the stack\n", s->name);
		teardown();
		return;
	}
	snprintf(dev, sizeof(dev), "/dev/%s", disk);
	ksft_print_msg("%s: %s\n", s->name, dev);
	verdict(s, disk);
	/*
	 * spin's state goes with the disk: the first md0 gets a cost
	 * parameter of its own, the next md0 (same device number) must
	 * start with the default and zero counters.
	 */
	if (i == 0 && spin_write_file("/sys/block/md0/spin/s_cutoff", "4096"))
		ksft_print_msg("setting md0's s_cutoff: %s\n", strerror(errno));
	if (i == 1) {
		long long sc = spin_read_ll("/sys/block/md0/spin/s_cutoff");
		long long rq = spin_stat_get("/sys/block/md0/spin/stat", "requests");

		ksft_test_result(sc == 131072 && rq == 0,
				 "a new md0 starts fresh: s_cutoff %lld (want 131072), %s %lld\n",
				 sc, "requests", rq);
	}
	for (size_t j = 0; j < ARRAY_SIZE(fss); j++) {
		if (sh("%s %s >/dev/null 2>&1", fss[j].mkfs, dev) ||
		    mount(dev, MNT, fss[j].type, 0, fss[j].opts)) {
			for (int k = 0; k < 2; k++)
				ksft_test_result_fail("%s, %s: mkfs and mount\n", s->name,
						      fss[j].type);
			continue;
		}
		mounted = 1;
		exercise(s, fss[j].type, disk);
		if (umount(MNT))
			ksft_print_msg("umount: %s\n", strerror(errno));
		mounted = 0;
	}
	teardown();
}

/*
 * Reads the file left on the multipath head @head (xfs, from run_stack())
 * into GPU memory and checks the bytes and the path taken: P2P with
 * @want_p2p, else fallback "distance" naming the path in far.
 */
static int mpath_read(const char *head, int want_p2p, char *why, size_t wl)
{
	char stat[PATH_MAX], dev[64], far_devt[32] = "";
	struct counters a, b;
	int fd, ok;

	snprintf(stat, sizeof(stat), "/sys/block/%s/spin/stat", head);
	snprintf(dev, sizeof(dev), "/dev/%s", head);
	if (mount(dev, MNT, "xfs", 0, NULL)) {
		snprintf(why, wl, "mount: %s", strerror(errno));
		return -1;
	}
	mounted = 1;
	fd = open(MNT "/f", O_RDONLY);
	trace_clear();
	counters(stat, &a);
	/* exercise() left pattern 7 around its write, pattern 8 inside it. */
	ok = fd >= 0 && !spin_uncache(fd) && pread(fd, gmem, FILE_LEN, 0) == (ssize_t)FILE_LEN;
	if (fd >= 0 && !ok)
		snprintf(why, wl, "pread into GPU memory: %s", strerror(errno));
	ok = ok && !spin_gpu_check(gpu, gmem, WR_POS, 7, 0, why, wl) &&
	     !spin_gpu_check(gpu, gmem + WR_POS, WR_LEN, 8, WR_POS, why, wl) &&
	     !spin_gpu_check(gpu, gmem + WR_POS + WR_LEN, FILE_LEN - WR_POS - WR_LEN, 7,
			     WR_POS + WR_LEN, why, wl);
	counters(stat, &b);
	if (fd < 0)
		snprintf(why, wl, "open: %s", strerror(errno));
	if (!want_p2p)
		devt_of(far, far_devt, sizeof(far_devt));
	if (ok && want_p2p && b.p2p - a.p2p < (long long)(FILE_LEN / 2)) {
		snprintf(why, wl, "bytes_p2p +%lld of %lu", b.p2p - a.p2p, FILE_LEN);
		ok = 0;
	}
	if (ok && !want_p2p && (b.p2p != a.p2p || b.fb_distance <= a.fb_distance ||
				!traced(head, "distance", far_devt))) {
		snprintf(why, wl, "bytes_p2p +%lld, fallback_distance +%lld, member=%s %s",
			 b.p2p - a.p2p, b.fb_distance - a.fb_distance, far_devt,
			 traced(head, "distance", far_devt) ? "traced" : "not traced");
		ok = 0;
	}
	if (fd >= 0)
		close(fd);
	teardown();
	return ok ? 0 : -1;
}

/*
 * The far head's root-bus path goes away (its controller is removed from
 * the PCI bus) and comes back (a rescan): the verdict and the path of reads
 * must follow.
 */
static void mpath_change(const char *serial)
{
	char dev[64], head[64], pci[PATH_MAX], path[PATH_MAX + 16], why[256] = "ok";
	int ok, n;

	if (spin_nvme_blockdev(serial, dev, sizeof(dev)) ||
	    mpath_paths(base(dev), mem0, mem1, far) != 2 || !far[0]) {
		ksft_test_result_fail("multipath: a path removed: no head with a far path\n");
		ksft_test_result_fail("multipath: the path back: no head with a far path\n");
		return;
	}
	snprintf(head, sizeof(head), "%s", base(dev));
	snprintf(path, sizeof(path), "/sys/block/%s/device/device", far);
	ok = !!realpath(path, pci);
	snprintf(path, sizeof(path), "%s/remove", pci);
	ok = ok && !spin_write_file(path, "1");
	n = mpath_wait(head, 1);
	if (!ok || n != 1)
		snprintf(why, sizeof(why), "removing %.200s: %d paths left", pci, n);
	else if (mpath_read(head, 1, why, sizeof(why)))
		ok = 0;
	ksft_test_result(ok && n == 1,
			 "multipath: %s's root-bus path removed: P2P over the path left (%s)\n",
			 head, why);

	snprintf(why, sizeof(why), "ok");
	ok = !spin_write_file("/sys/bus/pci/rescan", "1");
	n = mpath_wait(head, 2);
	if (!ok || n != 2 || !far[0]) {
		snprintf(why, sizeof(why), "rescan: %d paths, far path %s", n, far[0] ? far : "-");
		ok = 0;
	} else if (mpath_read(head, 0, why, sizeof(why))) {
		ok = 0;
	}
	ksft_test_result(ok, "multipath: %s's root-bus path back: fallback distance, %s (%s)\n",
			 head, far, why);
}

/*
 * The race's dm table, in @file: 8 MiB of each rig disk, then 8 MiB of each
 * multipath head (@near, @far: /dev paths), or with @near NULL an error
 * target in their place, which lets go of the heads.
 */
static int race_table(const char *file, const char *near, const char *far_head)
{
	const long long seg = 8 * MiB / 512;
	static const char *const devs[] = { dev0, dev1, dev2 };
	FILE *f = fopen(file, "w");

	if (!f)
		return -1;
	for (int i = 0; i < 3; i++)
		fprintf(f, "%lld %lld linear %s 0\n", i * seg, seg, devs[i]);
	if (near)
		fprintf(f, "%lld %lld linear %s 0\n%lld %lld linear %s 0\n", 3 * seg, seg, near,
			4 * seg, seg, far_head);
	else
		fprintf(f, "%lld %lld error\n", 3 * seg, 2 * seg);
	return fclose(f) ? -1 : 0;
}

/* Loads @table into DM_NAME and resumes it: the old table's devices are let go. */
static int dm_load(const char *table)
{
	if (sh("DM_DISABLE_UDEV=1 dmsetup reload --noudevsync " DM_NAME " %s", table))
		return -1;
	return sh("DM_DISABLE_UDEV=1 dmsetup resume --noudevsync " DM_NAME);
}

/*
 * Waits up to 30 s for the multipath head of @serial with two paths: @dev
 * (64 bytes) gets its /dev path, @pci the sysfs directories of the PCI
 * functions of its two controllers.
 */
static int race_head(const char *serial, char *dev, char pci[2][PATH_MAX])
{
	char p[2][64], path[PATH_MAX];

	for (int t = 0; t < 300; t++, usleep(100 * 1000)) {
		if (spin_nvme_blockdev(serial, dev, 64) ||
		    mpath_paths(base(dev), p[0], p[1], NULL) != 2)
			continue;
		for (int i = 0; i < 2; i++) {
			snprintf(path, sizeof(path), "/sys/block/%s/device/device", p[i]);
			if (!realpath(path, pci[i]))
				return -1;
		}
		return 0;
	}
	return -1;
}

/* What one reader of mpath_race() saw, in memory shared with the parent. */
struct race_reads {
	long reads, reports, errnos, bad;
	char why[160];
};

/*
 * Reads @path (a spin/p2p file) in a loop until @stop (the read end of a
 * non-blocking pipe) reaches end of file or @end (spin_now()) passes. A read
 * must give a report, whose first line is "queue 0" or "queue 1", or fail
 * with a clean errno (the disk went: ENODEV, ENXIO, ENOENT). The reader
 * runs at the lowest priority: dmsetup, woken on the same CPU (when a reader
 * lets go of the lock of the holder links, say), preempts it halfway through
 * a walk and can tear down what the walk is about to look at.
 */
static void race_reader(const char *path, int stop, struct race_reads *r, double end)
{
	char buf[4096], c;

	setpriority(PRIO_PROCESS, 0, 19);
	while (spin_now() < end && read(stop, &c, 1) < 0 && errno == EAGAIN) {
		int fd = open(path, O_RDONLY);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		int err = errno;

		if (fd >= 0)
			close(fd);
		r->reads++;
		if (n > 0) {
			buf[n] = 0;
			if (!strncmp(buf, "queue 0\n", 8) || !strncmp(buf, "queue 1\n", 8)) {
				r->reports++;
				continue;
			}
		} else if (n < 0 && (err == ENODEV || err == ENXIO || err == ENOENT)) {
			r->errnos++;
			continue;
		}
		if (!r->bad++)
			snprintf(r->why, sizeof(r->why), "read %zd, %s: \"%.60s\"", n,
				 n < 0 ? strerror(err) : "no errno", n > 0 ? buf : "");
	}
	_exit(0);
}

/* BUG (KASAN's reports among them) and WARNING lines in the kernel log. */
static int log_bad(void)
{
	return spin_log_count("BUG:") + spin_log_count("WARNING:");
}

/*
 * Tears stacks down under the walk of /sys/block/<dm>/spin/p2p: see the
 * comment at the top. One result.
 */
static void mpath_race(void)
{
	char near[64], far_head[64], pci[4][PATH_MAX], disk[32], p2p[PATH_MAX], path[PATH_MAX + 16];
	char why[256] = "ok";
	pid_t readers[RACE_READERS] = { 0 };
	double start = spin_now();
	int stop[2] = { -1, -1 }, ok, rounds = 0, bad0 = log_bad(), bad1;
	long reads = 0, reports = 0, errnos = 0, bad = 0;
	struct race_reads *r;

	teardown();
	r = mmap(NULL, RACE_READERS * sizeof(*r), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ok = r != MAP_FAILED;
	if (ok && (race_head(SPIN_MPNEAR_SERIAL, near, pci) ||
		   race_head(SPIN_MPFAR_SERIAL, far_head, pci + 2))) {
		snprintf(why, sizeof(why), "no multipath heads with two paths each");
		ok = 0;
	}
	ok = ok && !race_table(RACE_TABLE_HEADS, near, far_head) &&
	     !race_table(RACE_TABLE_NONE, NULL, NULL) &&
	     !sh("DM_DISABLE_UDEV=1 dmsetup create --noudevsync " DM_NAME " " RACE_TABLE_HEADS);
	if (ok)
		dm_made = 1;
	ok = ok && !dm_disk(disk, sizeof(disk)) && !pipe2(stop, O_NONBLOCK);
	if (!ok && !strcmp(why, "ok"))
		snprintf(why, sizeof(why), "setup: %s", strerror(errno));
	snprintf(p2p, sizeof(p2p), "/sys/block/%s/spin/p2p", ok ? disk : "-");
	for (int i = 0; ok && i < RACE_READERS; i++) {
		readers[i] = fork();
		if (readers[i] == 0) {
			close(stop[1]);
			race_reader(p2p, stop[0], &r[i], start + RACE_SECS + 120);
		}
		ok = readers[i] > 0;
	}

	for (; ok && rounds < RACE_ROUNDS && spin_now() - start < RACE_SECS; rounds++) {
		/* Holder links come and go while the heads are there. */
		for (int k = 0; ok && k < RACE_FLIPS; k++)
			ok = !dm_load(RACE_TABLE_NONE) && !dm_load(RACE_TABLE_HEADS);
		/* Every path goes: the heads' disks go, the table holds the heads open. */
		for (int i = 0; ok && i < 4; i++) {
			snprintf(path, sizeof(path), "%.*s/remove", PATH_MAX - 1, pci[i]);
			ok = !spin_write_file(path, "1");
		}
		if (ok && (!spin_nvme_blockdev(SPIN_MPNEAR_SERIAL, path, 64) ||
			   !spin_nvme_blockdev(SPIN_MPFAR_SERIAL, path, 64))) {
			snprintf(why, sizeof(why), "a head left with all its paths removed");
			ok = 0;
		}
		/* The table lets go of them: each head is freed while the readers walk. */
		ok = ok && !dm_load(RACE_TABLE_NONE);
		if (!ok && !strcmp(why, "ok"))
			snprintf(why, sizeof(why), "round %d: tearing down failed", rounds + 1);
		/*
		 * A rescan brings the heads back, after a failed step too (the
		 * tests that follow find the rig whole), and the table takes
		 * them again.
		 */
		if (spin_write_file("/sys/bus/pci/rescan", "1") && ok) {
			snprintf(why, sizeof(why), "round %d: rescan failed", rounds + 1);
			ok = 0;
		}
		if (race_head(SPIN_MPNEAR_SERIAL, near, pci) ||
		    race_head(SPIN_MPFAR_SERIAL, far_head, pci + 2)) {
			snprintf(why, sizeof(why), "round %d: the heads did not come back",
				 rounds + 1);
			ok = 0;
		}
		ok = ok && !race_table(RACE_TABLE_HEADS, near, far_head) &&
		     !dm_load(RACE_TABLE_HEADS);
		if (!ok && !strcmp(why, "ok"))
			snprintf(why, sizeof(why), "round %d: loading the table failed",
				 rounds + 1);
	}

	if (stop[1] >= 0)
		close(stop[1]);
	for (int i = 0; i < RACE_READERS; i++) {
		int status;

		if (readers[i] <= 0)
			continue;
		if (waitpid(readers[i], &status, 0) != readers[i] || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			r[i].bad++;
		reads += r[i].reads;
		reports += r[i].reports;
		errnos += r[i].errnos;
		if (r[i].bad && !bad)
			snprintf(why, sizeof(why), "reader %d: %s", i, r[i].why[0] ? r[i].why :
				 "did not exit cleanly");
		bad += r[i].bad;
	}
	if (stop[0] >= 0)
		close(stop[0]);
	bad1 = log_bad();
	if (ok && bad1 > bad0) {
		snprintf(why, sizeof(why), "the kernel log has %d new BUG or WARNING lines",
			 bad1 - bad0);
		ok = 0;
	}
	if (ok && rounds < 1) {
		snprintf(why, sizeof(why), "no round ran");
		ok = 0;
	}
	ksft_print_msg("%s: %ld reads: %ld reports, %ld clean errors, %ld bad\n", p2p, reads,
		       reports, errnos, bad);
	ksft_test_result(ok && !bad && reads > 0,
			 "multipath: heads freed under a dm table being read, %d rounds (%s)\n",
			 rounds, why);
	if (r != MAP_FAILED)
		munmap(r, RACE_READERS * sizeof(*r));
	teardown();
}

/* Writes a one-target table, SWAP_DISK of @dev from its start, to @file. */
static int swap_table(const char *file, const char *dev)
{
	FILE *f = fopen(file, "w");

	if (!f)
		return -1;
	fprintf(f, "0 %lu linear %s 0\n", SWAP_DISK / 512, dev);
	return fclose(f) ? -1 : 0;
}

/* The scheduler state of process @pid ('R', 'S', 'D', ...); 0 if unknown. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (spin_read_file(path, buf, sizeof(buf)))
		return 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/*
 * A reader of table_swap(), in a child: reads SWAP_LEN bytes at offset 0
 * of @path, opened with @flags, into @dst. Exits 0 if it read them all,
 * with the errno if the read failed, 255 otherwise.
 */
static void swap_reader(const char *path, int flags, uint8_t *dst)
{
	int fd = open(path, O_RDONLY | flags);
	ssize_t n = fd < 0 ? -1 : pread(fd, dst, SWAP_LEN, 0);

	_exit(n == (ssize_t)SWAP_LEN ? 0 : n < 0 && errno > 0 && errno < 255 ? errno : 255);
}

/*
 * Waits for child @pid, up to 60 s before it is killed; returns its exit
 * status, -1 if it did not exit by itself.
 */
static int swap_reap(pid_t pid)
{
	int status = 0;
	pid_t r = 0;

	for (int t = 0; t < 600 && !(r = waitpid(pid, &status, WNOHANG)); t++)
		usleep(100 * 1000);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return -1;
	}
	return r == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The first line of /sys/block/<disk>/spin/p2p ("queue 0" or "queue 1") in @out. */
static void queue_line(const char *disk, char *out, size_t len)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/block/%s/spin/p2p", disk);
	if (spin_read_file(path, out, len)) {
		snprintf(out, len, "-");
		return;
	}
	out[strcspn(out, "\n")] = 0;
}

/*
 * Swaps a dm table that accepts P2P pages for one that does not under
 * reads deferred while the device is suspended: see the comment at the
 * top. One result.
 */
static void table_swap(void)
{
	char disk[32] = "-", dev[64], vblk[64], stat[PATH_MAX], why[256] = "ok";
	char q0[32] = "-", q1[32] = "-";
	pid_t kid[2] = { -1, -1 };	/* the O_DIRECT read, the routed read */
	int st[2] = { -1, -1 }, ok, suspended = 0, blocked = 0, fd = -1, bad0 = log_bad(), bad1;
	struct counters a = { 0 }, b = { 0 };

	teardown();
	ok = !spin_virtio_blockdev(SPIN_VBLK_SERIAL, vblk, sizeof(vblk)) &&
	     sectors(vblk) >= (long long)(SWAP_DISK / 512) &&
	     !swap_table(SWAP_TABLE_NVME, dev0) && !swap_table(SWAP_TABLE_VBLK, vblk) &&
	     !sh("DM_DISABLE_UDEV=1 dmsetup create --noudevsync " DM_NAME " " SWAP_TABLE_NVME);
	if (ok)
		dm_made = 1;
	ok = ok && !dm_disk(disk, sizeof(disk));
	snprintf(dev, sizeof(dev), "/dev/%s", disk);
	snprintf(stat, sizeof(stat), "/sys/block/%s/spin/stat", disk);
	snprintf(stack_disk, sizeof(stack_disk), "%s", disk);
	ok = ok && !sh("%s -b 4096 %s >/dev/null 2>&1", fss[0].mkfs, dev) &&
	     !mount(dev, MNT, "ext4", MS_NOATIME, EXT4_OPTS);
	if (ok)
		mounted = 1;
	fd = ok ? open(MNT "/f", O_RDWR | O_CREAT | O_TRUNC, 0644) : -1;
	spin_pattern_fill(host, 0, SWAP_LEN, 10);
	ok = fd >= 0 && !spin_write_uncached(fd, host, SWAP_LEN, 0) && !spin_uncache(fd);
	if (!ok)
		snprintf(why, sizeof(why), "setup: %s", strerror(errno));
	queue_line(disk, q0, sizeof(q0));
	if (ok && strcmp(q0, "queue 1")) {
		snprintf(why, sizeof(why), "the table over spin-nvme0: \"%s\", want \"queue 1\"",
			 q0);
		ok = 0;
	}
	/* The whole read is one P2P leg. */
	memset(gmem, 0, SWAP_LEN);
	ok = ok && !spin_sysfs_set(SPIN_SYS "/mode", "p2p");
	counters(stat, &a);

	/* New bios wait in dm; the filesystem is frozen, so its sectors hold still. */
	suspended = ok && !sh("DM_DISABLE_UDEV=1 dmsetup suspend --noudevsync " DM_NAME);
	ok = suspended &&
	     !sh("dd if=%s of=%s bs=1M count=%lu iflag=direct oflag=direct conv=fsync 2>/dev/null",
		 dev0, vblk, SWAP_DISK / MiB);
	if (!ok && !strcmp(why, "ok"))
		snprintf(why, sizeof(why), "suspending %s or copying it to spin-vblk", dev);
	for (int i = 0; ok && i < 2; i++) {
		kid[i] = fork();
		if (kid[i] == 0 && i == 0)
			swap_reader(dev, O_DIRECT, gmem + BACK);
		else if (kid[i] == 0)
			swap_reader(MNT "/f", 0, gmem);
		ok = kid[i] > 0;
	}
	/* Both blocked on the suspended device: five looks in a row, 100 ms apart. */
	for (int t = 0, run = 0; ok && !blocked && t < 200; t++) {
		usleep(100 * 1000);
		run = proc_state(kid[0]) == 'D' && proc_state(kid[1]) == 'D' ? run + 1 : 0;
		blocked = run >= 5;
	}
	if (ok && !blocked) {
		snprintf(why, sizeof(why), "the readers did not block on the suspended device");
		ok = 0;
	}
	/* The table over spin-vblk; resumed after a failed step too. */
	if (ok && dm_load(SWAP_TABLE_VBLK)) {
		snprintf(why, sizeof(why), "loading the table over spin-vblk and resuming");
		ok = 0;
	}
	if (suspended && !ok)
		sh("DM_DISABLE_UDEV=1 dmsetup resume --noudevsync " DM_NAME);
	for (int i = 0; i < 2; i++)
		st[i] = kid[i] > 0 ? swap_reap(kid[i]) : -1;
	counters(stat, &b);
	queue_line(disk, q1, sizeof(q1));
	spin_sysfs_set(SPIN_SYS "/mode", "auto");

	if (ok && st[0] != EIO) {
		snprintf(why, sizeof(why), "the O_DIRECT read: %s, want EIO%s",
			 st[0] == 0 ? "all bytes" : st[0] > 0 ? strerror(st[0]) : "no exit",
			 st[0] == 0 ? " (its GPU pages reached spin-vblk)" : "");
		ok = 0;
	}
	if (ok && st[1] != 0) {
		snprintf(why, sizeof(why), "the routed read: %s",
			 st[1] > 0 && st[1] < 255 ? strerror(st[1]) : "short or no exit");
		ok = 0;
	}
	if (ok && spin_gpu_check(gpu, gmem, SWAP_LEN, 10, 0, why, sizeof(why)))
		ok = 0;
	if (ok && b.ioerr - a.ioerr < 1) {
		snprintf(why, sizeof(why), "fallback_io_error +%lld: the P2P leg was not refused",
			 b.ioerr - a.ioerr);
		ok = 0;
	}
	if (ok && strcmp(q1, "queue 0")) {
		snprintf(why, sizeof(why), "the table over spin-vblk: \"%s\", want \"queue 0\"",
			 q1);
		ok = 0;
	}
	bad1 = log_bad();
	if (ok && bad1 > bad0) {
		snprintf(why, sizeof(why), "the kernel log has %d new BUG or WARNING lines",
			 bad1 - bad0);
		ok = 0;
	}
	ksft_test_result(ok,
			 "dm table swapped from spin-nvme0 to spin-vblk under deferred reads: O_DIRECT EIO, routed read redone (fallback_io_error +%lld; %s)\n",
			 b.ioerr - a.ioerr, why);
	if (fd >= 0)
		close(fd);
	teardown();
}

int main(void)
{
	static const struct stack stacks[] = {
		{ "md RAID-0 (nvme0 + nvme1)", NULL, "0", 0, 1, NULL, P2P },
		{ "md RAID-1 (nvme0 + nvme1)", NULL, "1", 0, 0, NULL, P2P },
		{ "md RAID-10 (nvme0 + nvme1)", NULL, "10", 0, 0, NULL, P2P },
		{ "dm-stripe (nvme0 + nvme1)", NULL, NULL, 0, 1, table_stripe, P2P },
		{ "dm-linear (alternating nvme0, nvme1)", NULL, NULL, 0, 0, table_linear, P2P },
		{ "dm-crypt (nvme0)", NULL, NULL, 0, 0, table_crypt, QUEUE },
		/* Last of the md arrays: reuses md0's device number. */
		{ "md RAID-0 (nvme0 + nvme2)", NULL, "0", 1, 0, NULL, DISTANCE },
	};
	static const struct stack mpaths[] = {
		{ "NVMe multipath (both paths behind the switch)", SPIN_MPNEAR_SERIAL, NULL, 0, 1,
		  NULL, P2P },
		{ "NVMe multipath (a path on the root bus)", SPIN_MPFAR_SERIAL, NULL, 1, 0, NULL,
		  DISTANCE },
	};
	long long entries;
	int heap, buf, ret;

	main_pid = getpid();
	ksft_print_header();
	ksft_set_plan(ARRAY_SIZE(stacks) * STACK_RESULTS + 4 + ARRAY_SIZE(mpaths) * STACK_RESULTS +
		      3);
	SPIN_GPU_SETUP_OR_EXIT(gpu, GPU_LEN, &gmem, &heap, &buf, FILE_LEN, &host);
	if (spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev0, sizeof(dev0)) ||
	    spin_nvme_blockdev(SPIN_NVME1_SERIAL, dev1, sizeof(dev1)) ||
	    spin_nvme_blockdev(SPIN_NVME2_SERIAL, dev2, sizeof(dev2)))
		ksft_exit_fail_msg("the rig's NVMe disks not found\n");
	if (system("mdadm --version >/dev/null 2>&1") ||
	    system("dmsetup --version >/dev/null 2>&1"))
		ksft_exit_fail_msg("mdadm and dmsetup are needed (the rig's initramfs has them)\n");
	ret = spin_trace_event("spin/spin_route", 1);
	if (ret)
		ksft_exit_fail_msg("trace event spin_route: %s\n", strerror(-ret));
	mkdir("/run", 0755);
	mkdir(MNT, 0755);
	atexit(cleanup);
	entries = spin_stat_get(SPIN_SYS "/stat", "disk_entries");

	for (size_t i = 0; i < ARRAY_SIZE(stacks); i++)
		run_stack(i, &stacks[i]);
	raid1_fail();
	table_swap();
	{
		long long n = -1;

		/* md releases a stopped array's disk asynchronously: wait up to 20 s. */
		for (int t = 0; t < 200; t++) {
			n = spin_stat_get(SPIN_SYS "/stat", "disk_entries");
			if (n >= 0 && n <= entries)
				break;
			usleep(100 * 1000);
		}
		ksft_test_result(n >= 0 && n <= entries,
				 "spin's disk table is back to %lld entries after the stacks went (%lld)\n",
				 entries, n);
	}
	/* The multipath heads stay: after the table's check. */
	for (size_t i = 0; i < ARRAY_SIZE(mpaths); i++)
		run_stack(-1, &mpaths[i]);
	mpath_change(SPIN_MPFAR_SERIAL);
	/* Removes every path of both heads: last. */
	mpath_race();
	munmap(gmem, GPU_LEN);
	close(buf);
	close(heap);
	ksft_finished();
}
