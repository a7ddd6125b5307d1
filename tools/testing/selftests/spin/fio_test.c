// SPDX-License-Identifier: GPL-2.0
/*
 * fio regression jobs with GPU memory: the job files of
 * tools/testing/spin/fio (in the guest: /spin/fio), one per I/O engine
 * (psync, pvsync2, libaio, io_uring) and kind (buffered sequential, buffered
 * random, O_DIRECT), their buffers in the stand-in GPU's p2pmem/allocate
 * (iomem=mmapshared). Every job runs on ext4 (spin-nvme0), the buffered
 * sequential ones on xfs (spin-nvme1) too, twice: writing with
 * verify=crc32c, then, from uncached files, --verify_only (reading back
 * into GPU memory and checking).
 *
 * A job passes when its fio runs exit 0 and report no error for it in their
 * JSON output, the verify run wrote nothing, and the disk's spin counters
 * show P2P bytes written by the write run and read by the verify run for a
 * buffered job (the router's work: pread/pwrite, preadv2/pwritev2,
 * io_submit and io_uring are all routed) and none for an O_DIRECT job
 * (upstream's path, which the router leaves alone).
 *
 * One fio run per filesystem and phase runs all its jobs, one after another:
 * under the debug kernel and TCG, fio takes ~13 s just to start (it loads 64
 * shared libraries), which one run per job and phase paid 32 times. Each job
 * file is copied with exec_prerun and exec_postrun reading the disk's
 * counters (fio saves their output as <job>.prerun.txt and .postrun.txt) and
 * a stonewall, so every job's P2P bytes are still its own, and verify_only
 * for the verify run: given on the command line, fio applies it to the jobs
 * of the first job file only, and the others would write again.
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

struct job {
	char name[NAME_MAX + 1];	/* the file's name less ".fio": its section */
	int direct;
	long long wbytes[2], rbytes[2];	/* P2P bytes written and read, per run */
	int bad;			/* a run failed it */
	char why[160];
};

static struct job jobs[MAX_JOBS];
static int njobs;

static int run(const char *cmd)
{
	int status = system(cmd);

	return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct job *)a)->name, ((const struct job *)b)->name);
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

		if (n > 4 && n - 4 < sizeof(jobs[0].name) && !strcmp(e->d_name + n - 4, ".fio")) {
			snprintf(jobs[njobs].name, sizeof(jobs[0].name), "%.*s", (int)(n - 4),
				 e->d_name);
			jobs[njobs].direct = !!strstr(jobs[njobs].name, "-direct");
			njobs++;
		}
	}
	closedir(d);
	qsort(jobs, njobs, sizeof(jobs[0]), by_name);
	if (!njobs)
		ksft_exit_fail_msg("no job files in %s\n", JOB_DIR);
}

/*
 * Whether job @i runs on filesystem @f: all on the first, the sequential ones
 * on the others too.
 */
static int job_on(size_t f, int i)
{
	return !f || strstr(jobs[i].name, "-seq");
}

/*
 * Copies the file of job @j into @dir, the disk's counters @stat read before
 * and after the job, a stonewall and, with @verify, verify_only added to its
 * [global] section. (On fio's command line, job options such as
 * --verify_only apply to the jobs of the first job file only.)
 */
static int instrument(const char *dir, const struct job *j, const char *stat, int verify)
{
	char src[PATH_MAX], dst[PATH_MAX], line[512];
	FILE *in, *out;
	int ok = 0;

	snprintf(src, sizeof(src), "%s/%.*s.fio", JOB_DIR, NAME_MAX, j->name);
	snprintf(dst, sizeof(dst), "%s/%.*s.fio", dir, NAME_MAX, j->name);
	in = fopen(src, "r");
	out = fopen(dst, "w");
	while (in && out && fgets(line, sizeof(line), in)) {
		fputs(line, out);
		if (!strcmp(line, "[global]\n")) {
			fprintf(out, "exec_prerun=cat %s\nexec_postrun=cat %s\nstonewall\n%s",
				stat, stat, verify ? "verify_only=1\n" : "");
			ok = 1;
		}
	}
	if (in)
		fclose(in);
	if (out && fclose(out))
		ok = 0;
	return ok ? 0 : -1;
}

/* The "error" of job @name in fio's JSON output @json; -1 if it is not there. */
static int json_error(const char *json, const char *name)
{
	char key[NAME_MAX + 32];
	const char *p, *e;

	snprintf(key, sizeof(key), "\"jobname\" : \"%s\"", name);
	p = strstr(json, key);
	e = p ? strstr(p, "\"error\"") : NULL;
	e = e ? strchr(e, ':') : NULL;
	return e ? atoi(e + 1) : -1;
}

/* The whole file @path, NUL-terminated (NULL if it cannot be read). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	struct stat st;

	if (!f)
		return NULL;
	if (!fstat(fileno(f), &st))
		buf = calloc(1, st.st_size + 1);
	if (buf && fread(buf, 1, st.st_size, f) != (size_t)st.st_size) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/*
 * One fio run of @fs's jobs (@verify: 0 for the write run, 1 for the
 * verify_only run), in a directory of its own: records each job's P2P bytes
 * and marks the jobs it failed.
 */
static void run_phase(struct spin_fs *fs, size_t f, int verify)
{
	const char *phase = verify ? "verify" : "write";
	char dir[64], cmd[4 * PATH_MAX + MAX_JOBS * (NAME_MAX + 6)], path[PATH_MAX];
	size_t at;
	double t0;
	int ret, i;
	char *json;

	snprintf(dir, sizeof(dir), "/tmp/fio-%s-%s", fs->name, phase);
	mkdir(dir, 0755);
	at = snprintf(cmd, sizeof(cmd), "cd %s && SPIN_FIO_DIR=%s fio %s", dir, fs->dir,
		      "--output-format=json --output=out.json");
	for (i = 0; i < njobs; i++) {
		if (!job_on(f, i))
			continue;
		if (instrument(dir, &jobs[i], fs->stat, verify))
			ksft_exit_fail_msg("copying job %s into %s: %s\n", jobs[i].name, dir,
					   strerror(errno));
		at += snprintf(cmd + at, sizeof(cmd) - at, " %s.fio", jobs[i].name);
	}
	snprintf(cmd + at, sizeof(cmd) - at, " >/dev/null 2>err.txt");
	if (at >= sizeof(cmd))
		ksft_exit_fail_msg("fio command line too long\n");
	t0 = spin_now();
	ret = run(cmd);
	ksft_print_msg("%s: fio %s run of its jobs: exit %d, %.1f s\n", fs->name, phase, ret,
		       spin_now() - t0);
	snprintf(path, sizeof(path), "%s/out.json", dir);
	json = slurp(path);
	for (i = 0; i < njobs; i++) {
		struct job *j = &jobs[i];
		long long w0, w1, r0, r1;
		int err;

		if (!job_on(f, i))
			continue;
		snprintf(path, sizeof(path), "%s/%s.prerun.txt", dir, j->name);
		w0 = spin_stat_get(path, "write_bytes_p2p");
		r0 = spin_stat_get(path, "bytes_p2p");
		snprintf(path, sizeof(path), "%s/%s.postrun.txt", dir, j->name);
		w1 = spin_stat_get(path, "write_bytes_p2p");
		r1 = spin_stat_get(path, "bytes_p2p");
		err = json ? json_error(json, j->name) : -1;
		if (!j->bad && (ret || err)) {
			snprintf(j->why, sizeof(j->why), "fio %s run: exit %d, job error %d", phase,
				 ret, err);
			j->bad = 1;
		}
		if (!j->bad && (w0 < 0 || w1 < 0 || r0 < 0 || r1 < 0)) {
			snprintf(j->why, sizeof(j->why), "fio %s run: no counters before or after",
				 phase);
			j->bad = 1;
		}
		j->wbytes[verify] = w1 - w0;
		j->rbytes[verify] = r1 - r0;
	}
	free(json);
	if (ret) {
		snprintf(cmd, sizeof(cmd), "cat %s/err.txt >&2", dir);
		run(cmd);
	}
}

/* All of @fs's jobs: the write run, the page cache dropped, the verify run. */
static void run_jobs(struct spin_fs *fs, size_t f)
{
	for (int i = 0; i < njobs; i++) {
		jobs[i].bad = 0;
		snprintf(jobs[i].why, sizeof(jobs[i].why), "ok");
	}
	run_phase(fs, f, 0);
	sync();
	if (spin_write_file("/proc/sys/vm/drop_caches", "3"))
		ksft_exit_fail_msg("drop_caches: %s\n", strerror(errno));
	run_phase(fs, f, 1);
	for (int i = 0; i < njobs; i++) {
		struct job *j = &jobs[i];

		if (!job_on(f, i))
			continue;
		if (!j->bad && j->wbytes[1]) {
			snprintf(j->why, sizeof(j->why), "the verify run wrote");
			j->bad = 1;
		}
		if (!j->bad && !j->direct && (j->wbytes[0] <= 0 || j->rbytes[1] <= 0)) {
			snprintf(j->why, sizeof(j->why), "not routed");
			j->bad = 1;
		}
		if (!j->bad && j->direct && (j->wbytes[0] || j->rbytes[0] || j->rbytes[1])) {
			snprintf(j->why, sizeof(j->why), "an O_DIRECT job was routed");
			j->bad = 1;
		}
		ksft_test_result(!j->bad,
				 "%s: %s.fio: P2P bytes written %lld and read back %lld by the write run, read %lld by the verify run (%s)\n",
				 fs->name, j->name, j->wbytes[0], j->rbytes[0], j->rbytes[1],
				 j->why);
	}
}

int main(void)
{
	struct spin_fs all[] = {
		SPIN_FS_EXT4("/mnt/fio-ext4", 0),
		SPIN_FS_XFS("/mnt/fio-xfs", 0),
	};
	char gpu[PATH_MAX], mem[PATH_MAX + 32];
	int plan = 0;

	ksft_print_header();
	list_jobs();
	for (size_t f = 0; f < ARRAY_SIZE(all); f++)
		for (int j = 0; j < njobs; j++)
			plan += !!job_on(f, j);
	ksft_set_plan(plan);
	if (spin_gpu_find(gpu, sizeof(gpu)))
		SPIN_SKIP_MISSING("stand-in GPU not found");
	snprintf(mem, sizeof(mem), "%s/p2pmem/allocate", gpu);
	if (setenv("SPIN_FIO_MEM", mem, 1) ||
	    spin_sysfs_set(SPIN_SYS "/mode", "auto"))
		ksft_exit_fail_msg("setup: %s\n", strerror(errno));
	SPIN_FS_EACH_OR_EXIT(all, ARRAY_SIZE(all), 0, run_jobs);
	ksft_finished();
}
