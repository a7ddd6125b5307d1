// SPDX-License-Identifier: GPL-2.0

//! The shared unit-test cases of rust/spin/sched/cases.rs, one `#[test]` each, as KUnit runs them.

use spin_core::sched::cases;

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                if let Err(e) = cases::$name() {
                    panic!("{} failed at rust/spin/sched/cases.rs:{}: {}", stringify!($name), e.line, e.what);
                }
            }
        )*

        /// Every case in `cases::CASES` has a wrapper here, and no other.
        #[test]
        fn all_cases_wrapped() {
            let wrapped: &[&str] = &[$(stringify!($name)),*];
            let listed: Vec<&str> = cases::CASES.iter().map(|c| c.0).collect();
            assert_eq!(wrapped, listed.as_slice());
        }
    };
}

cases!(
    params_paper_and_gen4,
    params_reject_inconsistent,
    params_copy_first_max,
    params_reject_out_of_range,
    t_p2p_is_a_subadditive_hinge,
    runs_builder_merges_and_bounds,
    runs_reject_bad_input,
    check_detects_bad_schedules,
    greedy_paper_example,
    greedy_fully_cached_uses_page_cache,
    greedy_edges_and_large_run,
    released_rule_thresholds,
    optimal_paper_params_one_transfer,
    optimal_extends_into_cached_run,
    optimal_matches_page_reference,
    optimal_reports_small_buffers,
    optimal_bridges_short_gaps,
    optimal_exact_beyond_validated_ranges,
    overlap_splits_cached_request,
    overlap_not_worse_than_additive,
    overlap_queue_depth,
    overlap_cached_wants_p2p,
    plan_window_rounds_inwards,
    plan_bitmap_to_runs,
    plan_legs_cover_the_request,
    readahead_sequential_rule,
    readahead_prefetch_rule,
    partition_bounds_pages_fifo,
    partition_rebuilt_smaller,
    partition_holds_busy_pages,
    partition_watermarks_order,
    partition_reserves_windows,
    partition_consumed_streams,
    readahead_leg_reserve,
    readahead_leg_in_window,
    readahead_bridge_range,
    readahead_same_page,
    readahead_streaming_rule,
    readahead_ahead_wins,
    readahead_leg_fits,
);
