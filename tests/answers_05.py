"""Answers to lesson 05's exercises (positions), for testing the graders."""
from answers import Wrong

REFERENCE = {
    "sinusoidal_positions": """\
pos = torch.arange(T, dtype=torch.float32)[:, None]
two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
angles = pos / 10000 ** (two_i / d_model)
pe = torch.zeros(T, d_model)
pe[:, 0::2] = torch.sin(angles)
pe[:, 1::2] = torch.cos(angles)
return pe""",
    "apply_rope": """\
D = x.shape[-1]
freqs = base ** (-torch.arange(0, D, 2) / D)
angles = positions[:, None] * freqs
cos, sin = torch.cos(angles), torch.sin(angles)
a, b = x[..., 0::2], x[..., 1::2]
return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)""",
}


def _table(angles, fill):
    """A sinusoidal body: `angles` is the (T, d_model / 2) expression, `fill` the assignment lines."""
    return f"""\
pos = torch.arange(T)[:, None].float()
two_i = torch.arange(0, d_model, 2).float()
angles = {angles}
pe = torch.zeros(T, d_model)
{fill}
return pe"""


INTERLEAVED = "pe[:, 0::2] = torch.sin(angles)\npe[:, 1::2] = torch.cos(angles)"


def _rope(a_new="a * cos - b * sin", b_new="a * sin + b * cos", angles="positions[:, None] * freqs",
          freqs="base ** (-torch.arange(0, D, 2) / D)", pairs="x[..., 0::2], x[..., 1::2]"):
    """An apply_rope body with one piece swapped for a mistake."""
    return f"""\
D = x.shape[-1]
freqs = {freqs}
angles = {angles}
cos, sin = torch.cos(angles), torch.sin(angles)
a, b = {pairs}
return torch.stack([{a_new}, {b_new}], dim=-1).flatten(-2)"""


WRONG = [
    # 05 sinusoidal_positions
    Wrong("sinusoidal_positions", "sin and cos swapped",
          _table("pos / 10000 ** (two_i / d_model)",
                 "pe[:, 0::2] = torch.cos(angles)\npe[:, 1::2] = torch.sin(angles)"),
          "sin and cos are swapped", inject=True),
    Wrong("sinusoidal_positions", "exponent i instead of 2i",
          _table("pos / 10000 ** (torch.arange(d_model // 2).float() / d_model)", INTERLEAVED),
          "you used i/d_model"),
    Wrong("sinusoidal_positions", "column index in the exponent", """\
pos = torch.arange(T)[:, None].float()
j = torch.arange(d_model).float()
angles = pos / 10000 ** (j / d_model)
return torch.where(torch.arange(d_model) % 2 == 0, torch.sin(angles), torch.cos(angles))""",
          "both columns of a pair share one frequency"),
    Wrong("sinusoidal_positions", "divides the exponent by T",
          _table("pos / 10000 ** (two_i / T)", INTERLEAVED), "not by T, the number of positions"),
    Wrong("sinusoidal_positions", "sines then cosines",
          _table("pos / 10000 ** (two_i / d_model)",
                 "pe = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)"),
          "interleave the columns"),
    Wrong("sinusoidal_positions", "multiplies instead of dividing",
          _table("pos * 10000 ** (two_i / d_model)", INTERLEAVED), "you multiplied by it"),
    Wrong("sinusoidal_positions", "floor division in the exponent",
          _table("pos / 10000 ** (two_i // d_model)", INTERLEAVED), "not floor division (//)"),
    Wrong("sinusoidal_positions", "transposed",
          _table("pos / 10000 ** (two_i / d_model)", INTERLEAVED).replace("return pe", "return pe.T"),
          "one row per position"),
    # 05 apply_rope
    Wrong("apply_rope", "rotates the halves", """\
D = x.shape[-1]
angles = positions[:, None] * base ** (-torch.arange(0, D, 2) / D)
cos, sin = torch.cos(angles), torch.sin(angles)
a, b = x[..., : D // 2], x[..., D // 2:]
return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)""",
          "this lesson pairs dimension 2i with 2i + 1", inject=True),
    Wrong("apply_rope", "same rotation at every position", _rope(angles="freqs.expand(len(positions), -1)"),
          "the angle must be proportional to the position"),
    Wrong("apply_rope", "wrong direction", _rope(a_new="a * cos + b * sin", b_new="-a * sin + b * cos"),
          "you rotated the wrong way"),
    Wrong("apply_rope", "second dimension not rotated", _rope(b_new="b"),
          "both dimensions of a pair turn"),
    Wrong("apply_rope", "first dimension not rotated", _rope(a_new="a"),
          "both dimensions of a pair turn"),
    Wrong("apply_rope", "drops the a sin term", _rope(b_new="b * cos"),
          "both dimensions of a pair turn"),
    Wrong("apply_rope", "exponent i instead of 2i", _rope(freqs="base ** (-torch.arange(D // 2) / D)"),
          "you used base^(-i/D)"),
    Wrong("apply_rope", "arange instead of positions",
          _rope(angles="torch.arange(x.shape[-2])[:, None] * freqs"),
          "rotate by the positions you are given"),
    Wrong("apply_rope", "slices axis 1, not the last", _rope(pairs="x[:, 0::2], x[:, 1::2]"),
          "x[..., 0::2] and x[..., 1::2]"),
    Wrong("apply_rope", "ignores base", _rope(freqs="10000.0 ** (-torch.arange(0, D, 2) / D)"),
          "use the `base` argument"),
    Wrong("apply_rope", "rotates x in place", """\
D = x.shape[-1]
angles = positions[:, None] * base ** (-torch.arange(0, D, 2) / D)
cos, sin = torch.cos(angles), torch.sin(angles)
a, b = x[..., 0::2].clone(), x[..., 1::2].clone()
x[..., 0::2] = a * cos - b * sin
x[..., 1::2] = a * sin + b * cos
return x""",
          "changed its input x in place"),
]

WRONG += [
    Wrong("apply_rope", "pair written back swapped", _rope(a_new="a * sin + b * cos", b_new="a * cos - b * sin"),
          "you wrote them the other way round"),
    Wrong("apply_rope", "pairs written back as halves",
          _rope().replace("torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)",
                          "torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)"),
          "torch.cat puts all the a's first"),
    Wrong("apply_rope", "forgets to return",
          _rope().replace("return torch.stack", "out = torch.stack"),
          "finish it with a `return`"),
]

REFERENCE["rope_scores"] = """\
D = q.shape[-1]
freqs = base ** (-torch.arange(0, D, 2, dtype=q.dtype) / D)
t = distances[:, None] * freqs
qa, qb, ka, kb = q[0::2], q[1::2], k[0::2], k[1::2]
return ((qa * ka + qb * kb) * torch.cos(t) + (qb * ka - qa * kb) * torch.sin(t)).sum(-1)"""


def _scores(terms="(qa * ka + qb * kb) * torch.cos(t) + (qb * ka - qa * kb) * torch.sin(t)",
            freqs="base ** (-torch.arange(0, D, 2, dtype=q.dtype) / D)",
            pairs="q[0::2], q[1::2], k[0::2], k[1::2]", total=".sum(-1)"):
    """A rope_scores body with one piece swapped for a mistake."""
    return f"""\
D = q.shape[-1]
freqs = {freqs}
t = distances[:, None] * freqs
qa, qb, ka, kb = {pairs}
return ({terms}){total}"""


WRONG += [
    Wrong("rope_scores", "sin term with the wrong sign",
          _scores(terms="(qa * ka + qb * kb) * torch.cos(t) + (qa * kb - qb * ka) * torch.sin(t)"),
          "these are the scores at -distance", inject=True),
    Wrong("rope_scores", "no cross term", _scores(terms="(qa * ka + qb * kb) * torch.cos(t)"),
          "the term (q_b k_a - q_a k_b) sin t is missing"),
    Wrong("rope_scores", "pairs the halves",
          _scores(pairs="q[:D // 2], q[D // 2:], k[:D // 2], k[D // 2:]"),
          "you paired the halves"),
    Wrong("rope_scores", "exponent i instead of 2i",
          _scores(freqs="base ** (-torch.arange(D // 2, dtype=q.dtype) / D)"),
          "you used base^(-i/D)"),
    Wrong("rope_scores", "ignores base",
          _scores(freqs="10000.0 ** (-torch.arange(0, D, 2, dtype=q.dtype) / D)"),
          "use the `base` argument"),
    Wrong("rope_scores", "terms not summed over the pairs", _scores(total=""),
          "sum the pairs' terms over the last axis"),
    Wrong("rope_scores", "float32 frequencies returned as float32 for float64 input",
          _scores(freqs="base ** (-torch.arange(0, D, 2) / D)", total=".sum(-1).float()"),
          "the result has the wrong dtype"),
]

# Right answers written differently from the reference: each must pass its checker.
ALTERNATIVES = [
    ("sinusoidal_positions", "exp and log, as in the Annotated Transformer", """\
pos = torch.arange(T).unsqueeze(1).float()
div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
pe = torch.zeros(T, d_model)
pe[:, 0::2] = torch.sin(pos * div)
pe[:, 1::2] = torch.cos(pos * div)
return pe"""),
    ("sinusoidal_positions", "NumPy, stacked then reshaped, returned as a tensor", """\
angles = np.arange(T)[:, None] / 10000 ** (np.arange(d_model // 2) * 2 / d_model)
return torch.from_numpy(np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(T, d_model))"""),
    ("apply_rope", "complex numbers, as in Meta's original Llama code", """\
D = x.shape[-1]
angles = positions[:, None].double() * base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2).contiguous())
turned = pairs * torch.polar(torch.ones_like(angles), angles)
return torch.view_as_real(turned).reshape(x.shape).to(x.dtype)"""),
    ("rope_scores", "apply_rope at positions 0 and distance", """\
from course_lib.positions import apply_rope
keys = apply_rope(k.expand(len(distances), -1), distances, base)
return (apply_rope(q[None], torch.tensor([0]), base) @ keys.T)[0]"""),
    ("rope_scores", "complex numbers", """\
D = q.shape[-1]
t = distances[:, None].double() * base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
qc = torch.complex(q[0::2].double(), q[1::2].double())
kc = torch.complex(k[0::2].double(), k[1::2].double())
return (qc.conj() * kc * torch.exp(1j * t)).real.sum(-1).to(q.dtype)"""),
]

# Kinds a class found (issue 21), each with more than one instance.
WRONG += [
    # the course's own functions are the answer key
    Wrong("sinusoidal_positions", "course_lib's table", """\
from course_lib import positions
return positions.sinusoidal_positions(T, d_model)""", "calls course_lib's own sinusoidal_positions"),
    Wrong("sinusoidal_positions", "course_lib's table, cast", """\
from course_lib.positions import sinusoidal_positions as table
return table(T, d_model).double()""", "calls course_lib's own sinusoidal_positions"),
    Wrong("apply_rope", "course_lib's apply_rope", """\
import course_lib.positions as course_positions
return course_positions.apply_rope(x, positions, base=base)""",
          "calls course_lib's own apply_rope"),
    Wrong("apply_rope", "course_lib's apply_rope, imported", """\
from course_lib.positions import apply_rope as rope
return rope(x, positions, base)""", "calls course_lib's own apply_rope"),
    # the return type the statement names: a float tensor
    Wrong("sinusoidal_positions", "a NumPy table", """\
angles = np.arange(T)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
pe = np.zeros((T, d_model))
pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
return pe""", "should be a torch tensor, got a NumPy array"),
    Wrong("sinusoidal_positions", "an integer table", _table(
        "pos / 10000 ** (two_i / d_model)", INTERLEAVED).replace(
        "torch.zeros(T, d_model)", "torch.zeros(T, d_model, dtype=torch.long)"),
          "not a float tensor"),
    Wrong("sinusoidal_positions", "a list of rows", _table(
        "pos / 10000 ** (two_i / d_model)", INTERLEAVED).replace("return pe", "return pe.tolist()"),
          "should be a torch tensor"),
    # positions that do not start at 0: a chunk after a cache, one decode step
    Wrong("apply_rope", "positions counted from the first one",
          _rope(angles="(positions - positions[0])[:, None] * freqs"),
          "or the positions minus the first one"),
    Wrong("apply_rope", "positions counted from the smallest",
          _rope(angles="(positions - positions.min())[:, None] * freqs"),
          "a chunk after a cache starts where the cache ends"),
    Wrong("apply_rope", "arange from the first position",
          _rope(angles="torch.arange(len(positions))[:, None] * freqs"),
          "rotate by the positions you are given"),
    # rope_scores: float64 checked to float64 precision, distances far from 0
    Wrong("rope_scores", "float32 frequencies for float64 input",
          _scores(freqs="(base ** (-torch.arange(0, D, 2) / D)).float()", total=".sum(-1)"),
          "right only to float32 precision"),
    Wrong("rope_scores", "computed in float32, returned in q's dtype", """\
D = q.shape[-1]
qf, kf = q.float(), k.float()
t = distances[:, None].float() * base ** (-torch.arange(0, D, 2) / D)
qa, qb, ka, kb = qf[0::2], qf[1::2], kf[0::2], kf[1::2]
return ((qa * ka + qb * kb) * torch.cos(t) + (qb * ka - qa * kb) * torch.sin(t)).sum(-1).to(q.dtype)""",
          "right only to float32 precision"),
    Wrong("rope_scores", "distances counted from the first", _scores().replace(
        "t = distances[:, None] * freqs", "t = (distances - distances[0])[:, None] * freqs"),
          "the score at distance 0 is not q . k"),
]

ALTERNATIVES += [
    ("sinusoidal_positions", "one angle matrix, then torch.where", """\
angles = torch.arange(T)[:, None] * torch.exp(-math.log(10000.0) * (torch.arange(d_model) // 2 * 2) / d_model)
return torch.where(torch.arange(d_model) % 2 == 0, torch.sin(angles), torch.cos(angles))"""),
    ("apply_rope", "rotate-half trick on interleaved pairs", """\
D = x.shape[-1]
angles = positions[:, None] * base ** (-torch.arange(0, D, 2) / D)
cos = torch.cos(angles).repeat_interleave(2, dim=-1)
sin = torch.sin(angles).repeat_interleave(2, dim=-1)
turned = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
return x * cos + turned * sin"""),
]

WRONG += [
    Wrong("rope_scores", "exponent over D/2", _scores(
        freqs="base ** (-torch.arange(0, D, 2, dtype=q.dtype) / (D // 2))"), "the scores are not right"),
    Wrong("rope_scores", "summed over the distances", _scores(total=".sum(0)"),
          "the result has the wrong shape"),
    Wrong("rope_scores", "only the first pair", _scores(total="[:, 0]"),
          "the score at distance 0 is not q . k"),
]

ALTERNATIVES += [
    ("rope_scores", "k turned by hand, dotted with q", """\
D = q.shape[-1]
t = distances[:, None] * base ** (-torch.arange(0, D, 2, dtype=q.dtype) / D)
ka, kb = k[0::2], k[1::2]
turned = torch.stack([ka * t.cos() - kb * t.sin(), ka * t.sin() + kb * t.cos()], dim=-1)
return turned.flatten(-2) @ q"""),
]
