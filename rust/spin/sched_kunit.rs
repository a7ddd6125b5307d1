// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rust_spin_sched`: the decision core's shared unit cases, run in the kernel.
//!
//! The cases live once, in [`crate::sched::cases`]; the host crate runs the very same functions
//! with `cargo test`. KUnit's `#[kunit_tests]` needs one literal `#[test]` function per case, so
//! each case has a one-line wrapper here, and `every_case_is_wrapped` fails if a case is added
//! to [`cases::CASES`] without one.

use kernel::prelude::*;

#[kunit_tests(rust_spin_sched)]
mod tests {
    use crate::sched::cases::{self, CaseError};
    use kernel::prelude::*;

    /// Number of wrappers below; must equal `cases::CASES.len()`.
    const WRAPPED: usize = 40;

    /// Logs where a case failed; KTAP names the case.
    fn report(result: Result<(), CaseError>) -> Result<(), CaseError> {
        result.inspect_err(|e| {
            pr_err!(
                "spin: sched case failed at rust/spin/sched/cases.rs:{}: {}\n",
                e.line,
                e.what
            )
        })
    }

    #[test]
    fn every_case_is_wrapped() {
        assert_eq!(cases::CASES.len(), WRAPPED);
    }

    #[test]
    fn params_paper_and_gen4() -> Result<(), CaseError> {
        report(cases::params_paper_and_gen4())
    }

    #[test]
    fn params_reject_inconsistent() -> Result<(), CaseError> {
        report(cases::params_reject_inconsistent())
    }

    #[test]
    fn params_reject_out_of_range() -> Result<(), CaseError> {
        report(cases::params_reject_out_of_range())
    }

    #[test]
    fn t_p2p_is_a_subadditive_hinge() -> Result<(), CaseError> {
        report(cases::t_p2p_is_a_subadditive_hinge())
    }

    #[test]
    fn runs_builder_merges_and_bounds() -> Result<(), CaseError> {
        report(cases::runs_builder_merges_and_bounds())
    }

    #[test]
    fn runs_reject_bad_input() -> Result<(), CaseError> {
        report(cases::runs_reject_bad_input())
    }

    #[test]
    fn check_detects_bad_schedules() -> Result<(), CaseError> {
        report(cases::check_detects_bad_schedules())
    }

    #[test]
    fn greedy_paper_example() -> Result<(), CaseError> {
        report(cases::greedy_paper_example())
    }

    #[test]
    fn greedy_fully_cached_uses_page_cache() -> Result<(), CaseError> {
        report(cases::greedy_fully_cached_uses_page_cache())
    }

    #[test]
    fn greedy_edges_and_large_run() -> Result<(), CaseError> {
        report(cases::greedy_edges_and_large_run())
    }

    #[test]
    fn released_rule_thresholds() -> Result<(), CaseError> {
        report(cases::released_rule_thresholds())
    }

    #[test]
    fn optimal_paper_params_one_transfer() -> Result<(), CaseError> {
        report(cases::optimal_paper_params_one_transfer())
    }

    #[test]
    fn optimal_extends_into_cached_run() -> Result<(), CaseError> {
        report(cases::optimal_extends_into_cached_run())
    }

    #[test]
    fn optimal_matches_page_reference() -> Result<(), CaseError> {
        report(cases::optimal_matches_page_reference())
    }

    #[test]
    fn optimal_reports_small_buffers() -> Result<(), CaseError> {
        report(cases::optimal_reports_small_buffers())
    }

    #[test]
    fn optimal_bridges_short_gaps() -> Result<(), CaseError> {
        report(cases::optimal_bridges_short_gaps())
    }

    #[test]
    fn optimal_exact_beyond_validated_ranges() -> Result<(), CaseError> {
        report(cases::optimal_exact_beyond_validated_ranges())
    }

    #[test]
    fn overlap_splits_cached_request() -> Result<(), CaseError> {
        report(cases::overlap_splits_cached_request())
    }

    #[test]
    fn overlap_not_worse_than_additive() -> Result<(), CaseError> {
        report(cases::overlap_not_worse_than_additive())
    }

    #[test]
    fn overlap_queue_depth() -> Result<(), CaseError> {
        report(cases::overlap_queue_depth())
    }

    #[test]
    fn overlap_cached_wants_p2p() -> Result<(), CaseError> {
        report(cases::overlap_cached_wants_p2p())
    }

    #[test]
    fn plan_window_rounds_inwards() -> Result<(), CaseError> {
        report(cases::plan_window_rounds_inwards())
    }

    #[test]
    fn plan_bitmap_to_runs() -> Result<(), CaseError> {
        report(cases::plan_bitmap_to_runs())
    }

    #[test]
    fn plan_legs_cover_the_request() -> Result<(), CaseError> {
        report(cases::plan_legs_cover_the_request())
    }

    #[test]
    fn readahead_sequential_rule() -> Result<(), CaseError> {
        report(cases::readahead_sequential_rule())
    }

    #[test]
    fn readahead_prefetch_rule() -> Result<(), CaseError> {
        report(cases::readahead_prefetch_rule())
    }

    #[test]
    fn partition_bounds_pages_fifo() -> Result<(), CaseError> {
        report(cases::partition_bounds_pages_fifo())
    }

    #[test]
    fn partition_rebuilt_smaller() -> Result<(), CaseError> {
        report(cases::partition_rebuilt_smaller())
    }

    #[test]
    fn partition_holds_busy_pages() -> Result<(), CaseError> {
        report(cases::partition_holds_busy_pages())
    }

    #[test]
    fn partition_watermarks_order() -> Result<(), CaseError> {
        report(cases::partition_watermarks_order())
    }

    #[test]
    fn partition_reserves_windows() -> Result<(), CaseError> {
        report(cases::partition_reserves_windows())
    }

    #[test]
    fn params_copy_first_max() -> Result<(), CaseError> {
        report(cases::params_copy_first_max())
    }

    #[test]
    fn partition_consumed_streams() -> Result<(), CaseError> {
        report(cases::partition_consumed_streams())
    }

    #[test]
    fn readahead_leg_reserve() -> Result<(), CaseError> {
        report(cases::readahead_leg_reserve())
    }

    #[test]
    fn readahead_leg_in_window() -> Result<(), CaseError> {
        report(cases::readahead_leg_in_window())
    }

    #[test]
    fn readahead_bridge_range() -> Result<(), CaseError> {
        report(cases::readahead_bridge_range())
    }

    #[test]
    fn readahead_same_page() -> Result<(), CaseError> {
        report(cases::readahead_same_page())
    }

    #[test]
    fn readahead_streaming_rule() -> Result<(), CaseError> {
        report(cases::readahead_streaming_rule())
    }

    #[test]
    fn readahead_ahead_wins() -> Result<(), CaseError> {
        report(cases::readahead_ahead_wins())
    }

    #[test]
    fn readahead_leg_fits() -> Result<(), CaseError> {
        report(cases::readahead_leg_fits())
    }
}
