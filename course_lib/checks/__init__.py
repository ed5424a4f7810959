"""Checkers for the exercises, one per exercise, grouped by lesson, and help on request.

`check_<name>(<name>)` tries the learner's function on small cases, coarse to subtle,
and raises AssertionError with feedback a learner can act on, or prints one line.
`answer(qid, given)` says whether an answer to one of a lesson's questions is right, and why.
"""
from course_lib.checks.lesson00 import (check_next_byte_loss, check_next_token_targets,
                                        check_text_to_ids)
from course_lib.checks.lesson01 import check_attention, check_attention_steps, check_softmax
from course_lib.checks.lesson02 import (check_causal_mask, check_future_leak,
                                        check_masked_attention)
from course_lib.checks.lesson03 import check_merge_heads, check_multi_head_attention, check_split_heads
from course_lib.checks.lesson04 import check_block_forward, check_count_params, check_layer_norm
from course_lib.checks.lesson05 import (check_apply_rope, check_rope_scores,
                                        check_sinusoidal_positions)
from course_lib.checks.lesson06 import (check_cross_entropy, check_lr_schedule, check_sample_batch,
                                        check_train_step)
from course_lib.checks.lesson07 import (check_cached_attention_step, check_greedy_decode,
                                        check_kv_bytes_per_token)
from course_lib.checks.lesson08 import check_grouped_query_attention, check_rms_norm, check_swiglu
from course_lib.checks.lesson09 import (check_attention_flops, check_params_from_config,
                                        check_tiled_attention)
from course_lib.checks.lesson10 import (check_gpt2_to_tinylm, check_prefix_lm_mask,
                                        check_previous_token_scores)
from course_lib.checks.lesson11 import (check_best_pair, check_count_pairs, check_decode_tokens,
                                        check_encode_piece, check_merge_pair)
from course_lib.checks.hints import hint, solution
from course_lib.checks.questions import answer

__all__ = [
    "check_text_to_ids", "check_next_token_targets", "check_next_byte_loss",
    "check_softmax", "check_attention", "check_attention_steps",
    "check_causal_mask", "check_masked_attention", "check_future_leak",
    "check_split_heads", "check_merge_heads", "check_multi_head_attention",
    "check_layer_norm", "check_block_forward", "check_count_params",
    "check_sinusoidal_positions", "check_apply_rope", "check_rope_scores",
    "check_sample_batch", "check_cross_entropy", "check_train_step", "check_lr_schedule",
    "check_cached_attention_step", "check_greedy_decode", "check_kv_bytes_per_token",
    "check_rms_norm", "check_swiglu", "check_grouped_query_attention",
    "check_params_from_config", "check_attention_flops", "check_tiled_attention",
    "check_previous_token_scores", "check_prefix_lm_mask", "check_gpt2_to_tinylm",
    "check_count_pairs", "check_best_pair", "check_merge_pair", "check_encode_piece",
    "check_decode_tokens",
    "hint", "solution", "answer",
]
