"""`attncli softmax`: its numbers against hand calculations, PyTorch (softmax, logsumexp, cross_entropy and autograd's
gradient, float64, 1e-12) and top-k / top-p written here from their definitions; its formats; its bad inputs.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from attncli import pipeline, softmax
from attncli.cli import app
from tests.refusals import refused
from tests.test_spanish import english

E = math.e
TOLERANCE = 1e-12
SCREEN = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "LANGUAGE": None, "NO_COLOR": "1", "COLUMNS": "200"}


def run(*args: str, lang: str = "en", stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["softmax", *args, "--lang", lang], env=SCREEN, input=stdin)
    return result.exit_code, result.stdout, result.stderr


def steps_of(flags: dict) -> softmax.SoftmaxSteps:
    return softmax.compute(pipeline.logits(None, flags))


def close(got: object, want: object) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=0, atol=TOLERANCE)


# By hand


def test_a_row_by_hand() -> None:
    """Logits 2, 1, 0.1: m = 2, s − m = 0, −1, −1.9, Σ e^(s − m) = 1 + e^−1 + e^−1.9, LSE = 2 + ln of it."""
    steps = steps_of({"logits": "2, 1, 0.1", "tokens": "fisherman,net,bank", "targets": ["net"]})
    total = 1 + 1 / E + math.exp(-1.9)
    close(steps.stable.max, [2])
    close(steps.stable.shifted, [[0, -1, -1.9]])
    close(steps.stable.sum, [total])
    close(steps.stable.logsumexp, [2 + math.log(total)])
    close(steps.stable.probabilities, [[1 / total, 1 / E / total, math.exp(-1.9) / total]])
    close(steps.cross_entropy.per_row, [2 + math.log(total) - 1])
    close(steps.cross_entropy.gradient, [[1 / total, 1 / E / total - 1, math.exp(-1.9) / total]])
    assert steps.filtered is None


def test_temperature_divides_first_and_the_gradient_is_with_respect_to_the_logits_given() -> None:
    """T = 2 on 2, 0: z = 1, 0; p = e/(e + 1), 1/(e + 1); d CE(z_target = 0)/d s = (p − onehot)/(N·T)."""
    steps = steps_of({"logits": "2, 0", "temperature": "2", "targets": ["2"]})
    close(steps.scaled, [[1, 0]])
    close(steps.stable.probabilities, [[E / (E + 1), 1 / (E + 1)]])
    close(steps.cross_entropy.per_row, [math.log(E + 1)])
    close(steps.cross_entropy.gradient, [[E / (E + 1) / 2, (1 / (E + 1) - 1) / 2]])


@pytest.mark.parametrize(
    ("logits", "probabilities", "logsumexp"),
    [
        ("102, 101, 100.1", [1, 1 / E, math.exp(-1.9)], 102),
        ("2000, 1000, 100", [1, 0, 0], 2000),
        ("-1000, -1001, -1001.9", [1, 1 / E, math.exp(-1.9)], -1000),
    ],
)
def test_rows_far_from_zero_stay_finite(logits: str, probabilities: list[float], logsumexp: float) -> None:
    """The row 2, 1, 0.1 moved by 100 and by −1002, and ×1000: the same (or a saturated) softmax, every step finite."""
    steps = steps_of({"logits": logits, "targets": ["3"]})
    total = sum(probabilities)
    close(steps.stable.probabilities, [[x / total for x in probabilities]])
    close(steps.stable.logsumexp - logsumexp, [math.log(total)])
    for array in (*steps.stable, steps.cross_entropy.per_row, steps.cross_entropy.gradient):
        assert np.isfinite(array).all()


def test_the_widest_finite_row_writes_every_step() -> None:
    """1e308 and −7e307: s − m = −1.7e308 still finite, so is −ln p_t = 1.7e308; JSON holds them (−8e307: refused)."""
    code, stdout, stderr = run("1e308, -7e307", "--target", "2", "-f", "json")
    assert (code, stderr) == (0, "")
    row = json.loads(stdout)["rows"][0]
    assert row["shifted"] == [0.0, -7e307 - 1e308] and row["cross_entropy"] == 1e308 + 7e307


# PyTorch


@pytest.mark.parametrize("temperature", [1.0, 0.7, 2.5])
@pytest.mark.parametrize("scale", [1.0, 100.0, 1000.0])
def test_against_torch(temperature: float, scale: float) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(int(temperature * 10 + scale))
    rows = rng.normal(scale=scale, size=(3, 7)) + (100 if scale == 1 else 0)
    targets = rng.integers(0, 7, size=3)
    flags = {"logits": "; ".join(", ".join(repr(float(x)) for x in row) for row in rows)}
    flags["temperature"] = repr(temperature)
    flags["targets"] = [str(j + 1) for j in targets]
    steps = steps_of(flags)
    close(steps.logits.rows, rows)
    logits = torch.tensor(rows, dtype=torch.float64, requires_grad=True)
    scaled = logits / temperature
    close(steps.stable.probabilities, torch.softmax(scaled, dim=-1).detach().numpy())
    close(steps.stable.logsumexp, torch.logsumexp(scaled, dim=-1).detach().numpy())
    picked = torch.tensor(targets)
    losses = torch.nn.functional.cross_entropy(scaled, picked, reduction="none")
    close(steps.cross_entropy.per_row, losses.detach().numpy())
    mean = torch.nn.functional.cross_entropy(scaled, picked)
    assert abs(steps.cross_entropy.mean - mean.item()) <= TOLERANCE
    mean.backward()
    close(steps.cross_entropy.gradient, logits.grad.numpy())


# Top-k and top-p from their definitions


def reference(logits: list[float], k: int | None, p: float | None) -> tuple[list[bool], list[float]]:
    """Fan et al.'s top-k, then Holtzman et al.'s nucleus on what top-k leaves, renormalised; plain Python.

    The order is the logits' from the largest, the earlier token first among equals (Python's sort is stable);
    top-k keeps every token at least as large as the K-th of that order (Hugging Face's TopKLogitsWarper keeps
    `scores >= topk(scores, k)[..., -1]`: ties with the K-th stay); top-p keeps the shortest prefix of that order
    whose probability (renormalised over top-k) adds up to ≥ p.
    """
    top = max(logits)
    weights = [math.exp(x - top) for x in logits]
    probabilities = [w / sum(weights) for w in weights]
    order = sorted(range(len(logits)), key=lambda j: -logits[j])
    kth = logits[order[min(k, len(logits)) - 1]] if k is not None else -math.inf
    kept = {j for j in order if logits[j] >= kth}
    if p is not None:
        mass = sum(probabilities[j] for j in kept)
        running, nucleus = 0.0, set()
        for j in (j for j in order if j in kept):
            nucleus.add(j)
            running += probabilities[j] / mass
            if running >= p:
                break
        kept = nucleus
    mass = sum(probabilities[j] for j in kept)
    return [j in kept for j in range(len(logits))], [
        probabilities[j] / mass if j in kept else 0.0 for j in range(len(logits))
    ]


def test_top_k_and_top_p_follow_their_definitions() -> None:
    """Random rows with many ties (whole numbers 0..4), every K and a spread of P, alone and chained."""
    rng = np.random.default_rng(7)
    cases = 0
    for _ in range(40):
        rows = rng.integers(0, 5, size=(3, 6)).astype(float)
        text = "; ".join(", ".join(str(x) for x in row) for row in rows)
        for k in (None, 1, 2, 3, 6, 9):
            for p in (None, 0.05, 0.5, 0.9, 0.999, 1.0):
                if k is None and p is None:
                    continue
                flags = {"logits": text} | ({"top_k": k} if k else {}) | ({"top_p": str(p)} if p else {})
                filtered = steps_of(flags).filtered
                for row, kept, probabilities in zip(rows, filtered.kept, filtered.probabilities):
                    want_kept, want = reference(row.tolist(), k, p)
                    assert kept.tolist() == want_kept, (row, k, p)
                    close(probabilities, want)
                cases += 1
    assert cases == 40 * 35


def test_ties_keep_the_earlier_token_first_and_top_k_keeps_ties_with_the_kth() -> None:
    """Logits 1, 2, 2, 0: K = 1 keeps both 2s, tokens 2 and 3, as Hugging Face's TopKLogitsWarper keeps every token
    tied with the K-th (scores < the K-th's are removed); P = 0.3 keeps the first of the two 2s, token 2, its
    probability being e²/(1 + e + 2e²) = 0.3995 ≥ 0.3 and the earlier token coming first."""
    assert steps_of({"logits": "1, 2, 2, 0", "top_k": 1}).filtered.kept.tolist() == [[False, True, True, False]]
    assert steps_of({"logits": "1, 2, 2, 0", "top_k": 2}).filtered.kept.tolist() == [[False, True, True, False]]
    assert steps_of({"logits": "1, 2, 2, 0", "top_k": 3}).filtered.kept.tolist() == [[True, True, True, False]]
    assert steps_of({"logits": "1, 2, 2, 2", "top_k": 2}).filtered.kept.tolist() == [[False, True, True, True]]
    filtered = steps_of({"logits": "1, 2, 2, 0", "top_p": "0.3"}).filtered
    assert filtered.kept.tolist() == [[False, True, False, False]]
    close(filtered.probabilities, [[0, 1, 0, 0]])
    assert filtered.order.tolist() == [[1, 2, 0, 3]]


def test_top_k_keeps_what_hugging_faces_warper_keeps() -> None:
    """TopKLogitsWarper's own line in torch, `scores < torch.topk(scores, k)[0][..., -1, None]` removed, on rows of
    whole numbers (many ties) for every K from 1 to V + 1."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(29)
    rows = rng.integers(0, 4, size=(30, 7)).astype(float)
    text = "; ".join(", ".join(str(x) for x in row) for row in rows)
    for k in range(1, 9):
        scores = torch.tensor(rows, dtype=torch.float64)
        removed = scores < torch.topk(scores, min(k, 7))[0][..., -1, None]
        assert steps_of({"logits": text, "top_k": k}).filtered.kept.tolist() == (~removed).tolist(), k


def test_top_p_reads_what_top_k_leaves() -> None:
    """p = 0.5, 0.3, 0.2 (logits ln 5, ln 3, ln 2): K = 2 leaves 5/8, 3/8; P = 0.6 keeps the first alone
    (5/8 ≥ 0.6), where on the whole distribution it would need two (0.5 < 0.6)."""
    flags = {"logits": "ln(5), ln(3), ln(2)", "top_p": "0.6"}
    assert steps_of(flags).filtered.kept.tolist() == [[True, True, False]]
    chained = steps_of(flags | {"top_k": 2}).filtered
    assert chained.kept.tolist() == [[True, False, False]]
    close(chained.renormalised, [[5 / 8, 3 / 8, 0]])
    close(chained.cumulative[0, :2], [5 / 8, 1])


# The command line and its formats


def test_json_holds_every_step_by_the_issues_names() -> None:
    code, stdout, stderr = run(
        "2, 1, 0.1; 0, 3, 1", "--tokens", "a,b,c", "--target", "b", "--target", "3", "-f", "json"
    )
    assert (code, stderr) == (0, "")
    doc = json.loads(stdout)
    steps = steps_of({"logits": "2, 1, 0.1; 0, 3, 1", "tokens": "a,b,c", "targets": ["b", "3"]})
    assert list(doc) == [
        "attncli",
        "title",
        "notes",
        "temperature",
        "top_k",
        "top_p",
        "targets",
        "rows",
        "cross_entropy",
    ]
    assert doc["targets"] == ["b", "c"] and doc["cross_entropy"] == steps.cross_entropy.mean
    names = ["tokens", "logits", "max", "shifted", "exp", "sum", "logsumexp", "probabilities", "kept", "filtered"]
    for row, record in enumerate(doc["rows"]):
        assert list(record) == [*names, "cross_entropy", "grad_logits"]
        assert record["tokens"] == ["a", "b", "c"]
        assert record["probabilities"] == steps.stable.probabilities[row].tolist()
        assert record["logsumexp"] == steps.stable.logsumexp[row]
        assert record["grad_logits"] == steps.cross_entropy.gradient[row].tolist()
        assert record["kept"] is None and record["filtered"] is None
    filtered = json.loads(run("2, 1, 0.1", "--top-k", "2", "-f", "json")[1])["rows"][0]
    assert filtered["kept"] == [True, True, False] and filtered["cross_entropy"] is None


def test_csv_holds_every_number() -> None:
    code, stdout, _ = run("2, 1, 0.1", "--target", "1", "--top-p", "0.6", "-f", "csv")  # p = 0.6590: t1 alone
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(stdout)))
    assert list(rows[0]) == ["step", "row", "token", "value"]
    steps = steps_of({"logits": "2, 1, 0.1", "targets": ["1"], "top_p": "0.6"})
    by_step = {(row["step"], row["row"], row["token"]): row["value"] for row in rows}
    assert float(by_step["probabilities", "0", "t2"]) == steps.stable.probabilities[0, 1]
    assert by_step["kept", "0", "t3"] == "0" and float(by_step["filtered", "0", "t1"]) == 1.0
    assert float(by_step["cross_entropy", "", ""]) == steps.cross_entropy.mean
    tsv = run("2, 1, 0.1", "-f", "tsv")[1]
    assert tsv.splitlines()[0] == "step\trow\ttoken\tvalue"


def test_the_human_formats_write_every_step() -> None:
    shown = {
        fmt: run("2, 1, 0.1", "--tokens", "fisherman,net,bank", "--target", "net", "-f", fmt)[1]
        for fmt in ("text", "markdown", "latex")
    }
    for fmt, text in shown.items():
        for number in ("2.0000", "-1.9000", "0.3679", "1.5174", "2.4170", "0.6590", "-0.7576", "1.4170"):
            assert number in text, (fmt, number)
    assert "ln Σ e^s = m + ln Σ e^(s − m) = 2.0000 + ln 1.5174 = 2.4170" in shown["text"]
    assert "−ln p_t = LSE − s_t = 2.4170 − 1.0000 = 1.4170" in shown["text"]
    assert r"\ln \sum_j e^{s_j} = m + \ln \sum_j e^{s_j - m} = 2.0000 + \ln 1.5174 = 2.4170" in shown["latex"]


def test_a_file_with_rows_and_targets(tmp_path) -> None:
    path = tmp_path / "logits.yaml"
    path.write_text("title: Next token\nlogits: [[2, 1, 0.1], [0, 3, 1]]\ntokens: [a, b, c]\ntargets: [b, 2]\n")
    doc = json.loads(run(str(path), "-f", "json")[1])
    assert doc["title"] == "Next token" and doc["targets"] == ["b", "b"]
    assert json.loads(run(str(path), "--target", "a", "--target", "c", "-f", "json")[1])["targets"] == ["a", "c"]
    assert json.loads(run("-", "-f", "json", stdin=path.read_text())[1])["targets"] == ["b", "b"]


def test_logits_from_an_array_file(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "l.npy", np.array([[2.0, 1.0, 0.1]]))
    code, stdout, stderr = run("@l.npy", "-f", "json")
    assert (code, stderr) == (0, "")
    assert json.loads(stdout)["rows"][0]["logits"] == [2.0, 1.0, 0.1]


def test_spanish_says_it_all_in_spanish() -> None:
    for fmt in ("text", "markdown"):
        args = ("2, 1, 0.1; 1, 1, 1", "--tokens", "pescador,red,banco", "--target", "red", "--target", "1")
        code, shown, _ = run(*args, "--top-k", "2", "--temperature", "2", "-f", fmt, lang="es")
        assert code == 0 and "Fila 1 de 2" in shown and "entropía cruzada" in shown
        assert english(shown) == [], fmt


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_the_latex_compiles_without_scaling(tmp_path) -> None:
    from tests.test_writeups import compile_log

    code, source, _ = run("3, 2, 2, 1; 1, 2, 3, 4", "--temperature", "2", "--top-k", "3", "--top-p", "0.9",
                          "--target", "1", "--target", "4", "-f", "latex", lang="es")  # fmt: skip
    assert code == 0 and all(ord(char) < 256 for char in source)
    assert "attncli: scaled down" not in compile_log(tmp_path, source)


# Bad input: one line, exit 2, nothing on stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["2, x, 1"], "LOGITS: logits, row 1: unknown name 'x' (only the constants pi and e are known)"),
        (["1, 2; 3"], "LOGITS: logits, row 2: 1 number, expected 2 like the rows before it"),
        (["2, 1", "--tokens", "a,b,c"], "--tokens: tokens: 3 tokens, expected 2 (one per logit)"),
        (["2, 1", "--tokens", "a,a"], "--tokens: tokens[2]: 'a' names two logits"),
        (["2, 1", "--target", "c"], "--target: targets[1]: 'c' is neither a token nor a position (tokens: t1, t2)"),
        (["2, 1", "--target", "0"], "--target: targets[1]: position 0 is not one of the logits' positions, 1 to 2"),
        (["2, 1", "--target", "3"], "position 3 is not one of the logits' positions, 1 to 2"),
        (["2, 1; 1, 2", "--target", "1"], "--target: targets: 1 target, expected 2 (one per row of logits)"),
        (
            ["2, 1", "--temperature", "0"],
            "--temperature: temperature: expected a temperature above 0, got the number 0",
        ),
        (["2, 1", "--temperature", "-1"], "expected a temperature above 0, got the number -1"),
        (["2, 1", "--temperature", "x"], "--temperature: temperature: unknown name 'x'"),
        (["2, 1", "--temperature", "1e-320"], "--temperature: temperature: a result passes the range"),
        (["1e300, 1", "--temperature", "1e-10"], "temperature: a result passes the range of floating-point numbers"),
        (
            ["2, 1", "--top-k", "0"],
            "--top-k: top_k: expected a whole number of tokens to keep (1 or more), got the number 0",
        ),
        (["2, 1", "--top-k", "x"], "Invalid value for '--top-k': 'x' is not a whole number"),
        (["2, 1", "--top-p", "0"], "--top-p: top_p: expected a probability above 0 and at most 1, got the number 0"),
        (["2, 1", "--top-p", "1.5"], "got the number 1.5"),
        (["2, 1", "--top-p", "nan"], "--top-p: top_p: unknown name 'nan'"),
        (["1e308, -1e308"], "LOGITS: logits: a result passes the range of floating-point numbers"),  # s − m
        (["1e308, 0", "--target", "2", "--temperature", "1e-300"], "temperature: a result passes the range"),
        (["2, 1", "-f", "npz"], "unknown format 'npz'"),
        (["2, 1", "--precision", "18"], "Invalid value for '--precision': 18 is not in the range"),
        (["2, 1", "--tokens", ""], "--tokens: tokens: expected a list of token names"),
        (["missing.yaml"], "missing.yaml: cannot read the file"),
        ([], "Missing argument"),
    ],
)
def test_bad_flags(args: list[str], message: str) -> None:
    spanish = refused(run, args, message)
    if args:  # a missing argument is named by its metavar, which only a process started in Spanish has in Spanish
        assert english(spanish.removeprefix("attncli: ").split(": ", 1)[-1]) == [], spanish


def test_a_missing_argument_in_spanish_names_it_in_spanish() -> None:
    from tests.test_spanish import es_process

    code, stdout, stderr = es_process("softmax")
    assert (code, stdout) == (2, "") and "LOGITS|ARCHIVO" in stderr and english(stderr) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tokens: [a]\n", "bad.yaml:1: no logits: give a row of numbers"),
        ("- 1\n- 2\n", "bad.yaml:1: the document must be a mapping of fields (logits:"),
        ("logit: [1, 2]\n", "bad.yaml:1: logit: unknown field 'logit'; did you mean 'logits'?"),
        ("logits: one\n", "bad.yaml:1: logits: expected a matrix"),
        ("logits: {a: [1, 2]}\n", "bad.yaml:1: logits: this matrix has no token names"),
        ("logits: [1, 2]\ntokens: 3\n", "bad.yaml:2: tokens: expected a list of token names, got the number 3"),
        (
            "logits: [1, 2]\ntargets: [1.5]\n",
            "bad.yaml:2: targets[1]: expected a token's name or its position from 1, got the number 1.5",
        ),
        (
            "logits: [1, 2]\ntargets: [[1]]\n",
            "targets[1]: expected a token's name or its position from 1, got a list of 1",
        ),
        ("logits: [1, 2]\ntargets: [true]\n", "got true"),
        ("logits: [1, 2]\ntemperature: hot\n", "bad.yaml:2: temperature: unknown name 'hot'"),
        (
            "logits: [1, 2]\ntemperature:\n",
            "bad.yaml:2: temperature: expected a number or an arithmetic expression, got nothing",
        ),
        (
            "logits: [1, 2]\ntop_k: 1.5\n",
            "bad.yaml:2: top_k: expected a whole number of tokens to keep (1 or more), got the number 1.5",
        ),
        ("logits: [1, 2]\ntop_k: true\n", "top_k: expected a whole number of tokens to keep (1 or more), got true"),
        ("logits: [1, 2]\ntop_k:\n", "got nothing"),
        (
            "logits: [1, 2]\ntop_p: 2/3 + 1\n",
            "bad.yaml:2: top_p: expected a probability above 0 and at most 1, got the number 1.66",
        ),
        ("logits: [1, 2]\ntitle: [a]\n", "bad.yaml:2: title: expected text, got a list of 1"),
        ("logits: [1, 2]\nnotes: {a: 1}\n", "bad.yaml:2: notes: expected text, got a mapping"),
    ],
)
def test_bad_fields(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    refused(run, [str(path)], message)


def test_too_many_logits_are_refused(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "big.npy", np.zeros((2, 1_000_001)))
    code, stdout, stderr = run("@big.npy")
    assert (code, stdout) == (2, "")
    assert "2000002 logits, more than a softmax writes out step by step (limit 2000000)" in stderr
