"""course_lib: the tested reference implementations behind the transformer course.

Modules, one concept each, and the lessons that use them:

    device      pick_device (CUDA, MPS, then CPU) and one torch CPU thread    all lessons
    paths       where the data is: the repository, or inside a wheel          (data, costs)
    data        byte-level tokenizer, the corpus, batches                     00, 02-06
    attention   softmax, attention, causal_mask, multi-head and grouped-query  01-03, 08, 10
    positions   learned, sinusoidal and rotary (RoPE) positions               05, 08
    blocks      LayerNorm/RMSNorm, GELU MLP/SwiGLU, the pre-norm block        00, 04, 08
    model       ModelConfig (with the modern options) and TinyLM              00, 02-10
    costs       parameters, FLOPs, KV-cache and training memory of a config   04, 07-10
    training    loss, train_step, the training loop, presets                  02-06, 08
    checkpoint  saving and safely loading models and runs                     06, 07
    kv_cache    the preallocated per-layer key/value cache                     07, 08
    generation  sampling text, with or without the cache                      02, 06, 07, 10
    convert     Hugging Face GPT-2 and Llama configs and weights into TinyLM  08, 10
    display     show_with_still: a live widget with a still picture of it     01, 07
    readings    words a lesson prints about its own measurements              06, 08, 09
    checks      the graders of the exercises, one module per lesson           00-10
    train       the training command (also under torchrun)                    (tooling)
    exercises   makes exercises/ from notebooks/                              (tooling)
    hub         nbgitpuller links; a JupyterHub's CPU and memory limits       (tooling, all lessons)
    live        the instructors' live view of a lab: a JupyterHub service     (tooling, on a hub)
    grading     grades a learner's notebook, or a class's, under nbval        (tooling)
"""
__version__ = "0.1.0"
