// SPDX-License-Identifier: GPL-2.0
/*
 * The user tool (tools/spin, /usr/bin/spin in the guest):
 *  - /sys/block/<disk>/spin/p2p, the kernel's verdict the tool reports: "ok"
 *    for spin-nvme0, "distance" naming spin-nvme2 itself, "queue" for
 *    spin-vblk;
 *  - spin check: the stand-in GPU listed as a provider with its heap; the
 *    three disks with the right verdicts and reasons in words; files on ext4
 *    on spin-nvme0 (P2P possible, exit 0), on tmpfs (no_bdev), on ext4 on
 *    spin-nvme2 (distance, with the PCI route) and on xfs on spin-vblk
 *    (queue), alone and together (exit 1), in text and --json; the good file
 *    in the modes off and pagecache (exit 1, the mode named);
 *  - spin stat: totals, and with -i/-c the rates of a routed read's bytes on
 *    the right disk;
 *  - spin calibrate --apply --png on the file on spin-nvme0: the fit and the
 *    overlap of legs in flight together printed (and the p2p_overlap it
 *    gives), a PNG written, the printed parameters in sysfs, p2p_overlap
 *    included (restored afterwards);
 *    refused with the reason on tmpfs, spin-nvme2, spin-vblk and a small file;
 *  - bad arguments: one line on stderr, exit status 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define MiB (1024UL * 1024)
#define TOOL "/usr/bin/spin"
#define OUT_MAX (64 * 1024)
#define FOUR "/mnt/tool-near/f /mnt/tool-tmpfs/f /mnt/tool-far/f /mnt/tool-vblk/f"

static char gpu[PATH_MAX];
static const char *gpu_bdf;
static char out[OUT_MAX], err[4096];

/* Runs @cmd; stdout into out, stderr into err; returns the exit status or -1. */
static int run(const char *cmd)
{
	char full[1024];
	FILE *f;
	size_t n;
	int st;

	snprintf(full, sizeof(full), "%s 2>/tmp/tool_err", cmd);
	f = popen(full, "r");
	if (!f)
		return -1;
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	st = pclose(f);
	err[0] = 0;
	f = fopen("/tmp/tool_err", "r");
	if (f) {
		n = fread(err, 1, sizeof(err) - 1, f);
		err[n] = 0;
		fclose(f);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The line of out that contains @a (and @b, if given), or NULL. */
static const char *line_with(const char *a, const char *b)
{
	static char line[1024];
	const char *p = out;

	while (*p) {
		const char *e = strchr(p, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) ? n : sizeof(line) - 1),
			 p);
		if (strstr(line, a) && (!b || strstr(line, b)))
			return line;
		p += n + (e ? 1 : 0);
	}
	return NULL;
}

/*
 * Does the block of disk @name in spin check's text output (its line "  @name (" and the
 * more deeply indented lines under it) contain @what?
 */
static int block_has(const char *name, const char *what)
{
	char head[64], blk[8192];
	const char *p, *e;

	snprintf(head, sizeof(head), "\n  %s (", name);
	p = strstr(out, head);
	if (!p)
		return 0;
	for (e = strchr(p + 1, '\n'); e && !strncmp(e, "\n    ", 5); e = strchr(e + 1, '\n'))
		;
	snprintf(blk, sizeof(blk), "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
	return !!strstr(blk, what);
}

/* The JSON object of out that holds "path": "@path", up to the next "path" key. */
static int json_path(const char *path, char *obj, size_t len)
{
	char key[PATH_MAX + 16];
	const char *p, *e;

	snprintf(key, sizeof(key), "\"path\": \"%s\"", path);
	p = strstr(out, key);
	if (!p)
		return -1;
	e = strstr(p + 1, "\"path\": ");
	snprintf(obj, len, "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
	return 0;
}

struct disk {
	const char *what, *serial, *mkfs, *type, *dir;
	int virtio;
	char dev[64], name[32];
};

static int disk_setup(struct disk *d)
{
	char cmd[256];

	if (d->virtio ? spin_virtio_blockdev(d->serial, d->dev, sizeof(d->dev)) :
			spin_nvme_blockdev(d->serial, d->dev, sizeof(d->dev)))
		return -1;
	snprintf(d->name, sizeof(d->name), "%s", strrchr(d->dev, '/') + 1);
	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null 2>&1", d->mkfs, d->dev);
	mkdir(d->dir, 0755);
	if (system(cmd) || mount(d->dev, d->dir, d->type, 0, NULL))
		return -1;
	return 0;
}

static int make_file(const char *path, size_t len)
{
	static uint8_t buf[1 << 20];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return -1;
	for (size_t off = 0; off < len; off += sizeof(buf)) {
		spin_pattern_fill(buf, off, sizeof(buf), 5);
		if (pwrite(fd, buf, sizeof(buf), off) != (ssize_t)sizeof(buf)) {
			close(fd);
			return -1;
		}
	}
	fsync(fd);
	close(fd);
	return 0;
}

static void test_sysfs(struct disk *near, struct disk *far, struct disk *vblk)
{
	static const struct {
		int which;
		const char *want;
	} cases[] = { { 0, "ok" }, { 1, "distance" }, { 2, "queue" } };
	struct disk *ds[] = { near, far, vblk };

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct disk *d = ds[cases[i].which];
		char path[PATH_MAX], want[128], buf[4096], devt[64];
		int ok;

		snprintf(path, sizeof(path), "/sys/block/%s/spin/p2p", d->name);
		snprintf(want, sizeof(want), "provider %s %s", gpu_bdf, cases[i].want);
		ok = !spin_read_file(path, buf, sizeof(buf)) && strstr(buf, want);
		/*
		 * distance names the member whose PCI function is spin-nvme2's:
		 * with NVMe multipath the disk is a head over one path disk.
		 */
		if (ok && cases[i].which == 1) {
			char pci[PATH_MAX], named[160], *dv = strstr(buf, want) + strlen(want);

			ok = *dv == ' ' && !spin_nvme_pcidir(d->serial, pci, sizeof(pci));
			snprintf(devt, sizeof(devt), "%.*s", (int)strcspn(dv + 1, "\n"), dv + 1);
			snprintf(named, sizeof(named), "member %s %s ", devt,
				 ok ? strrchr(pci, '/') + 1 : "?");
			ok = ok && devt[0] && strstr(buf, named);
		}
		ksft_test_result(ok, "%s: /sys/block/%s/spin/p2p says \"%s\"\n", d->what, d->name,
				 want);
		if (!ok)
			ksft_print_msg("%s", buf);
	}
}

static void test_check(struct disk *near, struct disk *far, struct disk *vblk)
{
	char obj[4096], want[256];
	const char *l;
	int rc, ok;

	/* The whole system: the provider, and each disk with its verdict in words. */
	rc = run(TOOL " check");
	snprintf(want, sizeof(want), "%s: p2pmem", gpu_bdf);
	l = line_with(want, "heap /dev/dma_heap/p2p-");
	ksft_test_result(rc == 0 && l, "spin check: exit %d, %s\n", rc,
			 "the stand-in GPU listed with its heap");
	ok = rc == 0 && block_has(near->name, "P2P possible") &&
	     block_has(far->name, "no P2P: distance: pci_p2pdma_distance() refuses") &&
	     block_has(far->name, "; route ") &&
	     block_has(vblk->name, "no P2P: queue: the disk's queue does not accept");
	ksft_test_result(ok, "spin check: %s P2P possible, %s distance with the route, %s queue\n",
			 near->name, far->name, vblk->name);
	/* Shown always: the example in Documentation/spin/tools.rst comes from here. */
	ksft_print_msg("spin check:\n%s", out);

	/* One good file: exit 0. */
	rc = run(TOOL " check /mnt/tool-near/f");
	ok = rc == 0 && line_with("/mnt/tool-near/f", "P2P possible to");
	ksft_test_result(ok, "spin check FILE on ext4 on %s: exit %d, P2P possible\n", near->name,
			 rc);

	/* The same file in modes that send nothing by P2P: exit 1, the mode says why. */
	ok = 1;
	for (int m = 0; m < 2; m++) {
		const char *mode = m ? "pagecache" : "off";

		ok = ok && !spin_write_file(SPIN_SYS "/mode", mode);
		rc = run(TOOL " check /mnt/tool-near/f");
		snprintf(want, sizeof(want), "mode: %s (", mode);
		ok = ok && rc == 1 && line_with(want, "nothing by P2P");
		rc = run(TOOL " check --json /mnt/tool-near/f");
		ok = ok && rc == 1 && strstr(out, "\"mode_allows_p2p\": false") &&
		     strstr(out, "\"p2p_possible\": false");
		if (!ok)
			ksft_print_msg("mode %s:\n%s", mode, out);
	}
	ok = !spin_write_file(SPIN_SYS "/mode", "auto") && ok;
	ksft_test_result(ok, "spin check FILE in mode off and pagecache: exit 1, the mode named\n");

	/* Every fallback disk, text and JSON: exit 1, each reason right. */
	rc = run(TOOL " check " FOUR);
	ok = rc == 1 && line_with("/mnt/tool-tmpfs/f", "no P2P: no_bdev") &&
	     line_with("/mnt/tool-far/f", "no P2P: distance") &&
	     line_with("/mnt/tool-vblk/f", "no P2P: queue");
	ksft_test_result(ok, "spin check of four files: exit %d (want 1), %s\n", rc,
			 "no_bdev, distance, queue");
	if (!ok)
		ksft_print_msg("%s", out);
	rc = run(TOOL " check --json " FOUR);
	ok = rc == 1 && strstr(out, "\"p2p_possible\": false");
	ok = ok && !json_path("/mnt/tool-near/f", obj, sizeof(obj)) &&
	     strstr(obj, "\"p2p\": true") && strstr(obj, "\"reason\": null");
	ok = ok && !json_path("/mnt/tool-tmpfs/f", obj, sizeof(obj)) &&
	     strstr(obj, "\"reason\": \"no_bdev\"");
	ok = ok && !json_path("/mnt/tool-far/f", obj, sizeof(obj)) &&
	     strstr(obj, "\"reason\": \"distance\"");
	ok = ok && !json_path("/mnt/tool-vblk/f", obj, sizeof(obj)) &&
	     strstr(obj, "\"reason\": \"queue\"");
	ksft_test_result(ok, "spin check --json: exit %d, each path's p2p and reason\n", rc);
	if (!ok)
		ksft_print_msg("%s", out);
}

static void test_stat(struct disk *near)
{
	char want[64];
	uint8_t *g;
	int heap, buf, fd, rc, ok, ready[2];
	pid_t child;

	rc = run(TOOL " stat");
	ok = rc == 0 && line_with("mode: ", NULL) && line_with("system:", NULL) &&
	     line_with("bytes_p2p", NULL);
	ksft_test_result(ok, "spin stat: exit %d, the totals\n", rc);

	/* Rates: routed reads of 32 MiB while spin stat -i 1 -c 2 runs. */
	g = spin_gpu_buffer(gpu, 32 * MiB, &heap, &buf);
	if (g == MAP_FAILED) {
		ksft_test_result_fail("spin stat -i: no GPU memory\n");
		return;
	}
	/*
	 * The reader keeps reading (uncached, so by P2P) until the tool is
	 * done: however slowly the tool starts (a debug kernel), one of its two
	 * intervals sees the bytes. The tool starts once the first read is done
	 * (a first read also maps the buffer's pages, and a debug kernel with
	 * kmemleak is slow at that).
	 */
	if (pipe(ready)) {
		ready[0] = -1;
		ready[1] = -1;
	}
	child = fork();
	if (child == 0) {
		fd = open("/mnt/tool-near/f", O_RDONLY);
		for (int i = 0; fd >= 0 && i < 200; i++) {
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			if (pread(fd, g, 32 * MiB, 0) != (ssize_t)(32 * MiB))
				_exit(1);
			if (i == 0 && ready[1] >= 0 && write(ready[1], "r", 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	if (ready[0] >= 0) {
		char c;

		close(ready[1]);
		if (read(ready[0], &c, 1) != 1)
			ksft_print_msg("the reader did not start\n");
		close(ready[0]);
	}
	rc = run(TOOL " stat -i 1 -c 2");
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	snprintf(want, sizeof(want), "%s ", near->name);
	ok = rc == 0 && line_with("device", "rd_p2p_MB") && line_with(want, NULL);
	ksft_test_result(ok, "spin stat -i 1 -c 2: exit %d, a rate line for %s\n", rc, near->name);
	ksft_print_msg("spin stat -i 1 -c 2:\n%s", out);
	munmap(g, 32 * MiB);
	close(buf);
	close(heap);
}

static const char *const model[] = { "c_p2p_ns", "s_cutoff", "bw_p2p", "bw_pc", "p2p_overlap" };
#define N_MODEL ((int)ARRAY_SIZE(model))

/* Writes the cost model of @disk in an order that keeps it consistent (c_p2p_ns first high). */
static int model_write(const char *disk, const long long v[N_MODEL])
{
	char path[PATH_MAX], val[32];
	int ret = 0;

	for (int i = 0; i <= N_MODEL; i++) {
		snprintf(path, sizeof(path), "/sys/block/%s/spin/%s", disk, model[i % N_MODEL]);
		snprintf(val, sizeof(val), "%lld", i == 0 ? 1000000000LL : v[i % N_MODEL]);
		ret |= spin_write_file(path, val);
	}
	return ret;
}

static void test_calibrate(struct disk *near)
{
	char path[PATH_MAX], line[256], *p;
	long long before[N_MODEL], after[N_MODEL], printed[N_MODEL] = { -1, -1, -1, -1, -1 };
	unsigned char sig[8] = { 0 };
	int rc, ok;
	FILE *f;

	for (int i = 0; i < N_MODEL; i++) {
		snprintf(path, sizeof(path), "/sys/block/%s/spin/%s", near->name, model[i]);
		before[i] = spin_read_ll(path);
	}
	rc = run(TOOL " calibrate /mnt/tool-near/f --reps 3 --png /tmp/calib.png --apply");
	ksft_print_msg("spin calibrate:\n%s", out);
	for (int i = 0; i < N_MODEL; i++) {
		snprintf(path, sizeof(path), "/sys/block/%s/spin/%s", near->name, model[i]);
		after[i] = spin_read_ll(path);
		snprintf(line, sizeof(line), " %s=", model[i]);
		p = strstr(out, "parameters:");
		p = p ? strstr(p, line) : NULL;
		if (p)
			printed[i] = atoll(p + strlen(line));
	}
	f = fopen("/tmp/calib.png", "rb");
	if (f) {
		if (fread(sig, 1, sizeof(sig), f) != sizeof(sig))
			sig[0] = 0;
		fclose(f);
	}
	snprintf(line, sizeof(line), "with GPU memory of %s:", gpu_bdf);
	ok = rc == 0 && strstr(out, line) && strstr(out, "P2P (Eq. 1): C_p2p") &&
	     strstr(out, "R^2") && strstr(out, "applied to") &&
	     strstr(out, "legs in flight together: 8 readers of 4 KiB:") &&
	     strstr(out, ", p2p_overlap ") &&
	     !memcmp(sig, "\x89PNG\r\n\x1a\n", 8);
	for (int i = 0; ok && i < N_MODEL; i++)
		ok = printed[i] >= 0 && printed[i] == after[i];
	ok = ok && after[N_MODEL - 1] >= 100 && after[N_MODEL - 1] <= 6400;
	ksft_test_result(ok, "spin calibrate --apply --png: exit %d, %s\n", rc,
			 "the GPU's memory, fit and queue overlap printed, PNG written, sysfs holds the parameters");
	if (model_write(near->name, before))
		ksft_print_msg("restoring the cost model of %s failed\n", near->name);

	/* Refusals: one line, exit 2, the reason. */
	rc = run(TOOL " calibrate /mnt/tool-tmpfs/f");
	ksft_test_result(rc == 2 && strstr(err, "no_bdev"), "calibrate on tmpfs: exit %d, %.*s\n",
			 rc, (int)strcspn(err, "\n"), err);
	rc = run(TOOL " calibrate /mnt/tool-far/f");
	ksft_test_result(rc == 2 && strstr(err, "no P2P between") && strstr(err, "distance"),
			 "calibrate on spin-nvme2: exit %d, %.*s\n", rc, (int)strcspn(err, "\n"),
			 err);
	rc = run(TOOL " calibrate /mnt/tool-vblk/f");
	ksft_test_result(rc == 2 && strstr(err, "queue"), "calibrate on spin-vblk: exit %d, %.*s\n",
			 rc, (int)strcspn(err, "\n"), err);
	rc = run(TOOL " calibrate /mnt/tool-near/f --provider 0000:00:00.0");
	ksft_test_result(rc == 2 && strstr(err, "is not a p2pdma provider"),
			 "calibrate --provider of a non-provider: exit %d, %.*s\n", rc,
			 (int)strcspn(err, "\n"), err);
	rc = run(TOOL " calibrate /mnt/tool-near/small");
	ksft_test_result(rc == 2 && strstr(err, "MiB are needed"),
			 "calibrate on a 1 MiB file: exit %d, %.*s\n", rc, (int)strcspn(err, "\n"),
			 err);
}

static void test_bad_args(void)
{
	static const char *const bad[] = {
		TOOL, TOOL " bogus", TOOL " check --bogus", TOOL " stat -i", TOOL " stat -i x",
		TOOL " stat -i 0", TOOL " stat -c 3", TOOL " stat extra", TOOL " calibrate",
		TOOL " calibrate /nonexistent", TOOL " calibrate a b", TOOL " calibrate x --reps 0",
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int rc = run(bad[i]);
		int lines = 0;

		for (const char *p = err; *p; p++)
			lines += *p == '\n';
		/* Usage errors may add the usage lines; the message is the first. */
		ksft_test_result(rc == 2 && !strncmp(err, "spin: ", 6) && lines >= 1,
				 "'%s': exit %d (want 2), \"%.*s\"\n", bad[i], rc,
				 (int)strcspn(err, "\n"), err);
	}
}

int main(void)
{
	struct disk near = { .what = "ext4 on spin-nvme0", .serial = SPIN_NVME0_SERIAL,
			     .mkfs = SPIN_MKFS_EXT4, .type = "ext4", .dir = "/mnt/tool-near" };
	struct disk far = { .what = "ext4 on spin-nvme2", .serial = SPIN_NVME2_SERIAL,
			    .mkfs = SPIN_MKFS_EXT4, .type = "ext4", .dir = "/mnt/tool-far" };
	struct disk vblk = { .what = "xfs on spin-vblk", .serial = SPIN_VBLK_SERIAL,
			     .mkfs = SPIN_MKFS_XFS, .type = "xfs", .dir = "/mnt/tool-vblk",
			     .virtio = 1 };

	ksft_print_header();
	ksft_set_plan(3 + 6 + 2 + 6 + 12);
	if (access(TOOL, X_OK))
		ksft_exit_fail_msg("%s is missing from the initramfs\n", TOOL);
	if (spin_gpu_find(gpu, sizeof(gpu)))
		SPIN_SKIP_MISSING("stand-in GPU not found");
	gpu_bdf = strrchr(gpu, '/') ? strrchr(gpu, '/') + 1 : gpu;
	mkdir("/mnt/tool-tmpfs", 0755);
	if (disk_setup(&near) || disk_setup(&far) || disk_setup(&vblk) ||
	    mount("tmpfs", "/mnt/tool-tmpfs", "tmpfs", 0, "size=16m"))
		ksft_exit_fail_msg("setting up the disks: %s\n", strerror(errno));
	if (make_file("/mnt/tool-near/f", 32 * MiB) || make_file("/mnt/tool-far/f", 20 * MiB) ||
	    make_file("/mnt/tool-vblk/f", 20 * MiB) || make_file("/mnt/tool-tmpfs/f", MiB) ||
	    make_file("/mnt/tool-near/small", MiB))
		ksft_exit_fail_msg("writing the files: %s\n", strerror(errno));

	test_sysfs(&near, &far, &vblk);
	test_check(&near, &far, &vblk);
	test_stat(&near);
	test_calibrate(&near);
	test_bad_args();

	umount("/mnt/tool-near");
	umount("/mnt/tool-far");
	umount("/mnt/tool-vblk");
	umount("/mnt/tool-tmpfs");
	ksft_finished();
}
