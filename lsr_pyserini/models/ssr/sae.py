"""TopK sparse autoencoders (Gao et al., 2024) and the SSR model folder that holds two of them.

    z     = TopK_K(ReLU(W_enc (x - b_pre) + b_enc))        h latents, K active
    x_hat = W_dec z + b_pre                                decoder columns kept at unit norm

Training minimises the reconstruction error plus an auxiliary loss that revives dead latents: the
`aux_k` largest pre-activations among latents that fired on none of the last `dead_after` inputs
must reconstruct the residual x - x_hat (weight `aux_weight`). One SAE codes ordinary tokens, a
second one the pooled [CLS] vector (SSR-CLS).

An SSR model folder:

    sae.safetensors        token.* and cls.* SAE tensors
    lsr_family.json        {"family": "ssr", "config": {...}, "structure": {...}}: `config` every declared setting
                           (config.py's SCHEMA, the retrieval settings included), as every family's checkpoint
                           records them; `structure` what the SAEs are, not a setting: {"backbone": {...},
                           "token_sae": {...}, "cls_sae": {...}, "training": {...}} (the backbone they were fit
                           on, their sizes, how they were trained)

A folder written before kept the backbone, the SAE sizes, the training record and the retrieval
settings in an `ssr_config.json` of its own ({"family": "ssr", "backbone": ..., "token_sae": ...,
"cls_sae": ..., retrieval settings, "training": ...}); it still loads, to the same settings.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch

from ...core.errors import InputError
from ...core.hf import FAMILY_FILE, read_family
from ...core.outputs import OutputKind
from ..registry import old_settings
from .config import RETRIEVAL, SCHEMA

OLD_CONFIG_FILE, WEIGHTS_FILE = "ssr_config.json", "sae.safetensors"  # the first: folders written before only
STRUCTURE_KEY = "structure"  # lsr_family.json's entry beside the config: backbone, SAE sizes, training record
RETRIEVAL_DEFAULTS = RETRIEVAL.defaults()  # the retrieval settings an SSR model carries (`ssr fit` flags set them)


def _read_json(file: Path):
    try:
        return json.loads(file.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{file}: malformed JSON ({err.msg})") from None


def _is_ssr_folder(path: Path) -> bool:
    try:
        if (path / FAMILY_FILE).is_file():
            return read_family(path).get("family") == "ssr" and (path / WEIGHTS_FILE).is_file()
        config = json.loads((path / OLD_CONFIG_FILE).read_text(encoding="utf-8"))
        return isinstance(config, dict) and config.get("family") == "ssr"
    except (OSError, UnicodeDecodeError, ValueError):
        return False


SSR_MODEL = OutputKind("an SSR model folder", folder=True, recognise=_is_ssr_folder)


@old_settings("ssr")
def old_folder_settings(folder) -> dict:
    """The retrieval settings a folder written before kept in its own ssr_config.json ({} for any other)."""
    file = Path(folder) / OLD_CONFIG_FILE
    if not file.is_file():
        return {}
    config = _read_json(file)
    return {k: config[k] for k in RETRIEVAL.names if isinstance(config, dict) and k in config}


def recorded_settings(folder) -> dict:
    """The retrieval settings an SSR model folder records: its lsr_family.json's config's, else (a folder
    written before) its ssr_config.json's; checked against the declarations."""
    marker = read_family(folder)
    config = marker.get("config") if isinstance(marker.get("config"), dict) else {}
    given = {**old_folder_settings(folder), **{k: v for k, v in config.items() if k in RETRIEVAL}}
    return RETRIEVAL.checked(given, f"checkpoint {folder}")


def sparse_decode(decoder: torch.Tensor, indices: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """sum_k values[..., k] x decoder[:, indices[..., k]] without a dense code (embedding_bag: ~20x
    faster than gathering N x K x d rows on CPU)."""
    flat = torch.nn.functional.embedding_bag(indices.reshape(-1, indices.shape[-1]), decoder.T.contiguous(),
                                             per_sample_weights=values.reshape(-1, values.shape[-1]), mode="sum")
    return flat.reshape(*indices.shape[:-1], decoder.shape[0])


class TopKSAE(torch.nn.Module):
    def __init__(self, input_dim: int, latents: int, k: int):
        super().__init__()
        check_sizes(input_dim, latents, k)
        self.input_dim, self.latents, self.k = input_dim, latents, k
        decoder = torch.randn(input_dim, latents)
        decoder /= decoder.norm(dim=0, keepdim=True)
        self.W_dec = torch.nn.Parameter(decoder)
        self.W_enc = torch.nn.Parameter(decoder.T.clone())
        self.b_enc = torch.nn.Parameter(torch.zeros(latents))
        self.b_pre = torch.nn.Parameter(torch.zeros(input_dim))

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu((x - self.b_pre) @ self.W_enc.T + self.b_enc)

    def encode(self, x: torch.Tensor, k: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(indices, values) of the k (default K) largest ReLU activations, each N x k."""
        if x.shape[-1] != self.input_dim:
            raise InputError(f"SAE input size {self.input_dim} does not match the embeddings' size {x.shape[-1]}")
        values, indices = self.pre_activations(x).topk(min(k or self.k, self.k), dim=-1)
        return indices, values

    def decode(self, indices: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return sparse_decode(self.W_dec, indices, values) + self.b_pre

    def dense_codes(self, indices: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return torch.zeros(*indices.shape[:-1], self.latents, dtype=values.dtype,
                           device=values.device).scatter(-1, indices, values)

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        self.W_dec /= self.W_dec.norm(dim=0, keepdim=True).clamp(min=1e-8)

    def describe(self) -> dict:
        return {"input_dim": self.input_dim, "latents": self.latents, "k": self.k}


def check_sizes(input_dim: int, latents: int, k: int) -> None:
    if min(input_dim, latents, k) <= 0:
        raise InputError(f"SAE sizes must be positive (input {input_dim}, latents {latents}, k {k})")
    if k > latents:
        raise InputError(f"SAE k={k} exceeds its number of latents h={latents}: K must be at most h")


def normalised_mse(x: torch.Tensor, x_hat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(squared error / variance of x around its batch mean, that variance)."""
    variance = (x - x.mean(0)).pow(2).sum(-1).mean().clamp(min=1e-8)
    return (x - x_hat).pow(2).sum(-1).mean() / variance, variance


def padded_codes(sae, vectors: torch.Tensor, keep: torch.Tensor):
    """TopK codes of the kept rows of B x L x d vectors, as B x L x K (zeros where not kept)."""
    values, indices = sae.pre_activations(vectors[keep]).topk(sae.k, dim=-1)
    all_values = torch.zeros(*keep.shape, sae.k, dtype=values.dtype, device=values.device)
    all_indices = torch.zeros(*keep.shape, sae.k, dtype=torch.long, device=values.device)
    all_values[keep], all_indices[keep] = values, indices
    return all_indices, all_values, sae.decode(indices, values)


def late_interaction(query_codes, doc_codes, latents: int) -> torch.Tensor:
    """B x D matrix of sum_i max_t z_q,i . z_d,t (padded rows have zero codes, scores are >= 0)."""
    q_index, q_value = query_codes
    d_index, d_value = doc_codes
    dense_queries = torch.zeros(*q_index.shape[:2], latents, dtype=q_value.dtype,
                                device=q_value.device).scatter(-1, q_index, q_value)
    gathered = dense_queries[:, :, d_index]                          # B x Lq x D x Ld x K
    similarities = (gathered * d_value).sum(-1)                      # B x Lq x D x Ld
    return similarities.amax(-1).sum(1)                              # B x D



class SAEFit(torch.nn.Module):
    """One TopK SAE as a model of the training loop (`train/loop.py`): reconstruction + dead-latent
    auxiliary loss, Adam at a constant rate without clipping, and the decoder's columns kept at unit
    norm (the part of the gradient that would change their norms is dropped before each update, and
    they are set back to unit norm after it)."""

    device_ready = True       # batches are moved to the SAE's device in `loss`
    warmup_and_decay = False  # a constant learning rate
    clip_norm = None          # no gradient clipping

    def __init__(self, sae: TopKSAE, aux_k: int, aux_weight: float, dead_after: int):
        super().__init__()
        self.sae, self.aux_k, self.aux_weight, self.dead_after = sae, aux_k, aux_weight, dead_after
        self.register_buffer("since_fired", torch.zeros(sae.latents, dtype=torch.long, device=sae.W_enc.device))

    def optimizer(self, lr: float):
        return torch.optim.Adam(self.sae.parameters(), lr=lr)

    def loss(self, x: torch.Tensor, step: int | None = None) -> tuple[torch.Tensor, dict]:
        sae = self.sae
        x = x.to(sae.W_enc.device)
        pre = sae.pre_activations(x)
        values, indices = pre.topk(sae.k, dim=-1)
        x_hat = sae.decode(indices, values)
        reconstruction, variance = normalised_mse(x, x_hat)
        fired = torch.zeros(sae.latents, dtype=torch.bool, device=x.device)
        fired[indices[values > 0]] = True
        self.since_fired += len(x)
        self.since_fired[fired] = 0
        dead = self.since_fired > self.dead_after
        loss, aux = reconstruction, torch.zeros((), device=x.device)
        if dead.any() and self.aux_weight > 0:
            residual = (x - x_hat).detach()
            dead_pre = pre.masked_fill(~dead, 0.0)
            aux_values, aux_indices = dead_pre.topk(min(self.aux_k, int(dead.sum())), dim=-1)
            residual_hat = sparse_decode(sae.W_dec, aux_indices, aux_values)
            aux = (residual - residual_hat).pow(2).sum(-1).mean() / variance
            loss = loss + self.aux_weight * aux
        return loss, {"nmse": reconstruction.item(), "aux": aux.item(), "dead": int(dead.sum())}

    @torch.no_grad()
    def before_update(self) -> None:
        """Drop the part of the decoder's gradient that would change its columns' norms."""
        grad, columns = self.sae.W_dec.grad, self.sae.W_dec
        grad -= columns * (grad * columns).sum(0, keepdim=True)

    def after_update(self) -> None:
        self.sae.normalize_decoder()


class SAERows:
    """The rows of an N x d matrix (float16/32, e.g. a memory-mapped token store) as training batches:
    each epoch one permutation drawn from a generator seeded once, cut into N // batch_size batches,
    each batch's rows read in order as float32. `sample` holds up to 65,536 rows drawn first (for the
    initial b_pre and the final held-out error)."""

    def __init__(self, data: np.ndarray, seed: int):
        self.data = data
        generator = np.random.default_rng(seed)
        self.sample = data[np.sort(generator.choice(len(data), min(len(data), 65536), replace=False))]
        self._after_sample = generator.bit_generator.state
        self._next = (0, self._after_sample)  # (epoch, the generator's state before its permutation)

    def __len__(self) -> int:
        return len(self.data)

    def permutation(self, epoch: int) -> np.ndarray:
        """Epoch `epoch`'s permutation: the generator's draw after the sample and the epochs before."""
        start, state = self._next if self._next[0] <= epoch else (0, self._after_sample)
        generator = np.random.default_rng()
        generator.bit_generator.state = state
        for _ in range(start, epoch):
            generator.permutation(len(self.data))
        order = generator.permutation(len(self.data))
        self._next = (epoch + 1, generator.bit_generator.state)
        return order

    def epoch_batches(self, epoch: int, seed: int, batch_size: int, group_size: int = 1):
        order = self.permutation(epoch)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            rows = np.sort(order[start:start + batch_size])
            yield torch.from_numpy(np.asarray(self.data[rows], dtype=np.float32))


class SSRModel:
    """Backbone settings + token SAE + [CLS] SAE + retrieval settings."""

    def __init__(self, backbone: dict, token_sae: TopKSAE, cls_sae: TopKSAE, settings: dict, training: dict | None = None):
        dim = int(backbone.get("dim", 0))
        for name, sae in (("token", token_sae), ("[CLS]", cls_sae)):
            if sae.input_dim != dim:
                raise InputError(f"{name} SAE input size {sae.input_dim} does not match the backbone's "
                                 f"embedding size {dim} ({backbone.get('model')})")
        self.backbone, self.token_sae, self.cls_sae = backbone, token_sae, cls_sae
        self.settings = {**RETRIEVAL_DEFAULTS, **settings}
        self.training = training or {}

    def score(self, query, documents, cls_weight: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(SSR-CLS, SSR-tok), each B x D, of B queries and D documents, each side (token codes, dense
        [CLS] codes): token codes as (indices, values), B x L x K, zero values on padded tokens, and the
        [CLS] codes as B x h. SSR-tok = sum_i max_t z_q,i . z_d,t; SSR-CLS = SSR-tok + cls_weight x
        z_q,CLS . z_d,CLS (default: the model's cls_weight). The one definition of the score: training
        takes its gradient, and the re-ranker's kernels (`reranker.py`) compute it from a code store's
        sparse rows (tested equal to it in tests/models/test_ssr.py)."""
        (query_codes, query_cls), (doc_codes, doc_cls) = query, documents
        weight = self.settings["cls_weight"] if cls_weight is None else cls_weight
        tokens = late_interaction(query_codes, doc_codes, self.token_sae.latents)
        return tokens + weight * query_cls @ doc_cls.T, tokens

    def save(self, folder) -> None:
        """The SAE tensors, and in lsr_family.json the settings and what the SAEs are (`train ssr`
        records its base's full config there after, keeping the structure)."""
        from safetensors.torch import save_file

        from ...core.hf import write_config, write_family

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        state = {f"token.{k}": v.detach().contiguous() for k, v in self.token_sae.state_dict().items()}
        state.update({f"cls.{k}": v.detach().contiguous() for k, v in self.cls_sae.state_dict().items()})
        structure = {"backbone": self.backbone, "token_sae": self.token_sae.describe(),
                     "cls_sae": self.cls_sae.describe(), "training": self.training}
        save_file(state, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
        write_family(folder, "ssr", **{STRUCTURE_KEY: structure})
        write_config(folder, "ssr", {**SCHEMA.defaults(), **self.settings})  # keeps the structure beside the config

    @classmethod
    def load(cls, path: str) -> "SSRModel":
        """A folder `ssr fit` or `train ssr` wrote, now or before (with its own ssr_config.json)."""
        from safetensors.torch import load_file

        from ...core.hf import check_family

        folder = Path(path)
        check_family(path, "ssr")
        old = folder / OLD_CONFIG_FILE
        if not (folder / WEIGHTS_FILE).is_file() or not ((folder / FAMILY_FILE).is_file() or old.is_file()):
            raise InputError(f"{path}: not an SSR model folder (needs {WEIGHTS_FILE} and {FAMILY_FILE}; "
                             f"train one with `python -m lsr_pyserini.ssr fit`)")
        structure = read_family(folder).get(STRUCTURE_KEY)
        source = FAMILY_FILE
        if not isinstance(structure, dict):
            if not old.is_file():
                raise InputError(f"{path}: {FAMILY_FILE} does not say what its SAEs are (no {STRUCTURE_KEY!r}, "
                                 f"no {OLD_CONFIG_FILE}): not an SSR model folder")
            structure, source = _read_json(old), OLD_CONFIG_FILE  # a folder written before: its own config file
        state = load_file(str(folder / WEIGHTS_FILE))
        saes = []
        for prefix, key in (("token", "token_sae"), ("cls", "cls_sae")):
            sizes = structure[key]
            sae = TopKSAE(int(sizes["input_dim"]), int(sizes["latents"]), int(sizes["k"]))
            tensors = {k[len(prefix) + 1:]: v for k, v in state.items() if k.startswith(prefix + ".")}
            try:
                sae.load_state_dict(tensors)
            except RuntimeError as err:
                raise InputError(f"{folder / WEIGHTS_FILE}: {prefix} SAE weights do not match "
                                 f"{source} ({str(err).splitlines()[0]})") from None
            saes.append(sae.eval())
        return cls(structure["backbone"], saes[0], saes[1], recorded_settings(folder), structure.get("training"))

    def with_settings(self, **settings) -> "SSRModel":
        """This model with other retrieval settings (None: the model's), checked."""
        given = RETRIEVAL.checked({k: v for k, v in settings.items() if v is not None}, "argument")
        return SSRModel(self.backbone, self.token_sae, self.cls_sae, {**self.settings, **given}, self.training)


def adaptive_k(model: SSRModel, tokens: int) -> int:
    """Query-side K: `query_term_budget` neurons shared over the query's tokens, within [query_k_min, K]."""
    k = model.token_sae.k
    return max(min(model.settings["query_k_min"], k), min(k, math.ceil(model.settings["query_term_budget"] / max(tokens, 1))))
