"""Position information: attention alone cannot tell one order of tokens from another."""
import torch.nn as nn


class LearnedPositions(nn.Embedding):
    """A learned table of one vector per position, as in GPT-2; it ends at max_len.

    Shapes: positions (T,) int64 -> (T, C)
    """

    def __init__(self, max_len, d_model):
        super().__init__(max_len, d_model)
        self.max_len = max_len

    def forward(self, positions):
        if positions.numel() and int(positions.max()) >= self.max_len:
            raise ValueError(f"position {int(positions.max())} is past the end of the learned "
                             f"table, which has max_len={self.max_len} rows (positions 0 to "
                             f"{self.max_len - 1}); use shorter sequences or a larger max_len")
        return super().forward(positions)
