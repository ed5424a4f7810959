"""The KV cache and cached generation: the same tokens as rerunning the prefix, from a fixed-size cache."""
import pytest
import torch

from course_lib.generation import generate, pick
from course_lib.kv_cache import KVCache

from conftest import random_ids, tiny_model


def cached_logits(model, seq, prefill):
    """Logits for every position of seq: the first `prefill` in one pass, then one position at a time."""
    cache = KVCache.for_model(model, seq.shape[0])
    out = [model(seq[:, :prefill], cache)]
    for t in range(prefill, seq.shape[1]):
        out.append(model(seq[:, t:t + 1], cache))
    return torch.cat(out, dim=1), cache


@pytest.mark.parametrize("prefill", [1, 5, 16])
def test_each_cached_step_equals_the_full_pass(prefill):
    model = tiny_model().eval()
    seq = random_ids(3, 16)
    with torch.no_grad():
        got, cache = cached_logits(model, seq, prefill)
        want = model(seq)
    assert cache.length == 16
    assert (got - want).abs().max() < 1e-5


def test_prefill_in_chunks_equals_one_pass():
    model = tiny_model().eval()
    seq = random_ids(2, 12)
    cache = KVCache.for_model(model, 2)
    with torch.no_grad():
        first, second = model(seq[:, :7], cache), model(seq[:, 7:], cache)
        assert (torch.cat([first, second], 1) - model(seq)).abs().max() < 1e-5


@pytest.mark.parametrize("temperature, top_k", [(0, None), (1.0, None), (0.8, 5)])
def test_cached_and_uncached_generation_give_the_same_tokens(temperature, top_k):
    model = tiny_model(max_len=24)
    for seed in range(12):
        B, T = 1 + seed % 3, 1 + (5 * seed) % 24
        prompt = random_ids(B, T, seed=seed)
        n_new = 24 - T + 6 * (seed % 2)  # up to max_len, and past it on odd seeds
        runs = [generate(model, prompt, n_new, temperature, top_k, use_cache=use_cache,
                         generator=torch.Generator().manual_seed(seed)) for use_cache in (True, False)]
        assert runs[0].shape == (B, T + n_new)
        assert torch.equal(runs[0][:, :T], prompt)
        assert torch.equal(runs[0], runs[1]), f"seed {seed}: cached and uncached tokens differ"


def test_a_long_prompt_is_cut_to_the_window_in_both_paths():
    model = tiny_model(max_len=8)
    prompt = random_ids(2, 20)
    a, b = (generate(model, prompt, 5, temperature=0, use_cache=c) for c in (True, False))
    assert torch.equal(a, b) and torch.equal(a[:, :20], prompt)


def test_the_cache_is_preallocated_and_written_in_place():
    model = tiny_model().eval()
    cache = KVCache.for_model(model, 2)
    keys, where = cache.keys, cache.keys.data_ptr()
    seq = random_ids(2, 10)
    with torch.no_grad():
        model(seq[:, :4], cache)
        for t in range(4, 10):
            model(seq[:, t:t + 1], cache)
    assert cache.keys is keys and cache.keys.data_ptr() == where
    assert cache.keys[:, :, :, 10:].abs().sum() == 0           # nothing written past the length
    assert cache.keys[:, :, :, :10].abs().sum() > 0


def test_bytes_per_token_formula_matches_the_tensors():
    model = tiny_model(n_layers=3, d_model=32, n_heads=4, max_len=16)
    cache = KVCache.for_model(model, batch_size=5)
    assert cache.bytes_per_token == 2 * 3 * 4 * 8 * 4           # K and V x L x H x D x float32
    assert cache.nbytes == cache.bytes_per_token * 5 * 16        # per token x B x max_len
    half = KVCache(32, 1, 8, 16, 128, dtype=torch.bfloat16)      # Llama 3 8B's shape
    assert half.bytes_per_token == 131_072


def test_cache_errors_are_clear():
    model = tiny_model(max_len=8)
    cache = KVCache.for_model(model, 1)
    with torch.no_grad():
        model(random_ids(1, 6), cache)
        with pytest.raises(ValueError, match="holds 6 positions, and 3 more would pass max_len=8"):
            model(random_ids(1, 3), cache)
        with pytest.raises(ValueError, match="made for 1 sequences, the input has 2"):
            model(random_ids(2, 1), cache)
    open_model = tiny_model(causal=False)
    with pytest.raises(ValueError, match="needs causal attention"):
        open_model(random_ids(1, 2), KVCache.for_model(open_model, 1))


def test_update_refuses_to_overflow():
    cache = KVCache(1, 1, 1, 4, 2)
    cache.update(0, torch.ones(1, 1, 3, 2), torch.ones(1, 1, 3, 2))
    cache.advance(3)
    with pytest.raises(ValueError, match="holds 3 positions and 2 more would pass its max_len=4"):
        cache.update(0, torch.ones(1, 1, 2, 2), torch.ones(1, 1, 2, 2))


def test_pick_greedy_and_top_k():
    logits = torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 5.0]])
    assert pick(logits, temperature=0).tolist() == [[1], [2]]
    g = torch.Generator().manual_seed(0)
    assert all(pick(logits, 1.0, top_k=1, generator=g).tolist() == [[1], [2]] for _ in range(20))


def test_generate_restores_training_mode_and_checks_arguments():
    model = tiny_model().train()
    generate(model, random_ids(1, 3), 2)
    assert model.training
    with pytest.raises(ValueError, match="n_new must be >= 0"):
        generate(model, random_ids(1, 3), -1)


def test_a_model_without_the_mask_generates_without_a_cache():
    model = tiny_model(causal=False)
    prompt = random_ids(1, 4)
    assert torch.equal(generate(model, prompt, 5, temperature=0, use_cache=True),
                       generate(model, prompt, 5, temperature=0, use_cache=False))
