"""Tests for course_lib.blocks (MLP, Block with its writes) and TinyLM's residual stream."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.blocks import MLP, Block
from course_lib.model import ModelConfig, TinyLM

from conftest import TINY, random_ids, tiny_model


def _randomise(module, seed):
    """Give every parameter (LayerNorm weights and biases included) seeded random values."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3 + (1.0 if p.ndim == 1 else 0.0))
    return module


# --- MLP ----------------------------------------------------------------------


def test_mlp_shape_and_hidden_width():
    mlp = MLP(12)
    assert mlp.up.weight.shape == (48, 12) and mlp.down.weight.shape == (12, 48)
    assert mlp(torch.randn(3, 5, 12)).shape == (3, 5, 12)


def test_mlp_matches_exact_gelu_by_hand():
    torch.manual_seed(0)
    mlp = MLP(8)
    x = torch.randn(2, 3, 8)
    h = x @ mlp.up.weight.T + mlp.up.bias
    want = 0.5 * h * (1 + torch.erf(h / 2 ** 0.5)) @ mlp.down.weight.T + mlp.down.bias
    torch.testing.assert_close(mlp(x), want)


@pytest.mark.parametrize("t", [0, 2, 4])
def test_mlp_changes_only_the_changed_position(t):
    torch.manual_seed(1)
    mlp = MLP(8)
    x = torch.randn(2, 5, 8)
    x2 = x.clone()
    x2[:, t] += 3.0
    with torch.no_grad():
        y, y2 = mlp(x), mlp(x2)
    others = [s for s in range(5) if s != t]
    assert torch.equal(y[:, others], y2[:, others])
    assert not torch.allclose(y[:, t], y2[:, t])


# --- Block --------------------------------------------------------------------


def test_block_writes_add_up_to_forward_bit_for_bit():
    torch.manual_seed(2)
    blk = _randomise(Block(16, 4), seed=3)
    x = torch.randn(2, 6, 16) * 2 + 1
    with torch.no_grad():
        attn_write, mlp_write = blk.writes(x)
        assert attn_write.shape == mlp_write.shape == (2, 6, 16)
        assert torch.equal(blk(x), x + attn_write + mlp_write)
        torch.testing.assert_close(attn_write, blk.attn(blk.norm1(x)))
        torch.testing.assert_close(mlp_write, blk.mlp(blk.norm2(x + attn_write)))


def test_block_matches_torch_pre_norm_encoder_layer():
    """Parity with nn.TransformerEncoderLayer(norm_first=True), a pre-norm block that is not ours."""
    torch.manual_seed(4)
    C, H, T = 16, 4, 7
    blk = _randomise(Block(C, H), seed=5).eval()
    ref = nn.TransformerEncoderLayer(C, H, dim_feedforward=4 * C, dropout=0.0, activation="gelu",
                                     batch_first=True, norm_first=True).eval()
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(blk.attn.qkv.weight)
        ref.self_attn.in_proj_bias.zero_()             # our attention has no biases
        ref.self_attn.out_proj.weight.copy_(blk.attn.proj.weight)
        ref.self_attn.out_proj.bias.zero_()
        for ours, theirs in ((blk.norm1, ref.norm1), (blk.norm2, ref.norm2),
                             (blk.mlp.up, ref.linear1), (blk.mlp.down, ref.linear2)):
            theirs.weight.copy_(ours.weight)
            theirs.bias.copy_(ours.bias)
        x = torch.randn(3, T, C)
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        torch.testing.assert_close(blk(x), ref(x, src_mask=mask, is_causal=True), atol=1e-5, rtol=1e-4)


def test_block_without_residual_replaces_the_stream():
    torch.manual_seed(6)
    blk = _randomise(Block(8, 2, residual=False), seed=7)
    x = torch.randn(2, 3, 8)
    with torch.no_grad():
        assert torch.equal(blk(x), blk.mlp(blk.norm2(blk.attn(blk.norm1(x)))))
    with pytest.raises(ValueError, match="residual=False.*no writes"):
        blk.writes(x)


def test_block_is_residual_by_default():
    assert Block(8, 2).residual and all(b.residual for b in tiny_model().blocks)
    assert not any(b.residual for b in tiny_model(residual=False).blocks)


def _block_grad_norms(residual, norm, n_layers=24):
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(**{**TINY, "d_model": 32, "n_layers": n_layers, "residual": residual})).double()
    if not norm:
        for block in model.blocks:
            block.norm1 = block.norm2 = nn.Identity()
    ids = random_ids(2, 9)
    F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()).backward()
    return [torch.cat([p.grad.flatten() for p in b.parameters()]).norm().item() for b in model.blocks]


def test_residuals_keep_gradients_flowing_in_a_deep_stack():
    with_res = _block_grad_norms(residual=True, norm=True)
    plain = _block_grad_norms(residual=False, norm=False)
    assert max(with_res) / min(with_res) < 20
    assert plain[0] < 1e-20 * plain[-1]


# --- TinyLM's residual stream ---------------------------------------------------


def test_residual_stream_labels_shapes_and_start():
    model = tiny_model()
    ids = random_ids(3, 5)
    with torch.no_grad():
        stream = model.residual_stream(ids)
        start = model.tok_emb(ids) + model.pos_emb(torch.arange(5))
    labels = [label for label, _ in stream]
    assert labels == ["embed", "block 0 attn", "block 0 mlp", "block 1 attn", "block 1 mlp"]
    assert all(x.shape == (3, 5, TINY["d_model"]) for _, x in stream)
    assert torch.equal(stream[0][1], start)


def test_residual_stream_ends_where_the_model_reads_it():
    model = tiny_model(n_layers=3)
    ids = random_ids(2, 7)
    with torch.no_grad():
        last = model.residual_stream(ids)[-1][1]
        assert torch.equal(model.head(model.norm(last)), model(ids))


def test_residual_stream_is_the_running_sum_of_the_writes():
    model = _randomise(tiny_model(), seed=8)
    ids = random_ids(2, 6)
    with torch.no_grad():
        writes, stream = model.residual_writes(ids), model.residual_stream(ids)
    assert [w[0] for w in writes] == [s[0] for s in stream]
    for k in range(1, len(stream)):
        assert torch.equal(stream[k][1], stream[k - 1][1] + writes[k][1])
    for i, block in enumerate(model.blocks):  # each block's two writes, from the block itself
        with torch.no_grad():
            a, m = block.writes(stream[2 * i][1])
        assert torch.equal(a, writes[2 * i + 1][1]) and torch.equal(m, writes[2 * i + 2][1])


def test_residual_stream_carries_gradients():
    model = tiny_model()
    model.residual_stream(random_ids(1, 4))[-1][1].sum().backward()
    assert model.blocks[0].mlp.up.weight.grad.abs().sum() > 0


def test_residual_stream_errors():
    with pytest.raises(ValueError, match="residual=False.*residual=True"):
        tiny_model(residual=False).residual_stream(random_ids(1, 4))
    with pytest.raises(ValueError, match="longer than max_len=16"):
        tiny_model().residual_writes(random_ids(1, 17))
    with pytest.raises(TypeError, match=r"idx.long\(\)"):
        tiny_model().residual_stream(torch.zeros(1, 4))
