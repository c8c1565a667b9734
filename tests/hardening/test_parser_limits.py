"""Input limits enforced while parsing (app.ingest.safety.safejson), before structures are built."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import tracemalloc

import pytest

from app.ingest import iter_path
from app.ingest.safety.limits import InputLimits
from app.ingest.safety.safejson import JSONLimitError, iter_array, loads
from tests.hardening import hostile


def test_sniffing_a_4301_digit_integer_does_not_segfault(tmp_path):
    """Root cause of the crash: ijson's yajl2_c backend dereferences the NULL that int() returns
    for more than 4,300 digits. Run in a subprocess so a segfault fails the test, not pytest."""
    p = tmp_path / "long.json"
    p.write_bytes(hostile.long_int_object(4301))
    code = ("import sys; from app.ingest import iter_path; "
            "items = list(iter_path(sys.argv[1])); print(len(items)); print(items[0].error)")
    r = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr[-500:])
    assert "field metadata.n" in r.stdout and "MAX_INT_DIGITS" in r.stdout


def test_depth_limit_names_field_and_builds_nothing():
    data = hostile.deep(100_000)  # 500 KB of nesting; ijson.items needed ~24 GB for this
    tracemalloc.start()
    try:
        with pytest.raises(JSONLimitError) as exc:
            loads(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert exc.value.kind == "depth" and "nested deeper than 64 levels" in str(exc.value)
    assert str(exc.value).startswith("field a.a.a") and "MAX_JSON_DEPTH" in str(exc.value)
    assert peak < 20 * len(data), peak


def test_json_loads_would_raise_recursion_error_but_we_do_not():
    data = hostile.deep(5000)
    with pytest.raises(RecursionError):
        json.loads(data)
    with pytest.raises(ValueError):
        loads(data)  # a ValueError (JSONLimitError), which every reader reports as a rejected record


def test_string_and_integer_limits():
    lim = InputLimits(max_string_bytes=10, max_int_digits=5)
    assert loads(b'{"a": "0123456789", "n": 12345}', lim) == {"a": "0123456789", "n": 12345}
    with pytest.raises(JSONLimitError, match=r"field b\[1\]: a string longer than 10 bytes"):
        loads(b'{"b": ["x", "01234567890"]}', lim)
    with pytest.raises(JSONLimitError, match=r"field n: an integer with more than 5 digits"):
        loads(b'{"s": "999999999", "n": -123456}', lim)
    assert loads(b'{"f": 123456.5}', lim) == {"f": 123456.5}  # floats are not integers


def test_array_reads_on_after_bad_elements():
    good = [hostile.run("r0"), hostile.run("r3")]
    body = (b"[" + json.dumps(good[0]).encode() + b",\n" + hostile.deep(200) + b",\n"
            + b'{"n": 1' + b"0" * 5000 + b"},\n" + json.dumps(good[1]).encode() + b"]")
    els = list(iter_array(io.BytesIO(body), InputLimits(), chunk_size=97))
    assert [e.index for e in els] == [0, 1, 2, 3]
    assert els[0].value == good[0] and els[3].value == good[1]
    assert els[1].error.kind == "depth" and els[1].line == 2 and not els[1].fatal
    assert els[2].error.kind == "int" and els[2].line == 3


def test_deep_array_memory_is_flat(tmp_path):
    p = tmp_path / "deep.json"
    p.write_bytes(hostile.deep_array(20_000))
    tracemalloc.start()
    try:
        items = list(iter_path(p))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(items) == 1 and "nested deeper than 64 levels" in str(items[0].error)
    assert peak < 5 << 20, peak  # ijson.items: ~970 MB for this 40 KB file


def _runs(path):
    return [i.run["run_id"] for i in iter_path(path) if i.run], [str(i.error) for i in iter_path(path) if i.error]


def test_integer_beyond_64_bits_in_an_array_reads_like_jsonl(tmp_path):
    runs = [hostile.run("a"), hostile.run("b", metadata={"big": 2**64 + 1}), hostile.run("c")]
    arr, jl = tmp_path / "runs.json", tmp_path / "runs.jsonl"
    arr.write_text(json.dumps(runs))
    jl.write_text("\n".join(json.dumps(r) for r in runs))
    assert _runs(arr) == _runs(jl) == (["a", "b", "c"], [])


@pytest.mark.parametrize("kind", ["jsonl", "object"])
def test_deep_jsonl_line_and_object_are_rejected_with_line_and_field(tmp_path, kind):
    p = tmp_path / ("runs.jsonl" if kind == "jsonl" else "one.json")
    if kind == "jsonl":
        p.write_bytes(json.dumps(hostile.run("ok1")).encode() + b"\n" + hostile.deep_run_jsonl_line() + b"\n"
                      + json.dumps(hostile.run("ok2")).encode() + b"\n")
    else:
        p.write_bytes(hostile.deep_run_jsonl_line())
    ok, errors = _runs(p)
    assert ok == (["ok1", "ok2"] if kind == "jsonl" else [])
    assert len(errors) == 1 and "field metadata.a.a" in errors[0] and "MAX_JSON_DEPTH" in errors[0]
    if kind == "jsonl":
        assert f"{p}:2" in errors[0]


def test_events_per_run_limit(tmp_path, monkeypatch):
    from app.core.config import get_settings

    monkeypatch.setenv("MAX_EVENTS_PER_RUN", "10")
    get_settings.cache_clear()
    try:
        p = tmp_path / "runs.jsonl"
        p.write_text(json.dumps(hostile.run("small", 10)) + "\n" + json.dumps(hostile.run("big", 11)) + "\n")
        ok, errors = _runs(p)
    finally:
        get_settings.cache_clear()
    assert ok == ["small"]
    assert len(errors) == 1 and "run big: field events: 11 events, at most 10 per run" in errors[0]


def test_a_line_over_max_record_bytes_is_rejected_unread(tmp_path, monkeypatch):
    from app.core.config import get_settings

    monkeypatch.setenv("MAX_RECORD_BYTES", str(1 << 20))
    get_settings.cache_clear()
    try:
        p = tmp_path / "runs.jsonl"
        long = json.dumps(hostile.run("long", metadata={"pad": "x" * (8 << 20)}))
        p.write_text(json.dumps(hostile.run("a")) + "\n" + long + "\n" + json.dumps(hostile.run("b")) + "\n")
        tracemalloc.start()
        try:
            ok, errors = _runs(p)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        get_settings.cache_clear()
    assert ok == ["a", "b"] and len(errors) == 1
    assert f"{p}:2" in errors[0] and "MAX_RECORD_BYTES" in errors[0]
    assert peak < 4 << 20, peak  # the 8 MB line was never held whole


def test_an_array_element_or_one_run_file_over_max_record_bytes(tmp_path, monkeypatch):
    from app.core.config import get_settings

    monkeypatch.setenv("MAX_RECORD_BYTES", str(1 << 20))
    get_settings.cache_clear()
    try:
        big = hostile.run("big", metadata={"pad": ["x" * 1000] * 3000})  # 3 MB, no long string
        arr = tmp_path / "runs.json"
        arr.write_text(json.dumps([hostile.run("a"), big, hostile.run("b")]))
        one = tmp_path / "one.json"
        one.write_text(json.dumps(big, indent=1))
        tracemalloc.start()
        try:
            ok, errors = _runs(arr)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        ok1, errors1 = _runs(one)
    finally:
        get_settings.cache_clear()
    assert ok == ["a", "b"] and len(errors) == 1 and "[1]" in errors[0] and "MAX_RECORD_BYTES" in errors[0]
    assert peak < 3 << 20, peak
    assert ok1 == [] and len(errors1) == 1 and "MAX_RECORD_BYTES" in errors1[0]


def test_yaml_in_a_run_directory_refuses_aliases_and_deep_nesting(tmp_path):
    from app.ingest.safety.safeyaml import load

    laughs = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join(["*" + chr(97 + i)] * 9) + "]\n" for i in range(8))
    for text, needle in ((laughs, "aliases"), ("[" * 20000 + "]" * 20000, "MAX_JSON_DEPTH")):
        run_dir = tmp_path / needle
        run_dir.mkdir()
        (run_dir / "run.yaml").write_text(text)
        (err,) = [i.error for i in iter_path(run_dir) if i.error]
        assert needle in str(err) and "run.yaml" in str(err)
    assert load("a: {b: [1, 2]}\n") == {"a": {"b": [1, 2]}}


def test_a_wire_log_line_over_max_record_bytes_is_reported_not_read(tmp_path, monkeypatch):
    from app.core.config import get_settings

    monkeypatch.setenv("MAX_RECORD_BYTES", str(1 << 20))
    get_settings.cache_clear()
    try:
        p = tmp_path / "traffic.jsonl"
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "message/send",
               "params": {"message": {"role": "user", "messageId": "m1", "contextId": "ctx-1",
                                      "parts": [{"kind": "text", "text": "hi"}]}}}
        p.write_text(json.dumps(rpc) + "\n" + json.dumps({**rpc, "pad": "x" * (3 << 20)}) + "\n")
        items = list(iter_path(p))
    finally:
        get_settings.cache_clear()
    errors = [str(i.error) for i in items if i.error]
    assert len(errors) == 1 and f"{p}:2" in errors[0] and "MAX_RECORD_BYTES" in errors[0]


_json_values = None


def _values():
    from hypothesis import strategies as st

    global _json_values
    if _json_values is None:
        text = st.text(alphabet=st.sampled_from(list('ab"\\\\[]{},: \\n\\té€😀')), max_size=12)
        scalars = st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False,
                                                                                        allow_infinity=False) | text
        _json_values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4)
                                    | st.dictionaries(text, kids, max_size=4), max_leaves=20)
    return _json_values


def test_streamed_array_equals_json_loads_for_any_chunking():
    """Property: any array of objects/arrays reads element by element exactly as json.loads reads
    it whole, whatever the chunk size (strings with brackets, quotes, escapes, non-ASCII)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @given(st.lists(st.dictionaries(st.text(max_size=5), _values(), max_size=4) | st.lists(_values(), max_size=3),
                    max_size=6),
           st.integers(1, 40), st.booleans())
    @settings(max_examples=120, deadline=None, database=None)
    def check(elements, chunk, pretty):
        body = json.dumps(elements, indent=1 if pretty else None, ensure_ascii=False).encode()
        got = list(iter_array(io.BytesIO(body), InputLimits(), chunk_size=chunk))
        assert [e.error for e in got] == [None] * len(elements)
        assert [e.value for e in got] == elements

    check()
