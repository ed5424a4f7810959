"""Answers to lesson 00's exercises (start here), for testing the graders."""
from answers import Wrong

# A reference calls course_lib where the exercise allows it; where the exercise forbids the
# course's own function (encode) or torch's (F.cross_entropy), it is the plain answer.
REFERENCE = {
    "next_token_targets": """\
from course_lib.data import split_inputs_targets
inputs, targets = split_inputs_targets(ids[None])
return inputs[0], targets[0]""",
    "text_to_ids": "return torch.tensor(list(text.encode('utf-8')), dtype=torch.long)",
    "next_byte_loss": """\
logp = torch.log_softmax(logits, dim=-1)
return -logp.gather(-1, targets[..., None]).mean()""",
}


def _loss(logp="torch.log_softmax(logits, dim=-1)", pick="logp.gather(-1, targets[..., None])",
          reduce="-{}.mean()"):
    """A next_byte_loss body with one piece swapped for a mistake."""
    return f"logp = {logp}\nreturn {reduce.format(pick)}"


WRONG = [
    # 00 next_token_targets
    Wrong("next_token_targets", "unshifted targets", "return ids[:-1], ids[:-1]",
          "shift the targets by one", inject=True),
    Wrong("next_token_targets", "predicts the previous token", "return ids[1:], ids[:-1]",
          "predicts the previous token"),
    Wrong("next_token_targets", "keeps the last id as input", "return ids, ids[1:]",
          "drop one id from each end"),
    Wrong("next_token_targets", "targets as floats", "return ids[:-1], ids[1:].float()",
          "must hold integer token ids"),
    Wrong("next_token_targets", "forgets to return", "inputs, targets = ids[:-1], ids[1:]",
          "finish it with a `return`"),
    Wrong("next_token_targets", "returns one tensor", "return ids[1:]", "expected a pair"),
    Wrong("next_token_targets", "lists", "return ids[:-1].tolist(), ids[1:].tolist()",
          "must be torch tensors"),
    Wrong("next_token_targets", "NumPy arrays", "return ids[:-1].numpy(), ids[1:].numpy()",
          "must be torch tensors"),
    Wrong("next_token_targets", "int32 ids", "return ids[:-1].int(), ids[1:].int()",
          "must keep the ids' dtype"),
    Wrong("next_token_targets", "float64 ids", "return ids[:-1].double(), ids[1:].double()",
          "must hold integer token ids"),
    Wrong("next_token_targets", "roll wraps the first id round to the end",
          "return ids, torch.roll(ids, -1)", "drop one id from each end"),
    # 00 text_to_ids
    Wrong("text_to_ids", "one code point per character",
          "return torch.tensor([ord(ch) for ch in text], dtype=torch.long)",
          "these are the characters' code points", inject=True),
    Wrong("text_to_ids", "latin-1", "return torch.tensor(list(text.encode('latin-1')), dtype=torch.long)",
          "use text.encode('utf-8')"),
    Wrong("text_to_ids", "no dtype: the empty text gives float32",
          "return torch.tensor(list(text.encode('utf-8')))", "torch.tensor([]) of an empty list"),
    Wrong("text_to_ids", "a list", "return list(text.encode('utf-8'))", "expected a torch tensor"),
    Wrong("text_to_ids", "uint8 ids",
          "return torch.tensor(list(text.encode('utf-8')), dtype=torch.uint8)",
          "pass dtype=torch.long"),
    Wrong("text_to_ids", "a batch axis",
          "return torch.tensor([list(text.encode('utf-8'))], dtype=torch.long)",
          "expected a 1-D tensor of shape (T,)"),
    Wrong("text_to_ids", "strips the whitespace at the ends",
          "return torch.tensor(list(text.strip().encode('utf-8')), dtype=torch.long)",
          "don't strip() the text"),
    Wrong("text_to_ids", "drops a trailing newline",
          "return torch.tensor(list(text.rstrip('\\n').encode('utf-8')), dtype=torch.long)",
          "don't strip() the text"),
    Wrong("text_to_ids", "calls encode, which the exercise forbids",
          "from course_lib.data import encode\nreturn encode(text)", "calls encode, which this exercise"),
    Wrong("text_to_ids", "calls encode through its module",
          "import course_lib.data\nreturn course_lib.data.encode(text)", "calls encode, which this exercise"),
    Wrong("text_to_ids", "a NumPy array of the bytes",
          "return np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int64)", "expected a torch tensor"),
    Wrong("text_to_ids", "forgets to return",
          "ids = torch.tensor(list(text.encode('utf-8')), dtype=torch.long)",
          "finish it with a `return`"),
    # 00 next_byte_loss
    Wrong("next_byte_loss", "log of the softmax",
          _loss(logp="torch.log(torch.softmax(logits, dim=-1))"),
          "compute the log-probabilities directly", inject=True),
    Wrong("next_byte_loss", "no minus sign", _loss(reduce="{}.mean()"), "put a minus sign"),
    Wrong("next_byte_loss", "log2", _loss(logp="torch.log2(torch.softmax(logits, dim=-1))"),
          "not log2"),
    Wrong("next_byte_loss", "sum, not mean", _loss(reduce="-{}.sum()"), "not the sum"),
    Wrong("next_byte_loss", "mean over the whole vocabulary", _loss(pick="logp"),
          "not the mean over the whole vocabulary"),
    Wrong("next_byte_loss", "softmax over positions", _loss(logp="torch.log_softmax(logits, dim=0)"),
          "not over positions"),
    Wrong("next_byte_loss", "-p instead of -ln p",
          _loss(logp="torch.softmax(logits, dim=-1)"), "-ln p, not -p"),
    Wrong("next_byte_loss", "every target at every position", _loss(pick="logp[:, targets]"),
          "logp[torch.arange(T), targets]"),
    Wrong("next_byte_loss", "shifts the targets again",
          _loss(logp="torch.log_softmax(logits[:-1], dim=-1)",
                pick="logp.gather(-1, targets[1:, None])"),
          "don't shift again"),
    Wrong("next_byte_loss", "cross_entropy, which the exercise forbids",
          "return torch.nn.functional.cross_entropy(logits, targets)",
          "calls F.cross_entropy, which this exercise asks you not to use"),
    Wrong("next_byte_loss", "cross_entropy with the classes on axis 1", """\
import torch.nn.functional as F
if logits.dim() == 3:
    return F.cross_entropy(logits.transpose(1, 2), targets)
return F.cross_entropy(logits, targets)""", "calls F.cross_entropy, which this exercise"),
    Wrong("next_byte_loss", "nn.CrossEntropyLoss, F.cross_entropy as a module",
          "return torch.nn.CrossEntropyLoss()(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))",
          "calls F.cross_entropy, which this exercise"),
    Wrong("next_byte_loss", "nll_loss of the log-softmax", """\
logp = torch.log_softmax(logits, dim=-1)
return torch.nn.functional.nll_loss(logp.reshape(-1, logp.shape[-1]), targets.reshape(-1))""",
          "calls F.nll_loss, which this exercise"),
    Wrong("next_byte_loss", "a NumPy scalar", _loss(reduce="-{}.mean().numpy()[()]"),
          "got a NumPy scalar"),
    Wrong("next_byte_loss", "a NumPy float64", _loss(reduce="np.float64(-{}.mean().item())"),
          "got a NumPy scalar"),
    Wrong("next_byte_loss", "always in float32, also for float64 logits",
          _loss(logp="torch.log_softmax(logits.float(), dim=-1)"), "the loss has another dtype"),
    Wrong("next_byte_loss", "one loss per position",
          _loss(reduce="-{}.squeeze(-1)"), "average the per-position losses"),
    Wrong("next_byte_loss", "subtracts the maximum in place", """\
logits -= logits.max(dim=-1, keepdim=True).values
logp = logits - logits.exp().sum(dim=-1, keepdim=True).log()
return -logp.gather(-1, targets[..., None]).mean()""",
          "changed its input logits in place"),
    Wrong("next_byte_loss", "one-hot mask times every log-probability", """\
one_hot = torch.nn.functional.one_hot(targets, logits.shape[-1])
return -(one_hot * torch.log_softmax(logits, dim=-1)).sum(-1).mean()""", "-inf * 0 is NaN"),
    Wrong("next_byte_loss", "computed and returned in float64",
          _loss(logp="torch.log_softmax(logits.double(), dim=-1)"), "drop the conversion (.double()"),
]

# Right answers written differently from the reference: each must pass its checker.
ALTERNATIVES = [
    ("next_token_targets", "two slices", "inputs = ids[:-1]\ntargets = ids[1:]\nreturn inputs, targets"),
    ("next_token_targets", "slices of the last axis, which a batch would need too",
     "return ids[..., :-1], ids[..., 1:]"),
    ("text_to_ids", "NumPy's view of the bytes",
     "return torch.from_numpy(np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int64))"),
    ("text_to_ids", "a loop over the bytes", """\
ids = []
for byte in text.encode("utf-8"):
    ids.append(byte)
return torch.tensor(ids, dtype=torch.int64)"""),
    ("next_byte_loss", "log-softmax by hand", """\
shifted = logits - logits.max(dim=-1, keepdim=True).values
logp = shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
return -logp.gather(-1, targets.unsqueeze(-1)).mean()"""),
    ("next_byte_loss", "picked by indexing, returned as a float", """\
logp = torch.log_softmax(logits, dim=-1).reshape(-1, logits.shape[-1])
return -logp[torch.arange(len(logp)), targets.reshape(-1)].mean().item()"""),
    ("next_byte_loss", "log-sum-exp minus the target's logit", """\
lse = torch.logsumexp(logits, dim=-1)
return (lse - logits.gather(-1, targets[..., None]).squeeze(-1)).mean()"""),
    ("next_token_targets", "narrow along the last axis",
     "n = ids.shape[-1]\nreturn ids.narrow(-1, 0, n - 1), ids.narrow(-1, 1, n - 1)"),
    ("text_to_ids", "a LongTensor of the bytes", "return torch.LongTensor([b for b in bytes(text, 'utf-8')])"),
]

# A red team's view (review of 2026-12-04): the forbidden loss reached where a profiler does not look.
WRONG += [
    Wrong("next_byte_loss", "aten's cross_entropy_loss op", """\
return torch.ops.aten.cross_entropy_loss(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))""",
          "which this exercise asks you not to use"),
    Wrong("next_byte_loss", "the loss builtin called by map, from C", """\
V = logits.shape[-1]
return next(map(torch._C._nn.cross_entropy_loss, [logits.reshape(-1, V)], [targets.reshape(-1)], [None], [1]))""",
          "which this exercise asks you not to use"),
    Wrong("next_byte_loss", "aten's nll_loss_nd on log-probabilities", """\
V = logits.shape[-1]
logp = torch.log_softmax(logits.reshape(-1, V), dim=-1)
return torch.ops.aten.nll_loss_nd(logp, targets.reshape(-1), None, 1, -100)""",
          "calls F.nll_loss"),
]
