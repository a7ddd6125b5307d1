// SPDX-License-Identifier: GPL-2.0
/*
 * Fails on purpose. Only `make test-selfcheck` puts it into the guest, to
 * prove that a failing VM test turns the run red.
 */
#include "kselftest.h"

int main(void)
{
	ksft_print_header();
	ksft_set_plan(2);
	ksft_test_result_pass("selfcheck: a passing case\n");
	ksft_test_result_fail("selfcheck: a deliberately failing case\n");
	ksft_finished();
}
