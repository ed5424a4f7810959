"""course_lib: the tested reference implementations behind the transformer course.

Modules, one concept each, and the lessons that use them:

    device      pick_device: CUDA, then MPS, then CPU                        all lessons
    data        byte-level tokenizer, the corpus, batches                     00, 02-06
    attention   softmax, attention, causal_mask, multi-head attention         01-03
    positions   learned, sinusoidal and rotary (RoPE) positions               05
    blocks      the MLP and the pre-norm transformer block                     00, 04
    model       ModelConfig and TinyLM, with its residual stream              00, 02-07
    costs       parameter counts, exact and by rule of thumb                   04
    training    loss, train_step, the training loop, presets                  02-06
    checkpoint  saving and safely loading models and runs                     06, 07
    kv_cache    the preallocated per-layer key/value cache                     07
    generation  sampling text, with or without the cache                      02, 06, 07
    checks      the graders of the exercises, one module per lesson           00-07
    train       the training command (also under torchrun)                    (tooling)
    exercises   makes exercises/ from notebooks/                              (tooling)
    grading     grades a learner's notebook, or a class's                     (tooling)
"""
__version__ = "0.1.0"
