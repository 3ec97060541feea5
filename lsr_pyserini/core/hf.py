"""Hugging Face loading shared by every model family: tokenizers, models with a one-line error for a
bad checkpoint, and the family marker (`lsr_family.json`) a checkpoint trained here carries: its
family (a checkpoint trained for one family is refused by another) and its full config."""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

from .devices import current
from .errors import InputError
from .gguf import check_loadable, gguf_file

FAMILY_FILE = "lsr_family.json"


def model_error(reference: str, err: Exception) -> InputError:
    offline = os.environ.get("HF_HUB_OFFLINE") == "1"
    hint = " (HF_HUB_OFFLINE=1 is set: pass a local folder with --model)" if offline else ""
    detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return InputError(f"cannot load model {reference!r}: {detail}{hint}")


def transformer_folder(path: str) -> str:
    """Where a checkpoint's transformer lives: `path` itself, or, for a sentence-transformers folder
    whose first module routes queries and documents apart (an inference-free SPLADE saved here or by
    sentence-transformers: a Router), the document route's Transformer subfolder. Hub ids unchanged."""
    folder = Path(path)
    modules_file, router_file = folder / "modules.json", folder / "router_config.json"
    if not (modules_file.is_file() and router_file.is_file()):
        return path
    try:
        modules = json.loads(modules_file.read_text())
        if not (modules and str(modules[0].get("type", "")).endswith(".Router")):
            return path
        router = json.loads(router_file.read_text())
        first = router["structure"]["document"][0]
        if not str(router["types"][first]).endswith("Transformer"):
            raise InputError(f"{router_file}: the document route starts with {router['types'][first]}, not a Transformer")
    except (OSError, json.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError) as err:
        raise InputError(f"{folder}: unreadable sentence-transformers router ({type(err).__name__}: {err})") from None
    return str(folder / first)


def pretrained_source(path: str) -> tuple[str, dict]:
    """(folder, extra from_pretrained arguments) for a checkpoint: `gguf_file` for a GGUF file or a
    folder holding one (its architecture checked first: core/gguf.py), nothing otherwise."""
    folder, name = gguf_file(path)
    if name is None:
        return transformer_folder(path), {}
    check_loadable(path, folder, name)
    return folder, {"gguf_file": name}


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    folder, arguments = pretrained_source(path)
    try:
        return AutoTokenizer.from_pretrained(folder, **arguments)
    except Exception as err:  # transformers raises many types for a bad folder or hub id
        raise model_error(path, err) from None


def check_family(path: str, expected: str) -> None:
    """Refuse a checkpoint this toolkit trained for another model family."""
    marker = read_family(path)
    if marker and marker.get("family") != expected:
        raise InputError(f"checkpoint {path} was trained as a {marker.get('family')!r} model, not {expected!r}")


def write_family(path, family: str, **details) -> None:
    (Path(path) / FAMILY_FILE).write_text(json.dumps({"family": family, **details}, indent=2) + "\n")


def write_config(path, family: str, config: dict) -> None:
    """Record a checkpoint's full config in its family marker (`config`: every setting of the family's
    schema but the model, which is the folder itself), keeping what the family wrote there."""
    marker = read_family(path)
    settings = {k: v for k, v in config.items() if k not in ("model", "family", "name")}
    write_family(path, family, **{k: v for k, v in marker.items() if k not in ("family", "config")}, config=settings)


@contextmanager
def quiet_loading():
    """transformers' "Loading weights" and GGUF "de-quantizing" bars off while a model loads, unless
    a command shows it (core/cli.py `LoadingBars`): the library prints nothing. transformers is imported already (the
    caller is about to load with it); its setting is restored after."""
    from transformers.utils import logging as hf_logging

    from .cli import LoadingBars

    if LoadingBars.shown or not hf_logging.is_progress_bar_enabled():
        yield
        return
    from functools import partial

    from transformers import modeling_gguf_pytorch_utils as gguf_loading  # its de-quantizing bar is tqdm's own

    hf_logging.disable_progress_bar()
    bar, gguf_loading.tqdm = gguf_loading.tqdm, partial(gguf_loading.tqdm, disable=True)
    try:
        yield
    finally:
        gguf_loading.tqdm = bar
        hf_logging.enable_progress_bar()


def load_quietly(loader, path: str, what: str, **kwargs):
    """`loader.from_pretrained(path, **kwargs)` with transformers' load report silenced (weights a
    head-less class does not use are expected); InputError when the checkpoint lacks weights. The model
    computes in float32 whatever dtype the checkpoint stores (transformers 5 keeps the stored dtype), on
    the active device (`core/devices.py`; half precision is autocast, the weights stay float32)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with quiet_loading():
            model, info = loader.from_pretrained(path, output_loading_info=True, **kwargs)
    except Exception as err:
        raise model_error(path, err) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    missing = sorted(info.get("missing_keys", ()))
    if missing:
        raise InputError(f"model {path!r}: {what} (missing {', '.join(missing[:3])}"
                         f"{', ...' if len(missing) > 3 else ''})")
    return current().to(model.float())


def read_family(path) -> dict:
    """The family marker of a checkpoint trained here ({} for any other checkpoint)."""
    from .records import current_record

    marker = Path(path) / FAMILY_FILE
    return current_record(json.loads(marker.read_text())) if marker.is_file() else {}


def load_masked_lm(path: str, family: str = "splade"):
    """A masked-LM model; InputError when the checkpoint has no (trained) MLM head, or when this
    toolkit trained it for another family than `family`. Computes in float32, as `load_quietly`."""
    from transformers import AutoConfig, AutoModelForMaskedLM

    check_family(path, family)
    path = transformer_folder(path)
    try:
        config = AutoConfig.from_pretrained(path)
    except Exception as err:
        raise model_error(path, err) from None
    try:
        with quiet_loading():
            model, info = AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True)
    except ValueError as err:
        if "Unrecognized configuration class" in str(err):
            raise InputError(f"model {path!r}: {config.model_type} has no masked-LM head (SPLADE needs one)") from None
        raise model_error(path, err) from None
    except Exception as err:
        raise model_error(path, err) from None
    missing = sorted(info.get("missing_keys", ()))
    if missing:
        base = f"{model.base_model_prefix}."
        what = "has no masked-LM head" if any(not k.startswith(base) for k in missing) else "is incomplete"
        raise InputError(
            f"model {path!r}: checkpoint {what} (missing {', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})"
        )
    return current().to(model.float()).eval()


def sentence_transformers_defaults(path: str) -> dict:
    """Pooling, normalisation, max length and the query and document prompts (as `query_prefix`,
    `doc_prefix`) from a sentence-transformers folder ({} otherwise)."""
    folder = Path(path)
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return {}
    defaults: dict = {}
    try:
        modules = json.loads(modules_file.read_text())
        for module in modules:
            kind = module.get("type", "")
            if kind.endswith("Pooling"):
                config = json.loads((folder / module.get("path", "") / "config.json").read_text())
                mode = config.get("pooling_mode")  # sentence-transformers >= 5; older: one flag per mode
                if mode == "cls" or config.get("pooling_mode_cls_token"):
                    defaults["pooling_mode"] = "cls"
                elif mode == "mean" or config.get("pooling_mode_mean_tokens"):
                    defaults["pooling_mode"] = "mean"
            elif kind.endswith("Normalize"):
                defaults["normalize"] = True
            elif kind.endswith("Transformer") and module.get("path"):
                defaults["transformer_path"] = str(folder / module["path"])  # older layouts: 0_Transformer/
        bert_config = folder / "sentence_bert_config.json"
        if bert_config.is_file():
            defaults["max_length"] = json.loads(bert_config.read_text()).get("max_seq_length")
        model_config = folder / "config_sentence_transformers.json"
        if model_config.is_file():
            prompts = json.loads(model_config.read_text()).get("prompts") or {}
            defaults["query_prefix"], defaults["doc_prefix"] = prompts.get("query"), prompts.get("document")
    except (OSError, json.JSONDecodeError, AttributeError) as err:
        raise InputError(f"{folder}: unreadable sentence-transformers configuration ({err})") from None
    return {k: v for k, v in defaults.items() if v is not None}
