// SPDX-License-Identifier: GPL-2.0
/*
 * The README's example, gpu_pread_example, run as a user would run it: on a
 * file of ext4 on spin-nvme0, with the stand-in GPU's heap, unmodified.
 *
 * The example frees its GPU memory before it exits, so to check from the
 * host side what landed there this test runs it under ptrace and, when it
 * calls close() on its dma-buf, takes a duplicate of that descriptor first
 * (pidfd_getfd()): the buffer then outlives the program, and the test maps it
 * and asks the host side of the stand-in GPU whether it holds the file. The
 * program itself is not changed for the test. Checked:
 *  - its exit status and the CRC-32 it printed (its CPU's view of GPU memory);
 *  - the GPU memory it read the file into, from the host side (gpu_agent.py);
 *  - the file it wrote from GPU memory, by CPU reads once its pages are
 *    dropped;
 *  - the disk's counters: the read and the write both went by P2P (the file
 *    was uncached and everything is aligned).
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
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define MiB (1024UL * 1024)
#define LEN (4 * MiB)
#define SEED 911
#define DIR "/mnt/example"

/* The example program: beside this one (kselftest install) or in ../bin (the rig's /spin). */
static int example_path(char *path, size_t len)
{
	char self[PATH_MAX - 32], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return -1;
	self[n] = '\0';
	slash = strrchr(self, '/');
	*slash = '\0';
	snprintf(path, len, "%s/gpu_pread_example", self);
	if (!access(path, X_OK))
		return 0;
	snprintf(path, len, "%s/../bin/gpu_pread_example", self);
	return access(path, X_OK);
}

/* Whether descriptor @fd of process @pid is a dma-buf ("/dmabuf:<name>"). */
static int is_dmabuf(pid_t pid, unsigned long long fd)
{
	char path[64], link[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%llu", pid, fd);
	n = readlink(path, link, sizeof(link) - 1);
	return n >= 8 && !strncmp(link, "/dmabuf:", 8);
}

/*
 * Runs @argv with its standard output into @out, stopped at every system
 * call. At the entry of a close() of a dma-buf, that buffer is duplicated
 * into this process (*@dmabuf; -1 if there was none). Returns the wait status
 * of the program, or -1 if it could not be run.
 */
static int run_traced(char *const argv[], char *out, size_t outlen, int *dmabuf)
{
	int pipefd[2], status = -1, pidfd, sig = 0;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	*dmabuf = -1;
	if (pipe(pipefd))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		dup2(pipefd[1], STDOUT_FILENO);
		close(pipefd[0]);
		close(pipefd[1]);
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pipefd[1]);
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	/* The first stop is the exec's SIGTRAP. */
	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status) || pidfd < 0) {
		ksft_print_msg("%s did not start: status %#x, pidfd %d\n", argv[0], status, pidfd);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		status = -1;
		goto out;
	}
	ptrace(PTRACE_SETOPTIONS, pid, NULL, PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL);
	for (;;) {
		if (ptrace(PTRACE_SYSCALL, pid, NULL, (void *)(long)sig) ||
		    waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
			break;
		sig = 0;
		if (WSTOPSIG(status) == (SIGTRAP | 0x80)) {
			struct __ptrace_syscall_info info;

			if (*dmabuf < 0 &&
			    ptrace(PTRACE_GET_SYSCALL_INFO, pid, (void *)sizeof(info), &info) > 0 &&
			    info.op == PTRACE_SYSCALL_INFO_ENTRY && info.entry.nr == SYS_close &&
			    is_dmabuf(pid, info.entry.args[0]))
				*dmabuf = syscall(SYS_pidfd_getfd, pidfd,
						  (int)info.entry.args[0], 0);
		} else {
			sig = WSTOPSIG(status); /* a signal for the program: deliver it */
		}
	}
	if (!WIFEXITED(status) && !WIFSIGNALED(status)) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
out:
	while (got + 1 < outlen && (n = read(pipefd[0], out + got, outlen - 1 - got)) > 0)
		got += n;
	out[got] = '\0';
	close(pipefd[0]);
	if (pidfd >= 0)
		close(pidfd);
	return status;
}

int main(void)
{
	char gpu[PATH_MAX], heap[PATH_MAX], prog[PATH_MAX], dev[64], disk[32], stat[PATH_MAX];
	char out[512], why[256], *crc;
	char in_path[] = DIR "/data", out_path[] = DIR "/copy", len_arg[32];
	long long rd0, wr0, rd, wr;
	uint8_t *want, *got, *map;
	int fd, dmabuf, status;

	ksft_print_header();
	ksft_set_plan(5);
	if (spin_gpu_find(gpu, sizeof(gpu)))
		SPIN_SKIP_MISSING("stand-in GPU not found");
	snprintf(heap, sizeof(heap), "/dev/dma_heap/p2p-%s", strrchr(gpu, '/') + 1);
	if (example_path(prog, sizeof(prog)))
		ksft_exit_fail_msg("gpu_pread_example not found beside %s or in ../bin\n", prog);
	if (spin_write_file("/sys/kernel/spin/mode", "auto"))
		ksft_exit_fail_msg("spin mode: %s\n", strerror(errno));
	if (spin_fs_make(SPIN_NVME0_SERIAL, SPIN_MKFS_EXT4, "ext4", DIR, 0, dev, sizeof(dev),
			 disk, sizeof(disk)))
		ksft_exit_fail_msg("ext4 on %s: %s\n", SPIN_NVME0_SERIAL, strerror(errno));
	snprintf(stat, sizeof(stat), "/sys/block/%s/spin/stat", disk);

	/* The input: the test pattern, written around the page cache (uncached). */
	want = spin_alloc_aligned(LEN);
	got = spin_alloc_aligned(LEN);
	if (!want || !got)
		ksft_exit_fail_msg("out of memory\n");
	spin_pattern_fill(want, 0, LEN, SEED);
	fd = open(in_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || spin_write_uncached(fd, want, LEN, 0))
		ksft_exit_fail_msg("%s: %s\n", in_path, strerror(errno));
	close(fd);

	rd0 = spin_stat_get(stat, "bytes_p2p");
	wr0 = spin_stat_get(stat, "write_bytes_p2p");
	snprintf(len_arg, sizeof(len_arg), "%lu", LEN);
	status = run_traced((char *const[]){ prog, heap, in_path, out_path, len_arg, NULL },
			    out, sizeof(out), &dmabuf);
	rd = spin_stat_get(stat, "bytes_p2p") - rd0;
	wr = spin_stat_get(stat, "write_bytes_p2p") - wr0;
	ksft_print_msg("%s %s %s %s %s: %s", prog, heap, in_path, out_path, len_arg, out);

	ksft_test_result(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
			 "gpu_pread_example exits 0 (wait status %#x)\n", status);

	crc = strstr(out, "crc32 ");
	ksft_test_result(crc && strtoul(crc + 6, NULL, 16) == spin_crc32(0, want, LEN),
			 "its CRC-32 of GPU memory is the file's (%08x)\n",
			 spin_crc32(0, want, LEN));

	map = dmabuf < 0 ? MAP_FAILED : mmap(NULL, LEN, PROT_READ, MAP_SHARED, dmabuf, 0);
	if (map == MAP_FAILED) {
		snprintf(why, sizeof(why), "no dma-buf taken over (fd %d): %s", dmabuf,
			 strerror(errno));
	} else if (spin_gpu_check(gpu, map, LEN, SEED, 0, why, sizeof(why))) {
		/* why says where */
	} else {
		snprintf(why, sizeof(why), "ok");
	}
	ksft_test_result(!strcmp(why, "ok"),
			 "its GPU memory holds the file, seen from the host side: %s\n", why);
	if (map != MAP_FAILED)
		munmap(map, LEN);
	if (dmabuf >= 0)
		close(dmabuf);

	fd = open(out_path, O_RDONLY);
	memset(got, 0, LEN);
	ksft_test_result(fd >= 0 && spin_read_uncached(fd, got, LEN, 0) == (ssize_t)LEN &&
			 spin_pattern_check(got, 0, LEN, SEED) < 0,
			 "the file it wrote from GPU memory holds the bytes (CPU reads)\n");
	if (fd >= 0)
		close(fd);

	ksft_test_result(rd == (long long)LEN && wr == (long long)LEN,
			 "%s: %lld bytes read and %lld written by P2P, of %lu each\n", disk, rd,
			 wr, LEN);

	unlink(in_path);
	unlink(out_path);
	if (umount(DIR))
		ksft_print_msg("umount %s: %s\n", DIR, strerror(errno));
	ksft_finished();
}
