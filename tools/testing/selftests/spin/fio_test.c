// SPDX-License-Identifier: GPL-2.0
/*
 * fio regression jobs with GPU memory (issue #12): the job files of
 * tools/testing/spin/fio (in the guest: /spin/fio), one per I/O engine
 * (psync, pvsync2, libaio, io_uring) and kind (buffered sequential, buffered
 * random, O_DIRECT), their buffers in the stand-in GPU's p2pmem/allocate
 * (iomem=mmapshared). Every job runs on ext4 (spin-nvme0), the buffered
 * sequential ones on xfs (spin-nvme1) too, twice: writing with
 * verify=crc32c, then, from an uncached file, --verify_only (reading back
 * into GPU memory and checking).
 *
 * A job passes when both fio runs exit 0 and report no error in their JSON
 * output, and the disk's spin counters moved bytes by P2P both ways for a
 * buffered job (the router's work: pread/pwrite, preadv2/pwritev2,
 * io_submit and io_uring are all routed) and none for an O_DIRECT job
 * (upstream's P2P path, which the router leaves alone).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define JOB_DIR "/spin/fio"
#define MAX_JOBS 32

struct fs {
	const char *name, *serial, *type, *mkfs, *dir;
	char dev[64], disk[32], stat[PATH_MAX];
};

static char jobs[MAX_JOBS][NAME_MAX + 1];
static int njobs;
static const char *mounted;

static void restore(void)
{
	if (mounted && umount(mounted))
		ksft_print_msg("umount %s: %s\n", mounted, strerror(errno));
}

static int run(const char *cmd)
{
	int status = system(cmd);

	return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The job files, sorted. */
static void list_jobs(void)
{
	DIR *d = opendir(JOB_DIR);
	struct dirent *e;

	if (!d)
		ksft_exit_fail_msg("%s: %s\n", JOB_DIR, strerror(errno));
	while ((e = readdir(d)) && njobs < MAX_JOBS) {
		size_t n = strlen(e->d_name);

		if (n > 4 && !strcmp(e->d_name + n - 4, ".fio"))
			snprintf(jobs[njobs++], sizeof(jobs[0]), "%s", e->d_name);
	}
	closedir(d);
	qsort(jobs, njobs, sizeof(jobs[0]), by_name);
	if (!njobs)
		ksft_exit_fail_msg("no job files in %s\n", JOB_DIR);
}

/* Whether fio's JSON output @path reports every job with "error" : 0. */
static int json_clean(const char *path)
{
	char buf[1 << 16], *p;
	int seen = 0;

	if (spin_read_file(path, buf, sizeof(buf)))
		return 0;
	for (p = strstr(buf, "\"error\""); p; p = strstr(p + 1, "\"error\"")) {
		char *v = strchr(p, ':');

		if (!v || atoi(v + 1) != 0)
			return 0;
		seen++;
	}
	return seen > 0;
}

static void run_job(struct fs *fs, const char *job)
{
	int direct = !!strstr(job, "-direct");
	char cmd[3 * PATH_MAX], why[256] = "ok";
	long long w0, w1, r0, r1;
	double t0, t1, t2, t3;
	int ok = 1, wr, vr;

	w0 = spin_stat_get(fs->stat, "write_bytes_p2p");
	r0 = spin_stat_get(fs->stat, "bytes_p2p");
	snprintf(cmd, sizeof(cmd), "SPIN_FIO_FILE=%s/fio.dat fio --output-format=json "
		 "--output=/tmp/fio-w.json %s/%s >/dev/null 2>/tmp/fio-w.err",
		 fs->dir, JOB_DIR, job);
	t0 = spin_now();
	wr = run(cmd);
	t1 = spin_now();
	if (spin_write_file("/proc/sys/vm/drop_caches", "3"))
		ok = 0;
	t2 = spin_now();
	snprintf(cmd, sizeof(cmd), "SPIN_FIO_FILE=%s/fio.dat fio --verify_only "
		 "--output-format=json --output=/tmp/fio-v.json %s/%s >/dev/null 2>/tmp/fio-v.err",
		 fs->dir, JOB_DIR, job);
	vr = run(cmd);
	t3 = spin_now();
	ksft_print_msg("%s: %s: fio write %.1f s, drop_caches %.1f s, fio verify %.1f s\n",
		       fs->name, job, t1 - t0, t2 - t1, t3 - t2);
	w1 = spin_stat_get(fs->stat, "write_bytes_p2p");
	r1 = spin_stat_get(fs->stat, "bytes_p2p");
	if (wr || vr || !json_clean("/tmp/fio-w.json") || !json_clean("/tmp/fio-v.json")) {
		snprintf(why, sizeof(why), "fio exit %d/%d or errors in its JSON", wr, vr);
		run("cat /tmp/fio-w.err /tmp/fio-v.err >&2");
		ok = 0;
	}
	if (ok && !direct && (w1 <= w0 || r1 <= r0)) {
		snprintf(why, sizeof(why), "not routed: P2P bytes written %lld, read %lld", w1 - w0,
			 r1 - r0);
		ok = 0;
	}
	if (ok && direct && (w1 != w0 || r1 != r0)) {
		snprintf(why, sizeof(why), "an O_DIRECT job was routed");
		ok = 0;
	}
	ksft_test_result(ok,
			 "%s: %s: write + crc32c verify, P2P bytes written %lld, read %lld (%s)\n",
			 fs->name, job, w1 - w0, r1 - r0, why);
	snprintf(cmd, sizeof(cmd), "%s/fio.dat", fs->dir);
	unlink(cmd);
}

int main(void)
{
	struct fs all[] = {
		{ .name = "ext4", .serial = SPIN_NVME0_SERIAL, .type = "ext4",
		  .mkfs = "mkfs.ext4 -q -F", .dir = "/mnt/fio-ext4" },
		{ .name = "xfs", .serial = SPIN_NVME1_SERIAL, .type = "xfs",
		  .mkfs = "mkfs.xfs -q -f", .dir = "/mnt/fio-xfs" },
	};
	char gpu[PATH_MAX], mem[PATH_MAX + 32];
	int nseq = 0;

	ksft_print_header();
	list_jobs();
	for (int j = 0; j < njobs; j++)
		nseq += !!strstr(jobs[j], "-seq.fio");
	ksft_set_plan(njobs + nseq);
	if (spin_gpu_find(gpu, sizeof(gpu)))
		ksft_exit_fail_msg("stand-in GPU not found\n");
	snprintf(mem, sizeof(mem), "%s/p2pmem/allocate", gpu);
	if (setenv("SPIN_FIO_MEM", mem, 1) ||
	    spin_write_file("/sys/kernel/spin/mode", "auto"))
		ksft_exit_fail_msg("setup: %s\n", strerror(errno));
	atexit(restore);
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		struct fs *fs = &all[i];

		if (spin_fs_make(fs->serial, fs->mkfs, fs->type, fs->dir, 0, fs->dev,
				 sizeof(fs->dev), fs->disk, sizeof(fs->disk)))
			ksft_exit_fail_msg("%s on %s (%s): %s\n", fs->type, fs->dev, fs->serial,
					   strerror(errno));
		mounted = fs->dir;
		snprintf(fs->stat, sizeof(fs->stat), "/sys/block/%s/spin/stat", fs->disk);
		for (int j = 0; j < njobs; j++)
			if (i == 0 || strstr(jobs[j], "-seq.fio"))
				run_job(fs, jobs[j]);
		mounted = NULL;
		if (umount(fs->dir))
			ksft_print_msg("umount %s: %s\n", fs->dir, strerror(errno));
	}
	ksft_finished();
}
