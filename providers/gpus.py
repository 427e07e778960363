"""One name per GPU model across providers, with memory kept apart.

Providers spell the same chip many ways: AWS's family tables say `A100` and `T4G`, an
offer file's attribute may say `NVIDIA A100 80GB`, GCP's accelerator types
`nvidia-a100-80gb`, the NVIDIA device plugin's node label `NVIDIA-A100-SXM4-80GB`. shoal
names the model only (`A100`) and reports memory per GPU in `gpu_memory_gib`, so
`--select gpu=A100` and `--sort gpu_memory_gib` mean the same on every provider, and
`--select gpu=A100-80GB` is read as `gpu=A100` with 80 GiB per GPU.

The names (README "GPU names" lists them) are the vendors' own model names in their
usual capitalisation; a name shoal does not know passes through with vendor words and
form factors removed, so a new chip still shows, just not merged with its aliases.
"""

from __future__ import annotations

import re

# Canonical model names, as vendors write them. Keys are the upper-case spelling.
MODELS: tuple[str, ...] = (
    # NVIDIA data centre
    "K80", "M60", "P4", "P40", "P100", "V100", "T4", "T4G", "A2", "A10", "A10G", "A16",
    "A30", "A40", "A100", "L4", "L40", "L40S", "H20", "H100", "H200", "GH200", "B100",
    "B200", "B300", "GB200", "GB300", "RTX PRO 6000", "RTX 6000", "RTX A6000",
    # AMD
    "MI25", "MI50", "MI100", "MI210", "MI250", "MI250X", "MI300A", "MI300X", "MI325X",
    "MI355X", "Radeon Pro V520", "Radeon Pro V620",
    # Intel and cloud accelerators (counted as GPUs by the providers that list them)
    "Gaudi", "Gaudi2", "Gaudi3", "Max 1100", "Max 1550", "Inferentia", "Inferentia2",
    "Trainium", "Trainium2", "Qualcomm AI 100",
)  # fmt: skip
_BY_UPPER = {name.upper(): name for name in MODELS}
# Words that name a vendor or a product line, not the model.
_VENDOR = frozenset({"NVIDIA", "AMD", "INTEL", "TESLA", "INSTINCT", "GEFORCE", "GPU"})
# Form factors and memory technologies: the same model in another package.
_FORM = re.compile(r"^(SXM\d*|PCIE\d*|HBM\d*E?|NVLINK|OAM|MEGA|GEN\d+)$")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)(GB|GIB|G)$")
_SPLIT = re.compile(r"[\s_\-/]+")


def canonical(name: str) -> tuple[str, float | None]:
    """(model, GiB per GPU if the name says it). `NVIDIA-A100-SXM4-80GB` -> ("A100", 80.0);
    `nvidia-tesla-t4` -> ("T4", None); `T4g` -> ("T4G", None); "" -> ("", None)."""
    words = [w for w in _SPLIT.split(name.strip()) if w]
    memory: float | None = None
    kept: list[str] = []
    for word in words:
        upper = word.upper()
        if match := _MEMORY.match(upper):
            memory = float(match.group(1))
        elif upper not in _VENDOR and not _FORM.match(upper):
            kept.append(word)
    if not kept:
        return ("", memory) if not words else (name.strip(), memory)
    joined = " ".join(kept).upper()
    if joined in _BY_UPPER:
        return _BY_UPPER[joined], memory
    for word in kept:  # "H100 NVL", "A100 X": the known model inside
        if word.upper() in _BY_UPPER:
            return _BY_UPPER[word.upper()], memory
    return " ".join(kept), memory


def model(name: str) -> str:
    """The canonical model alone."""
    return canonical(name)[0]
