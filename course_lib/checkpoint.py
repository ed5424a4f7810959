"""Saving and loading training runs safely.

A checkpoint is one file written with torch.save holding only plain data: dicts, lists,
str, int, float and tensors. It is written to `path + ".tmp"` and then renamed over `path`
(os.replace is atomic), so a run killed while saving never leaves half a file under `path`.
It is read with torch.load(weights_only=True), which refuses to build arbitrary Python
objects: loading a file from elsewhere cannot run code hidden in it.
"""
import os
from dataclasses import asdict, fields
from pathlib import Path

import torch

from course_lib.model import ModelConfig, TinyLM

FORMAT_VERSION = 1
_REQUIRED = ("format_version", "model_config", "model_state", "step")


class CheckpointError(ValueError):
    """The file is not a checkpoint this course can load, or does not fit the model."""


def _as_dict(config):
    if config is None:
        return None
    if isinstance(config, dict):
        return dict(config)
    return asdict(config)


def save_checkpoint(path, model, optimizer=None, *, step=0, train_config=None, generator=None,
                    history=None, rank_generator_states=None):
    """Write the model (and optionally optimizer, step, run config, batch generator, history).

    `model` is a TinyLM (or a DDP wrapper around one). `history` is a training.History or a
    dict of plain lists. The file appears under `path` only once it is complete.
    """
    model = model.module if hasattr(model, "module") else model
    if not isinstance(model, TinyLM):
        raise TypeError(f"save_checkpoint expects a TinyLM, got {type(model).__name__}")
    if history is not None and not isinstance(history, dict):
        history = history.to_dict()
    state = {
        "format_version": FORMAT_VERSION,
        "model_config": asdict(model.config),
        "model_state": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "optimizer_state": optimizer.state_dict() if optimizer is not None else None,
        "step": int(step),
        "train_config": _as_dict(train_config),
        "generator_state": generator.get_state() if generator is not None else None,
        "rank_generator_states": list(rank_generator_states) if rank_generator_states else None,
        "torch_rng_state": torch.get_rng_state(),
        "history": history,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)  # atomic: readers see the old file or the new one, never a mix
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _reason(err):
    """The informative line of torch.load's error (its first line is generic advice)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    detail = [ln for ln in lines if "WeightsUnpickler" not in ln and not ln.startswith(
        ("Weights only load failed", "Please file", "Check the documentation"))]
    return f"{type(err).__name__}: {(detail or lines or [''])[0][:160]}"


def _read(path, map_location):
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}; train one first, e.g. "
                                f"`python -m course_lib.train --data data/shakespeare.txt --preset cpu "
                                f"--out {path.parent}`, or check the path")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # UnpicklingError, RuntimeError (bad zip), EOFError, ...
        if "global" in str(err).lower():  # the safe unpickler met a class or function reference
            raise CheckpointError(
                f"{path} holds Python objects other than tensors and plain data, so it was refused "
                f"unopened (loading it could run code hidden in it). Only load checkpoints you "
                f"wrote with course_lib.checkpoint.save_checkpoint") from err
        raise CheckpointError(
            f"{path} is not a readable checkpoint ({_reason(err)}); "
            f"the file is probably truncated or corrupt: delete it and train again, "
            f"or resume from an older copy") from err
    if not isinstance(state, dict) or not all(k in state for k in _REQUIRED):
        got = sorted(state)[:8] if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"{path} is a torch file but not a course_lib checkpoint: expected a "
                              f"dict with keys {list(_REQUIRED)}, got {got}")
    if state["format_version"] != FORMAT_VERSION:
        raise CheckpointError(f"{path} has checkpoint format {state['format_version']!r}, this code "
                              f"reads format {FORMAT_VERSION}; update course_lib or retrain")
    return state


def _saved_config(state, path):
    saved = state["model_config"]
    names = {f.name for f in fields(ModelConfig)}
    if not isinstance(saved, dict) or not set(saved) <= names:
        raise CheckpointError(f"{path} has a model_config this code does not know: {saved!r}")
    try:
        return ModelConfig(**saved)
    except ValueError as err:
        raise CheckpointError(f"{path} has an invalid model_config: {err}") from err


def load_checkpoint(path, model=None, optimizer=None, map_location="cpu") -> dict:
    """Read a checkpoint; load its weights into `model` and its state into `optimizer` if given.

    Returns the checkpoint dict (keys: format_version, model_config, model_state,
    optimizer_state, step, train_config, generator_state, rank_generator_states,
    torch_rng_state, history).
    """
    state = _read(path, map_location)
    saved = _saved_config(state, path)
    if model is not None:
        inner = model.module if hasattr(model, "module") else model
        if getattr(inner, "config", None) != saved:
            raise CheckpointError(
                f"{path} was saved from a model with {saved}, but the model given has "
                f"{getattr(inner, 'config', None)}; build it with TinyLM(ModelConfig(**ckpt['model_config'])) "
                f"or use load_model({str(path)!r})")
        try:
            inner.load_state_dict(state["model_state"])
        except RuntimeError as err:
            raise CheckpointError(f"{path}: the saved weights do not fit the model: {err}") from err
    if optimizer is not None:
        if state.get("optimizer_state") is None:
            raise CheckpointError(f"{path} was saved without optimizer state (a weights-only export), "
                                  f"so the run cannot be resumed from it; resume from a full checkpoint")
        try:
            optimizer.load_state_dict(state["optimizer_state"])
        except (ValueError, KeyError) as err:
            raise CheckpointError(f"{path}: the saved optimizer state does not fit this optimizer: "
                                  f"{err}") from err
    return state


def load_model(path, device=None) -> TinyLM:
    """Build the TinyLM a checkpoint describes, load its weights, and return it in eval mode."""
    state = _read(path, "cpu")
    model = TinyLM(_saved_config(state, path))
    try:
        model.load_state_dict({k: v.float() for k, v in state["model_state"].items()})
    except RuntimeError as err:
        raise CheckpointError(f"{path}: the saved weights do not fit its own config: {err}") from err
    if device is not None:
        model.to(device)
    return model.eval()


def parameter_checksum(model) -> str:
    """sha256 of every weight (float32 bytes, state_dict order): equal iff the weights are equal."""
    import hashlib

    model = model.module if hasattr(model, "module") else model
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()
