"""Checkers for the exercises, one per exercise, grouped by lesson.

`check_<name>(<name>)` tries the learner's function on small cases, coarse to subtle,
and raises AssertionError with feedback a learner can act on, or prints one line.
"""
from course_lib.checks.lesson00 import check_next_token_targets
from course_lib.checks.lesson01 import check_attention, check_attention_steps, check_softmax
from course_lib.checks.lesson02 import check_causal_mask, check_masked_attention

__all__ = ["check_next_token_targets", "check_softmax", "check_attention",
           "check_attention_steps", "check_causal_mask", "check_masked_attention"]
