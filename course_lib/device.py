"""Pick the device the notebooks run on."""
import os

import torch


def pick_device(verbose=True):
    """The best available device: CUDA, then Apple's MPS, then the CPU.

    Set the environment variable COURSE_DEVICE (e.g. COURSE_DEVICE=cpu) to choose by hand.
    """
    chosen = os.environ.get("COURSE_DEVICE")
    if chosen:
        device = torch.device(chosen)
        reason = "chosen by COURSE_DEVICE"
    elif torch.cuda.is_available():
        device = torch.device("cuda")
        reason = f"CUDA GPU: {torch.cuda.get_device_name(0)}"
    elif torch.backends.mps.is_available():
        device = torch.device("mps")
        reason = "Apple GPU through MPS"
    else:
        device = torch.device("cpu")
        reason = "no CUDA or MPS GPU found"
    if verbose:
        print(f"Using device {device.type} ({reason})")
    return device
