"""Checkers for lesson 05, positions: the sinusoidal table and rotary embeddings (RoPE)."""
import numpy as np
import torch

from course_lib import positions as ref
from course_lib.checks.core import Checker, seed
from course_lib.checks.domain import each
from course_lib.checks.lesson04 import observed_call, own_messages, tensor_as_array


def _close(value, expected, atol=1e-4, rtol=1e-4):
    return value.shape == expected.shape and np.allclose(value, expected, atol=atol, rtol=rtol)


def _sin_cos_table(T, d, exponent, divide=True, swap=False, halves=False):
    """A (T, d) table built with one of the usual mistakes; exponent(i) is pair i's power of 10000."""
    pos = np.arange(T)[:, None]
    scale = 10000.0 ** np.array([exponent(i) for i in range(d // 2)], dtype=np.float64)
    angles = pos / scale if divide else pos * scale                   # (T, d / 2)
    first, second = (np.cos(angles), np.sin(angles)) if swap else (np.sin(angles), np.cos(angles))
    if halves:
        return np.concatenate([first, second], axis=1)
    return np.stack([first, second], axis=-1).reshape(T, d)


def sinusoidal_hint(T, d, got):
    """Name the usual mistake that explains this table, if one does."""
    __tracebackhide__ = True
    right = lambda i: 2 * i / d
    mistakes = [
        (_sin_cos_table(T, d, right, swap=True),
         "sin and cos are swapped: the even columns 2i hold sin and the odd columns 2i + 1 hold "
         "cos, so position 0 is [0, 1, 0, 1, ...]"),
        (_sin_cos_table(T, d, right, halves=True),
         "interleave the columns: column 2i is the sin and column 2i + 1 the cos of the same "
         "angle; you put all the sines first and all the cosines after them"),
        (_sin_cos_table(T, d, lambda i: i / d),
         "the exponent is 2i/d_model, where i counts the pairs: pair i (columns 2i and 2i + 1) "
         "uses 10000^(2i/d_model); you used i/d_model"),
        (_per_column(T, d),
         "both columns of a pair share one frequency: columns 2i and 2i + 1 both use "
         "10000^(2i/d_model); you put the column index in the exponent, so each cos column "
         "got 10000^((2i + 1)/d_model)"),
        (_sin_cos_table(T, d, lambda i: 2 * i / T),
         f"the exponent divides by d_model, the width ({d} here), not by T, the number of "
         f"positions ({T} here)"),
        (_sin_cos_table(T, d, right, divide=False),
         "divide the position by 10000^(2i/d_model); you multiplied by it"),
        (_sin_cos_table(T, d, lambda i: 0.0),
         "every pair has the same frequency, 1 radian per position: the exponent 2i/d_model came "
         "out as 0; use true division (/), not floor division (//)"),
    ]
    for table, hint in mistakes:
        if _close(got, table, atol=1e-3):
            return hint
    return None


def _per_column(T, d):
    """The table with column j's angle pos / 10000^(j/d): the column index in the exponent."""
    angles = np.arange(T)[:, None] / 10000.0 ** (np.arange(d) / d)  # (T, d)
    return np.where(np.arange(d) % 2 == 0, np.sin(angles), np.cos(angles))


def _own_answer(c, args, kwargs, course_fn, case):
    """Fail if fn(*args) calls course_lib's own answer to this exercise."""
    __tracebackhide__ = True
    _, seen = observed_call(c, *args, case=case, watch=(course_fn,), **kwargs)
    if seen["called"]:
        c.fail(f"your function calls course_lib's own {course_fn.__name__}", case=case,
               hint=f"write it yourself: course_lib.positions.{course_fn.__name__} is the answer "
                    f"key and earns no credit")
    c.ok()


@own_messages("sinusoidal_positions")
def check_sinusoidal_positions(fn):
    """Check sinusoidal_positions(T, d_model) -> (T, d_model) float tensor of sines and cosines."""
    __tracebackhide__ = True
    c = Checker("sinusoidal_positions", fn)
    _own_answer(c, (3, 4), {}, ref.sinusoidal_positions, "sinusoidal_positions(T=3, d_model=4)")
    for T, d in ((5, 6), (12, 4), (3, 16), (50, 10)):
        _table_one(c, (T, d), f"sinusoidal_positions(T={T}, d_model={d})")
    # any length (past tables of 128 to 1,024 positions) and any even width
    each(c, _draw_table, _table_one, n=20, stream=50)
    c.done()


_TABLE_FORMULA = ("PE[pos, 2i] = sin(pos / 10000^(2i/d_model)) and "
                  "PE[pos, 2i + 1] = cos(pos / 10000^(2i/d_model)), for i = 0 .. d_model/2 - 1")


def _draw_table(d):
    T = d.length()
    width = 2 * (d.size(1, 32, small=8) if T > 16 else d.size(1, 128, small=8))
    return (T, width), f"sinusoidal_positions(T={T}, d_model={width})"


def _table_one(c, args, case):
    """Check sinusoidal_positions on one (T, d_model), against the table in float64: a float32
    angle pos * frequency is off by up to about T * 1e-6 (the product's and the power's
    rounding), so the tolerance grows with T."""
    __tracebackhide__ = True
    T, d = args
    formula = _TABLE_FORMULA
    out = c.call(T, d, case=case)
    if isinstance(out, torch.Tensor) and not out.dtype.is_floating_point:
        c.fail("the table is not a float tensor", case=case, expected="torch.float32",
               got=str(out.dtype),
               hint="build the table as a float tensor (torch.zeros makes float32 by "
                    "default): an integer tensor rounds every sine and cosine to -1, 0 or 1")
    got = tensor_as_array(c, out, "the table", case,
                          hint="return a float torch tensor of shape (T, d_model)")
    c.shape(got, (T, d), "the table", case,
            hint="one row per position (T rows), one column per dimension (d_model columns)")
    c.finite(got, "the table", case, hint=formula)
    want = _sin_cos_table(T, d, lambda i: 2 * i / d)
    if not _close(got, want, atol=1e-5 + 1e-6 * T):
        hint = sinusoidal_hint(T, d, got)
        if hint is None and not _close(got[0], want[0], atol=1e-5):
            hint = ("at position 0 every angle is 0, so row 0 must be sin 0, cos 0, ... = "
                    "[0, 1, 0, 1, ...]; " + formula)
        c.fail("the table is not right", case=case, expected=want, got=got,
               hint=hint or formula)
    c.ok()


def _rope(x, positions, base=10000.0, exponent=None, sign=1.0, halves=False, keep=None,
          out="interleaved"):
    """RoPE in float64 with one of the usual mistakes switched on.

    exponent(i, D) is pair i's power of base (right: -2i/D); keep="even"/"odd" leaves that
    dimension of every pair unrotated; keep="odd_cos" drops the a*sin term of the odd one;
    out="swapped" writes each rotated pair back as (b', a'), out="halves" as all a' then all b'.
    """
    x = x.double().numpy()
    D = x.shape[-1]
    exponent = exponent or (lambda i, D: -2 * i / D)
    freqs = base ** np.array([exponent(i, D) for i in range(D // 2)])
    angles = sign * np.asarray(positions, dtype=np.float64)[:, None] * freqs    # (T, D / 2)
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = (x[..., : D // 2], x[..., D // 2:]) if halves else (x[..., 0::2], x[..., 1::2])
    new_a, new_b = a * cos - b * sin, a * sin + b * cos
    if keep == "even":
        new_a = a
    elif keep == "odd":
        new_b = b
    elif keep == "odd_cos":
        new_b = b * cos
    if out == "swapped":
        new_a, new_b = new_b, new_a
    if halves or out == "halves":
        return np.concatenate([new_a, new_b], axis=-1)
    return np.stack([new_a, new_b], axis=-1).reshape(x.shape)


def rope_hint(x, positions, got, base=10000.0):
    """Name the usual mistake that explains this output of apply_rope, if one does."""
    __tracebackhide__ = True
    T, D = x.shape[-2:]
    both = ("both dimensions of a pair turn: the new (2i, 2i + 1) is (a cos t - b sin t, "
            "a sin t + b cos t) with a = x[..., 2i], b = x[..., 2i + 1]; you left one of them "
            "(partly) unrotated")
    mistakes = [
        (_rope(x, positions, base, halves=True),
         "this lesson pairs dimension 2i with 2i + 1 (interleaved, as in the RoFormer paper): "
         "a = x[..., 0::2], b = x[..., 1::2]; you rotated the halves (i, i + D/2), the "
         "convention of some libraries"),
        (_rope(x, np.ones(T), base),
         "the angle must be proportional to the position, positions * base^(-2i/D); your "
         "rotation is the same at every position (position 0 must not move at all)"),
        (_rope(x, np.arange(T), base),
         "rotate by the positions you are given, not by 0, 1, 2, ... (torch.arange(T), or the "
         "positions minus the first one): a sequence may start at any position (a chunk after "
         "a cache starts where the cache ends) or skip some"),
        (_rope(x, positions, base, sign=-1.0),
         "you rotated the wrong way (by -t): the new pair is (a cos t - b sin t, "
         "a sin t + b cos t); check the signs of the two sin terms"),
        (_rope(x, positions, base, out="swapped"),
         "each rotated pair goes back in its own order: the new a (a cos t - b sin t) into "
         "dimension 2i and the new b into 2i + 1; you wrote them the other way round"),
        (_rope(x, positions, base, out="halves"),
         "write each rotated pair back where it came from, interleaved: "
         "torch.stack([new_a, new_b], dim=-1).flatten(-2); torch.cat puts all the a's first "
         "and all the b's after them"),
        (_rope(x, positions, base, keep="odd"), both),
        (_rope(x, positions, base, keep="even"), both),
        (_rope(x, positions, base, keep="odd_cos"), both),
        (_rope(x, positions, base, exponent=lambda i, D: -i / D),
         "the angle of pair i is positions * base^(-2i/D), where i counts the pairs "
         "(i = 0 .. D/2 - 1); you used base^(-i/D)"),
        (_rope(x, positions, base, exponent=lambda i, D: -2 * i / T),
         f"the exponent divides by D, the width x.shape[-1] ({D} here), not by T, the number "
         f"of positions ({T} here)"),
        (_rope(x, positions, base, halves=True, sign=-1.0),
         "this lesson pairs dimension 2i with 2i + 1 (interleaved): a = x[..., 0::2], "
         "b = x[..., 1::2]; you rotated the halves (i, i + D/2), and in the wrong direction"),
    ]
    if base != 10000.0:
        mistakes.insert(0, (_rope(x, positions, 10000.0),
                            f"use the `base` argument (here {base}) instead of a fixed 10000"))
    for want, hint in mistakes:
        if _close(got, want):
            return hint
    return None


@own_messages("apply_rope")
def check_apply_rope(fn):
    """Check apply_rope(x, positions, base=10000.0): interleaved pairs rotated by position."""
    __tracebackhide__ = True
    c = Checker("apply_rope", fn)
    gen = torch.Generator().manual_seed(seed(5))
    _own_answer(c, (torch.randn(2, 4, generator=gen), torch.tensor([0, 1])), {},
                ref.apply_rope, "x (T=2, D=4), positions [0, 1]")
    cases = [
        ((5, 6), [0, 1, 2, 3, 4], 10000.0, "x (T=5, D=6), positions [0, 1, 2, 3, 4]"),
        ((2, 5, 6), [0, 1, 4, 9, 12], 10000.0, "x (B=2, T=5, D=6), positions [0, 1, 4, 9, 12]"),
        ((2, 3, 4, 8), [0, 2, 5, 7], 10000.0, "x (B=2, H=3, T=4, D=8), positions [0, 2, 5, 7]"),
        ((3, 4, 10), [0, 3, 1, 20], 100.0, "x (3, T=4, D=10), positions [0, 3, 1, 20], base=100.0"),
        ((2, 3, 5, 6), [9, 10, 11, 12, 13], 10000.0,
         "x (B=2, H=3, T=5, D=6), positions [9, 10, 11, 12, 13] (a chunk after 9 cached tokens)"),
        ((2, 1, 8), [37], 10000.0, "x (B=2, T=1, D=8), positions [37] (one decode step)"),
    ]
    for shape, pos, base, case in cases:
        _rope_one(c, (torch.randn(*shape, generator=gen), torch.tensor(pos), base), case)
    # any leading axes, length, even width and base, positions in any order up to 8,192
    each(c, _draw_rope, _rope_one, n=20, stream=51)
    c.done()


_ROTATE = ("each pair (a, b) = (x[..., 2i], x[..., 2i + 1]) becomes (a cos t - b sin t, "
           "a sin t + b cos t) with t = positions * base^(-2i/D)")


def _draw_rope(d):
    lead = tuple(d.integer(1, 3) for _ in range(d.integer(0, 2)))
    T, D = d.integer(1, 24), 2 * d.integer(1, 8)
    base = d.choice((10000.0, 100.0, 500000.0))
    g = torch.Generator().manual_seed(d.seed())
    x = torch.randn(*lead, T, D, generator=g)
    far = d.choice((40, 1_000, 8_192))
    positions = torch.randint(0, far + 1, (T,), generator=g)
    if d.boolean(0.5):   # a run of positions, as a chunk after a cache
        positions = torch.arange(T) + int(positions[0])
    return (x, positions, base), (f"a random x of shape {tuple(x.shape)}, positions "
                                  f"{positions.tolist()}" + (f", base={base:g}" if base != 10000
                                                             else ""))


def _rope_one(c, args, case):
    """Check apply_rope on one (x, positions, base). The angles are float32: at position p
    their rounding moves the result by up to about p * 1e-6, so the tolerance grows with p."""
    __tracebackhide__ = True
    x, positions, base = args
    shape, pos = tuple(x.shape), positions.tolist()
    rotate = _ROTATE
    kwargs = {} if base == 10000.0 else {"base": base}
    tol = 1e-5 + 2e-6 * max(pos) * float(x.abs().max())
    crash = ("slice the last axis with x[..., 0::2] and x[..., 1::2] (the ... keeps any "
             "leading axes), and build the angles (T, D/2) as positions[:, None] * "
             "freqs[None, :] so they broadcast against those (..., T, D/2) slices")
    result = c.call(x, positions, case=case, crash_hint=crash, **kwargs)
    got = tensor_as_array(c, result, "the result", case,
                          hint="return a tensor of x's shape, built with torch operations")
    c.shape(got, shape, "the result", case, hint="the result has the same shape as x")
    c.finite(got, "the result", case, hint=rotate)

    def fail(what, expected, shown, hint):
        __tracebackhide__ = True
        c.fail(what, case=case, expected=expected, got=shown,
               hint=rope_hint(x, positions, got, base) or hint)

    want = _rope(x.double(), positions, base)
    if 0 in pos:
        zero = pos.index(0)
        if not _close(got[..., zero, :], x.numpy()[..., zero, :], atol=1e-5):
            fail("the vector at position 0 moved", x.numpy()[..., zero, :],
                 got[..., zero, :],
                 "at position 0 every angle is 0 and the rotation is the identity")
        c.ok()
    if not _close(np.linalg.norm(got, axis=-1), np.linalg.norm(x.numpy(), axis=-1), atol=1e-4):
        fail("the vectors changed length", np.linalg.norm(x.numpy(), axis=-1),
             np.linalg.norm(got, axis=-1), "a rotation keeps every vector's length; " + rotate)
    c.ok()
    if not _close(got, want, atol=tol):
        fail("the result is not right", want, got, rotate)
    c.ok()


def _scores_by_distance(q, k, distances, base=10000.0, exponent=None, sign=1.0, halves=False,
                        cross=True):
    """q's RoPE score against k at each distance, in float64, right or with one usual mistake."""
    q, k = q.double().numpy(), k.double().numpy()
    D = q.shape[-1]
    exponent = exponent or (lambda i, D: -2 * i / D)
    freqs = base ** np.array([exponent(i, D) for i in range(D // 2)])
    t = sign * np.asarray(distances, dtype=np.float64)[:, None] * freqs          # (N, D / 2)
    if halves:
        qa, qb, ka, kb = q[: D // 2], q[D // 2:], k[: D // 2], k[D // 2:]
    else:
        qa, qb, ka, kb = q[0::2], q[1::2], k[0::2], k[1::2]
    terms = (qa * ka + qb * kb) * np.cos(t)
    if cross:
        terms = terms + (qb * ka - qa * kb) * np.sin(t)
    return terms.sum(axis=-1)                                                    # (N,)


@own_messages("rope_scores")
def check_rope_scores(fn):
    """Check rope_scores(q, k, distances, base=10000.0): the RoPE score from the distance alone."""
    __tracebackhide__ = True
    c = Checker("rope_scores", fn)
    gen = torch.Generator().manual_seed(seed(7))
    cases = [
        (6, [0, 1, 3, 10, 2], 10000.0, torch.float32),
        (8, [5, -5, 0, 17, -40, 100], 10000.0, torch.float64),
        (10, [0, 2, -3, 7], 100.0, torch.float32),
        (12, [-7, -3, -60, -1], 10000.0, torch.float64),     # no distance 0, keys before q
        (6, [40, 41, 42], 10000.0, torch.float32),           # far along, as after a cache
    ]
    for D, dist, base, dtype in cases:
        q = torch.randn(D, generator=gen, dtype=dtype)
        k = torch.randn(D, generator=gen, dtype=dtype)
        _scores_one(c, (q, k, torch.tensor(dist), base), _scores_case(D, dist, base, dtype))
    # any even width, base and number of distances; distances of either sign, up to 100,000 in
    # float64 (float32 angles that large lose the digits a score needs)
    each(c, _draw_scores, _scores_one, n=20, stream=52)
    c.done()


_SCORE_FORMULA = ("per pair i (a = 2i, b = 2i + 1) with t = distance * base^(-2i/D): "
                  "(q_a k_a + q_b k_b) cos t + (q_b k_a - q_a k_b) sin t, summed over the pairs")


def _scores_case(D, dist, base, dtype):
    return (f"q, k of shape ({D},) {str(dtype).replace('torch.', '')}, distances {dist}"
            + (f", base={base}" if base != 10000.0 else ""))


def _draw_scores(d):
    D, N = 2 * d.integer(1, 16), d.integer(1, 12)
    dtype = d.choice((torch.float64, torch.float32))
    base = d.choice((10000.0, 100.0, 500000.0))
    far = d.choice((50, 200) if dtype == torch.float32 else (50, 8_192, 100_000))
    g = torch.Generator().manual_seed(d.seed())
    q, k = (torch.randn(D, generator=g, dtype=dtype) for _ in range(2))
    dist = torch.randint(-far, far + 1, (N,), generator=g).tolist()
    return (q, k, torch.tensor(dist), base), _scores_case(D, dist, base, dtype)


def _scores_one(c, args, case):
    """Check rope_scores on one (q, k, distances, base)."""
    __tracebackhide__ = True
    q, k, distances, base = args
    D, dist, dtype, formula = q.shape[0], distances.tolist(), q.dtype, _SCORE_FORMULA
    kwargs = {} if base == 10000.0 else {"base": base}
    out = c.call(q, k, distances, case=case, **kwargs,
                 crash_hint="q[0::2], q[1::2] are the pairs' a and b, each (D/2,); the angles "
                            "distances[:, None] * freqs are (N, D/2) and broadcast against "
                            "them; sum over the last axis")
    if not isinstance(out, torch.Tensor):
        c.fail("expected a torch tensor", case=case, got=type(out).__name__,
               hint="return a tensor of shape (N,), one score per distance")
    N = len(dist)
    if tuple(out.shape) == (N, D // 2):
        c.fail("the result has one number per pair", case=case, expected=(N,),
               got=tuple(out.shape), hint="sum the pairs' terms over the last axis")
    c.shape(out, (N,), "the result", case, hint="one score per distance: shape (N,)")
    if out.dtype != dtype:
        c.fail("the result has the wrong dtype", case=case, expected=str(dtype),
               got=str(out.dtype),
               hint="compute in q's dtype: build the frequencies with dtype=q.dtype (or "
                    "convert the result with .to(q.dtype))")
    c.ok()
    got = out.detach().double().numpy()
    c.finite(got, "the result", case, hint=formula)
    want = _scores_by_distance(q, k, dist, base)
    zero = [j for j, d in enumerate(dist) if d == 0]
    plain = float(q.double() @ k.double())
    if zero and not np.isclose(got[zero[0]], plain, atol=1e-4, rtol=1e-4):
        c.fail("the score at distance 0 is not q . k", case=case, expected=plain,
               got=got[zero[0]],
               hint="at distance 0 both vectors turn by the same angle and the rotations "
                    "cancel, so the score is the plain dot product q . k")
    c.ok()
    tol = 1e-9 if dtype == torch.float64 else 1e-4      # float64 to float64 precision
    if not _close(got, want, atol=tol, rtol=tol):
        if dtype == torch.float64 and _close(got, want, atol=1e-4):
            c.fail("the scores are right only to float32 precision", case=case,
                   expected=want, got=got,
                   hint="q and k are float64 and are checked to float64 precision: build "
                        "the frequencies in q's dtype rather than torch's default float32, "
                        "and stay in it")
        mistakes = [
            (_scores_by_distance(q, k, dist, base, sign=-1.0),
             "these are the scores at -distance: the key sits `distance` positions AFTER the "
             "query, so the pair's angle is t = +distance * base^(-2i/D) in "
             "(q_a k_a + q_b k_b) cos t + (q_b k_a - q_a k_b) sin t; check the sign of the "
             "sin term"),
            (_scores_by_distance(q, k, dist, base, cross=False),
             "a rotation mixes the two numbers of a pair: the term "
             "(q_b k_a - q_a k_b) sin t is missing"),
            (_scores_by_distance(q, k, dist, base, halves=True),
             "this lesson pairs dimension 2i with 2i + 1 (a = q[0::2], b = q[1::2]); you "
             "paired the halves (i, i + D/2)"),
            (_scores_by_distance(q, k, dist, base, exponent=lambda i, D: -i / D),
             "the angle of pair i is distance * base^(-2i/D), where i counts the pairs; you "
             "used base^(-i/D)"),
            (_scores_by_distance(q, k, dist, 10000.0) if kwargs else None,
             f"use the `base` argument (here {base}) instead of a fixed 10000"),
        ]
        hint = next((h for wrong, h in mistakes if wrong is not None and _close(got, wrong)),
                    formula)
        c.fail("the scores are not right", case=case, expected=want, got=got, hint=hint)
    c.ok()


# Hints on request (course_lib.checks.hints.hint): the idea, the usual mistake, the shape of
# the code. None of them holds a line of the answer.
HINTS = {
    "sinusoidal_positions": (
        "Every entry is the sine or cosine of position times a frequency; pair i's frequency is "
        "10000 to the power -2i/d_model. Compute all the angles at once by broadcasting a column "
        "of positions against a row of frequencies.",
        "The exponent uses 2i (0, 2, 4, ...) over d_model, not i over d_model; sines go in the "
        "even columns and cosines in the odd ones, interleaved, not one half then the other.",
        "Angles (T, d_model/2); an output of zeros (T, d_model) whose columns 0::2 and 1::2 you "
        "fill; float32 throughout.",
    ),
    "apply_rope": (
        "Rotate each pair of dimensions (2i, 2i+1) of row t by the angle positions[t] times pair "
        "i's frequency, the same 2-D rotation for every pair with its own angle.",
        "Use the positions you are given, not 0..T-1: in cached decoding rows start at later "
        "positions. Pair neighbours (2i, 2i+1), not i with i + D/2, and rotate by +angle with "
        "the sign of the formula.",
        "a = x[..., 0::2] and b = x[..., 1::2], each (..., T, D/2); angles (T, D/2); stack the two "
        "rotated halves on a new last axis and flatten it to interleave them back.",
    ),
    "rope_scores": (
        "Each pair contributes (q_a k_a + q_b k_b) cos t + (q_b k_a - q_a k_b) sin t with "
        "t = distance times the pair's frequency; the score sums the pairs.",
        "Distances can be negative and the sign of the sine term matters; build the frequencies "
        "in q's dtype, so float64 input keeps float64 precision.",
        "Angles (N, D/2) from distances[:, None] times the frequencies; the pair terms are "
        "(D/2,) vectors that broadcast against them; sum over the last axis to get (N,).",
    ),
}


# Questions on this lesson's ideas: `answer("05-...", ...)` in the lesson's Questions section.
from course_lib.checks.questions import Choice, Number  # noqa: E402

QUESTIONS = {
    "05-blind": Choice(
        prompt="Section 1 fed \"dog bites man\" and \"man bites dog\" to attention with token "
               "embeddings only, no positions and no mask. What did \"bites\" get?",
        after="## 1. Attention is order-blind",
        choices={
            "a": ("the same output in both sentences",
                  "a permutation of the inputs only permutes the outputs, and \"bites\" sits "
                  "in the middle both times: nothing can tell who bit whom."),
            "b": ("a different output, since its neighbours swapped places",
                  "without positions attention sees a set of vectors, not a sequence: the "
                  "same neighbours in another order give the same scores."),
            "c": ("an output that differs a little (about 1e-3), since its neighbours sit "
                  "elsewhere",
                  "the printed vectors agreed in every digit, and the permuted outputs agreed "
                  "with the moved ones to 1e-6: at most float32 rounding, nothing that "
                  "depends on the order."),
        },
        right="a"),
    "05-pair0": Number(
        prompt="With d = 64, pair 0 of the sinusoidal table turns by 1 radian per position, a "
               "full turn every 6.3 positions. With d = 128 instead, every how many positions "
               "does pair 0 make a full turn?",
        after="## 2. Sinusoidal positions",
        value=6.283, tolerance=0.01, unit="positions",
        why="ω₀ = 10000^(−0/d) = 1 radian per position whatever d is, so a full turn of 2π "
            "radians takes 2π ≈ 6.283 positions; d changes only the slower pairs.",
        wrong=((12.4, 12.7, "the width does not change pair 0's frequency: its exponent is "
                            "2i/d with i = 0."),
               (0.9, 1.1, "1 is its frequency in radians per position; a full turn is 2π "
                          "radians."),
               (3.1, 3.2, "π radians is half a turn.")),
        otherwise="write pair 0's frequency from the formula with i = 0, then the positions a "
                  "full turn of 2π takes."),
    "05-rope-distance": Number(
        prompt="Section 4's two-dimensional RoPE gave the score 6.1049 for a query at 10 and "
               "a key at 13 (and −4.8617 for a query at 5 and a key at 2). What score does it "
               "give for a query at position 1,000 and a key at 1,003, with the same q and k?",
        after="## 4. Rotary position embeddings (RoPE)",
        value=6.1049, tolerance=0.001,
        why="the score is q^T R((n − m)ω) k and depends only on the distance n − m = 3, the "
            "same as for 10 and 13.",
        wrong=((-4.87, -4.85, "that is the score at distance −3, the key before the query; "
                              "here the key is 3 positions after it."),
               (-0.001, 0.001, "rotation keeps lengths, so large positions do not wash the "
                               "score out; it depends on the distance alone.")),
        otherwise="what the score depends on was shown for three pairs of positions; compare "
                  "this pair's distance with theirs."),
    "05-wrap": Choice(
        prompt="A learned table of `max_len` = 8 that wraps positions round with a modulo is "
               "fed 12 tokens. What goes wrong?",
        after="Worse still is no error at all",
        choices={
            "a": ("an IndexError at position 8",
                  "the modulo maps 8 to 0 before the lookup, so no index is ever out of "
                  "range: that is the trouble."),
            "b": ("positions 8 to 11 silently get the vectors of 0 to 3, and attention cannot "
                  "tell those pairs apart",
                  "no error, and positions that share a vector bring order-blindness back: "
                  "swapping tokens 1 and 9 only swapped their outputs."),
            "c": ("nothing: the table generalises to the longer sequence",
                  "a learned table has no vector for position 8; the modulo reuses position "
                  "0's, which the model learned for the start of a sequence."),
            "d": ("course_lib's ValueError names the position and the limit",
                  "that is `LearnedPositions`, which refuses; the wrapping table says "
                  "nothing at all."),
        },
        right="b"),
}
