"""Every fast path equals its plain one: decoding token for token (and logit for logit),
training step for step in float32; the bf16 mode runs and learns; bad options are refused."""
import pytest
import torch

from course_lib.checkpoint import load_model
from course_lib.generation import FastDecoder, generate
from course_lib.kv_cache import KVCache

from conftest import ROOT, random_ids, tiny_model

# The options of ModelConfig that change the decode step, alone and together.
CONFIGS = [
    dict(),
    dict(positions="rope"),
    dict(n_kv_heads=2),
    dict(n_kv_heads=1, positions="rope"),
    dict(norm="rmsnorm"),
    dict(mlp="swiglu"),
    dict(attn_bias=True, gelu_approx="tanh", tie_embeddings=False),
    dict(norm="rmsnorm", mlp="swiglu", positions="rope", n_kv_heads=2, tie_embeddings=False),
]


@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_a_fast_step_gives_the_readable_steps_logits_bit_for_bit(options):
    model = tiny_model(max_len=24, **options).eval()
    seq = random_ids(3, 20)
    plain, fast = KVCache.for_model(model, 3), KVCache.for_model(model, 3)
    with torch.inference_mode():
        model(seq[:, :5], plain)
        model(seq[:, :5], fast)
        decoder = FastDecoder(model, fast)
        for t in range(5, 20):
            want = model(seq[:, t:t + 1], plain)[:, -1]
            got = decoder.step(seq[:, t])
            assert torch.equal(got, want), f"position {t}: logits differ"
    assert fast.length == plain.length == 20
    assert torch.equal(fast.keys, plain.keys) and torch.equal(fast.values, plain.values)


@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("temperature, top_k", [(0, None), (1.0, None), (0.8, 5)])
def test_fast_generation_gives_the_same_tokens(options, temperature, top_k):
    model = tiny_model(max_len=24, **options)
    for seed in range(4):
        B, T = 1 + seed % 3, 1 + (7 * seed) % 24
        prompt = random_ids(B, T, seed=seed)
        n_new = 24 - T + 6 * (seed % 2)  # up to max_len, and past it on odd seeds
        runs = [generate(model, prompt, n_new, temperature, top_k, fast=fast,
                         generator=torch.Generator().manual_seed(seed)) for fast in (False, True)]
        assert runs[1].dtype == runs[0].dtype and runs[1].shape == runs[0].shape
        assert torch.equal(runs[0], runs[1]), f"seed {seed}: fast and readable tokens differ"


def test_fast_generation_on_the_trained_checkpoint_gives_the_same_tokens():
    model = load_model(ROOT / "data" / "tinylm.pt")
    prompt = torch.tensor([list(b"ROMEO:\n"), list(b"To be, ")])
    for temperature in (0, 0.8):
        a, b = (generate(model, prompt, 150, temperature=temperature, fast=fast,
                         generator=torch.Generator().manual_seed(3)) for fast in (False, True))
        assert torch.equal(a, b)


def test_fast_generation_leaves_the_model_as_it_found_it():
    model = tiny_model().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = generate(model, random_ids(2, 4).int(), 0, fast=True)
    assert out.dtype == torch.int32  # n_new = 0 returns the prompt itself, as the plain path does
    generate(model, random_ids(2, 4).int(), 5, fast=True)
    assert model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize("kwargs, options, error, message", [
    (dict(fast=True, use_cache=False), {}, ValueError, "use_cache=False"),
    (dict(fast="yes"), {}, TypeError, "fast must be True or False"),
    (dict(fast=True), dict(causal=False), ValueError, "causal=False"),
    (dict(fast=True), dict(residual=False), ValueError, "residual=False"),
])
def test_bad_fast_options_are_refused(kwargs, options, error, message):
    model = tiny_model(**options)
    with pytest.raises(error, match=message):
        generate(model, random_ids(1, 3), 2, **kwargs)
