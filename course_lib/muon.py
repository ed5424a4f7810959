"""Muon: momentum, then orthogonalised, for a network's hidden weight matrices.

Muon (Keller Jordan, 2024) updates a 2-D weight W (out, in) by its momentum-averaged gradient
made orthogonal: the matrix U V^T of the gradient's singular value decomposition U S V^T,
approximated by a few Newton-Schulz iterations (matrix products only). Every direction the
gradient points in then moves by the same amount, where plain SGD or Adam moves the few
directions with large singular values most. It is meant for the hidden layers only:
embeddings, the output head, norms and biases keep AdamW (`MuonWithAdamW` runs both).

torch has `torch.optim.Muon` (2.9 and later); this module's update differs from it in one
thing: its Newton-Schulz iterations run in the gradient's own dtype (float32 here), where
torch's cast to bfloat16, which a CPU without bfloat16 instructions emulates (its defaults
differ too: lr 0.02 and no weight decay here, 1e-3 and 0.1 there). On the course's
2-core CPU torch's iterations took 1.0 s of CPU a step for the 4 x 128 model's 16 matrices, against
0.044 s in float32 (docs/benchmarks.md).
"""
import math

import torch
import torch.nn as nn

# The quintic iteration's coefficients (Keller Jordan's): in five iterations they push the
# singular values of a matrix of norm 1 into roughly [0.7, 1.2], all but the smallest (those
# far below the largest, which grow by about a factor of 3.4 an iteration from wherever they are).
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def orthogonalize(g, steps=5, eps=1e-7):
    """An approximately orthogonal matrix with g's singular vectors: about U V^T for g = U S V^T.

    Newton-Schulz: scale g to norm 1 (so every singular value is <= 1), then apply
    X <- a X + (b A + c A^2) X with A = X X^T, `steps` times. Each iteration maps every
    singular value s to a s + b s^3 + c s^5, which pulls them towards 1.

    Shapes: g (m, n) -> (m, n), in g's dtype
    """
    if g.ndim != 2:
        raise ValueError(f"orthogonalize takes a 2-D matrix, got shape {tuple(g.shape)}")
    a, b, c = NS_COEFFICIENTS
    wide = g.shape[0] <= g.shape[1]
    x = g if wide else g.T                       # (r, k) with r <= k: X X^T is the small (r, r)
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T                           # (r, r)
        poly = torch.addmm(gram, gram, gram, beta=b, alpha=c)  # b A + c A^2
        x = torch.addmm(x, poly, x, beta=a)      # a X + (b A + c A^2) X
    return x if wide else x.T


class Muon(torch.optim.Optimizer):
    """Muon for 2-D weight matrices: W <- W (1 - lr wd) - lr * scale * orthogonalize(momentum).

    The momentum is Nesterov's (as in torch.optim.Muon): buf <- m buf + (1 - m) g, and the
    matrix orthogonalised is (1 - m) g + m buf. scale = sqrt(max(1, out / in)), so a tall
    matrix's update has the same size per entry as a square one's (torch's "original").
    """

    def __init__(self, params, lr=0.02, momentum=0.95, weight_decay=0.0, ns_steps=5,
                 ns_dtype=None):
        for name, value in (("lr", lr), ("weight_decay", weight_decay)):
            if not value >= 0:
                raise ValueError(f"Muon's {name} must be >= 0, got {value}")
        if not 0 <= momentum < 1:
            raise ValueError(f"Muon's momentum must be in [0, 1), got {momentum}; 0.95 is typical")
        if isinstance(ns_steps, bool) or not isinstance(ns_steps, int) or ns_steps < 1:
            raise ValueError(f"Muon's ns_steps must be a positive integer, got {ns_steps!r}")
        if ns_dtype not in (None, torch.float32, torch.bfloat16):
            raise ValueError(f"Muon's ns_dtype must be None (the gradient's own), torch.float32 "
                             f"or torch.bfloat16, got {ns_dtype!r}")
        self.ns_dtype = ns_dtype  # the Newton-Schulz iterations' dtype; None: the gradient's
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      ns_steps=ns_steps))
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon updates 2-D weight matrices only, got a parameter of "
                                     f"shape {tuple(p.shape)}; give it to AdamW instead")

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, m = group["lr"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - m)                   # m buf + (1 - m) g
                g = p.grad.lerp(buf, m)
                if self.ns_dtype is not None and self.ns_dtype != g.dtype:
                    g = orthogonalize(g.to(self.ns_dtype), group["ns_steps"]).to(p.dtype)
                    update = g
                else:
                    update = orthogonalize(g, group["ns_steps"])
                scale = math.sqrt(max(1.0, p.shape[0] / p.shape[1]))
                p.mul_(1 - lr * group["weight_decay"])
                p.add_(update, alpha=-lr * scale)
        return loss


def hidden_matrices(model):
    """The parameters Muon should update: the weights of the model's nn.Linear layers, except
    the output head (`model.head`) and any weight shared with an nn.Embedding (a tied head).

    Everything else (embeddings, the head, norm gains, biases) is for AdamW.
    """
    embedded = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    head = getattr(model, "head", None)
    if isinstance(head, nn.Linear):
        embedded.add(id(head.weight))
    seen, matrices = set(), []
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.weight.requires_grad:
            w = module.weight
            if id(w) not in embedded and id(w) not in seen:
                seen.add(id(w))
                matrices.append(w)
    return matrices


class MuonWithAdamW:
    """Two optimisers stepped as one: Muon for some parameters, AdamW for the others.

    It offers what the training loop and checkpoints use: param_groups (Muon's, then
    AdamW's; each group's "lr_ratio" is its learning rate over the schedule's), zero_grad,
    step, state_dict and load_state_dict.
    """

    def __init__(self, muon: Muon, adamw: torch.optim.AdamW):
        self.muon, self.adamw = muon, adamw

    @property
    def param_groups(self):
        return self.muon.param_groups + self.adamw.param_groups

    def zero_grad(self, set_to_none=True):
        self.muon.zero_grad(set_to_none=set_to_none)
        self.adamw.zero_grad(set_to_none=set_to_none)

    def step(self):
        self.muon.step()
        self.adamw.step()

    def state_dict(self):
        return {"muon": self.muon.state_dict(), "adamw": self.adamw.state_dict()}

    def load_state_dict(self, state):
        if not isinstance(state, dict) or set(state) != {"muon", "adamw"}:
            raise ValueError("this optimizer state was not saved by MuonWithAdamW (it needs the "
                             "keys 'muon' and 'adamw'); resume with the optimizer that saved it")
        self.muon.load_state_dict(state["muon"])
        self.adamw.load_state_dict(state["adamw"])
