"""course_lib: the tested reference implementations behind the transformer course.

Modules, one concept each, and the lessons that use them:

    device      pick_device: CUDA, then MPS, then CPU                        all lessons
    data        byte-level tokenizer, the corpus, batches                     00, 02-05
    attention   softmax, attention, causal_mask, multi-head attention         01-03
    positions   learned, sinusoidal and rotary (RoPE) positions               05
    blocks      the MLP and the pre-norm transformer block                     00, 04
    model       ModelConfig and TinyLM, with its residual stream              00, 02-05
    costs       parameter counts, exact and by rule of thumb                   04
    training    next-token loss, train_step, a small training loop            02-04
    generation  sampling text one token at a time                             02
    checks      the graders of the exercises, one module per lesson           00-05
    exercises   makes exercises/ from notebooks/                              (tooling)
    grading     grades a learner's notebook, or a class's                     (tooling)
"""
__version__ = "0.1.0"
