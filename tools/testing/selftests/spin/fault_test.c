// SPDX-License-Identifier: GPL-2.0
/*
 * I/O errors under routed reads: fail_make_request fails a share
 * of the bios of the NVMe disk while buffered reads into GPU memory run in
 * auto and p2p mode, on ext4 (spin-nvme0) and xfs (spin-nvme1), mounted
 * noatime so that only data reads meet the faults.
 *
 * Every read must return all its bytes, right, or a short count whose bytes
 * are right, or fail with EIO, and the faults must show as one or the other;
 * a P2P leg that fails is redone through the page
 * cache (counted in fallback_io_error), so faults must show up there; once the
 * faults stop, the whole file reads back right; the GPU provider's pool
 * returns to its starting size when the buffer is freed (no page stays
 * pinned). The debug kernel's log check catches oopses and KASAN/lockdep
 * reports on the error paths.
 *
 * A writeback error behind a P2P leg (p2p mode writes dirty pages back
 * before the device reads them) must stay visible: the read is served from
 * the page cache, as a plain buffered read would be, and the next fsync()
 * reports EIO.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define PG 4096UL
#define FILE_LEN (16 * MiB)
#define GPU_LEN (16 * MiB)
#define READS 150
#define FAIL_DIR "/sys/kernel/debug/fail_make_request"

static char gpu[PATH_MAX];
static uint8_t *host;
static char fail_disk[PATH_MAX];

static long long p2pmem_available(void)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/p2pmem/available", gpu);
	return spin_read_ll(path);
}

/*
 * Faults on (a share of 1 in @every bios of the disk fails) or off (@every 0);
 * what it changes is given back at exit (spin_sysfs_set()).
 */
static int faults(int every)
{
	char v[16];

	if (!every)
		return spin_sysfs_set(fail_disk, "0") |
		       spin_sysfs_set(FAIL_DIR "/probability", "0");
	snprintf(v, sizeof(v), "%d", 100 / every);
	return spin_sysfs_set(FAIL_DIR "/verbose", "0") |
	       spin_sysfs_set(FAIL_DIR "/interval", "1") |
	       spin_sysfs_set(FAIL_DIR "/times", "-1") |
	       spin_sysfs_set(FAIL_DIR "/space", "0") |
	       spin_sysfs_set(FAIL_DIR "/probability", v) |
	       spin_sysfs_set(fail_disk, "1");
}

static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;

static unsigned long long rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* @fs mounted noatime, with its data file. */
static void fs_setup(struct spin_fs *fs)
{
	int fd;

	SPIN_FS_SETUP_OR_EXIT(fs, MS_NOATIME);
	snprintf(fail_disk, sizeof(fail_disk), "/sys/block/%s/make-it-fail", fs->disk);
	fd = open(fs->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	spin_pattern_fill(host, 0, FILE_LEN, fs->seed);
	if (fd < 0 || spin_write_uncached(fd, host, FILE_LEN, 0))
		ksft_exit_fail_msg("%s: data file: %s\n", fs->name, strerror(errno));
	close(fd);
}

/* Reads under faults in @mode; returns the number of reads that broke the rules. */
static int faulty_reads(struct spin_fs *fs, uint8_t *gmem, const char *mode, int *eio, int *shorts)
{
	char path[PATH_MAX], why[256];
	int bad = 0, fd;

	snprintf(path, sizeof(path), "%s/data", fs->dir);
	fd = open(path, O_RDONLY);
	if (fd < 0 || spin_sysfs_set(SPIN_SYS "/mode", mode))
		ksft_exit_fail_msg("%s: %s\n", path, strerror(errno));
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	faults(5);
	for (int i = 0; i < READS; i++) {
		/* Small sequential runs, and large reads at random places. */
		size_t len = i % 3 ? 4 * KiB << (rng() % 3) : (rng() % 2048 + 1) * PG - rng() % 512;
		off_t pos = i % 3 ? (off_t)((i / 3) % 256) * 64 * KiB : (off_t)(rng() % 2048) * PG;
		ssize_t n;

		if (pos + len > FILE_LEN)
			len = FILE_LEN - pos;
		n = pread(fd, gmem, len, pos);
		if (n < 0 && errno == EIO) {
			(*eio)++;
		} else if (n < 0 || n > (ssize_t)len) {
			ksft_print_msg("%s %s: read %zu at %lld: %zd (%s)\n", fs->name, mode, len,
				       (long long)pos, n, strerror(errno));
			bad++;
		} else {
			*shorts += n < (ssize_t)len;
			if (n && spin_gpu_check(gpu, gmem, n, fs->seed, pos, why, sizeof(why))) {
				ksft_print_msg("%s %s: read %zu at %lld: %zd bytes, wrong: %s\n",
					       fs->name, mode, len, (long long)pos, n, why);
				bad++;
			}
		}
		if (i % 16 == 15)
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	}
	faults(0);
	close(fd);
	return bad;
}

static void run(struct spin_fs *fs, uint8_t *gmem)
{
	static const char *const modes[] = { "auto", "p2p" };
	long long ioerr0 = spin_stat_get(fs->stat, "fallback_io_error"), ioerr1;
	char path[PATH_MAX], why[256];
	int fd, ok;

	for (size_t m = 0; m < ARRAY_SIZE(modes); m++) {
		int eio = 0, shorts = 0;
		int bad = faulty_reads(fs, gmem, modes[m], &eio, &shorts);

		/* The faults must show: as EIO, or as short counts of right bytes. */
		ksft_test_result(!bad && eio + shorts > 0,
				 "%s, %s mode, 1 in 5 bios failing: %d reads right, short or EIO (%d EIO, %d short, %d wrong)\n",
				 fs->name, modes[m], READS, eio, shorts, bad);
	}
	ioerr1 = spin_stat_get(fs->stat, "fallback_io_error");
	ksft_test_result(ioerr1 > ioerr0,
			 "%s: failed P2P legs counted and redone through the page cache (fallback_io_error +%lld)\n",
			 fs->name, ioerr1 - ioerr0);

	/* Faults off: everything reads back right, through P2P again. */
	snprintf(path, sizeof(path), "%s/data", fs->dir);
	fd = open(path, O_RDONLY);
	spin_sysfs_set(SPIN_SYS "/mode", "auto");
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	ok = fd >= 0 && pread(fd, gmem, FILE_LEN, 0) == (ssize_t)FILE_LEN &&
	     !spin_gpu_check(gpu, gmem, FILE_LEN, fs->seed, 0, why, sizeof(why));
	ksft_test_result(ok, "%s: faults off: the whole file reads back right%s%s\n", fs->name,
			 ok ? "" : ": ", ok ? "" : why);
	close(fd);
}

/*
 * A P2P leg over dirty pages whose writeback fails: the read returns the
 * page cache's (newer) bytes and fsync() reports the error once.
 */
static void writeback_error(struct spin_fs *fs, uint8_t *gmem)
{
	const size_t len = 16 * KiB;
	long long ioerr0 = spin_stat_get(fs->stat, "fallback_io_error"), ioerr1;
	char path[PATH_MAX], why[256] = "";
	int fd, r1, r2, e1, wrong;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/wb", fs->dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	spin_pattern_fill(host, 0, len, fs->seed + 1000);
	if (fd < 0 || pwrite(fd, host, len, 0) != (ssize_t)len || fsync(fd))
		ksft_exit_fail_msg("%s: %s: %s\n", fs->name, path, strerror(errno));
	spin_pattern_fill(host, 0, len, fs->seed + 2000);
	/* Nothing else dirty: the one failing bio is the writeback of these pages. */
	if (syncfs(fd) || pwrite(fd, host, len, 0) != (ssize_t)len ||
	    spin_sysfs_set(SPIN_SYS "/mode", "p2p"))
		ksft_exit_fail_msg("%s: %s: %s\n", fs->name, path, strerror(errno));
	/* Exactly one bio fails: the writeback of the four dirty pages. */
	spin_sysfs_set(FAIL_DIR "/verbose", "0");
	spin_sysfs_set(FAIL_DIR "/interval", "1");
	spin_sysfs_set(FAIL_DIR "/space", "0");
	spin_sysfs_set(FAIL_DIR "/times", "1");
	spin_sysfs_set(FAIL_DIR "/probability", "100");
	spin_sysfs_set(fail_disk, "1");
	n = pread(fd, gmem, len, 0);
	faults(0);
	spin_sysfs_set(SPIN_SYS "/mode", "auto");
	ioerr1 = spin_stat_get(fs->stat, "fallback_io_error");
	wrong = n != (ssize_t)len ||
		spin_gpu_check(gpu, gmem, len, fs->seed + 2000, 0, why, sizeof(why));
	ksft_test_result(!wrong && ioerr1 == ioerr0 + 1,
			 "%s: a P2P leg whose writeback fails is served from the page cache: %zd bytes%s%s (fallback_io_error +%lld)\n",
			 fs->name, n, wrong ? ", wrong: " : ", the written ones", wrong ? why : "",
			 ioerr1 - ioerr0);
	r1 = fsync(fd);
	e1 = errno;
	r2 = fsync(fd);
	ksft_test_result(r1 == -1 && e1 == EIO && r2 == 0,
			 "%s: the writeback error stays visible: fsync %s, then %s\n", fs->name,
			 r1 ? strerror(e1) : "succeeded", r2 ? strerror(errno) : "succeeds");
	close(fd);
}

int main(void)
{
	struct spin_fs all[] = {
		SPIN_FS_EXT4("/mnt/fault-ext4", 71),
		SPIN_FS_XFS("/mnt/fault-xfs", 72),
	};
	long long avail0, avail1;
	int heap, buf;
	uint8_t *gmem;

	ksft_print_header();
	ksft_set_plan(ARRAY_SIZE(all) * 6 + 1);
	if (access(FAIL_DIR, F_OK))
		ksft_exit_fail_msg("%s is missing: a kernel without FAIL_MAKE_REQUEST\n", FAIL_DIR);
	if (spin_gpu_find(gpu, sizeof(gpu)))
		SPIN_SKIP_MISSING("stand-in GPU not found");
	host = spin_alloc_aligned(FILE_LEN);
	avail0 = p2pmem_available();
	gmem = spin_gpu_buffer(gpu, GPU_LEN, &heap, &buf);
	if (gmem == MAP_FAILED || !host || avail0 < 0)
		ksft_exit_fail_msg("no GPU memory from the heap: %s\n", strerror(errno));

	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		fs_setup(&all[i]);
		/* First: the faults of run() may turn the filesystem read-only. */
		writeback_error(&all[i], gmem);
		run(&all[i], gmem);
		faults(0);
		if (spin_fs_unmount(&all[i]))
			ksft_print_msg("umount %s: %s\n", all[i].dir, strerror(errno));
	}
	munmap(gmem, GPU_LEN);
	close(buf);
	close(heap);
	avail1 = p2pmem_available();
	ksft_test_result(avail1 == avail0,
			 "the GPU provider's pool is back to its size once the buffer is freed (%lld of %lld bytes)\n",
			 avail1, avail0);
	ksft_finished();
}
