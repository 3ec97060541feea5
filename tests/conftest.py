"""Shared fixtures: tiny random-weight models built from configs, sample files, the real data."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Two xdist workers, each with torch's two OpenMP threads, share 2 cores: OpenMP's default
# busy-waiting then spends a worker's CPU spinning at every barrier while the other worker needs
# it. Passive waiting gave the same shards and cut two concurrent 400-document SciFact encodings
# from 70.5 s to 40.2 s on 2 cores (one alone: 27.2 vs 27.8 s); docs/ci.md. Set here, before any
# test imports torch, so that the workers and every command they start inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402  (after OMP_WAIT_POLICY, which torch's OpenMP reads once)

START_THREADS = torch.get_num_threads()
# The torch thread count the golden recordings were made at (tests/golden/README.md): trained
# weights and MiniLM's floats differ between 1 and 2 threads.
GOLDEN_THREADS = 2

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "lsr_pyserini" / "sample"
SHARED_DATA = Path(os.environ.get("LSR_PYSERINI_DATA_ROOT", REPO.parent / "shared" / "data"))
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


# Hypothesis draws the same examples on every run (derandomize: examples from a seed derived from
# each test, no example database carried between runs), so a property test that fails, fails again,
# and a CI run cannot pass or fail by the draw. HYPOTHESIS_PROFILE=explore draws fresh examples (for
# looking for bugs by hand, not for CI). Loaded here, before the test modules build their settings.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The slow tests (real checkpoints and collections, minutes each) first, in their own order:
    with `-n 2` (pytest-xdist, the README's test command) the workers take them right after the two
    groups (xdist's loadgroup hands out the largest groups first) while the many short tests fill
    the gaps, instead of one long regression finishing last alone.

    Then, under `--dist loadgroup`, each item marked `xdist_group(NAME)` gets the `@NAME` suffix on
    its node id that xdist's scheduler groups by. pytest-xdist 3.8 writes that suffix to
    `item._nodeid`, which pytest 9.2 no longer reads (it keeps the id in `item._id`), so without this
    the "serve" and "ray" groups ran on both workers and their session fixtures (the sample indexes,
    a local Ray) were built twice. trylast: after xdist's own hook, so that a version of xdist that
    sets the suffix itself is not given a second one. A grouped item that still lacks its suffix (an
    upgrade that breaks the grouping again) fails (pytest_runtest_setup)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if not names:
            continue
        suffix = "@" + "_".join(names)
        if not item.nodeid.endswith(suffix):
            item._id = coerce_node_id(f"{item.nodeid}{suffix}")
        item.lacks_group_suffix = not item.nodeid.endswith(suffix)


def pytest_runtest_setup(item):
    if getattr(item, "lacks_group_suffix", False):
        pytest.fail("--dist loadgroup: this item is marked xdist_group but its node id lacks the @group suffix, so "
                    "xdist spreads its group over the workers (a pytest or pytest-xdist upgrade?): see "
                    "pytest_collection_modifyitems in tests/conftest.py", pytrace=False)


# -- No silent skips: every skip is listed at the end, and one whose reason matches no pattern of
# tests/allowed-skips.txt fails the session. A skip from a pytest.skip() in a test or fixture, a
# skipif mark or a module-level skip all count; on xdist the controller receives the workers'
# reports, so this runs on the controller only (not on the workers, which print nothing).
ALLOWED_SKIPS_FILE = Path(__file__).with_name("allowed-skips.txt")
EXTRA_ALLOWED_SKIPS = "LSR_PYSERINI_ALLOW_SKIPS"  # a regular expression: more allowed reasons, by hand


def allowed_skip_patterns() -> list[re.Pattern]:
    lines = (line.split("#", 1)[0].strip() for line in ALLOWED_SKIPS_FILE.read_text().splitlines())
    patterns = [re.compile(line) for line in lines if line]
    if os.environ.get(EXTRA_ALLOWED_SKIPS):
        patterns.append(re.compile(os.environ[EXTRA_ALLOWED_SKIPS]))
    return patterns


def skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def _is_controller(config) -> bool:
    return not hasattr(config, "workerinput")


_SESSION: dict = {}  # "config", "skips": [(node id, reason, allowed)], "allowed": the patterns


def pytest_configure(config):
    _SESSION.update(config=config, skips=[], allowed=allowed_skip_patterns())


def _record_skip(report) -> None:
    if not report.skipped or hasattr(report, "wasxfail") or not _is_controller(_SESSION["config"]):
        return
    reason = skip_reason(report)
    _SESSION["skips"].append((report.nodeid, reason, any(p.search(reason) for p in _SESSION["allowed"])))


def pytest_runtest_logreport(report):
    _record_skip(report)


def pytest_collectreport(report):
    _record_skip(report)


def pytest_sessionfinish(session, exitstatus):
    if _is_controller(session.config) and any(not allowed for _, _, allowed in _SESSION["skips"]) \
            and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def torch_threads(request):
    """Each test starts at torch's thread count of the session's start, a golden one (marker
    `golden`) at the recordings' count. A command a test runs in process sets torch's count for the
    whole process (`--threads N`): without this, it carried into the tests after it, and a worker
    left at 1 thread trained other weights than the 2-thread recordings (9 golden tests failed in a
    full session on an Intel Xeon, none alone)."""
    torch.set_num_threads(GOLDEN_THREADS if request.node.get_closest_marker("golden") else START_THREADS)
    yield
    torch.set_num_threads(START_THREADS)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    _report_measured(terminalreporter, config)
    skips = _SESSION.get("skips", [])
    if not skips or not _is_controller(config):
        return
    unlisted = [skip for skip in skips if not skip[2]]
    terminalreporter.section(f"skips: {len(skips)}, {len(unlisted)} not on {ALLOWED_SKIPS_FILE.name}",
                             red=bool(unlisted))
    for nodeid, reason, allowed in sorted(skips):
        terminalreporter.line(f"{'allowed' if allowed else 'NOT ALLOWED'}  {nodeid}: {reason}")
    if unlisted:
        terminalreporter.line(f"error: {len(unlisted)} skips match no pattern of tests/{ALLOWED_SKIPS_FILE.name}: "
                              f"a skip there hides a failure (a pinned package that does not import, data "
                              f"that is not at ../shared/data); the session fails", red=True)


def _report_measured(terminalreporter, config) -> None:
    """The metrics each reproduction measured (tests/commands/test_regressions.py records them as the user
    property `measured`), under this CPU's kind: a CI log then holds the figures a regression file
    needs to give a value for that kind."""
    if not _is_controller(config):
        return
    measured = sorted((report.nodeid, value) for outcome in ("passed", "failed")
                      for report in terminalreporter.stats.get(outcome, []) if getattr(report, "when", "") == "call"
                      for name, value in getattr(report, "user_properties", []) if name == "measured")
    if not measured:
        return
    from lsr_pyserini.core.environment import cpu_kind

    terminalreporter.section(f"measured by the reproductions (CPU kind {cpu_kind()})")
    for nodeid, value in measured:
        terminalreporter.line(f"{nodeid.rpartition('[')[2].rstrip(']')}: {value}")


def sample_vocabulary() -> list[str]:
    words = set()
    for path in (SAMPLE / "corpus.jsonl", SAMPLE / "queries.test.tsv"):
        words.update(re.findall(r"[a-z0-9]+", path.read_text().lower()))
    pieces = {f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"} | set("abcdefghijklmnopqrstuvwxyz0123456789")
    punctuation = set(".,;:'\"()-_?!/{}[]")
    return SPECIAL + sorted(words | pieces | punctuation)


def build_tiny_bert(folder: Path, with_mlm_head: bool = True, seed: int = 0, extra_tokens: tuple = ()) -> Path:
    """A 2-layer, 32-hidden BERT with random weights and a WordPiece tokenizer over the sample text
    (`extra_tokens` follow the special tokens, e.g. BERT's `[unused0]`)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    vocab = sample_vocabulary()
    vocab[len(SPECIAL):len(SPECIAL)] = extra_tokens
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizer(vocab={token: i for i, token in enumerate(vocab)}, do_lower_case=True)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    model = (BertForMaskedLM if with_mlm_head else BertModel)(config)
    if with_mlm_head:  # a visible bias so that pooling before the bias would be caught
        with torch.no_grad():
            model.cls.predictions.bias.normal_(0, 0.5)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_mlm(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-mlm"))


@pytest.fixture(scope="session")
def tiny_encoder_only(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert-no-head"), with_mlm_head=False)


@pytest.fixture(scope="session")
def tiny_preset(tmp_path_factory, tiny_mlm) -> Path:
    path = tmp_path_factory.mktemp("presets") / "tiny-splade.yaml"
    path.write_text(f"family: splade\nmodel: {tiny_mlm}\npooling: max\ndoc_max_length: 64\n"
                    f"query_max_length: 16\nimpact_scale: 100\nbatch_size: 4\n")
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "scifact" / "corpus.jsonl.gz").is_file():
        pytest.skip(f"real collections not found at {SHARED_DATA} (set LSR_PYSERINI_DATA_ROOT)")
    return SHARED_DATA


# `meet_nulls()`: Java code that meets a null 200 times in 200,000 calls. The JIT compiles
# ArrayList.addAll's null check as a plain load that only the JVM's SIGSEGV handler turns into a
# NullPointerException: with another handler in place, the process dies with a segfault.
MEET_NULLS_IN_COMPILED_JAVA = """
def meet_nulls():
    from jnius import JavaException, autoclass
    items, other = autoclass("java.util.ArrayList")(), autoclass("java.util.ArrayList")()
    other.add(1)
    nulls = 0
    for i in range(200_000):
        try:
            items.addAll(other if i % 1000 else None)
        except JavaException:
            nulls += 1
        if i % 1000 == 0:
            items.clear()
    return nulls
"""


def run_tool(tool: str, *args, check: bool = False, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `python -m lsr_pyserini.TOOL ARGS` as a user would; returns the completed process."""
    result = subprocess.run([sys.executable, "-m", f"lsr_pyserini.{tool}", *map(str, args)],
                            capture_output=True, text=True, cwd=cwd or REPO,
                            env={**os.environ, "TQDM_DISABLE": "1"})
    if check and result.returncode != 0:
        raise AssertionError(f"{tool} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def encoded_sample(work: Path, *more_steps) -> Path:
    """The sample encoded with SPLADE-tiny (`vectors`, `queries.tsv`), its Lucene impact index
    (`lucene`) and top-1000 run (`run.lucene.txt`) under `work`, then `more_steps` ((tool, *args))."""
    corpus, queries = SAMPLE / "corpus.jsonl", SAMPLE / "queries.test.tsv"
    steps = [
        ("encode", "corpus", "--input", corpus, "--output", work / "vectors", "--quiet"),
        ("encode", "queries", "--input", queries, "--output", work / "queries.tsv", "--quiet"),
        ("lucene", "index", "--collection", "JsonVectorCollection", "--input", work / "vectors", "--index",
         work / "lucene", "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized",
         "--threads", "1"),
        ("lucene", "search", "--index", work / "lucene", "--topics", work / "queries.tsv", "--output",
         work / "run.lucene.txt", "--impact", "--hits", "1000"),
        *more_steps,
    ]
    for tool, *args in steps:
        run_tool(tool, *args, check=True)
    return work


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


LLAMA3_STYLE_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
LLM_SPECIAL = ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]


def build_tiny_causal_lm(folder: Path, architecture: str = "llama", chat_template: bool = True,
                         seed: int = 0) -> Path:
    """A 2-layer, 32-hidden Llama, Qwen2 or Gemma3 with random weights and a byte-level BPE tokenizer
    trained on the sample text (Llama-3 style chat template unless chat_template=False)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM,
                              PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM)

    folder.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=LLM_SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    text = [(SAMPLE / "corpus.jsonl").read_text(), (SAMPLE / "queries.test.tsv").read_text()]
    prompts = "You are an AI assistant that can understand human language. Passage: Query: Use one word to " \
              "represent the passage query in a retrieval task. Make sure your word is in lowercase. The word is:"
    bpe.train_from_iterator(text + [prompts] * 3, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    if chat_template:
        tokenizer.chat_template = LLAMA3_STYLE_TEMPLATE
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    common = dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    if architecture == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common, tie_word_embeddings=False))
    elif architecture == "gemma3":  # the promptreps-gemma3-270m preset's architecture: sliding and full
        # attention layers, tied embeddings scaled by sqrt(hidden), soft-capped attention
        model = Gemma3ForCausalLM(Gemma3TextConfig(**common, head_dim=8, sliding_window=4, tie_word_embeddings=True,
                                                   layer_types=["sliding_attention", "full_attention"],
                                                   pad_token_id=tokenizer.pad_token_id))
    else:
        model = Qwen2ForCausalLM(Qwen2Config(**common, tie_word_embeddings=True))
    with torch.no_grad():  # larger output weights so that many logits are positive
        model.get_output_embeddings().weight.normal_(0, 0.5)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-llama"), "llama")


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-qwen2"), "qwen2")


@pytest.fixture(scope="session")
def tiny_gemma3(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-gemma3"), "gemma3")


@pytest.fixture(scope="session")
def tiny_llama_without_template(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-llama-no-template"), "llama", chat_template=False)


@pytest.fixture(scope="session")
def service_indexes(tmp_path_factory) -> dict:
    """The sample's SPLADE-tiny and BM25 Lucene indexes (texts stored), for the service's tests."""
    from service import build_sample_indexes

    return build_sample_indexes(tmp_path_factory.mktemp("service-indexes"))


# -- Runs stopped at a known point, for the kill and Ctrl-C tests ---------------------------------
# The command runs as `python -m MODULE ARGS` would, but with CheckedParts.write (every shard and
# store part goes through it) wrapped: at part PART, after the first write to its file aside (one
# record of a shard, the first bytes of an .npz) and a flush, the process stops itself (SIGSTOP).
# The test waits for that stop, sends its signal (SIGKILL, or SIGINT then SIGCONT) and so hits the
# run at the same point every time: parts 0..PART-1 complete and recorded, part PART half written
# aside, neither recorded nor renamed. A run cannot end before the signal (it waits, stopped), so
# no retry and no skip; on a fast or a loaded machine the test does the same thing.
PAUSE_AT_PART = """
import os, runpy, signal, sys
from lsr_pyserini.core import writer

part, module = int(sys.argv.pop(1)), sys.argv.pop(1)
original = writer.CheckedParts.write


class StopsAtSecondWrite:
    def __init__(self, handle):
        self.handle, self.writes = handle, 0

    def write(self, data):
        self.writes += 1
        if self.writes == 2:
            self.handle.flush()
            os.kill(os.getpid(), signal.SIGSTOP)
        return self.handle.write(data)

    def __getattr__(self, name):
        return getattr(self.handle, name)


def write(self, index, write_part, **stats):
    if index == part:
        return original(self, index, lambda handle: write_part(StopsAtSecondWrite(handle)), **stats)
    return original(self, index, write_part, **stats)


writer.CheckedParts.write = write
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def start_paused_at_part(command: list[str], part: int, **popen) -> subprocess.Popen:
    """Start `command` (`[python, "-m", MODULE, *args]`) and return once it has stopped itself in
    the middle of writing part `part` (see PAUSE_AT_PART); fails if it ends first. The child gets
    SIGINT as a shell gives it (default_sigint) unless `popen` names another preexec_fn."""
    import time

    assert command[1] == "-m", command
    popen.setdefault("preexec_fn", default_sigint)
    process = subprocess.Popen([command[0], "-c", PAUSE_AT_PART, str(part), *command[2:]], cwd=REPO, **popen)
    deadline = time.time() + 900  # only against a hang: the run waits stopped for the test, however slow
    while time.time() < deadline:
        pid, status = os.waitpid(process.pid, os.WUNTRACED | os.WNOHANG)
        if pid:
            assert os.WIFSTOPPED(status), f"the run ended (wait status {status}) before it wrote part {part}"
            return process
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"the run did not reach part {part} in 900 s")


def default_sigint() -> None:
    """In the child, before exec: SIGINT as a shell gives it (default action, not blocked), so that
    Python installs its KeyboardInterrupt handler. A child inherits an ignored SIGINT and a blocked
    mask: an in-process JVM or Ray started by an earlier test may leave either in a test worker."""
    import signal

    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def sigint_state(pid: int) -> dict[str, str]:
    """Whether process `pid` catches, ignores or (per thread) blocks SIGINT, from /proc."""
    bit, state = 1 << (2 - 1), {}
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        fields = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        if not state:
            state = {name: str(bool(int(fields[key], 16) & bit)) for name, key in
                     (("caught", "SigCgt"), ("ignored", "SigIgn"))}
            state["threads blocking it"] = 0
        state["threads blocking it"] += bool(int(fields["SigBlk"], 16) & bit)
        state["threads"] = state.get("threads", 0) + 1
    return state


def interrupt_paused(process: subprocess.Popen) -> None:
    """Ctrl-C a process stopped by start_paused_at_part: SIGINT stays pending until SIGCONT. Fails,
    naming the child's SIGINT state, when a Ctrl-C could not reach its Python handler."""
    import signal

    state = sigint_state(process.pid)
    assert (state["caught"] == "True" and state["ignored"] == "False"
            and state["threads blocking it"] < state["threads"]), f"the run cannot take a Ctrl-C: {state}"
    process.send_signal(signal.SIGINT)
    os.kill(process.pid, signal.SIGCONT)
