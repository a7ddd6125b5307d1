/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the spin benches (tools/testing/spin/bench): the
 * clock, TAP lines, options from the kernel command line, medians, the
 * drain of QEMU's throttling burst, and tracefs.
 */
#ifndef SPIN_BENCH_LIB_H
#define SPIN_BENCH_LIB_H

#include <stdarg.h>
#include <stdio.h>
#include <sys/types.h>

#ifndef __printf
#define __printf(a, b) __attribute__((format(printf, a, b)))
#endif

/* TAP lines printed so far, and how many were "not ok". */
extern int bench_tapn, bench_failures;

double bench_now(void);
__printf(1, 2) void bench_fail(const char *fmt, ...);
void bench_vfail(const char *fmt, va_list ap);
void bench_vdie(const char *name, double t0, void (*cleanup)(void), const char *fmt,
		va_list ap);
const char *bench_opt(const char *bench, const char *key);
long long bench_opt_ll(const char *bench, const char *key, long long def);
double bench_median(const double *v, int n);
int bench_drain(int fd, long long dev_size, long long bps, long long iops, void *buf);
unsigned long long bench_rng(unsigned long long *state);
int bench_pattern_file(const char *path, size_t len, unsigned long long seed, void *buf,
		       size_t buf_len);
int bench_trace_on(const char *const *events, int n, int buffer_kb);
FILE *bench_trace_off(const char *const *events, int n);
int bench_trace_lost(const char *line);

#endif /* SPIN_BENCH_LIB_H */
