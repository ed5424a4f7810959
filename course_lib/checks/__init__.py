"""Checkers for the exercises, one per exercise, grouped by lesson, and help on request.

`check_<name>(<name>)` tries the learner's function on small cases, coarse to subtle,
and raises AssertionError with feedback a learner can act on, or prints one line.
`answer(qid, given)` says whether an answer to one of a lesson's questions is right, and why.

Each name is imported from its module the first time it is asked for (PEP 562), so
`from course_lib.checks import check_softmax` loads lesson 01's checkers only, and a process
that needs the hints or the questions alone (the grader's) imports no checker and no torch.
`load_checkers()` imports them all, for a process that wants them in before its work starts.
"""
import importlib

_MODULES = {   # the module each exported name lives in
    "lesson00": ("check_next_byte_loss", "check_next_token_targets", "check_text_to_ids"),
    "lesson01": ("check_attention", "check_attention_steps", "check_softmax"),
    "lesson02": ("check_causal_mask", "check_future_leak", "check_masked_attention"),
    "lesson03": ("check_merge_heads", "check_multi_head_attention", "check_split_heads"),
    "lesson04": ("check_block_forward", "check_count_params", "check_layer_norm"),
    "lesson05": ("check_apply_rope", "check_rope_scores", "check_sinusoidal_positions"),
    "lesson06": ("check_cross_entropy", "check_lr_schedule", "check_sample_batch", "check_train_step"),
    "lesson07": ("check_cached_attention_step", "check_greedy_decode", "check_kv_bytes_per_token"),
    "lesson08": ("check_grouped_query_attention", "check_rms_norm", "check_swiglu"),
    "lesson09": ("check_attention_flops", "check_params_from_config", "check_tiled_attention"),
    "lesson10": ("check_gpt2_to_tinylm", "check_prefix_lm_mask", "check_previous_token_scores"),
    "lesson11": ("check_best_pair", "check_count_pairs", "check_decode_tokens", "check_encode_piece",
                 "check_merge_pair"),
    "hints": ("hint", "solution"),
    "questions": ("answer",),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}
_SUBMODULES = {*_MODULES, "core", "tables"}

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


def __getattr__(name):
    """A checker, hint, solution or answer (or one of the modules), imported on first use."""
    if name in _SUBMODULES:
        return importlib.import_module(f"course_lib.checks.{name}")
    if name not in _WHERE:
        raise AttributeError(f"module 'course_lib.checks' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"course_lib.checks.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


def load_checkers():
    """Import every lesson's checkers now (and with them torch); returns nothing."""
    for module in _MODULES:
        importlib.import_module(f"course_lib.checks.{module}")
